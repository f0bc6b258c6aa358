//! `orbit gen`: deterministic output, `--check` on the committed tree and on a changed copy.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn orbit(args: &[&str], cwd: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_orbit"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("run orbit");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// A temp copy of what `gen` reads and writes.
fn tree_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for dir in ["templates", "generated-sql", "migrations"] {
        copy_dir(&repo().join(dir), &tmp.path().join(dir));
    }
    tmp
}

#[test]
fn rendering_twice_gives_identical_bytes() {
    let a = orbit::codegen::render().expect("render");
    let b = orbit::codegen::render().expect("render");
    assert_eq!(a.files, b.files);
    // And the binary writes the same bytes into two fresh trees.
    let (t1, t2) = (tree_copy(), tree_copy());
    for t in [&t1, &t2] {
        std::fs::remove_dir_all(t.path().join("generated-sql")).unwrap();
        let (code, _, err) = orbit(&["gen"], t.path());
        assert_eq!(code, 0, "{err}");
    }
    for path in a.files.keys() {
        let x = std::fs::read(t1.path().join(path)).unwrap();
        let y = std::fs::read(t2.path().join(path)).unwrap();
        assert_eq!(x, y, "{} differs between runs", path.display());
    }
}

/// Template syntax inside a macro's string argument is not rendered (askama passes it through
/// verbatim): a `{{ c.x }}` there would reach a user as text. Build such strings with `~`.
#[test]
fn no_template_syntax_survives_rendering() {
    for o in orbit::codegen::render_objects().unwrap() {
        for marker in ["{{", "{%", "{#"] {
            assert!(
                !o.sql.contains(marker),
                "{}: rendered SQL still contains {marker}",
                o.name
            );
        }
    }
}

#[test]
fn check_passes_on_the_committed_tree() {
    let (code, out, err) = orbit(&["gen", "--check"], &repo());
    assert_eq!(
        code, 0,
        "gen --check failed on the committed tree:\n{out}{err}"
    );
}

#[test]
fn check_fails_naming_the_file_after_a_template_changes() {
    let t = tree_copy();
    let template = t
        .path()
        .join("templates/procedures/orbit_extension_version.sql");
    let text = std::fs::read_to_string(&template).unwrap();
    std::fs::write(
        &template,
        text.replace("READS SQL DATA", "READS SQL DATA\n  COMMENT 'changed'"),
    )
    .unwrap();
    let (code, _, err) = orbit(
        &["gen", "--check", "--root", t.path().to_str().unwrap()],
        &repo(),
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("generated-sql/procedures/orbit_extension_version.sql"),
        "{err}"
    );
    assert!(
        err.contains("templates/procedures/orbit_extension_version.sql"),
        "{err}"
    );
}

#[test]
fn check_names_differing_missing_and_extra_files() {
    let t = tree_copy();
    std::fs::write(
        t.path().join("generated-sql/tables/orbit_task.sql"),
        "-- edited by hand\n",
    )
    .unwrap();
    std::fs::remove_file(t.path().join("generated-sql/tables/orbit_resource.sql")).unwrap();
    std::fs::write(t.path().join("migrations/000099_stray.sql"), "SELECT 1;\n").unwrap();
    let (code, _, err) = orbit(
        &["gen", "--check", "--root", t.path().to_str().unwrap()],
        &repo(),
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("differs: generated-sql/tables/orbit_task.sql"),
        "{err}"
    );
    assert!(
        err.contains("missing: generated-sql/tables/orbit_resource.sql"),
        "{err}"
    );
    assert!(
        err.contains("extra:   migrations/000099_stray.sql"),
        "{err}"
    );
    // `gen` repairs all three.
    let (code, _, err) = orbit(&["gen", "--root", t.path().to_str().unwrap()], &repo());
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = orbit(
        &["gen", "--check", "--root", t.path().to_str().unwrap()],
        &repo(),
    );
    assert_eq!(code, 0, "{err}");
}

#[test]
fn an_unregistered_template_is_refused() {
    let t = tree_copy();
    std::fs::write(
        t.path().join("templates/tables/orbit_stray.sql"),
        "-- orbit_stray: x\n",
    )
    .unwrap();
    let (code, _, err) = orbit(
        &["gen", "--check", "--root", t.path().to_str().unwrap()],
        &repo(),
    );
    assert_eq!(code, 2);
    assert!(err.contains("tables/orbit_stray.sql"), "{err}");
}

#[test]
fn every_generated_file_carries_the_generated_header() {
    let r = orbit::codegen::render().unwrap();
    for (path, text) in &r.files {
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.contains("GENERATED FILE: do not edit"),
            "{} lacks the header",
            path.display()
        );
    }
    for o in &r.objects {
        assert!(r.files[&Path::new("generated-sql").join(o.file())]
            .contains(&format!("templates/{}", o.template)));
    }
}

