//! `orbit chaos`: a lock-set test in the style of Jepsen's. Worker OS processes run keyed tasks
//! over a few keys; each task appends its element to its key's fenced register
//! ([`workload`]). Meanwhile a fault injector, on a seeded schedule it prints, SIGKILLs workers,
//! SIGSTOPs others for longer than the lease, kills the façade's database connections, restarts
//! the façade, and crashes and restarts the database — a PRIVATE MariaDB/MySQL this harness starts
//! from the machine's server binary on its own port and data directory. Afterwards the
//! [`checker`] reads the history and the run ends with one line:
//! `tasks=N faults=N overlaps=N token_regressions=N lost_updates=N lost_tasks=N`.
//!
//! The façade and workers are separate processes of this same binary (`orbit serve`,
//! `orbit chaos-worker`), so a kill is a real process death.

pub mod answers;
pub mod checker;
pub mod worker;
pub mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sqlx::{Connection, MySqlConnection, MySqlPool};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::dev::PrivateServer;
use crate::processlist;
use checker::{Report, Summary};

/// The faults the injector can apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum FaultKind {
    /// SIGKILL a worker process (a replacement starts under a new identity).
    KillWorker,
    /// SIGSTOP a worker for longer than the lease, then SIGCONT.
    PauseWorker,
    /// `KILL CONNECTION` every database connection of the façade.
    KillConnections,
    /// SIGKILL the façade and start it again on the same address.
    RestartFacade,
    /// SIGKILL the database server and start it again on the same port and data.
    RestartDatabase,
    /// SIGSTOP the database for 3-8 s while a burst of clients gives up on their requests after
    /// 0.2-1 s, then SIGCONT ([`answers`] checks every answer afterwards).
    PauseDatabase,
}

impl FaultKind {
    pub const ALL: [FaultKind; 6] = [
        FaultKind::KillWorker,
        FaultKind::PauseWorker,
        FaultKind::KillConnections,
        FaultKind::RestartFacade,
        FaultKind::RestartDatabase,
        FaultKind::PauseDatabase,
    ];
}

/// One run's settings.
#[derive(Clone, Debug)]
pub struct ChaosConfig {
    /// How long tasks are submitted and faults injected (the drain comes after).
    pub duration: Duration,
    /// Worker processes.
    pub workers: usize,
    /// Concurrency keys the tasks share.
    pub keys: u32,
    /// Submits per second.
    pub rate: u32,
    /// The façade's lease (`serve --lease-seconds`); pauses last longer than this.
    pub lease_seconds: u32,
    /// Mean time between faults.
    pub fault_every: Duration,
    pub faults: Vec<FaultKind>,
    pub seed: u64,
    /// Where the private database keeps its data and the processes their logs.
    pub dir: PathBuf,
    /// How long to wait, after the faults stop, for every task to end.
    pub drain: Duration,
    /// Every other worker process uses `start_on_assign`.
    pub start_on_assign: bool,
    /// Key policies on the first keys ([`POLICIES`]): `key-0` cancels its running holder on
    /// every submit (`cancel_running`), `key-1` keeps only its newest waiting task
    /// (`replace_waiting`), `key-2` has two holders at once, `key-3` two holders and at most 2
    /// grants a second. The checker holds each key to its limit and rate; a cancelled or
    /// replaced task is an end, not a loss.
    pub policies: bool,
}

/// One key policy of a run with [`ChaosConfig::policies`].
#[derive(Clone, Copy, Debug)]
pub struct ChaosPolicy {
    pub key: &'static str,
    pub on_busy: &'static str,
    pub limit: u32,
    /// (grants, per seconds).
    pub rate: Option<(u32, u32)>,
}

/// The key policies of a run with [`ChaosConfig::policies`] (it needs at least 4 keys).
pub const POLICIES: [ChaosPolicy; 4] = [
    ChaosPolicy {
        key: "key-0",
        on_busy: "cancel_running",
        limit: 1,
        rate: None,
    },
    ChaosPolicy {
        key: "key-1",
        on_busy: "replace_waiting",
        limit: 1,
        rate: None,
    },
    ChaosPolicy {
        key: "key-2",
        on_busy: "queue",
        limit: 2,
        rate: None,
    },
    ChaosPolicy {
        key: "key-3",
        on_busy: "queue",
        limit: 2,
        rate: Some((2, 1)),
    },
];

