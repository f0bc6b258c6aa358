//! The code generator behind `orbit gen`: renders the askama templates under `templates/` into the
//! reviewed SQL under `generated-sql/` and the numbered migrations under `migrations/`, lints what
//! it rendered (see [`lint`]), and compares the result with the committed tree for `gen --check`.
//!
//! Output is a pure function of the templates: every file is rendered in memory in a fixed order,
//! so two runs give identical bytes.

pub mod lint;
mod templates;
pub mod upgrade;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

pub use templates::{Consts, CONSTS};

/// The extension version this build renders and installs; `migrations/` holds one file per version.
/// It is the number of the newest migration. Each orbit release `0.N.0` ships extension version N
/// (0.1.0 shipped 1); a patch release never changes an installed object. While the crate version
/// carries a pre-release suffix (`0.2.0-dev`), the newest migration is unreleased: `gen` still
/// renders it, and releasing freezes it (see [`upgrade::FROZEN`]).
pub const EXTENSION_VERSION: u32 = 2;

/// What `orbit --version` prints after the program name: the crate and extension versions.
pub const VERSION_LINE: &str = concat!(env!("CARGO_PKG_VERSION"), " (extension 2)");

/// The line that separates a migration's body from its catalog section. A migration's checksum is
/// the SHA-256 of everything before this line, so the catalog can record it from inside the file.
pub const CATALOG_MARKER: &str = "-- orbit:catalog";

/// Session settings every install and migration runs under: strict mode, so a bad value fails
/// loudly instead of being truncated, and procedures (which capture sql_mode) run strict too.
pub const SQL_MODE: &str =
    "STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION";

/// What kind of database object a template defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Table,
    Procedure,
}

impl Kind {
    /// The folder under `templates/` and `generated-sql/`, and the catalog's `kind` value.
    pub fn dir(self) -> &'static str {
        match self {
            Kind::Table => "tables",
            Kind::Procedure => "procedures",
        }
    }
    /// The `kind` of the object's row in the `orbit_extension` catalog.
    pub fn catalog_kind(self) -> &'static str {
        match self {
            Kind::Table => "table",
            Kind::Procedure => "procedure",
        }
    }
}

/// Which install an object belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Set {
    /// The Orbit extension itself (migrations, catalog).
    Extension,
    /// The resource-side fence a resource owner installs in the resource's own database
    /// (`generated-sql/fence/install.sql`; not part of the extension or its catalog).
    Fence,
}

impl Set {
    fn of(template: &str) -> Set {
        if template.starts_with("fence/") {
            Set::Fence
        } else {
            Set::Extension
        }
    }

    /// The folder prefix under `templates/` and `generated-sql/`.
    pub fn prefix(self) -> &'static str {
        match self {
            Set::Extension => "",
            Set::Fence => "fence/",
        }
    }
}

/// One rendered table or procedure.
#[derive(Clone, Debug)]
pub struct Object {
    pub set: Set,
    pub kind: Kind,
    pub name: String,
    /// The template's path under `templates/`, e.g. `tables/orbit_task.sql`.
    pub template: String,
    /// The one-line purpose from the template's opening `-- name: purpose` comment.
    pub purpose: String,
    /// The doc comment block that opens the template (without the `-- ` prefixes).
    pub doc: String,
    /// The installable SQL (DDL, or DROP + DELIMITER-wrapped CREATE PROCEDURE).
    pub sql: String,
}

impl Object {
    /// The object's file under `generated-sql/`.
    pub fn file(&self) -> String {
        format!("{}{}/{}.sql", self.set.prefix(), self.kind.dir(), self.name)
    }
    /// The full text of the object's generated file.
    pub fn file_text(&self) -> String {
        format!(
            "{}{}",
            generated_header(&format!("templates/{}", self.template)),
            self.sql
        )
    }
}

/// Everything `gen` writes, keyed by path relative to the repository root.
pub struct Rendered {
    pub objects: Vec<Object>,
    pub files: BTreeMap<PathBuf, String>,
    /// Statements neither sqlparser nor the lint's procedural grammar could read, reported
    /// instead of silently skipped.
    pub unparsed: Vec<lint::Unparsed>,
    /// How the other statements were read.
    pub coverage: lint::Coverage,
}

