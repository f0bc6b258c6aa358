//! `orbit gen`: render the templates, or check the rendered files against them.

use std::process::ExitCode;

use crate::codegen;

pub(super) fn gen(check: bool, root: &std::path::Path) -> ExitCode {
    if !root.join("templates").is_dir() {
        eprintln!(
            "error: {} holds no templates/ folder; run `orbit gen` in the repository root or pass --root DIR",
            root.display()
        );
        return ExitCode::from(2);
    }
    if let Err(unregistered) = codegen::unregistered_templates(root) {
        eprintln!("error: {unregistered}");
        return ExitCode::from(2);
    }
    let rendered = match codegen::render() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    // What the lint could not read is listed in generated-sql/README.md and shown here.
    let c = rendered.coverage;
    eprintln!(
        "lint: ok; {} procedure statements parsed by sqlparser, {} procedural statements read by the lint's grammar, {} not parsed (listed in generated-sql/README.md)",
        c.sqlparser,
        c.grammar,
        rendered.unparsed.len()
    );
    for u in &rendered.unparsed {
        eprintln!("lint: not parsed: {u}");
    }
    if check {
        let drift = codegen::check(&rendered, root);
        if drift.is_empty() {
            println!(
                "gen --check: {} files match the templates",
                rendered.files.len()
            );
            ExitCode::SUCCESS
        } else {
            eprintln!("gen --check: the committed SQL differs from what the templates render (run `cargo run -- gen`):");
            for d in drift {
                eprintln!("  {d}");
            }
            ExitCode::from(1)
        }
    } else {
        match codegen::write(&rendered, root) {
            Ok(changed) => {
                for p in &changed {
                    println!("wrote {}", p.display());
                }
                println!(
                    "gen: {} files, {} changed",
                    rendered.files.len(),
                    changed.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                // A template changed since this binary was built, or a file cannot be written:
                // configuration, not the database.
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        }
    }
}
