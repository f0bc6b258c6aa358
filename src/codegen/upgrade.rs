//! Releases and upgrades: which migrations are frozen, what the last release installed, and how
//! the upgrade migration to the current extension version is rendered from the difference.
//!
//! A released migration is frozen byte for byte: [`FROZEN`] records its SHA-256, `gen` never
//! renders it again and `gen --check` fails while the file differs. The unreleased migration of
//! the current [`EXTENSION_VERSION`] is rendered on every `gen`, pgmq's `pgmq--a--b.sql` style:
//!
//! - the objects the last release installed are known from its full install script
//!   ([`BASELINE_TEXT`], for 0.1.0 the frozen `000001_install.sql` itself): one section per
//!   object, and a catalog row with the checksum of each object's file;
//! - a procedure whose file changed is re-created (DROP + CREATE), a new table or procedure is
//!   created, a procedure no longer rendered is dropped;
//! - table changes and data migrations come from a reviewed upgrade template
//!   (`templates/upgrades/NNNNNN.sql`) whose comments say why; `gen` refuses to render while a
//!   table's DDL changed (or a table was removed) and that template does not `ALTER TABLE` (or
//!   `DROP TABLE IF EXISTS`) it;
//! - the catalog section records the version of every added or changed object, deletes the rows
//!   of dropped ones, and claims the new version last.
//!
//! A fresh database gets the same statements (`migrate up` applies every migration in order), so
//! a fresh and an upgraded database cannot differ; `generated-sql/install.sql` is the same state
//! written as one script for review and installing by hand, and tests/upgrade.rs proves it
//! installs exactly the schema and catalog the migrations leave.

use std::collections::BTreeMap;

use super::{
    catalog_row, generated_header, push_objects, push_session_settings, sha256_hex, templates,
    GenError, Kind, Object, Set, CATALOG_MARKER, CONSTS, EXTENSION_VERSION,
};

/// A released migration: frozen byte for byte.
pub struct Frozen {
    pub version: u32,
    /// The file under `migrations/`.
    pub file: &'static str,
    /// The SHA-256 of the whole file as released.
    pub sha256: &'static str,
    /// The orbit release that shipped it.
    pub release: &'static str,
}

/// Every released migration, in version order. Releasing a version appends its migration here
/// (and, from then on, `gen` never renders it again).
pub const FROZEN: &[Frozen] = &[Frozen {
    version: 1,
    file: "000001_install.sql",
    sha256: "abff9c05ed98d4d3d56bc0acefb3fa5fbf39b7bac7d40f1b3809da0e4185a924",
    release: "0.1.0",
}];

/// The extension version of the last release.
pub const BASELINE_VERSION: u32 = 1;

/// The full install of the last release, as compiled into this binary: for 0.1.0 the frozen
/// `000001_install.sql` (checked against [`FROZEN`] on every render).
pub const BASELINE_TEXT: &str = include_str!("../../migrations/000001_install.sql");

/// One object as the last release installed it.
#[derive(Clone, Debug)]
pub struct BaseObject {
    pub kind: Kind,
    /// Its section of the install script (the object's generated SQL).
    pub sql: String,
    /// The catalog's checksum of its generated file.
    pub checksum: String,
    /// The catalog's version of it.
    pub version: u32,
}

/// What the last release installed, parsed from its install script.
#[derive(Debug)]
pub struct Baseline {
    pub version: u32,
    pub objects: BTreeMap<String, BaseObject>,
    /// The catalog's migration rows: (name, checksum).
    pub migrations: Vec<(String, String)>,
}

const SECTION_OPEN: &str = "-- ---- ";