/// Errors that stop `gen`.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    #[error("template {template} failed to render: {source}")]
    Render {
        template: String,
        source: askama::Error,
    },
    #[error("template {template} must open with a `-- {name}: <purpose>` comment line")]
    MissingPurpose { template: String, name: String },
    #[error("template {template}: {message}")]
    Shape { template: String, message: String },
    #[error("lint failed:\n{}", .0.iter().map(|v| format!("  - {v}")).collect::<Vec<_>>().join("\n"))]
    Lint(Vec<lint::Violation>),
    /// A released migration was edited or removed: only a human can restore it.
    #[error("{0}")]
    Frozen(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn generated_header(template: &str) -> String {
    format!(
        "-- GENERATED FILE: do not edit. Rendered by `orbit gen` from {template}.\n\
         -- Change the template and run `cargo run -- gen`; `gen --check` fails while this file differs.\n\n"
    )
}

pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Renders one template into an [`Object`], checking its documented shape.
fn build_object(kind: Kind, name: &str, template: &str, text: String) -> Result<Object, GenError> {
    let shape = |message: &str| GenError::Shape {
        template: template.to_string(),
        message: message.to_string(),
    };
    let set = Set::of(template);
    let expected = format!("{}{}/{name}.sql", set.prefix(), kind.dir());
    if template != expected {
        return Err(shape(&format!("must live at templates/{expected}")));
    }
    let text = text.trim().to_string() + "\n";
    // The doc block is the run of `--` lines at the top; its first line names the object.
    let doc_lines: Vec<&str> = text.lines().take_while(|l| l.starts_with("--")).collect();
    let purpose = doc_lines
        .first()
        .and_then(|l| l.strip_prefix(&format!("-- {name}:")))
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .ok_or_else(|| GenError::MissingPurpose {
            template: template.to_string(),
            name: name.to_string(),
        })?;
    let doc = doc_lines
        .iter()
        .map(|l| l.strip_prefix("-- ").unwrap_or(l.trim_start_matches('-')))
        .collect::<Vec<_>>()
        .join("\n");
    let sql = match kind {
        Kind::Table => {
            let head = format!("CREATE TABLE IF NOT EXISTS {name} (");
            if !text.contains(&head) {
                return Err(shape(&format!("a table template must contain `{head}`")));
            }
            text
        }
        Kind::Procedure => {
            let head = format!("CREATE PROCEDURE {name}(");
            let at = text
                .find(&head)
                .ok_or_else(|| shape(&format!("must contain `{head}`")))?;
            if text[..at]
                .lines()
                .any(|l| !l.trim().is_empty() && !l.starts_with("--"))
            {
                return Err(shape("only comment lines may come before CREATE PROCEDURE"));
            }
            let definition = text[at..].trim_end();
            if !definition.ends_with("END") {
                return Err(shape(
                    "a procedure definition must end with its closing END",
                ));
            }
            if definition.contains("$$") {
                return Err(shape(
                    "`$$` is the install delimiter and may not appear in a procedure",
                ));
            }
            format!(
                "{}DROP PROCEDURE IF EXISTS {name};\nDELIMITER $$\n{definition}$$\nDELIMITER ;\n",
                &text[..at]
            )
        }
    };
    Ok(Object {
        set,
        kind,
        name: name.to_string(),
        template: template.to_string(),
        purpose,
        doc,
        sql,
    })
}

/// Renders every registered template (in the registry's fixed order).
pub fn render_objects() -> Result<Vec<Object>, GenError> {
    templates::REGISTRY
        .iter()
        .map(|t| {
            let text = (t.render)(&CONSTS).map_err(|source| GenError::Render {
                template: t.template.to_string(),
                source,
            })?;
            build_object(t.kind, t.name, t.template, text)
        })
        .collect()
}

/// `generated-sql/install.sql`: the full install of the current version in one script (session
/// settings, every table, every procedure), then exactly the catalog rows that applying every
/// migration in order leaves: each object with the version that last created or changed it, each
/// migration with its checksum, and the extension row of the newest migration.
fn install_script(
    objects: &[Object],
    header: &str,
    base: &upgrade::Baseline,
    migrations: &[(String, u32, String)],
) -> String {
    let objects: Vec<&Object> = objects.iter().filter(|o| o.set == Set::Extension).collect();
    let mut body = String::from(header);
    push_session_settings(&mut body);
    push_objects(&mut body, &objects);
    let mut text = body;
    text.push_str(CATALOG_MARKER);
    text.push_str(
        "\n-- The catalog rows come last: a script that stops early never claims its version.\n",
    );
    for o in objects {
        text.push_str(&catalog_row(
            o.kind.catalog_kind(),
            &o.name,
            upgrade::object_version(base, o),
            &sha256_hex(&o.file_text()),
        ));
    }
    for (name, version, checksum) in migrations {
        text.push_str(&catalog_row("migration", name, *version, checksum));
    }
    let (_, version, checksum) = migrations.last().expect("at least one migration");
    text.push_str(&catalog_row("extension", "orbit", *version, checksum));
    text
}

/// The session settings every script runs under (see [`SQL_MODE`]).
fn push_session_settings(body: &mut String) {
    body.push_str("SET NAMES utf8mb4;\n");
    body.push_str(&format!("SET SESSION sql_mode = '{SQL_MODE}';\n\n"));
}

/// Appends tables, then procedures, each with a separator naming its template.
fn push_objects(body: &mut String, objects: &[&Object]) {
    for kind in [Kind::Table, Kind::Procedure] {
        for o in objects.iter().filter(|o| o.kind == kind) {
            body.push_str(&format!(
                "-- ---- {} (from templates/{}) ----\n",
                o.name, o.template
            ));
            body.push_str(&o.sql);
            body.push('\n');
        }
    }
}

/// The fence's install script: idempotent DDL for the resource's own database, no catalog.
fn fence_script(objects: &[Object]) -> String {
    let fence: Vec<&Object> = objects.iter().filter(|o| o.set == Set::Fence).collect();
    let mut body =
        generated_header("every template under templates/fence/ (the resource-side fence)");
    body.push_str(
        "-- Install in the RESOURCE's database (not Orbit's): mariadb resource_db < generated-sql/fence/install.sql\n",
    );
    push_session_settings(&mut body);
    push_objects(&mut body, &fence);
    body
}

fn catalog_row(kind: &str, name: &str, version: u32, checksum: &str) -> String {
    // Every value here is generated by this module (names, hex digests), never user input.
    format!(
        "INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) \
         VALUES ('{kind}', '{name}', {version}, '{checksum}', UTC_TIMESTAMP(6)) \
         ON DUPLICATE KEY UPDATE version = VALUES(version), checksum = VALUES(checksum), \
         installed_at = VALUES(installed_at);\n"
    )
}

/// The migration file name of the current version.
pub fn migration_file_name(version: u32, title: &str) -> String {
    format!("{version:06}_{title}.sql")
}

/// The SHA-256 of a migration's body (everything before [`CATALOG_MARKER`]).
pub fn migration_checksum(text: &str) -> String {
    let body = match text.find(&format!("\n{CATALOG_MARKER}\n")) {
        Some(at) => &text[..at + 1],
        None => text,
    };
    sha256_hex(body)
}

/// The lock order every procedure keeps: one list, rendered into generated-sql/README.md and
/// checked against each procedure's header by tests/lint.rs.
pub const LOCK_ORDER: &str = include_str!("../../templates/lock_order.md");

/// The tables of [`LOCK_ORDER`], in order: each numbered line's first `orbit_…` name.
pub fn lock_order_tables() -> Vec<&'static str> {
    LOCK_ORDER
        .lines()
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.trim().parse::<u32>().is_ok())
        })
        .filter_map(|l| l.split('`').nth(1))
        .collect()
}