#[test]
fn a_changed_release_migration_is_refused_and_never_rewritten() {
    let t = tree_copy();
    let frozen = t.path().join("migrations/000001_install.sql");
    let original = std::fs::read(&frozen).unwrap();
    let mut edited = original.clone();
    edited.extend_from_slice(b"-- an edit\n");
    std::fs::write(&frozen, &edited).unwrap();
    let root = t.path().to_str().unwrap();
    let (code, _, err) = orbit(&["gen", "--check", "--root", root], &repo());
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("frozen:  migrations/000001_install.sql") && err.contains("0.1.0"),
        "{err}"
    );
    // `gen` refuses too, and leaves the file as it found it.
    let (code, _, err) = orbit(&["gen", "--root", root], &repo());
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("migrations/000001_install.sql"), "{err}");
    assert_eq!(std::fs::read(&frozen).unwrap(), edited);
    // Removed, it is reported missing and not rendered again.
    std::fs::remove_file(&frozen).unwrap();
    let (code, _, err) = orbit(&["gen", "--check", "--root", root], &repo());
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("missing: migrations/000001_install.sql"),
        "{err}"
    );
    let (code, _, _) = orbit(&["gen", "--root", root], &repo());
    assert_ne!(code, 0);
    assert!(!frozen.exists());
}

/// The objects extension 2 adds (among them the key policies' tables, the operator CLI's
/// credential list, the key inspector and its metrics, the sweep of silent sessions, and the
/// internal procedures the hot paths call for a batch or a rare case), in name order.
const ADDED_IN_2: [&str; 21] = [
    "orbit_attempt_charge",
    "orbit_attempt_grant",
    "orbit_credential_list",
    "orbit_key_get",
    "orbit_key_list",
    "orbit_key_metrics",
    "orbit_key_policy",
    "orbit_key_policy_delete",
    "orbit_key_policy_list",
    "orbit_key_policy_set",
    "orbit_key_rate_check",
    "orbit_key_rate_log",
    "orbit_key_slot",
    "orbit_plan_list",
    "orbit_plan_schedule_due",
    "orbit_plan_schedule_set",
    "orbit_queue_set_retention",
    "orbit_session_sweep",
    "orbit_task_create_keyed_many",
    "orbit_task_event_list",
    "orbit_task_purge",
];

#[test]
fn the_release_baseline_is_the_frozen_000001() {
    use orbit::codegen::upgrade;
    let base = upgrade::baseline().expect("the compiled-in 000001 is the released one");
    assert_eq!(base.version, 1);
    // The frozen release installed 68 objects; each is still installed today or dropped by name
    // in the upgrade.
    assert_eq!(base.objects.len(), 68, "0.1.0 installed 68 objects");
    let objects = orbit::codegen::render_objects().unwrap();
    let up = plan_of(objects.clone()).unwrap();
    for name in base.objects.keys() {
        assert!(
            objects.iter().any(|o| &o.name == name) || up.dropped.iter().any(|d| &d.1 == name),
            "{name} is neither installed nor dropped"
        );
    }
    assert_eq!(base.migrations.len(), 1);
}

/// The upgrade plan of a changed set of objects (as if the templates had changed).
fn plan_of(
    objects: Vec<orbit::codegen::Object>,
) -> Result<orbit::codegen::upgrade::Upgrade, String> {
    let base = orbit::codegen::upgrade::baseline().unwrap();
    orbit::codegen::upgrade::plan(&objects, &base)
        .map(|u| u.expect("extension 2 has an upgrade"))
        .map_err(|e| e.to_string())
}