/// Parses an install script rendered by `install_script`: the `-- ---- NAME (from templates/…)
/// ----` sections before the catalog marker, then the catalog rows after it.
pub fn parse_baseline(version: u32, text: &str) -> Result<Baseline, String> {
    let marker = format!("\n{CATALOG_MARKER}\n");
    let at = text
        .find(&marker)
        .ok_or("the baseline has no catalog section")?;
    let (body, catalog) = (&text[..at + 1], &text[at + marker.len()..]);
    let mut sections: Vec<(String, Kind, String)> = Vec::new();
    for line in body.split_inclusive('\n') {
        let parsed = line
            .strip_prefix(SECTION_OPEN)
            .and_then(|l| l.trim_end().strip_suffix(" ----"))
            .and_then(|l| l.split_once(" (from templates/"))
            .and_then(|(name, template)| {
                let kind = if template.starts_with("tables/") {
                    Kind::Table
                } else if template.starts_with("procedures/") {
                    Kind::Procedure
                } else {
                    return None;
                };
                Some((name.to_string(), kind))
            });
        match (parsed, sections.last_mut()) {
            (Some((name, kind)), _) => sections.push((name, kind, String::new())),
            (None, Some(last)) => last.2.push_str(line),
            (None, None) => {}
        }
    }
    let mut rows: BTreeMap<(String, String), (u32, String)> = BTreeMap::new();
    for line in catalog.lines() {
        let Some(values) = line.strip_prefix(
            "INSERT INTO orbit_extension (kind, name, version, checksum, installed_at) VALUES (",
        ) else {
            continue;
        };
        let fields: Vec<&str> = values.splitn(5, ", ").collect();
        let unquote = |s: &str| s.trim_matches('\'').to_string();
        if fields.len() < 4 {
            return Err(format!("unreadable catalog row: {line}"));
        }
        let v: u32 = fields[2]
            .parse()
            .map_err(|_| format!("unreadable catalog row: {line}"))?;
        rows.insert(
            (unquote(fields[0]), unquote(fields[1])),
            (v, unquote(fields[3])),
        );
    }
    let mut objects = BTreeMap::new();
    for (name, kind, mut sql) in sections {
        // install_script writes each object's SQL followed by one empty line.
        sql.pop();
        let (v, checksum) = rows
            .get(&(kind.catalog_kind().to_string(), name.clone()))
            .cloned()
            .ok_or_else(|| format!("{name} has no catalog row"))?;
        objects.insert(
            name,
            BaseObject {
                kind,
                sql,
                checksum,
                version: v,
            },
        );
    }
    let migrations = rows
        .iter()
        .filter(|((kind, _), _)| kind == "migration")
        .map(|((_, name), (_, sum))| (name.clone(), sum.clone()))
        .collect();
    Ok(Baseline {
        version,
        objects,
        migrations,
    })
}

/// The baseline compiled into this binary, checked against its frozen SHA-256.
pub fn baseline() -> Result<Baseline, GenError> {
    let frozen = FROZEN
        .iter()
        .find(|f| f.version == BASELINE_VERSION)
        .expect("the baseline version is frozen");
    let err = |message: String| GenError::Shape {
        template: format!("migrations/{}", frozen.file),
        message,
    };
    if sha256_hex(BASELINE_TEXT) != frozen.sha256 {
        return Err(err(format!(
            "this binary was built from an edited copy (SHA-256 {}, released as {}); restore the file",
            sha256_hex(BASELINE_TEXT),
            frozen.sha256
        )));
    }
    parse_baseline(BASELINE_VERSION, BASELINE_TEXT).map_err(err)
}

/// The upgrade from the last release to the current extension version.
pub struct Upgrade {
    pub from: u32,
    pub to: u32,
    /// The migration's name, e.g. `000002_upgrade`.
    pub name: String,
    /// The reviewed template, e.g. `upgrades/000002.sql`.
    pub template: &'static str,
    /// The template's opening doc block (without `-- `), shown in generated-sql/README.md.
    pub doc: String,
    /// The rendered template: the reviewed table changes and data migrations.
    pub body: String,
    /// Objects the last release did not have.
    pub added: Vec<String>,
    /// Objects whose generated file changed (procedures are re-created).
    pub changed: Vec<String>,
    /// Tables among `changed` whose DDL changed (the upgrade template alters them).
    pub altered: Vec<String>,
    /// Every table among `changed` (its DDL or only its doc comment).
    pub tables_changed: Vec<String>,
    /// Objects of the last release no longer rendered: (kind, name).
    pub dropped: Vec<(Kind, String)>,
}

/// The version the catalog records for an object of the current install: the baseline's when
/// its file is unchanged since the last release, else the current version.
pub fn object_version(base: &Baseline, o: &Object) -> u32 {
    match base.objects.get(&o.name) {
        Some(b) if b.checksum == sha256_hex(&o.file_text()) => b.version,
        _ => EXTENSION_VERSION,
    }
}

