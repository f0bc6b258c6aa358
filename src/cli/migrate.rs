//! `orbit migrate up|status|verify`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::{bench, migrate};

#[derive(Subcommand, Debug)]
pub enum MigrateAction {
    /// Install this version on a database without the extension (its full install), or apply
    /// every pending migration in order (a no-op when current).
    #[command(
        after_help = "Example:\n  ORBIT_MYSQL_DSN=mysql://root@127.0.0.1:3306/orbit orbit migrate up"
    )]
    Up(MigrateArgs),
    /// Show the installed version, applied and pending migrations.
    #[command(
        after_help = "Example:\n  orbit migrate status --dsn mysql://root@127.0.0.1:3306/orbit"
    )]
    Status(MigrateArgs),
    /// Compare every installed table, index and procedure with the catalog and this binary's
    /// definitions; exit 1 naming each one that is missing or changed.
    #[command(
        after_help = "Example:\n  orbit migrate verify --dsn mysql://root@127.0.0.1:3306/orbit\n\n\
Exit codes: 0 the install matches; 1 something is missing or changed (each printed);\n\
2 bad DSN; 3 database error. `orbit serve` runs the same check at start."
    )]
    Verify(VerifyArgs),
}

#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// Database DSN, e.g. mysql://root@127.0.0.1:3306/orbit.
    #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    /// Database DSN, e.g. mysql://root@127.0.0.1:3306/orbit.
    #[arg(long, env = "ORBIT_MYSQL_DSN", hide_env_values = true)]
    pub dsn: Option<String>,
    /// Read migrations from this folder instead of those built into the binary.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

pub(super) async fn migrate_cmd(action: MigrateAction) -> Result<ExitCode, migrate::MigrateError> {
    let (args, is_up) = match action {
        MigrateAction::Up(a) => (a, true),
        MigrateAction::Status(a) => (a, false),
        MigrateAction::Verify(a) => return verify_cmd(a).await,
    };
    // A folder of migrations is applied file by file; the built-in ones start an empty database
    // with the full install of their last version.
    let (migrations, install) = match &args.dir {
        Some(dir) => (migrate::from_dir(dir)?, None),
        None => (migrate::embedded(), Some(migrate::embedded_install())),
    };
    let dsn = args.dsn.ok_or(migrate::MigrateError::NoDsn)?;
    let mut conn = migrate::connect(&dsn).await?;
    if is_up {
        let mut bar: Option<indicatif::ProgressBar> = None;
        let applied = migrate::up(&mut conn, &migrations, install.as_ref(), |name, i, n| {
            if i == 0 {
                if let Some(done) = bar.take() {
                    done.finish_and_clear();
                }
                bar = Some(bench::progress(n as u64, &format!("applying {name}")));
            }
            if let Some(b) = &bar {
                b.set_position(i as u64 + 1);
            }
        })
        .await;
        if let Some(done) = bar.take() {
            done.finish_and_clear();
        }
        let applied = applied?;
        if applied.is_empty() {
            println!(
                "migrate up: already at version {}; nothing to do",
                migrations.last().map_or(0, |m| m.version)
            );
        } else if applied == [migrate::INSTALL_NAME] {
            println!(
                "migrate up: installed version {} (the full install, which records {} as applied)",
                migrations.last().map_or(0, |m| m.version),
                migrations
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        } else {
            println!("migrate up: applied {}", applied.join(", "));
        }
        Ok(ExitCode::SUCCESS)
    } else {
        let s = migrate::status(&mut conn, &migrations).await?;
        println!("installed version: {}", s.version);
        for a in &s.applied {
            let mark = if s.changed.contains(&a.name) {
                "  CHANGED SINCE APPLIED"
            } else {
                ""
            };
            println!(
                "applied  {} (version {}, sha256 {}){mark}",
                a.name, a.version, a.checksum
            );
        }
        for p in &s.pending {
            println!("pending  {p}");
        }
        Ok(if s.changed.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

async fn verify_cmd(args: VerifyArgs) -> Result<ExitCode, migrate::MigrateError> {
    let dsn = args.dsn.ok_or(migrate::MigrateError::NoDsn)?;
    let mut conn = migrate::connect(&dsn).await?;
    let report = crate::verify::verify(&mut conn).await?;
    for line in crate::verify::describe(&report) {
        println!("{line}");
    }
    if report.ok() && report.limits.is_empty() {
        println!(
            "migrate verify: version {}, {} tables and procedures match their definitions",
            report.version, report.checked
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "migrate verify: {} problem(s) in the install of version {}{}",
            report.problems.len(),
            report.version,
            if report.limits.is_empty() {
                ""
            } else {
                "; this account cannot see everything: run it as the account that ran `migrate up`"
            }
        );
        Ok(ExitCode::from(1))
    }
}
