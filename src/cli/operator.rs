//! The operator commands over the HTTP API: `orbit task list|get|cancel|resolve` and `orbit queue
//! list|get|pause|resume|set-retention`, through [`orbit_sdk::Client`], so they go through the same procedures
//! and scopes as any client. Each reads the server's URL from `--url`/`ORBIT_URL` and the token
//! from `ORBIT_TOKEN` or the credentials file `--credentials-file`/`ORBIT_CREDENTIALS_FILE` (a
//! token is never taken on the command line, where `ps` would show it). Output is a table for
//! people, or the API's JSON with `--json`.
//!
//! Exit codes: 0 done; 1 the command ran and found a problem (404 not found, 409 the task is not
//! in a state that allows it); 2 usage or configuration (no URL or token, a bad argument, 401 a
//! token the server does not know, 403 a credential without the scope); 3 the server or its
//! database is unavailable (unreachable, 5xx).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use orbit_sdk::{ApiError, Client};
use serde_json::Value;

/// Where the API is and who calls it.
#[derive(clap::Args, Debug, Clone)]
pub struct ApiArgs {
    /// The server, e.g. http://127.0.0.1:8080.
    #[arg(long, env = "ORBIT_URL", global = true)]
    pub url: Option<String>,
    /// A credentials file written by `orbit admin bootstrap` / `credential create` (its token is
    /// used); ORBIT_TOKEN, when set, is used instead.
    #[arg(long, env = "ORBIT_CREDENTIALS_FILE", global = true)]
    pub credentials_file: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum TaskAction {
    /// List tasks, newest first (GET /v1/tasks; scope tasks:read).
    #[command(
        after_help = "Example:\n  ORBIT_URL=http://127.0.0.1:8080 ORBIT_CREDENTIALS_FILE=ops.json orbit task list --state NEEDS_REVIEW"
    )]
    List(TaskListArgs),
    /// Show a task and its attempts (scope tasks:read).
    #[command(after_help = "Example:\n  orbit task get 42 --json")]
    Get { id: u64 },
    /// Cancel a task that has not finished (scope tasks:submit).
    #[command(after_help = "Example:\n  orbit task cancel 42")]
    Cancel { id: u64 },
    /// Settle a NEEDS_REVIEW task: succeeded, failed, or requeue (scope tasks:submit).
    #[command(
        after_help = "Example:\n  orbit task resolve 42 --resolution succeeded --note '{\"checked_by\": \"ops\"}'"
    )]
    Resolve {
        id: u64,
        #[arg(long, value_parser = ["succeeded", "failed", "requeue"])]
        resolution: String,
        /// JSON kept as the task's output (succeeded) or error (failed).
        #[arg(long)]
        note: Option<String>,
    },
}

#[derive(clap::Args, Debug)]
pub struct TaskListArgs {
    /// Only this queue's tasks (its id).
    #[arg(long)]
    pub queue: Option<String>,
    /// Only tasks in this state (WAITING, LEASED, RUNNING, RETRY_WAIT, SUCCEEDED, FAILED,
    /// CANCELLED, NEEDS_REVIEW, EXPIRED).
    #[arg(long)]
    pub state: Option<String>,
    #[arg(long)]
    pub business_key: Option<String>,
    #[arg(long)]
    pub concurrency_key: Option<String>,
    /// At most this many tasks (pages of up to 500 are fetched).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub limit: u32,
}

#[derive(Subcommand, Debug)]
pub enum QueueAction {
    /// List the queues the credential reaches (scope tasks:read).
    #[command(after_help = "Example:\n  orbit queue list --json")]
    List,
    /// Show one queue (scope tasks:read).
    #[command(after_help = "Example:\n  orbit queue get 0f1e2d3c4b5a69788796a5b4c3d2e1f0")]
    Get { id: String },
    /// Stop new grants from a queue; in-flight attempts continue (scope queues:manage).
    #[command(after_help = "Example:\n  orbit queue pause 0f1e2d3c4b5a69788796a5b4c3d2e1f0")]
    Pause { id: String },
    /// Let a paused queue's tasks be granted again (scope queues:manage).
    #[command(after_help = "Example:\n  orbit queue resume 0f1e2d3c4b5a69788796a5b4c3d2e1f0")]
    Resume { id: String },
    /// Keep the queue's finished tasks (SUCCEEDED, FAILED, CANCELLED, EXPIRED) this many seconds
    /// after they finish, then purge them with their attempts, history and idempotency receipts;
    /// 60 to 315360000, default 604800 (7 days). Applies to tasks already finished too (scope
    /// queues:manage).
    #[command(
        name = "set-retention",
        after_help = "Example (30 days):\n  orbit queue set-retention 0f1e2d3c4b5a69788796a5b4c3d2e1f0 2592000"
    )]
    SetRetention { id: String, seconds: u64 },
}