/// The DDL of a table's generated SQL, without the doc comment before it (which is not installed).
fn table_ddl(sql: &str) -> &str {
    sql.find("CREATE TABLE").map_or(sql, |at| &sql[at..])
}

/// Compares the current objects with the baseline and renders the upgrade template. `None` when
/// the current version is the last release's (then nothing may have changed).
pub fn plan(objects: &[Object], base: &Baseline) -> Result<Option<Upgrade>, GenError> {
    let objects: Vec<&Object> = objects.iter().filter(|o| o.set == Set::Extension).collect();
    let mut added = Vec::new();
    let mut changed = Vec::new();
    let mut altered = Vec::new();
    let mut tables_changed = Vec::new();
    for o in &objects {
        match base.objects.get(&o.name) {
            None => added.push(o.name.clone()),
            Some(b) if b.checksum != sha256_hex(&o.file_text()) => {
                changed.push(o.name.clone());
                if o.kind == Kind::Table {
                    tables_changed.push(o.name.clone());
                }
                if o.kind == Kind::Table && table_ddl(&b.sql) != table_ddl(&o.sql) {
                    altered.push(o.name.clone());
                }
            }
            Some(_) => {}
        }
    }
    let dropped: Vec<(Kind, String)> = base
        .objects
        .iter()
        .filter(|(name, _)| !objects.iter().any(|o| &o.name == *name))
        .map(|(name, b)| (b.kind, name.clone()))
        .collect();
    let upgrade = templates::UPGRADES
        .iter()
        .find(|u| u.version == EXTENSION_VERSION);
    let Some(registered) = upgrade.filter(|_| EXTENSION_VERSION > base.version) else {
        if EXTENSION_VERSION == base.version {
            let mut all: Vec<String> = added.iter().chain(&changed).cloned().collect();
            all.extend(dropped.iter().map(|(_, n)| n.clone()));
            if !all.is_empty() {
                return Err(GenError::Shape {
                    template: "src/codegen/mod.rs".into(),
                    message: format!(
                        "objects changed since release {} ({}): raise EXTENSION_VERSION and add templates/upgrades/{:06}.sql",
                        base.version,
                        all.join(", "),
                        base.version + 1
                    ),
                });
            }
            return Ok(None);
        }
        return Err(GenError::Shape {
            template: format!("templates/upgrades/{EXTENSION_VERSION:06}.sql"),
            message: format!(
                "extension version {EXTENSION_VERSION} needs an upgrade template from {} registered in src/codegen/templates.rs",
                base.version
            ),
        });
    };
    if EXTENSION_VERSION != base.version + 1 {
        return Err(GenError::Shape {
            template: format!("templates/{}", registered.template),
            message: format!(
                "one migration per release: the last release is extension {}, so this one is {}",
                base.version,
                base.version + 1
            ),
        });
    }
    let shape = |message: String| GenError::Shape {
        template: format!("templates/{}", registered.template),
        message,
    };
    let text = (registered.render)(&CONSTS).map_err(|source| GenError::Render {
        template: registered.template.to_string(),
        source,
    })?;
    let body = text.trim().to_string() + "\n";
    let doc_lines: Vec<&str> = body.lines().take_while(|l| l.starts_with("--")).collect();
    let title = format!("-- {EXTENSION_VERSION:06}:");
    if !doc_lines.first().is_some_and(|l| l.starts_with(&title)) {
        return Err(shape(format!("must open with a `{title} <title>` line")));
    }
    if !doc_lines
        .iter()
        .any(|l| l.starts_with("-- Data rewritten:"))
    {
        return Err(shape(
            "its doc block must say `-- Data rewritten: …` (or `none`) for the DBA".into(),
        ));
    }
    for table in &altered {
        if !names_statement(&body, "ALTER TABLE", table) {
            return Err(shape(format!(
                "the DDL of table {table} changed since extension {}: add its `ALTER TABLE {table}` here, with a comment saying why",
                base.version
            )));
        }
    }
    for (kind, name) in &dropped {
        if *kind == Kind::Table && !names_statement(&body, "DROP TABLE IF EXISTS", name) {
            return Err(shape(format!(
                "table {name} is no longer rendered: add `DROP TABLE IF EXISTS {name}` here, saying what becomes of its data"
            )));
        }
    }
    let doc = doc_lines
        .iter()
        .map(|l| l.strip_prefix("-- ").unwrap_or(l.trim_start_matches('-')))
        .collect::<Vec<_>>()
        .join("\n");
    Ok(Some(Upgrade {
        from: base.version,
        to: EXTENSION_VERSION,
        name: format!("{EXTENSION_VERSION:06}_upgrade"),
        template: registered.template,
        doc,
        body,
        added,
        changed,
        altered,
        tables_changed,
        dropped,
    }))
}