fn readme(
    objects: &[Object],
    unparsed: &[lint::Unparsed],
    upgrade: Option<&upgrade::Upgrade>,
) -> String {
    let mut md = String::from(
        "<!-- GENERATED FILE: do not edit. Rendered by `orbit gen` from the templates it lists. -->\n\
         # Orbit SQL objects\n\n\
         This folder is the review surface for DBAs: one file per table and stored procedure, rendered\n\
         from `templates/` by `cargo run -- gen` and checked in CI by `gen --check`. `install.sql`\n\
         installs everything at once (what `orbit migrate up` gives a new database); `../migrations/`\n\
         holds the numbered, versioned scripts that upgrade a database of an earlier release.\n\n\
         Procedures call each other with positional parameters, so a `CALL` between them names every\n\
         argument that is a number, `NULL` or an expression after the parameter it fills,\n\
         `0 /* p_hinted */`; `gen` checks each name and each argument count against the callee's\n\
         parameter list (`src/codegen/lint/calls.rs`).\n\n",
    );
    md.push_str(&format!("Extension version: **{EXTENSION_VERSION}**.\n\n"));
    md.push_str(&readme_upgrades(upgrade));
    md.push_str(LOCK_ORDER);
    for (kind, title) in [(Kind::Table, "Tables"), (Kind::Procedure, "Procedures")] {
        md.push_str(&format!(
            "## {title}\n\n| object | purpose |\n| --- | --- |\n"
        ));
        for o in objects.iter().filter(|o| o.kind == kind) {
            md.push_str(&format!(
                "| [`{}`]({}) | {} |\n",
                o.name,
                o.file(),
                o.purpose.replace('|', "\\|")
            ));
        }
        md.push('\n');
    }
    md.push_str(
        "## What the lint could not parse\n\n\
         `gen` reads every statement of every table and procedure before it writes them. DDL and DML\n\
         (with the subqueries inside procedural statements) are parsed by sqlparser (MySqlDialect) and\n\
         linted. Procedural statements are parsed whole by sqlparser when it has a grammar for them\n\
         (SET, CALL, START TRANSACTION, COMMIT, ROLLBACK, SAVEPOINT); the others (DECLARE, SIGNAL,\n\
         RESIGNAL, END, LEAVE, ITERATE, OPEN, CLOSE, FETCH, GET DIAGNOSTICS, UNTIL) are read by the\n\
         lint's own grammar (`src/codegen/lint/procedural.rs`), and every expression in them, as in\n\
         the IF, ELSEIF, WHEN and WHILE conditions, is parsed by sqlparser.\n\n\
         Below is what neither could read, by procedure: the lint checked these by text rules only\n\
         (no dynamic SQL, no CREATE OR REPLACE), so a DBA reads them by hand.\n\n",
    );
    if unparsed.is_empty() {
        md.push_str("Nothing: every statement was read.\n");
    }
    let mut last: Option<&str> = None;
    for u in unparsed {
        if last != Some(u.object.as_str()) {
            md.push_str(&format!("- `{}`\n", u.object));
            last = Some(u.object.as_str());
        }
        md.push_str(&format!(
            "  - `{}` — {}\n",
            u.statement.replace('`', "'"),
            u.reason
        ));
    }
    md.push('\n');
    md.push_str("## Procedure reference\n\n");
    for o in objects.iter().filter(|o| o.kind == Kind::Procedure) {
        md.push_str(&format!("### `{}`\n\n```text\n{}\n```\n\n", o.name, o.doc));
    }
    md
}

