//! End-to-end scenarios over a real `serve` process, real HTTP submits and real SDK workers:
//! `e2e` (unkeyed throughput), `keys` (N tasks over K keys), `hotkey` (one key, hand-off latency),
//! `submit` (HTTP submits/s) and `sessions` (memory of 1,000 idle WebSocket sessions).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use orbit_sdk::client::SubmitTask;
use orbit_sdk::{Client, Worker};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use super::serve::ServeProcess;
use super::{key_grants, progress, tenant, with, BenchDb, KeyLimits, Percentiles, Report};
use crate::db::DbError;

/// Options of the flow scenarios.
pub struct FlowOptions {
    pub tasks: u32,
    pub workers: u32,
    pub keys: u32,
    /// Workers use `Worker::start_on_assign`.
    pub start_on_assign: bool,
    /// Tasks per submit request (1 = `POST /v1/tasks`, more = `POST /v1/tasks/batch`).
    pub batch: u32,
    /// `e2e` and `keys`: submit every task before the workers start, and time the processing
    /// alone (a burn-down); the submit phase is reported on its own.
    pub preload: bool,
    /// `keys` and `hotkey`: the key policy set on the scenario's keys (`--key-limit`, `--rate`).
    pub limits: KeyLimits,
}

/// `keys`' policy pattern: every key it uses starts with it.
const KEYS_POLICY: [(&str, &str); 1] = [("prefix", "key-")];
/// `hotkey`'s policy pattern: its one key.
const HOTKEY_POLICY: [(&str, &str); 1] = [("exact", "hot")];

const SUBMITTERS: u32 = 16;

fn internal(e: impl std::fmt::Display) -> DbError {
    DbError::Internal(e.to_string())
}

fn new_task(queue: &str, key: Option<String>, n: u32) -> SubmitTask {
    SubmitTask {
        queue_id: queue.into(),
        handler: "bench.noop".into(),
        handler_version: "v1".into(),
        payload_version: "v1".into(),
        payload: json!({ "n": n }),
        concurrency_key: key,
        ..Default::default()
    }
}

/// How often a submit request answered 503 (the server's call timeout, reached when many
/// batches queue for the same keys on a busy machine) is sent again, with the same
/// Idempotency-Keys, before the scenario fails.
const SUBMIT_ATTEMPTS: u32 = 10;

/// What [`submit_all`] saw: each request's latency (retries included) and how many requests were
/// sent again after a 503.
struct Submits {
    latencies: Vec<Duration>,
    retries: u64,
}

/// Submits `tasks` through `SUBMITTERS` concurrent HTTP clients, `batch` tasks a request.
async fn submit_all(
    client: &Client,
    tasks: Vec<SubmitTask>,
    batch: u32,
) -> Result<Submits, DbError> {
    let total = tasks.len() as u64;
    let mut requests: Vec<Vec<(String, SubmitTask)>> = Vec::new();
    let mut tasks = tasks.into_iter().enumerate().peekable();
    while tasks.peek().is_some() {
        requests.push(
            tasks
                .by_ref()
                .take(batch.max(1) as usize)
                .map(|(i, t)| (format!("bench-{i}"), t))
                .collect(),
        );
    }
    requests.reverse();
    let requests = Arc::new(Mutex::new(requests));
    let retries = Arc::new(AtomicU64::new(0));
    let bar = progress(total, "submitting");
    let mut handles = Vec::new();
    for _ in 0..SUBMITTERS {
        let (client, requests, retries, bar) = (
            client.clone(),
            requests.clone(),
            retries.clone(),
            bar.clone(),
        );
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let next = requests.lock().expect("requests").pop();
                let Some(items) = next else {
                    return Ok::<_, DbError>(latencies);
                };
                let started = Instant::now();
                for attempt in 1.. {
                    let sent = if let [(key, task)] = items.as_slice() {
                        client.submit(key, task).await.map(drop)
                    } else {
                        client.submit_many(&items).await.map(drop)
                    };
                    match sent {
                        Ok(()) => break,
                        Err(e) if e.status == 503 && attempt < SUBMIT_ATTEMPTS => {
                            retries.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt)))
                                .await;
                        }
                        Err(e) => return Err(internal(e)),
                    }
                }
                latencies.push(started.elapsed());
                bar.inc(items.len() as u64);
            }
        }));
    }
    let mut latencies = Vec::new();
    for h in handles {
        latencies.extend(h.await.map_err(internal)??);
    }
    bar.finish_and_clear();
    Ok(Submits {
        latencies,
        retries: retries.load(Ordering::Relaxed),
    })
}