/// Why an operator command failed, with its exit code.
struct Failure {
    code: u8,
    message: String,
}

fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: 2,
        message: message.into(),
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        let code = match e.status {
            404 | 409 => 1,
            400 | 401 | 403 | 405 | 413 | 422 => 2,
            _ => 3,
        };
        let message = if e.status == 0 {
            format!("cannot reach the server: {}", e.message)
        } else {
            let hint = match e.status {
                401 => {
                    " (the token is unknown or revoked: check ORBIT_TOKEN or the credentials file)"
                }
                403 => " (the credential lacks the scope this command needs)",
                _ => "",
            };
            format!("{} {}: {}{hint}", e.status, e.code, e.message)
        };
        Failure { code, message }
    }
}

/// The client of `args`: the URL and a token, or a readable reason (exit 2).
fn client(args: &ApiArgs) -> Result<Client, Failure> {
    let url = args
        .url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| {
            usage("no server URL: pass --url or set ORBIT_URL (e.g. http://127.0.0.1:8080)")
        })?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(usage(format!(
            "the URL {url:?} is not http:// or https:// (e.g. http://127.0.0.1:8080)"
        )));
    }
    let token = match std::env::var("ORBIT_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        Some(t) => t.trim().to_string(),
        None => {
            let path = args.credentials_file.as_ref().ok_or_else(|| {
                usage(
                    "no token: set ORBIT_TOKEN, or pass --credentials-file / set \
                     ORBIT_CREDENTIALS_FILE (a file written by `orbit admin bootstrap`)",
                )
            })?;
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
            serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["token"].as_str().map(str::to_string))
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    usage(format!(
                        "{} is not a credentials file (a JSON object with a \"token\")",
                        path.display()
                    ))
                })?
        }
    };
    Ok(Client::new(url, &token))
}

fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn print_json(v: &impl serde::Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("API values serialise")
    );
}

/// Prints rows as aligned columns under a header.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}  "));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(s)) if s.is_empty() => "-".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn task_row(t: &orbit_sdk::client::Task) -> Vec<String> {
    vec![
        t.id.to_string(),
        t.queue_id.clone(),
        t.state.clone(),
        t.handler.clone(),
        t.concurrency_key.clone().unwrap_or_else(|| "-".into()),
        format!("{}/{}", t.attempt_count, t.max_attempts),
        text(t.rest.get("created_at")),
    ]
}

const TASK_HEADER: [&str; 7] = [
    "ID", "QUEUE", "STATE", "HANDLER", "KEY", "ATTEMPTS", "CREATED",
];

fn print_task(t: &orbit_sdk::client::Task) {
    let mut fields = vec![
        ("id", t.id.to_string()),
        ("queue", t.queue_id.clone()),
        ("state", t.state.clone()),
        ("handler", format!("{} {}", t.handler, t.handler_version)),
        (
            "concurrency_key",
            t.concurrency_key.clone().unwrap_or_else(|| "-".into()),
        ),
        (
            "business_key",
            t.business_key
                .clone()
                .filter(|k| !k.is_empty())
                .unwrap_or_else(|| "-".into()),
        ),
        ("priority", t.priority.to_string()),
        (
            "attempts",
            format!("{} of {}", t.attempt_count, t.max_attempts),
        ),
    ];
    for key in [
        "run_at",
        "deadline_at",
        "created_at",
        "finished_at",
        "blocked_reason",
    ] {
        if let Some(v) = t.rest.get(key).filter(|v| !v.is_null()) {
            fields.push((key, text(Some(v))));
        }
    }
    fields.push(("output", text(t.output.as_ref())));
    fields.push(("error", text(t.error.as_ref())));
    let width = fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in fields {
        println!("{k:<width$}  {v}");
    }
}

fn queue_row(q: &orbit_sdk::client::Queue) -> Vec<String> {
    vec![
        q.id.clone(),
        q.name.clone(),
        if q.paused { "yes" } else { "no" }.to_string(),
        text(q.rest.get("max_active_attempts")),
        text(q.rest.get("retention_seconds")),
        text(q.rest.get("created_at")),
    ]
}

const QUEUE_HEADER: [&str; 6] = [
    "ID",
    "NAME",
    "PAUSED",
    "MAX_ACTIVE",
    "RETENTION_S",
    "CREATED",
];

/// `orbit task …`.
pub async fn task_cmd(action: TaskAction, args: ApiArgs) -> ExitCode {
    finish(task(action, &args).await)
}

