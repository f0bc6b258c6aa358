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