fn worker(
    url: &str,
    token: &str,
    name: &str,
    queues: &[String],
    capacity: u32,
    start_on_assign: bool,
    done: Arc<AtomicU64>,
) -> Worker {
    let mut w = Worker::new(url, token, name)
        .capacity(capacity)
        .start_on_assign(start_on_assign);
    for q in queues {
        w = w.queue(q);
    }
    w.handler("bench.noop", "v1", move |_ctx| {
        let done = done.clone();
        async move {
            done.fetch_add(1, Ordering::Relaxed);
            Ok(Value::Null)
        }
    })
}

async fn wait_for(done: &AtomicU64, target: u64, what: &str) {
    let bar = progress(target, what);
    while done.load(Ordering::Relaxed) < target {
        bar.set_position(done.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    bar.finish_and_clear();
}

/// `e2e` (keys = 0) and `keys` (keys > 0): tasks/s from the first submit to the last result ack
/// with workers running meanwhile, or with `preload` from the workers' start to the last result
/// ack, every task submitted beforehand (the submit phase is reported in `details`).
/// `keys` sets `opts.limits` as one prefix policy over its keys (`key-`), and reports how many
/// held a key at once ([`key_grants`]).
pub async fn throughput(
    bench: &BenchDb,
    opts: &FlowOptions,
    keys: u32,
    baseline: f64,
) -> Result<Report, DbError> {
    let t = tenant(&bench.db).await?;
    if keys > 0 {
        opts.limits.apply(&bench.db, &t, &KEYS_POLICY).await?;
    }
    let serve = ServeProcess::start(&bench.dsn).await?;
    let client = Client::new(&serve.url, &t.token);
    let done = Arc::new(AtomicU64::new(0));
    let start_workers = || -> Vec<_> {
        (0..opts.workers)
            .map(|i| {
                worker(
                    &serve.url,
                    &t.token,
                    &format!("bench-{i}"),
                    std::slice::from_ref(&t.queue_id),
                    16,
                    opts.start_on_assign,
                    done.clone(),
                )
                .start()
            })
            .collect()
    };
    let tasks = (0..opts.tasks)
        .map(|n| {
            new_task(
                &t.queue_id,
                (keys > 0).then(|| format!("key-{}", n % keys)),
                n,
            )
        })
        .collect();
    let n = u64::from(opts.tasks);
    let mut details = json!({ "workers": opts.workers, "keys": keys, "start_on_assign": opts.start_on_assign,
                              "batch": opts.batch, "preload": opts.preload, "target_ratio": 0.5 });
    let (mut submits, workers, meter, started) = if opts.preload {
        let meter = bench.meter(serve.pid()).await?;
        let started = Instant::now();
        let submits = submit_all(&client, tasks, opts.batch).await?;
        let seconds = started.elapsed().as_secs_f64().max(f64::EPSILON);
        let cost = meter.per_task(n).await?;
        eprintln!(
            "bench: submitted {n} tasks in {seconds:.2} s ({:.0} tasks/s); starting the workers",
            n as f64 / seconds
        );
        details = with(
            details,
            json!({ "latency": "submit request (submit phase)", "submit_seconds": seconds,
                    "submit_tasks_per_s": n as f64 / seconds, "submit_server_cost": cost }),
        );
        let meter = bench.meter(serve.pid()).await?;
        let started = Instant::now();
        (submits, start_workers(), meter, started)
    } else {
        details = with(details, json!({ "latency": "submit request" }));
        let workers = start_workers();
        let meter = bench.meter(serve.pid()).await?;
        let started = Instant::now();
        let submits = submit_all(&client, tasks, opts.batch).await?;
        (submits, workers, meter, started)
    };
    wait_for(&done, n, "running").await;
    for w in workers {
        w.drain().await.map_err(internal)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let cost = meter.per_task(n).await?;
    if keys > 0 {
        details = with(details, opts.limits.details(&KEYS_POLICY));
        details = with(
            details,
            key_grants(&bench.db, t.application_id, opts.limits.rate).await?,
        );
    }
    Ok(Report::throughput(
        if keys == 0 { "e2e" } else { "keys" },
        opts.tasks,
        seconds,
        &mut submits.latencies,
        baseline,
        with(details, json!({ "submit_retries": submits.retries })),
    )
    .costing(cost))
}

/// `hotkey`: N tasks on one key across two queues and two workers; hand-off = a task's handler
/// starting after the previous holder's handler finished (result, ack, grant, assign, start).
/// With `--key-limit` above 1 several hold the key at once, and a handler that starts before the
/// previous token's ended counts a hand-off of 0; with `--rate` a grant past the rate waits.
pub async fn hotkey(bench: &BenchDb, opts: &FlowOptions, baseline: f64) -> Result<Report, DbError> {
    let t = tenant(&bench.db).await?;
    opts.limits.apply(&bench.db, &t, &HOTKEY_POLICY).await?;
    let serve = ServeProcess::start(&bench.dsn).await?;
    let client = Client::new(&serve.url, &t.token);
    let second = client
        .create_queue(&format!("hot-{}", crate::auth::new_queue_id()))
        .await
        .map_err(internal)?
        .id;
    let queues = vec![t.queue_id.clone(), second.clone()];
    // All tasks are accepted before the workers start: the figure is the hand-off itself, not
    // hand-offs competing with the submit traffic for the same two cores.
    let tasks = (0..opts.tasks)
        .map(|n| new_task(&queues[n as usize % 2], Some("hot".into()), n))
        .collect();
    submit_all(&client, tasks, opts.batch).await?;
    let meter = bench.meter(serve.pid()).await?;
    let spans: Arc<Mutex<Vec<(u64, Instant, Instant)>>> = Arc::default();
    let origin = Instant::now();
    let mut workers = Vec::new();
    for i in 0..opts.workers.max(2) {
        let spans = spans.clone();
        let mut w = Worker::new(&serve.url, &t.token, &format!("hot-{i}"))
            .capacity(super::HOTKEY_CAPACITY)
            .start_on_assign(opts.start_on_assign);
        for q in &queues {
            w = w.queue(q);
        }
        workers.push(
            w.handler("bench.noop", "v1", move |ctx| {
                let spans = spans.clone();
                async move {
                    let entered = Instant::now();
                    spans.lock().expect("spans").push((
                        ctx.concurrency_token.unwrap_or(0),
                        entered,
                        Instant::now(),
                    ));
                    Ok(Value::Null)
                }
            })
            .start(),
        );
    }
    let bar = progress(u64::from(opts.tasks), "hand-offs");
    while spans.lock().expect("spans").len() < opts.tasks as usize {
        bar.set_position(spans.lock().expect("spans").len() as u64);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    bar.finish_and_clear();
    for w in workers {
        w.drain().await.map_err(internal)?;
    }
    let mut spans = spans.lock().expect("spans").clone();
    spans.sort_by_key(|s| s.0);
    let mut handoffs: Vec<Duration> = spans
        .windows(2)
        .map(|p| p[1].1.saturating_duration_since(p[0].2))
        .collect();
    let first = spans.first().map_or(origin, |s| s.1);
    let last = spans.last().map_or(origin, |s| s.2);
    let cost = meter.per_task(u64::from(opts.tasks)).await?;
    let details = with(
        json!({ "latency": "hand-off (previous handler end -> next handler start)", "start_on_assign": opts.start_on_assign,
                "targets": {"p99_ms": 5, "tasks_per_s": 500} }),
        opts.limits.details(&HOTKEY_POLICY),
    );
    let details = with(
        details,
        key_grants(&bench.db, t.application_id, opts.limits.rate).await?,
    );
    Ok(Report::throughput(
        "hotkey",
        opts.tasks,
        last.duration_since(first).as_secs_f64(),
        &mut handoffs,
        baseline,
        details,
    )
    .costing(cost))
}

/// `delayed`: how late a due delayed task reaches a worker. The workers connect and idle; the
/// tasks are submitted (in batches of --batch) with run_at spread evenly over `spread_seconds`,
/// the first 5 s ahead; each handler records when it was entered. Lateness = handler entry − the
/// task's run_at, both read off this host's clock (the database's UTC_TIMESTAMP and the
/// process's); the target is p99 ≤ 1 s (issue 26). The scheduler promotes due tasks at least
/// every 250 ms (`scheduler::MAX_SLEEP`), and the dispatch probe then wakes the queue's sessions.
pub async fn delayed(
    bench: &BenchDb,
    opts: &FlowOptions,
    spread_seconds: u32,
    baseline: f64,
) -> Result<Report, DbError> {
    let t = tenant(&bench.db).await?;
    let serve = ServeProcess::start(&bench.dsn).await?;
    let client = Client::new(&serve.url, &t.token);
    let entered: Arc<Mutex<Vec<(String, chrono::DateTime<chrono::Utc>)>>> = Arc::default();
    let mut workers = Vec::new();
    for i in 0..opts.workers.max(1) {
        let entered = entered.clone();
        workers.push(
            Worker::new(&serve.url, &t.token, &format!("delayed-{i}"))
                .capacity(16)
                .start_on_assign(opts.start_on_assign)
                .queue(&t.queue_id)
                .handler("bench.noop", "v1", move |ctx| {
                    let entered = entered.clone();
                    async move {
                        let now = chrono::Utc::now();
                        let run_at = ctx.task.rest["run_at"].as_str().unwrap_or("").to_string();
                        entered.lock().expect("entered").push((run_at, now));
                        Ok(Value::Null)
                    }
                })
                .start(),
        );
    }
    let first = chrono::Utc::now() + chrono::Duration::seconds(5);
    let step = f64::from(spread_seconds) / f64::from(opts.tasks.max(1));
    let tasks = (0..opts.tasks)
        .map(|n| {
            let at = first + chrono::Duration::microseconds((f64::from(n) * step * 1e6) as i64);
            SubmitTask {
                run_at: Some(at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)),
                ..new_task(&t.queue_id, None, n)
            }
        })
        .collect();
    submit_all(&client, tasks, opts.batch).await?;
    let meter = bench.meter(serve.pid()).await?;
    let bar = progress(u64::from(opts.tasks), "delayed tasks run");
    let deadline = Instant::now() + Duration::from_secs(u64::from(spread_seconds) + 60);
    while entered.lock().expect("entered").len() < opts.tasks as usize {
        if Instant::now() > deadline {
            return Err(internal(format!(
                "only {} of {} delayed tasks ran within a minute of the last run_at",
                entered.lock().expect("entered").len(),
                opts.tasks
            )));
        }
        bar.set_position(entered.lock().expect("entered").len() as u64);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    bar.finish_and_clear();
    for w in workers {
        w.drain().await.map_err(internal)?;
    }
    let entered = entered.lock().expect("entered").clone();
    let mut early = 0u32;
    let mut lateness: Vec<Duration> = Vec::with_capacity(entered.len());
    for (run_at, at) in &entered {
        let run_at = chrono::DateTime::parse_from_rfc3339(run_at)
            .map_err(|e| internal(format!("task run_at {run_at:?}: {e}")))?;
        match (*at - run_at.with_timezone(&chrono::Utc)).to_std() {
            Ok(late) => lateness.push(late),
            Err(_) => {
                early += 1;
                lateness.push(Duration::ZERO);
            }
        }
    }
    if early > 0 {
        return Err(internal(format!(
            "{early} delayed tasks ran before their run_at"
        )));
    }
    let cost = meter.per_task(u64::from(opts.tasks)).await?;
    Ok(Report::throughput(
        "delayed",
        opts.tasks,
        f64::from(spread_seconds),
        &mut lateness,
        baseline,
        json!({ "latency": "lateness (handler entry - run_at)", "spread_seconds": spread_seconds,
                "targets": {"p99_ms": 1000} }),
    )
    .costing(cost))
}

/// `submit`: HTTP submits/s with Idempotency-Keys from 16 concurrent clients.
pub async fn submit(bench: &BenchDb, opts: &FlowOptions, baseline: f64) -> Result<Report, DbError> {
    let t = tenant(&bench.db).await?;
    let serve = ServeProcess::start(&bench.dsn).await?;
    let client = Client::new(&serve.url, &t.token);
    let tasks = (0..opts.tasks)
        .map(|n| new_task(&t.queue_id, None, n))
        .collect();
    let meter = bench.meter(serve.pid()).await?;
    let started = Instant::now();
    let mut submits = submit_all(&client, tasks, opts.batch).await?;
    let seconds = started.elapsed().as_secs_f64();
    let cost = meter.per_task(u64::from(opts.tasks)).await?;
    Ok(Report::throughput(
        "submit",
        opts.tasks,
        seconds,
        &mut submits.latencies,
        baseline,
        json!({ "clients": SUBMITTERS, "batch": opts.batch, "latency": "submit request", "target_ratio": 0.8,
                "submit_retries": submits.retries }),
    )
    .costing(cost))
}

/// `sessions`: resident memory of `serve` holding `tasks` idle worker sessions.
pub async fn sessions(
    bench: &BenchDb,
    opts: &FlowOptions,
    baseline: f64,
) -> Result<Report, DbError> {
    let t = tenant(&bench.db).await?;
    let serve = ServeProcess::start(&bench.dsn).await?;
    let before = serve.rss_bytes().unwrap_or(0);
    let url = format!(
        "{}/v1/workers/connect",
        serve.url.replacen("http://", "ws://", 1)
    );
    let bar = progress(u64::from(opts.tasks), "opening sessions");
    let mut sockets = Vec::new();
    let mut latencies = Vec::new();
    let started = Instant::now();
    for i in 0..opts.tasks {
        let mut req = url.as_str().into_client_request().map_err(internal)?;
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {}", t.token).parse().map_err(internal)?,
        );
        let began = Instant::now();
        let (mut ws, _) = tokio_tungstenite::connect_async(req)
            .await
            .map_err(internal)?;
        let hello = json!({"type": "hello", "worker_id": format!("idle-{i}"), "capacity": 1, "queue_ids": [t.queue_id],
                           "handlers": [], "concurrency_keys": true, "resume": []});
        ws.send(Message::Text(hello.to_string().into()))
            .await
            .map_err(internal)?;
        ws.next()
            .await
            .ok_or_else(|| internal("closed before welcome"))?
            .map_err(internal)?;
        latencies.push(began.elapsed());
        sockets.push(ws);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = serve.rss_bytes().unwrap_or(0);
    let p = Percentiles::of(&mut latencies);
    let mb = after as f64 / 1_048_576.0;
    drop(sockets);
    Ok(Report {
        scenario: "sessions",
        tasks: u64::from(opts.tasks),
        seconds,
        tasks_per_s: f64::from(opts.tasks) / seconds,
        p50_ms: p.p50_ms,
        p99_ms: p.p99_ms,
        baseline_commits_per_s: baseline,
        ratio: mb / 100.0,
        details: json!({ "serve_rss_mb_before": before as f64 / 1_048_576.0, "serve_rss_mb": mb, "target_mb": 100,
                         "latency": "connect + hello -> welcome" }),
        server_cost: None,
    })
}