/// The upgrade migration's text.
pub fn script(objects: &[Object], up: &Upgrade, base_release: &str) -> String {
    let objects: Vec<&Object> = objects.iter().filter(|o| o.set == Set::Extension).collect();
    let pick = |names: &[String], kind: Kind| -> Vec<&Object> {
        objects
            .iter()
            .copied()
            .filter(|o| o.kind == kind && names.contains(&o.name))
            .collect()
    };
    let mut body = generated_header(&format!(
        "templates/{} and the templates of every object added or changed since extension {}",
        up.template, up.from
    ));
    body.push_str(&format!(
        "-- Upgrade from extension {} (orbit {base_release}) to extension {}. Stop every writer, run\n\
         -- `orbit migrate up`, then start the new servers (docs/upgrading.md). Every statement is safe\n\
         -- to run again: a run that stopped part-way is completed by running `orbit migrate up` again.\n\n",
        up.from, up.to
    ));
    push_session_settings(&mut body);
    let new_tables = pick(&up.added, Kind::Table);
    if !new_tables.is_empty() {
        body.push_str("-- ==== New tables ====\n");
        push_objects(&mut body, &new_tables);
    }
    body.push_str(&format!(
        "-- ==== Table changes and data migrations (reviewed, from templates/{}) ====\n",
        up.template
    ));
    body.push_str(&up.body);
    body.push('\n');
    let dropped: Vec<&String> = up
        .dropped
        .iter()
        .filter(|(k, _)| *k == Kind::Procedure)
        .map(|(_, n)| n)
        .collect();
    if !dropped.is_empty() {
        body.push_str("-- ==== Procedures dropped ====\n");
        for name in dropped {
            body.push_str(&format!("DROP PROCEDURE IF EXISTS {name};\n"));
        }
        body.push('\n');
    }
    let changed = pick(&up.changed, Kind::Procedure);
    if !changed.is_empty() {
        body.push_str(&format!(
            "-- ==== Procedures re-created (their text changed since extension {}) ====\n",
            up.from
        ));
        push_objects(&mut body, &changed);
    }
    let new_procedures = pick(&up.added, Kind::Procedure);
    if !new_procedures.is_empty() {
        body.push_str("-- ==== New procedures ====\n");
        push_objects(&mut body, &new_procedures);
    }
    let own = sha256_hex(&body);
    let mut text = body;
    text.push_str(CATALOG_MARKER);
    text.push_str(
        "\n-- The catalog rows come last: a script that stops early never claims its version.\n",
    );
    for o in objects
        .iter()
        .filter(|o| up.added.contains(&o.name) || up.changed.contains(&o.name))
    {
        text.push_str(&catalog_row(
            o.kind.catalog_kind(),
            &o.name,
            up.to,
            &sha256_hex(&o.file_text()),
        ));
    }
    for (kind, name) in &up.dropped {
        text.push_str(&format!(
            "DELETE FROM orbit_extension WHERE kind = '{}' AND name = '{name}';\n",
            kind.catalog_kind()
        ));
    }
    text.push_str(&catalog_row("migration", &up.name, up.to, &own));
    text.push_str(&catalog_row("extension", "orbit", up.to, &own));
    text
}

/// Whether `body` has a `{verb} {table}` statement for exactly that table: `ALTER TABLE
/// orbit_task_event` is not an `ALTER TABLE orbit_task`.
fn names_statement(body: &str, verb: &str, table: &str) -> bool {
    let needle = format!("{verb} {table}");
    body.match_indices(&needle).any(|(at, _)| {
        !body[at + needle.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })
}
