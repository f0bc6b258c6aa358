//! Orbit: a durable task platform whose logic lives in MySQL/MariaDB stored procedures.
//!
//! Tasks that share a `concurrency_key` within a namespace share one execution permit, and every
//! grant carries a persisted, strictly increasing `concurrency_token` (a fencing token). The rules
//! live in SQL; the Rust side renders that SQL, installs it, and marshals traffic into `CALL`s.
//!
//! # Layout
//!
//! - [`codegen`]: `orbit gen` — renders `templates/` (askama) into `generated-sql/` (one file per
//!   table and procedure, the DBA review surface) and `migrations/`, and lints the result with
//!   sqlparser ([`codegen::lint`]).
//! - [`sqlscript`]: splits SQL scripts into statements like the `mariadb` client (`DELIMITER`).
//! - [`migrate`]: `orbit migrate up|status` — applies the numbered migrations and reads the
//!   `orbit_extension` catalog.
//! - [`db`]: one typed async function per stored procedure, and the one error type
//!   ([`db::DbError`]) that SIGNALled codes, deadlocks and lost connections map onto.
//! - [`http`]: `orbit serve`, the axum façade — one router module per resource, one error type
//!   ([`http::error::ApiError`]), the OpenAPI document generated from the handlers, and the
//!   operator console at `/console` ([`http::console`]: static assets that call the same API).
//! - [`scheduler`]: the serve loop that recovers leases, promotes retries, expires deadlines,
//!   fires plans and purges finished tasks past their queue's retention.
//! - [`schedule`]: cron expressions in IANA time zones: a cron plan's next fire time, which the
//!   server computes and stores on the plan row.
//! - [`dispatch`]: wake-ups of this process's worker sessions, signalled by the handlers, the
//!   sessions and the scheduler (which imports nothing from [`http`]).
//! - [`auth`]: bearer tokens (random, stored only as SHA-256).
//! - [`dev`]: `orbit dev` — a private MariaDB/MySQL from the machine's server binary for local use.
//! - [`bench`]: `orbit bench` scenarios, measured against the server's durable-commit baseline,
//!   with the database server's work per task ([`bench::server_cost`]).
//! - [`chaos`]: `orbit chaos` — keyed worker processes under injected faults (kills, pauses,
//!   façade and database restarts) and the invariant checker that reads the history afterwards.
//! - [`processlist`]: the server's process list, read the way every supported server answers
//!   (the bench's idle check, chaos's connection kills, tests that watch connections).
//! - [`telemetry`]: the Prometheus metrics `/metrics` exports, declared once with their help.
//! - [`testing`]: a fresh database per test, installed through [`migrate`], dropped afterwards.
//! - [`verify`]: `orbit migrate verify` and serve's start-up check: the installed objects against
//!   the catalog and this binary's definitions.
//! - [`cli`]: the `orbit` command line, one module per subcommand; `orbit task …` and `orbit
//!   queue …` (`cli::operator`) go over the HTTP API through `orbit_sdk`.

pub mod auth;
pub mod bench;
pub mod chaos;
pub mod cli;
pub mod codegen;
pub mod db;
pub mod dev;
pub mod dispatch;
pub mod http;
pub mod migrate;
pub mod processlist;
pub mod schedule;
pub mod scheduler;
pub mod sqlscript;
pub mod telemetry;
pub mod testing;
pub mod verify;