/// How a run's policies read in its log.
fn policies_text() -> String {
    POLICIES
        .iter()
        .map(|p| {
            let mut text = format!("{} {}", p.key, p.on_busy);
            if p.limit > 1 {
                text.push_str(&format!(" limit {}", p.limit));
            }
            if let Some((grants, seconds)) = p.rate {
                text.push_str(&format!(" rate {grants}/{seconds}s"));
            }
            text
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why a run could not be carried out (distinct from a run that found violations).
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    #[error(transparent)]
    Dev(#[from] crate::dev::DevError),
    #[error(transparent)]
    Migrate(#[from] crate::migrate::MigrateError),
    #[error("{0}")]
    Setup(String),
}

fn setup(what: &str) -> impl Fn(String) -> ChaosError + '_ {
    move |e| ChaosError::Setup(format!("{what}: {e}"))
}

/// What a run found.
#[derive(Debug)]
pub struct Outcome {
    pub summary: Summary,
    pub report: Report,
    /// Writes the fence refused (a paused or replaced holder that came back).
    pub fenced_off: u64,
    /// Faults by kind.
    pub faults: BTreeMap<String, u64>,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.report.ok()
    }
}

/// The orbit façade as a child process on a fixed address.
struct Facade {
    child: Child,
    addr: String,
}

/// This binary, resolved once: `/proc/self/exe` stops resolving when a rebuild replaces the file
/// mid-run.
fn exe() -> Result<PathBuf, ChaosError> {
    static EXE: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    EXE.get_or_init(|| std::env::current_exe().map_err(|e| e.to_string()))
        .clone()
        .map_err(setup("locate this binary"))
}

impl Facade {
    async fn start(dsn: &str, addr: &str, lease: u32, log: &Path) -> Result<Facade, ChaosError> {
        let exe = exe()?;
        // The address may still be held for a moment after a kill: try a few times.
        let mut last = String::new();
        for _ in 0..50 {
            let log_file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .map_err(|e| setup("serve log")(e.to_string()))?;
            let mut child = Command::new(&exe)
                .args(["serve", "--addr", addr, "--pool-size", "8"])
                .args(["--lease-seconds", &lease.to_string()])
                .env("ORBIT_MYSQL_DSN", dsn)
                .env("RUST_LOG", "warn")
                .stdout(Stdio::piped())
                .stderr(log_file)
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| setup("start serve")(e.to_string()))?;
            let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
            match tokio::time::timeout(Duration::from_secs(30), lines.next_line()).await {
                Ok(Ok(Some(l))) if l.starts_with("listening on ") => {
                    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
                    return Ok(Facade {
                        child,
                        addr: addr.to_string(),
                    });
                }
                other => {
                    last = format!("{other:?}");
                    let _ = child.kill().await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        Err(ChaosError::Setup(format!(
            "serve did not start on {addr} ({last}); see {}",
            log.display()
        )))
    }

    async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// A worker process and its identity.
struct WorkerProcess {
    child: Child,
    id: String,
}

/// Everything the injector acts on.
struct Cluster {
    cfg: ChaosConfig,
    database: PrivateServer,
    facade: Facade,
    workers: Vec<WorkerProcess>,
    /// Worker processes paused right now (pid → resume time).
    paused: Arc<Mutex<Vec<u32>>>,
    next_worker: u64,
    url: String,
    token: String,
    queue_ids: Vec<String>,
    fence_dsn: String,
    fenced_off: Arc<AtomicU64>,
    answers: Arc<answers::Answers>,
    accepted: answers::Accepted,
}

fn signal(pid: u32, sig: &str) {
    // The process may be gone already (killed by another fault, or at the end): say nothing.
    let _ = std::process::Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

impl Cluster {
    fn orbit_dsn(&self) -> String {
        self.database.dsn.clone()
    }

    async fn spawn_worker(&mut self) -> Result<(), ChaosError> {
        self.next_worker += 1;
        let id = format!("chaos-worker-{}", self.next_worker);
        let exe = exe()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.cfg.dir.join("workers.log"))
            .map_err(|e| setup("worker log")(e.to_string()))?;
        let mut child = Command::new(exe)
            .args(["chaos-worker", "--url", &self.url, "--worker-id", &id])
            .args(["--queues", &self.queue_ids.join(",")])
            .args(["--fence-dsn", &self.fence_dsn, "--capacity", "2"])
            .args(
                (self.cfg.start_on_assign && self.next_worker % 2 == 1)
                    .then_some("--start-on-assign"),
            )
            .env("ORBIT_TOKEN", &self.token)
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| setup("start chaos-worker")(e.to_string()))?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("piped")).lines();
        let fenced_off = self.fenced_off.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.starts_with("fenced-off") {
                    fenced_off.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        self.workers.push(WorkerProcess { child, id });
        Ok(())
    }

    /// Applies one fault and says what it did.
    async fn inject(&mut self, kind: FaultKind, rng: &mut StdRng) -> Result<String, ChaosError> {
        match kind {
            FaultKind::KillWorker => {
                let i = rng.gen_range(0..self.workers.len());
                let mut w = self.workers.remove(i);
                let pid = w.child.id().unwrap_or(0);
                let _ = w.child.kill().await;
                self.spawn_worker().await?;
                Ok(format!(
                    "SIGKILL worker {} (pid {pid}); started a replacement",
                    w.id
                ))
            }
            FaultKind::PauseWorker => {
                let paused = self.paused.lock().expect("paused").clone();
                let candidates: Vec<&WorkerProcess> = self
                    .workers
                    .iter()
                    .filter(|w| w.child.id().is_some_and(|p| !paused.contains(&p)))
                    .collect();
                // Prefer a worker that is running a task right now: its write must be fenced off.
                let holders = self.running_workers().await;
                let holding: Vec<&WorkerProcess> = candidates
                    .iter()
                    .copied()
                    .filter(|w| holders.contains(&w.id))
                    .collect();
                let pick = if holding.is_empty() {
                    &candidates
                } else {
                    &holding
                };
                let Some(w) = pick.choose(rng) else {
                    return Ok("pause skipped: every worker is paused".into());
                };
                let pid = w.child.id().expect("running");
                let pause = Duration::from_millis(
                    u64::from(self.cfg.lease_seconds) * 1000 + 1500 + rng.gen_range(0..1000),
                );
                signal(pid, "STOP");
                self.paused.lock().expect("paused").push(pid);
                let list = self.paused.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(pause).await;
                    signal(pid, "CONT");
                    list.lock().expect("paused").retain(|p| *p != pid);
                });
                Ok(format!(
                    "SIGSTOP worker {} (pid {pid}{}) for {:.1} s (lease {} s), then SIGCONT",
                    w.id,
                    if holding.is_empty() {
                        ""
                    } else {
                        ", running a task"
                    },
                    pause.as_secs_f64(),
                    self.cfg.lease_seconds
                ))
            }
            FaultKind::KillConnections => {
                let mut conn = MySqlConnection::connect(&self.orbit_dsn())
                    .await
                    .map_err(|e| setup("connect to kill connections")(e.to_string()))?;
                let list = |e: sqlx::Error| setup("list connections")(e.to_string());
                let (me, _) = processlist::own_id(&mut conn).await.map_err(list)?;
                let ids: Vec<u64> = processlist::read(&mut conn)
                    .await
                    .map_err(list)?
                    .into_iter()
                    .filter(|p| {
                        p.id != me && p.db.as_deref() == Some("orbit") && p.command != "Daemon"
                    })
                    .map(|p| p.id)
                    .collect();
                let mut killed = 0;
                for id in &ids {
                    // An id read from the server itself; KILL takes no placeholder.
                    if sqlx::raw_sql(&format!("KILL CONNECTION {id}"))
                        .execute(&mut conn)
                        .await
                        .is_ok()
                    {
                        killed += 1;
                    }
                }
                let _ = conn.close().await;
                Ok(format!("KILL CONNECTION on {killed} façade connections"))
            }
            FaultKind::RestartFacade => {
                let pid = self.facade.child.id().unwrap_or(0);
                self.facade.kill().await;
                let down = Duration::from_millis(rng.gen_range(200..1500));
                tokio::time::sleep(down).await;
                self.facade = Facade::start(
                    &self.orbit_dsn(),
                    &self.facade.addr,
                    self.cfg.lease_seconds,
                    &self.cfg.dir.join("serve.log"),
                )
                .await?;
                Ok(format!(
                    "SIGKILL façade (pid {pid}); restarted after {:.1} s",
                    down.as_secs_f64()
                ))
            }
            FaultKind::PauseDatabase => {
                let pid = self.database.pid();
                let pause = Duration::from_millis(rng.gen_range(3000..8000));
                signal(pid, "STOP");
                let burst = tokio::spawn(answers::abandoning_burst(
                    self.answers.clone(),
                    orbit_sdk::Client::new(&self.url, &self.token),
                    self.accepted.clone(),
                    200,
                    rng.gen(),
                ));
                tokio::time::sleep(pause).await;
                signal(pid, "CONT");
                let _ = burst.await;
                Ok(format!(
                    "SIGSTOP database (pid {pid}) for {:.1} s under 200 requests abandoned after 0.2-1 s, then SIGCONT",
                    pause.as_secs_f64()
                ))
            }
            FaultKind::RestartDatabase => {
                let pid = self.database.pid();
                let port = self.database.port;
                self.database.crash();
                let down = Duration::from_millis(rng.gen_range(200..2000));
                tokio::time::sleep(down).await;
                let started = Instant::now();
                self.database =
                    crate::dev::start_private_server_on(&self.cfg.dir.join("db"), Some(port))
                        .await?;
                Ok(format!(
                    "SIGKILL database (pid {pid}); restarted after {:.1} s, recovered in {:.1} s",
                    down.as_secs_f64(),
                    started.elapsed().as_secs_f64()
                ))
            }
        }
    }

    /// Worker ids holding a started attempt now (empty if the database cannot say).
    async fn running_workers(&self) -> Vec<String> {
        let Ok(mut conn) = MySqlConnection::connect(&self.orbit_dsn()).await else {
            return Vec::new();
        };
        let ids: Vec<Vec<u8>> = sqlx::query_scalar(
            "SELECT DISTINCT CAST(worker_id AS BINARY) FROM orbit_attempt WHERE state = 'RUNNING'",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
        let _ = conn.close().await;
        ids.into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    }

    fn resume_all(&self) {
        for pid in self.paused.lock().expect("paused").drain(..) {
            signal(pid, "CONT");
        }
    }

    async fn stop(&mut self) {
        self.resume_all();
        for w in &mut self.workers {
            let _ = w.child.kill().await;
        }
        self.facade.kill().await;
    }
}

/// Runs the workload under faults, drains, checks, and returns what the checker found.
pub async fn run(cfg: ChaosConfig) -> Result<Outcome, ChaosError> {
    exe()?;
    let started = Instant::now();
    let say =
        move |line: String| println!("chaos [{:6.1}s] {line}", started.elapsed().as_secs_f64());
    std::fs::create_dir_all(&cfg.dir)
        .map_err(|e| setup("create the run directory")(e.to_string()))?;
    let database = crate::dev::start_private_server_on(&cfg.dir.join("db"), None).await?;
    say(format!(
        "private database on port {} (data and logs in {})",
        database.port,
        cfg.dir.display()
    ));
    let orbit_dsn = database.dsn.clone();
    let fence_dsn = format!("mysql://root@127.0.0.1:{}/chaos_resource", database.port);
    install(&orbit_dsn, &fence_dsn).await?;
    let (token, first_queue) = bootstrap(&orbit_dsn, "chaos", cfg.policies).await?;
    // A second tenant, only to read the first one's ids (never anything but 404).
    let (other_token, _) = bootstrap(&orbit_dsn, "chaos-other", false).await?;
    let addr = format!("127.0.0.1:{}", crate::dev::free_port()?);
    let facade = Facade::start(
        &orbit_dsn,
        &addr,
        cfg.lease_seconds,
        &cfg.dir.join("serve.log"),
    )
    .await?;
    let url = format!("http://{addr}");
    let client = orbit_sdk::Client::new(&url, &token);
    let second = client
        .create_queue("chaos-second")
        .await
        .map_err(|e| setup("create a queue")(e.to_string()))?;
    let mut cluster = Cluster {
        cfg: cfg.clone(),
        database,
        facade,
        workers: Vec::new(),
        paused: Arc::default(),
        next_worker: 0,
        url: url.clone(),
        token: token.clone(),
        queue_ids: vec![first_queue, second.id],
        fence_dsn: fence_dsn.clone(),
        fenced_off: Arc::default(),
        answers: Arc::default(),
        accepted: Arc::default(),
    };
    for _ in 0..cfg.workers {
        cluster.spawn_worker().await?;
    }
    say(format!(
        "façade {url}, {} worker processes, {} keys, {} submits/s, lease {} s, seed {}{}",
        cfg.workers,
        cfg.keys,
        cfg.rate,
        cfg.lease_seconds,
        cfg.seed,
        if cfg.policies {
            format!(", key policies: {}", policies_text())
        } else {
            String::new()
        }
    ));

    // Producers: submits paced to the rate, each retried under one Idempotency-Key until answered.
    let accepted = cluster.accepted.clone();
    let end = Instant::now() + cfg.duration;
    let give_up = end + cfg.drain / 2;
    let other = orbit_sdk::Client::new(&url, &other_token);
    let reader = tokio::spawn(answers::reader(
        cluster.answers.clone(),
        client.clone(),
        other.clone(),
        accepted.clone(),
        end,
        cfg.seed ^ 0x5eed,
    ));
    let mut producers = Vec::new();
    const PRODUCERS: u32 = 4;
    for p in 0..PRODUCERS {
        let client = client.clone();
        let accepted = accepted.clone();
        let answers = cluster.answers.clone();
        let queues = cluster.queue_ids.clone();
        let (keys, rate, seed) = (cfg.keys, cfg.rate.max(1), cfg.seed);
        producers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(p) << 32));
            let interval = Duration::from_secs_f64(f64::from(PRODUCERS) / f64::from(rate));
            let mut next = Instant::now();
            let mut n = u64::from(p);
            let mut gave_up = 0u64;
            while Instant::now() < end {
                let key = format!("key-{}", rng.gen_range(0..keys));
                let queue = &queues[rng.gen_range(0..queues.len())];
                let task = workload::task(queue, &key, n);
                match workload::submit_until_accepted(
                    &client,
                    &format!("chaos-{n}"),
                    &task,
                    give_up,
                )
                .await
                {
                    Ok(answered) => {
                        answers.submitted(&task, &answered);
                        accepted
                            .lock()
                            .expect("accepted")
                            .push((answered.id, task.payload.clone()));
                    }
                    Err(_) => gave_up += 1,
                }
                n += u64::from(PRODUCERS);
                next += interval;
                tokio::time::sleep_until(next.max(Instant::now())).await;
            }
            gave_up
        }));
    }

    // The fault injector: kinds in a shuffled cycle so a short run still sees each of them.
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut faults = 0u64;
    let mut cycle: Vec<FaultKind> = Vec::new();
    if !cfg.faults.is_empty() {
        loop {
            let mean = cfg.fault_every.as_secs_f64();
            let wait = Duration::from_secs_f64(mean * rng.gen_range(0.5..1.5));
            if Instant::now() + wait >= end {
                break;
            }
            tokio::time::sleep(wait).await;
            if cycle.is_empty() {
                cycle = cfg.faults.clone();
                cycle.shuffle(&mut rng);
            }
            let kind = cycle.pop().expect("refilled");
            let what = cluster.inject(kind, &mut rng).await?;
            faults += 1;
            *counts.entry(format!("{kind:?}")).or_default() += 1;
            say(format!("fault {faults}: {what}"));
        }
    }
    tokio::time::sleep_until(end).await;
    say("faults stopped; waiting for submits to be answered".into());
    let mut gave_up = 0;
    for p in producers {
        gave_up += p.await.unwrap_or(0);
    }
    let _ = reader.await;
    cluster.resume_all();

    // Drain: every task ends (workers keep running), bounded.
    let orbit = crate::migrate::connect_pool(&orbit_dsn, 2).await?;
    let drain_deadline = Instant::now() + cfg.drain;
    let mut open: i64 = -1;
    while Instant::now() < drain_deadline {
        match sqlx::query_scalar::<_, i64>(
            "SELECT COUNT(*) FROM orbit_task WHERE state IN ('WAITING','LEASED','RUNNING','RETRY_WAIT')",
        )
        .fetch_one(&orbit)
        .await
        {
            Ok(0) => {
                open = 0;
                break;
            }
            Ok(n) => open = n,
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    say(format!(
        "drained in {:.1} s ({} tasks still open)",
        cfg.drain.as_secs_f64()
            - drain_deadline
                .saturating_duration_since(Instant::now())
                .as_secs_f64(),
        open.max(0)
    ));
    // Let the workers' last fence writes and results settle before they stop.
    cluster.stop().await;

    // Every accepted task read back one request at a time, as its owner and as the other tenant.
    let accepted = accepted.lock().expect("accepted").clone();
    let restarted = Facade::start(
        &orbit_dsn,
        &addr,
        cfg.lease_seconds,
        &cfg.dir.join("serve.log"),
    )
    .await;
    if let Ok(mut facade) = restarted {
        for (id, payload) in &accepted {
            cluster.answers.read_own(&client, *id, payload).await;
            cluster.answers.read_foreign(&other, *id).await;
        }
        facade.kill().await;
    }
    let fence = crate::migrate::connect_pool(&fence_dsn, 2).await?;
    let ids: Vec<u64> = accepted.iter().map(|(id, _)| *id).collect();
    let mut report = checker::check(&orbit, Some(&fence), &ids)
        .await
        .map_err(|e| setup("read the history")(e.to_string()))?;
    let answers = &cluster.answers;
    report.crossed_answers = answers.crossed.load(Ordering::Relaxed);
    report.internal_errors = answers.internal.load(Ordering::Relaxed);
    for d in answers.details.lock().expect("details").iter() {
        report.details.push(format!("answer: {d}"));
    }
    let fenced_off = cluster.fenced_off.load(Ordering::Relaxed);
    say(format!(
        "checked {} grants, {} fenced writes, {} writes fenced off, {} HTTP answers, {} submits never answered; states {:?}; faults {:?}",
        report.grants,
        report.fenced_writes,
        fenced_off,
        cluster.answers.checked.load(Ordering::Relaxed),
        gave_up,
        report.states,
        counts
    ));
    for d in &report.details {
        say(format!("VIOLATION {d}"));
    }
    orbit.close().await;
    fence.close().await;
    drop(cluster);
    Ok(Outcome {
        summary: report.summary(faults),
        report,
        fenced_off,
        faults: counts,
    })
}

/// Installs the extension in `orbit` and the fence in `chaos_resource`.
async fn install(orbit_dsn: &str, fence_dsn: &str) -> Result<(), ChaosError> {
    let mut conn = crate::migrate::connect(orbit_dsn).await?;
    sqlx::raw_sql("CREATE DATABASE IF NOT EXISTS chaos_resource CHARACTER SET utf8mb4")
        .execute(&mut conn)
        .await
        .map_err(|e| setup("create the resource database")(e.to_string()))?;
    crate::migrate::up_embedded(&mut conn).await?;
    let _ = conn.close().await;
    let rendered =
        crate::codegen::render().map_err(|e| setup("render the fence")(e.to_string()))?;
    let script = rendered
        .files
        .get(Path::new("generated-sql/fence/install.sql"))
        .ok_or_else(|| ChaosError::Setup("no fence install script".into()))?;
    let mut conn = crate::migrate::connect(fence_dsn).await?;
    for s in crate::sqlscript::split(script) {
        sqlx::raw_sql(&s.sql)
            .execute(&mut conn)
            .await
            .map_err(|e| setup("install the fence")(format!("line {}: {e}", s.line)))?;
    }
    let _ = conn.close().await;
    Ok(())
}

/// A credential with every scope, and (`policies`) the run's key policies in its namespace;
/// returns its token and the bootstrap queue's id.
async fn bootstrap(
    orbit_dsn: &str,
    application: &str,
    policies: bool,
) -> Result<(String, String), ChaosError> {
    let pool: MySqlPool = crate::migrate::connect_pool(orbit_dsn, 1).await?;
    let db = crate::db::Db::new(pool);
    let (bootstrap, token) = crate::db::queues::Bootstrap::with_new_token(
        application,
        "chaos",
        "chaos",
        "chaos-first",
        &crate::testing::ALL_SCOPES,
        "chaos",
    );
    let b = db
        .admin_bootstrap(&bootstrap)
        .await
        .map_err(|e| setup("bootstrap")(e.to_string()))?;
    if policies {
        let hash = crate::auth::token_hash(&token);
        for p in POLICIES {
            let mut spec =
                crate::db::keys::KeyPolicySpec::new("exact", p.key, p.on_busy).limit(p.limit);
            if let Some((grants, seconds)) = p.rate {
                spec = spec.rate(grants, seconds);
            }
            db.key_policy_set(&hash, b.namespace_id, &spec)
                .await
                .map_err(|e| setup("set a key policy")(e.to_string()))?;
        }
    }
    db.close().await;
    Ok((token, b.queue_id))
}