async fn task(action: TaskAction, args: &ApiArgs) -> Result<(), Failure> {
    let note = match &action {
        TaskAction::Resolve { note: Some(n), .. } => Some(
            serde_json::from_str::<Value>(n)
                .map_err(|e| usage(format!("--note is not JSON: {e}")))?,
        ),
        _ => None,
    };
    let client = client(args)?;
    match action {
        TaskAction::List(l) => {
            let mut query: Vec<(&str, String)> = Vec::new();
            if let Some(q) = &l.queue {
                query.push(("queue_id", q.clone()));
            }
            if let Some(s) = &l.state {
                query.push(("state", s.to_ascii_uppercase()));
            }
            if let Some(k) = &l.business_key {
                query.push(("business_key", k.clone()));
            }
            if let Some(k) = &l.concurrency_key {
                query.push(("concurrency_key", k.clone()));
            }
            let mut tasks = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let want = (l.limit as usize - tasks.len()).min(500);
                let mut page_query: Vec<(&str, &str)> =
                    query.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let limit = want.to_string();
                page_query.push(("limit", &limit));
                if let Some(c) = &cursor {
                    page_query.push(("cursor", c));
                }
                let (page, next) = client.list_tasks(&page_query).await?;
                tasks.extend(page);
                cursor = next;
                if cursor.is_none() || tasks.len() >= l.limit as usize {
                    break;
                }
            }
            if args.json {
                print_json(&tasks);
            } else {
                print_table(
                    &TASK_HEADER,
                    &tasks.iter().map(task_row).collect::<Vec<_>>(),
                );
            }
        }
        TaskAction::Get { id } => {
            let t = client.task(id).await?;
            let attempts = client.attempts(id).await?;
            if args.json {
                let mut v = serde_json::to_value(&t).expect("a task serialises");
                v["attempts"] = serde_json::to_value(&attempts).expect("attempts serialise");
                print_json(&v);
            } else {
                print_task(&t);
                if !attempts.is_empty() {
                    println!();
                    print_table(
                        &[
                            "ATTEMPT", "NO", "STATE", "WORKER", "TOKEN", "GRANTED", "RELEASED",
                            "OUTCOME",
                        ],
                        &attempts
                            .iter()
                            .map(|a| {
                                vec![
                                    a.id.to_string(),
                                    a.attempt_no.to_string(),
                                    a.state.clone(),
                                    text(a.rest.get("worker_id")),
                                    a.concurrency_token.clone().unwrap_or_else(|| "-".into()),
                                    text(a.rest.get("granted_at")),
                                    text(a.rest.get("released_at")),
                                    text(a.rest.get("outcome")),
                                ]
                            })
                            .collect::<Vec<_>>(),
                    );
                }
            }
        }
        TaskAction::Cancel { id } => {
            let t = client.cancel(id).await?;
            if args.json {
                print_json(&t);
            } else {
                println!("task {} is {}", t.id, t.state);
            }
        }
        TaskAction::Resolve { id, resolution, .. } => {
            let t = client.resolve(id, &resolution, note.as_ref()).await?;
            if args.json {
                print_json(&t);
            } else {
                println!("task {} resolved ({resolution}): now {}", t.id, t.state);
            }
        }
    }
    Ok(())
}

/// `orbit queue …`.
pub async fn queue_cmd(action: QueueAction, args: ApiArgs) -> ExitCode {
    finish(queue(action, &args).await)
}

async fn queue(action: QueueAction, args: &ApiArgs) -> Result<(), Failure> {
    let client = client(args)?;
    let pause_requested = matches!(action, QueueAction::Pause { .. });
    let show = |queues: &[orbit_sdk::client::Queue]| {
        if args.json {
            print_json(&queues);
        } else {
            print_table(
                &QUEUE_HEADER,
                &queues.iter().map(queue_row).collect::<Vec<_>>(),
            );
        }
    };
    match action {
        QueueAction::List => {
            let mut queues = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut query = vec![("limit", "500")];
                if let Some(c) = &cursor {
                    query.push(("cursor", c));
                }
                let (page, next) = client.list_queues(&query).await?;
                queues.extend(page);
                cursor = next;
                if cursor.is_none() {
                    break;
                }
            }
            show(&queues);
        }
        QueueAction::Get { id } => {
            let q = client.queue(&id).await?;
            if args.json {
                print_json(&q);
            } else {
                show(std::slice::from_ref(&q));
            }
        }
        QueueAction::Pause { id } | QueueAction::Resume { id } => {
            let paused = pause_requested;
            let q = client.set_queue_paused(&id, paused).await?;
            if args.json {
                print_json(&q);
            } else {
                println!(
                    "queue {} ({}) is {}",
                    q.id,
                    q.name,
                    if q.paused { "paused" } else { "running" }
                );
            }
        }
        QueueAction::SetRetention { id, seconds } => {
            let q = client.set_queue_retention(&id, seconds).await?;
            if args.json {
                print_json(&q);
            } else {
                println!(
                    "queue {} ({}) keeps finished tasks {} seconds",
                    q.id,
                    q.name,
                    text(q.rest.get("retention_seconds"))
                );
            }
        }
    }
    Ok(())
}