#[test]
fn the_upgrade_recreates_changed_procedures_and_lists_them() {
    let objects = orbit::codegen::render_objects().unwrap();
    let up = plan_of(objects.clone()).unwrap();
    assert!(up.changed.contains(&"orbit_task_grant".to_string()));
    assert_eq!(
        up.altered,
        [
            "orbit_attempt",
            "orbit_credential",
            "orbit_extension",
            "orbit_plan",
            "orbit_plan_fire",
            "orbit_plan_version",
            "orbit_queue",
            "orbit_resource",
            "orbit_session",
            "orbit_task",
            "orbit_task_event"
        ]
    );
    // Exactly the objects 0.1.0 did not have are added, and the permit tables (now columns of
    // orbit_resource and orbit_attempt) are dropped.
    let base = orbit::codegen::upgrade::baseline().unwrap();
    let new: Vec<String> = objects
        .iter()
        .filter(|o| o.set == orbit::codegen::Set::Extension && !base.objects.contains_key(&o.name))
        .map(|o| o.name.clone())
        .collect();
    let mut added = up.added.clone();
    added.sort();
    let mut new = new;
    new.sort();
    assert_eq!(added, new);
    assert_eq!(added, ADDED_IN_2);
    let dropped: Vec<&str> = up.dropped.iter().map(|d| d.1.as_str()).collect();
    assert_eq!(dropped, ["orbit_key_permit", "orbit_queue_permit"]);
    let text = orbit::codegen::upgrade::script(&objects, &up, "0.1.0");
    assert!(text.contains("DROP PROCEDURE IF EXISTS orbit_task_grant;"));
    assert!(text.contains("CREATE PROCEDURE orbit_task_grant("));
    // An unchanged procedure is left alone (and is in the install, so the check can fail).
    assert!(objects.iter().any(|o| o.name == "orbit_attempt_get"));
    assert!(!text.contains("CREATE PROCEDURE orbit_attempt_get("));
    assert!(text.contains("VALUES ('procedure', 'orbit_task_grant', 2,"));
    assert!(!text.contains("'orbit_attempt_get'"));
}

#[test]
fn the_upgrade_drops_removed_procedures_and_creates_new_ones() {
    let mut objects = orbit::codegen::render_objects().unwrap();
    let at = objects
        .iter()
        .position(|o| o.name == "orbit_task_get")
        .unwrap();
    let mut added = objects.remove(at);
    added.name = "orbit_task_fetch".into();
    added.sql = added.sql.replace("orbit_task_get", "orbit_task_fetch");
    objects.push(added);
    let up = plan_of(objects.clone()).unwrap();
    assert!(up.added.contains(&"orbit_task_fetch".to_string()));
    let dropped: Vec<&str> = up.dropped.iter().map(|d| d.1.as_str()).collect();
    assert_eq!(
        dropped,
        ["orbit_key_permit", "orbit_queue_permit", "orbit_task_get"]
    );
    let text = orbit::codegen::upgrade::script(&objects, &up, "0.1.0");
    assert!(text.contains("DROP PROCEDURE IF EXISTS orbit_task_get;"));
    assert!(text.contains("CREATE PROCEDURE orbit_task_fetch("));
    assert!(text.contains(
        "DELETE FROM orbit_extension WHERE kind = 'procedure' AND name = 'orbit_task_get';"
    ));
}

#[test]
fn a_table_change_without_its_alter_in_the_upgrade_template_is_refused() {
    let mut objects = orbit::codegen::render_objects().unwrap();
    let worker = objects
        .iter_mut()
        .find(|o| o.name == "orbit_worker")
        .unwrap();
    worker.sql = worker.sql.replacen(
        "CREATE TABLE IF NOT EXISTS orbit_worker (",
        "CREATE TABLE IF NOT EXISTS orbit_worker (\n  extra INT NOT NULL DEFAULT 0 COMMENT 'x',",
        1,
    );
    let err = plan_of(objects.clone()).err().expect("refused");
    assert!(err.contains("ALTER TABLE orbit_worker"), "{err}");
    assert!(err.contains("templates/upgrades/000002.sql"), "{err}");
    // A table's doc comment alone (not installed) needs no ALTER.
    let mut objects = orbit::codegen::render_objects().unwrap();
    let worker = objects
        .iter_mut()
        .find(|o| o.name == "orbit_worker")
        .unwrap();
    worker.sql = format!("-- more words\n{}", worker.sql);
    let up = plan_of(objects).unwrap();
    assert!(up.changed.contains(&"orbit_worker".to_string()));
    assert!(!up.altered.contains(&"orbit_worker".to_string()));
    // A dropped table must be dropped by the template, saying where its data went.
    let mut objects = orbit::codegen::render_objects().unwrap();
    objects.retain(|o| o.name != "orbit_plan_fire");
    let err = plan_of(objects).err().expect("refused");
    assert!(
        err.contains("DROP TABLE IF EXISTS orbit_plan_fire"),
        "{err}"
    );
}

#[test]
fn a_release_build_has_every_migration_frozen() {
    // The crate version carries `-dev` while the newest migration is unreleased; dropping it
    // (releasing) requires adding that migration to upgrade::FROZEN.
    let released = !env!("CARGO_PKG_VERSION").contains('-');
    let frozen = orbit::codegen::upgrade::FROZEN.len() as u32;
    if released {
        assert_eq!(
            frozen,
            orbit::codegen::EXTENSION_VERSION,
            "freeze the release's migration"
        );
    } else {
        assert_eq!(frozen + 1, orbit::codegen::EXTENSION_VERSION);
    }
}