/// The README's section per migration: what each release's migration adds, changes and drops.
fn readme_upgrades(up: Option<&upgrade::Upgrade>) -> String {
    let mut md = String::from(
        "## Migrations\n\n\
         `orbit migrate up` applies these in order to a database of an earlier release. A database\n\
         with no version gets `install.sql` instead, the same end state (schema and catalog, the\n\
         migrations recorded as applied) in one script: the frozen 0.1.0 file does not run on MySQL.\n\
         A released migration is frozen byte for byte (`gen --check` fails if it changes); every later\n\
         change to an installed object ships in the next migration. How to upgrade: docs/upgrading.md.\n\n",
    );
    for f in upgrade::FROZEN {
        md.push_str(&format!(
            "### `{}` (orbit {}, extension {}, frozen)\n\n",
            f.file, f.release, f.version
        ));
        if f.version == 1 {
            md.push_str("The first release: installs every table and procedure.\n\n");
        }
    }
    let Some(up) = up else {
        return md;
    };
    md.push_str(&format!(
        "### `{}.sql` (extension {} from {}, unreleased: rendered from the templates)\n\n\
         Rendered by `gen` from the difference between the templates and the last release, plus the\n\
         reviewed [`templates/{}`](../templates/{}).\n\n",
        up.name, up.to, up.from, up.template, up.template
    ));
    let list = |names: Vec<String>| {
        if names.is_empty() {
            "none".to_string()
        } else {
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let is_table = |n: &String| up.altered.contains(n) || up.tables_changed.contains(n);
    let procedures: Vec<String> = up
        .changed
        .iter()
        .filter(|n| !is_table(n))
        .cloned()
        .collect();
    let doc_only: Vec<String> = up
        .tables_changed
        .iter()
        .filter(|n| !up.altered.contains(n))
        .cloned()
        .collect();
    md.push_str(&format!("- Added: {}\n", list(up.added.clone())));
    md.push_str(&format!(
        "- Tables altered (by the reviewed template): {}\n",
        list(up.altered.clone())
    ));
    md.push_str(&format!(
        "- Tables whose documentation alone changed (catalog row only): {}\n",
        list(doc_only)
    ));
    md.push_str(&format!(
        "- Procedures re-created (DROP + CREATE): {}\n",
        list(procedures)
    ));
    md.push_str(&format!(
        "- Dropped: {}\n\n",
        list(up.dropped.iter().map(|(_, n)| n.clone()).collect())
    ));
    md.push_str(&format!("```text\n{}\n```\n\n", up.doc));
    md
}

/// Renders and lints everything `gen` writes.
pub fn render() -> Result<Rendered, GenError> {
    let objects = render_objects()?;
    let report = lint::lint(&objects);
    if !report.violations.is_empty() {
        return Err(GenError::Lint(report.violations));
    }
    let mut files = BTreeMap::new();
    for o in &objects {
        files.insert(PathBuf::from("generated-sql").join(o.file()), o.file_text());
    }
    // The released migrations are frozen (never rendered, see upgrade::FROZEN); the current
    // version's upgrade is rendered from the difference with the last release.
    let base = upgrade::baseline()?;
    let up = upgrade::plan(&objects, &base)?;
    let mut migrations: Vec<(String, u32, String)> = Vec::new();
    for f in upgrade::FROZEN {
        let name = f.file.trim_end_matches(".sql").to_string();
        let sum = base
            .migrations
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| s.clone())
            .expect("the baseline records every frozen migration");
        migrations.push((name, f.version, sum));
    }
    if let Some(up) = &up {
        let release = upgrade::FROZEN.last().map_or("", |f| f.release);
        let text = upgrade::script(&objects, up, release);
        migrations.push((up.name.clone(), up.to, migration_checksum(&text)));
        files.insert(
            PathBuf::from("migrations").join(format!("{}.sql", up.name)),
            text,
        );
    }
    files.insert(
        PathBuf::from("generated-sql/install.sql"),
        install_script(
            &objects,
            &generated_header("every template under templates/ (the full install of this version)"),
            &base,
            &migrations,
        ),
    );
    files.insert(
        PathBuf::from("generated-sql/fence/install.sql"),
        fence_script(&objects),
    );
    files.insert(
        PathBuf::from("generated-sql/README.md"),
        readme(&objects, &report.unparsed, up.as_ref()),
    );
    Ok(Rendered {
        objects,
        files,
        unparsed: report.unparsed,
        coverage: report.coverage,
    })
}

/// The folders `gen` owns: every file in them is either rendered or reported as extra.
const OWNED_DIRS: [&str; 2] = ["generated-sql", "migrations"];

fn list_files(root: &Path, dir: &str) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            return;
        };
        for e in entries.flatten() {
            let rel = dir.join(e.file_name());
            if e.path().is_dir() {
                walk(root, &rel, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, Path::new(dir), &mut out);
    out
}

/// How a file on disk differs from what `gen` renders.
#[derive(Debug, PartialEq, Eq)]
pub enum Drift {
    /// A template on disk is not the one compiled into this binary: what it renders now is unknown
    /// to this build, so the generated file is stale (rebuild, e.g. `cargo run -- gen`).
    TemplateChanged {
        template: PathBuf,
        generated: PathBuf,
    },
    Differs(PathBuf),
    Missing(PathBuf),
    Extra(PathBuf),
    /// A released migration whose bytes differ from the release: `gen` never rewrites it.
    Frozen {
        path: PathBuf,
        release: &'static str,
        sha256: &'static str,
    },
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Drift::TemplateChanged {
                template,
                generated,
            } => write!(
                f,
                "stale:   {} ({} changed since this binary was built)",
                generated.display(),
                template.display()
            ),
            Drift::Differs(p) => write!(f, "differs: {}", p.display()),
            Drift::Missing(p) => write!(f, "missing: {}", p.display()),
            Drift::Extra(p) => write!(f, "extra:   {}", p.display()),
            Drift::Frozen {
                path,
                release,
                sha256,
            } => write!(
                f,
                "frozen:  {} was released in orbit {release} and must never change (SHA-256 {sha256}); \
                 restore it (git checkout -- {}) and ship the change in the next migration",
                path.display(),
                path.display()
            ),
        }
    }
}

