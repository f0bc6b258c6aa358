//! The README's CLI reference is the binary's own `--help` output.

use std::process::Command;

#[test]
fn the_readme_shows_the_current_help_output() {
    let out = Command::new(env!("CARGO_BIN_EXE_orbit"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("<!-- orbit --help -->\n```text\n")
        .expect("README has the help marker")
        + "<!-- orbit --help -->\n```text\n".len();
    let end = start + readme[start..].find("```").unwrap();
    assert_eq!(
        &readme[start..end],
        help,
        "update the README's `orbit --help` block"
    );
}

#[test]
fn every_subcommand_has_help_with_an_example() {
    for args in [
        vec!["gen"],
        vec!["migrate", "up"],
        vec!["migrate", "status"],
        vec!["dev"],
        vec!["serve"],
        vec!["admin", "bootstrap"],
        vec!["admin", "credential", "create"],
        vec!["admin", "credential", "revoke"],
        vec!["admin", "credential", "list"],
        vec!["task"],
        vec!["task", "list"],
        vec!["task", "get"],
        vec!["task", "cancel"],
        vec!["task", "resolve"],
        vec!["queue"],
        vec!["queue", "list"],
        vec!["queue", "get"],
        vec!["queue", "pause"],
        vec!["queue", "resume"],
        vec!["queue", "set-retention"],
        vec!["migrate", "verify"],
        vec!["bench"],
        vec!["chaos"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_orbit"))
            .args(&args)
            .arg("--help")
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(
            text.contains("Example"),
            "{args:?} --help has no example:\n{text}"
        );
    }
}