/// Compares the rendered files with the tree under `root`.
pub fn check(rendered: &Rendered, root: &Path) -> Vec<Drift> {
    let mut drift = Vec::new();
    let sources = templates::REGISTRY
        .iter()
        .map(|t| {
            (
                t.template,
                t.source,
                Path::new("generated-sql").join(t.template),
            )
        })
        .chain(templates::UPGRADES.iter().map(|u| {
            let migration = format!("{:06}_upgrade.sql", u.version);
            (
                u.template,
                u.source,
                Path::new("migrations").join(migration),
            )
        }));
    for (t_template, t_source, generated) in sources {
        let template = Path::new("templates").join(t_template);
        if std::fs::read_to_string(root.join(&template)).is_ok_and(|disk| disk != t_source) {
            drift.push(Drift::TemplateChanged {
                template,
                generated,
            });
        }
    }
    for (path, text) in &rendered.files {
        match std::fs::read_to_string(root.join(path)) {
            Ok(disk) if &disk == text => {}
            Ok(_) => drift.push(Drift::Differs(path.clone())),
            Err(_) => drift.push(Drift::Missing(path.clone())),
        }
    }
    let frozen: Vec<PathBuf> = upgrade::FROZEN
        .iter()
        .map(|f| Path::new("migrations").join(f.file))
        .collect();
    for (f, path) in upgrade::FROZEN.iter().zip(&frozen) {
        match std::fs::read(root.join(path)) {
            Ok(disk) if hex::encode(Sha256::digest(&disk)) == f.sha256 => {}
            Ok(_) => drift.push(Drift::Frozen {
                path: path.clone(),
                release: f.release,
                sha256: f.sha256,
            }),
            Err(_) => drift.push(Drift::Missing(path.clone())),
        }
    }
    for dir in OWNED_DIRS {
        for path in list_files(root, dir) {
            if !rendered.files.contains_key(&path) && !frozen.contains(&path) {
                drift.push(Drift::Extra(path));
            }
        }
    }
    drift.sort_by_key(|d| d.to_string());
    drift
}

/// Writes the rendered files under `root`, removing files in the owned folders that `gen` no
/// longer renders. Returns the paths whose content changed.
pub fn write(rendered: &Rendered, root: &Path) -> Result<Vec<PathBuf>, GenError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| GenError::Io { path, source }
    };
    let mut changed = Vec::new();
    for drift in check(rendered, root) {
        match drift {
            Drift::TemplateChanged { template, .. } => {
                return Err(GenError::Shape {
                    template: template.display().to_string(),
                    message: "changed since this binary was built; run `cargo run -- gen` to rebuild and render".into(),
                })
            }
            d @ Drift::Frozen { .. } => {
                return Err(GenError::Frozen(d.to_string()));
            }
            Drift::Missing(p) if !rendered.files.contains_key(&p) => {
                return Err(GenError::Frozen(format!(
                    "missing: {} is a released migration; restore it (git checkout -- {})",
                    p.display(),
                    p.display()
                )));
            }
            Drift::Extra(p) => {
                std::fs::remove_file(root.join(&p)).map_err(io(&p))?;
                changed.push(p);
            }
            Drift::Differs(p) | Drift::Missing(p) => {
                let full = root.join(&p);
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                }
                std::fs::write(&full, &rendered.files[&p]).map_err(io(&p))?;
                changed.push(p);
            }
        }
    }
    Ok(changed)
}

/// Fails when a file under `templates/tables` or `templates/procedures` is not registered, so a
/// new template can never be silently left out of the install.
pub fn unregistered_templates(root: &Path) -> Result<(), String> {
    let registered: Vec<&str> = templates::REGISTRY.iter().map(|t| t.template).collect();
    let mut missing = Vec::new();
    let upgrades: Vec<&str> = templates::UPGRADES.iter().map(|u| u.template).collect();
    for dir in [
        "tables",
        "procedures",
        "fence/tables",
        "fence/procedures",
        "upgrades",
    ] {
        for path in list_files(&root.join("templates"), dir) {
            let rel = path.to_string_lossy().replace('\\', "/");
            if rel.ends_with(".sql")
                && !registered.contains(&rel.as_str())
                && !upgrades.contains(&rel.as_str())
            {
                missing.push(rel);
            }
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "templates not registered in src/codegen/templates.rs (add them to `registry!`): {}",
            missing.join(", ")
        ))
    }
}
