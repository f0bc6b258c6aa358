//! The operator console (`/console`) in a real browser: headless Chromium driven through
//! chromedriver (WebDriver) against a spawned `orbit serve` and a fresh database. One server and
//! one browser for the whole walk-through, whose steps run in order: sign in; the overview; a held
//! key's holder and token, cancelling the holder's task and the next holder appearing with a
//! larger token; pausing a queue; resolving a needs-review task; a payload and a key made of HTML
//! rendered as text with nothing run; plans; another tenant's token seeing none of it. Each page
//! is saved to `target/console-screenshots/`.
//!
//! Chromium and chromedriver come from Debian (`apt-get install chromium chromium-driver`); when
//! they are missing this test fails, it does not skip (`.ci/run` installs them).

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use orbit::testing::{Fixture, Server};
use serde_json::{json, Value};
use support::ws::RawWorker;

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// How long a condition may take to show in the page.
const DEADLINE: Duration = Duration::from_secs(20);

/// chromedriver on a free port and one headless Chromium session through it; both end with it.
struct Browser {
    client: Client,
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Browser {
        for binary in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                Path::new(binary).exists(),
                "{binary} is missing: the console tests need Debian's chromium and chromium-driver \
                 (apt-get install -y chromium chromium-driver)"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1360,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(e) if started.elapsed() < DEADLINE => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("no WebDriver session from chromedriver within {DEADLINE:?}: {e}"),
            }
        };
        Browser {
            client,
            _driver: driver,
            _profile: profile,
        }
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// Navigates within the console (hash routing, no reload).
    async fn route(&self, hash: &str) {
        self.client
            .execute("location.hash = arguments[0];", vec![json!(hash)])
            .await
            .expect("set location.hash");
    }

    /// The text of the first element matching `css` once `ok` holds for it; panics with the last
    /// text seen after [`DEADLINE`].
    async fn wait_text(&self, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        let mut last = String::from("(no such element)");
        loop {
            if let Ok(e) = self.client.find(Locator::Css(css)).await {
                if let Ok(text) = e.text().await {
                    if ok(&text) {
                        return text;
                    }
                    last = text;
                }
            }
            if started.elapsed() > DEADLINE {
                let page = self.page_text().await;
                panic!("{what}: `{css}` never matched within {DEADLINE:?}; last text {last:?}; page: {page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `css` matches nothing.
    async fn wait_gone(&self, css: &str, what: &str) {
        let started = Instant::now();
        while !self
            .client
            .find_all(Locator::Css(css))
            .await
            .map(|v| v.is_empty())
            .unwrap_or(false)
        {
            if started.elapsed() > DEADLINE {
                panic!("{what}: `{css}` still there after {DEADLINE:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the first element matching `css`, retrying while it is absent, disabled, or replaced
    /// by a refresh between finding and clicking.
    async fn click(&self, css: &str, what: &str) {
        let started = Instant::now();
        loop {
            if let Ok(e) = self.client.find(Locator::Css(css)).await {
                if e.is_enabled().await.unwrap_or(false) && e.click().await.is_ok() {
                    return;
                }
            }
            if started.elapsed() > DEADLINE {
                let page = self.page_text().await;
                panic!("{what}: could not click `{css}` within {DEADLINE:?}; page: {page}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Filters the queue page's tasks by `state` and `key` through its form. The page's
    /// auto-refresh may replace the form between two steps (a stale element, or a control
    /// rendered again from the address), so the whole form is filled again until the address
    /// carries both filters.
    async fn apply_filter(&self, state: &str, key: &str) {
        let started = Instant::now();
        loop {
            let filled = async {
                let select = self.client.find(Locator::Css("#filter-state")).await?;
                select.select_by_value(state).await?;
                let input = self.client.find(Locator::Css("#filter-key")).await?;
                input.clear().await?;
                input.send_keys(key).await?;
                self.client
                    .find(Locator::Css("#apply-filter"))
                    .await?
                    .click()
                    .await?;
                Ok::<(), fantoccini::error::CmdError>(())
            }
            .await;
            let hash = self.eval("return location.hash;").await;
            let hash = hash.as_str().unwrap_or_default().to_string();
            if filled.is_ok() && hash.contains(&format!("state={state}")) && hash.contains("key=") {
                return;
            }
            if started.elapsed() > DEADLINE {
                panic!(
                    "the filter was not applied within {DEADLINE:?}: {filled:?}; address {hash}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn page_text(&self) -> String {
        self.client
            .execute("return document.body.innerText;", vec![])
            .await
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .unwrap_or_default()
    }

    async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.expect("script")
    }

    async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = screenshots();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/console-screenshots")
}

/// A plain HTTP client for setting the scene through the API.
struct Http {
    url: String,
    token: String,
    http: reqwest::Client,
}

impl Http {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            req = req
                .header("Idempotency-Key", format!("k-{}", rand::random::<u64>()))
                .json(&body);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.send(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body["data"].clone()
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let (status, reply) = self.send(reqwest::Method::POST, path, Some(body)).await;
        assert!(
            status == 200 || status == 201,
            "POST {path}: {status} {reply}"
        );
        reply["data"].clone()
    }

    async fn submit(&self, queue_id: &str, key: &str, payload: Value) -> u64 {
        let mut task = json!({"queue_id": queue_id, "handler": "invoice.send", "handler_version": "v1",
                              "payload_version": "v1", "payload": payload});
        if !key.is_empty() {
            task["concurrency_key"] = json!(key);
        }
        self.post("/v1/tasks", task).await["id"].as_u64().unwrap()
    }
}

/// Signs in on the sign-in page with `token`.
async fn sign_in(b: &Browser, base: &str, token: &str) {
    b.goto(&format!("{base}/console#/signin")).await;
    b.wait_text("#signin-form h1", "the sign-in page", |t| t == "Sign in")
        .await;
    let input = b.client.find(Locator::Css("#token")).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys(token).await.unwrap();
    b.click("#sign-in", "sign in").await;
    b.wait_text("#page-overview h1", "the overview after sign-in", |t| {
        t == "Overview"
    })
    .await;
}

#[tokio::test]
async fn the_console_in_a_real_browser() {
    let f = Fixture::new().await;
    // A lease long enough that the unstarted holder below keeps its key for the whole test.
    let server = Server::start_with_args(
        env!("CARGO_BIN_EXE_orbit"),
        &f.test_db.dsn,
        &["--lease-seconds", "600"],
    )
    .await;
    let base = server.url.clone();
    let api = Http {
        url: base.clone(),
        token: f.token.clone(),
        http: reqwest::Client::new(),
    };
    let b = Browser::start().await;

    // --- Sign in. A wrong token is refused and not kept.
    b.goto(&format!("{base}/console")).await;
    let input = b.client.find(Locator::Css("#token")).await.unwrap();
    input.send_keys("orbit_not-a-token").await.unwrap();
    b.click("#sign-in", "sign in with a wrong token").await;
    b.wait_text("#signin-error", "a wrong token is refused", |t| {
        t.contains("UNAUTHENTICATED")
    })
    .await;
    assert_eq!(
        b.eval("return sessionStorage.length;").await,
        json!(0),
        "a refused token is not kept"
    );
    sign_in(&b, &base, &f.token).await;

    // --- A held key: a raw worker takes the first task of the key and does not start it.
    let key = "account/42";
    let first = api.submit(&f.queue_id, key, json!({"invoice": 1})).await;
    let second = api.submit(&f.queue_id, key, json!({"invoice": 2})).await;
    let mut worker = RawWorker::connect(&base, &f.token).await;
    let welcome = worker
        .hello("w-console", &[&f.queue_id], true, 2, &[])
        .await;
    assert_eq!(welcome["type"], "welcome", "{welcome}");
    let assign = worker.recv_type("task.assign").await;
    assert_eq!(assign["task"]["id"], first, "{assign}");
    let token: u64 = assign["concurrency_token"]
        .as_u64()
        .or_else(|| assign["concurrency_token"].as_str()?.parse().ok())
        .expect("a keyed assignment carries its token");

    // The overview counts it.
    b.route("#/").await;
    b.wait_text("#queues tbody tr", "the overview lists the queue", |t| {
        t.contains("q1")
    })
    .await;
    b.wait_text("#total-active", "the held task is counted", |t| t == "1")
        .await;
    b.wait_text("#throughput", "throughput with metrics:read", |t| {
        t.contains("results")
    })
    .await;
    b.screenshot("overview").await;

    // The keys page lists the held key; its page shows the holder and its token.
    b.route("#/keys").await;
    b.wait_text("#keys tbody tr", "the busiest keys", |t| t.contains(key))
        .await;
    b.screenshot("keys").await;
    b.click("#keys a.key-link", "open the key").await;
    let shown = b
        .wait_text("#holder-token", "the holder's token", |t| !t.is_empty())
        .await;
    assert_eq!(shown, token.to_string());
    b.wait_text("#holder-worker", "the holder's worker", |t| {
        t == "w-console"
    })
    .await;
    b.wait_text("#holder-task", "the holder's task", |t| {
        t == format!("#{first}")
    })
    .await;
    b.wait_text("#key-waiting", "one task waits", |t| t == "1")
        .await;
    b.wait_text("#key-holders", "one holder of one", |t| t == "1 of 1")
        .await;
    b.wait_text("#grants tbody", "the grant is in the recent grants", |t| {
        t.contains(&token.to_string())
    })
    .await;
    b.screenshot("key").await;

    // Cancel the holder's task: the worker's session takes the next task with a larger token,
    // and the page shows the new holder.
    b.click("#cancel-holder", "cancel the holder's task").await;
    b.wait_text("#flash-message", "the cancel is done", |t| {
        t == format!("Cancel task #{first}: done")
    })
    .await;
    let next = worker.recv_type("task.assign").await;
    assert_eq!(next["task"]["id"], second, "{next}");
    let next_token = b
        .wait_text("#holder-task", "the next holder appears", |t| {
            t == format!("#{second}")
        })
        .await;
    let _ = next_token;
    let shown: u64 = b
        .wait_text("#holder-token", "the next holder's token", |t| {
            t.parse::<u64>().is_ok_and(|v| v > token)
        })
        .await
        .parse()
        .unwrap();
    assert!(shown > token, "the next holder's token {shown} > {token}");
    b.wait_text("#grants tbody", "the cancelled grant is listed", |t| {
        t.contains("cancelled")
    })
    .await;
    b.screenshot("key-handoff").await;
    let task = api.get(&format!("/v1/tasks/{first}")).await;
    assert_eq!(task["state"], "CANCELLED");

    // --- Needs review: the second task runs and ends with an unknown outcome.
    let attempt = next["attempt_id"].as_u64().unwrap();
    worker
        .send(json!({"type": "task.start", "attempt_id": attempt}))
        .await;
    worker.recv_type("task.start.ok").await;
    worker
        .send(
            json!({"type": "task.result", "attempt_id": attempt, "outcome": "unknown",
                     "error": {"message": "connection reset while sending"}}),
        )
        .await;
    assert_eq!(
        worker.recv_type("task.result.ack").await["task_state"],
        "NEEDS_REVIEW"
    );
    b.route(&format!("#/task/{second}")).await;
    b.wait_text("#task-state", "the task needs review", |t| {
        t == "NEEDS_REVIEW"
    })
    .await;
    b.wait_text("#timeline", "the timeline shows grant and start", |t| {
        t.contains("submitted") && t.contains("granted to w-console") && t.contains("started")
    })
    .await;
    b.wait_text("#attempts tbody", "the attempt and its token", |t| {
        t.contains(&shown.to_string())
    })
    .await;
    b.screenshot("task").await;
    b.route("#/review").await;
    let row = format!("#review tr[data-task-id='{second}']");
    b.wait_text(&row, "the inbox lists the task", |t| t.contains(key))
        .await;
    b.screenshot("review").await;
    b.click(
        &format!("#resolve-{second}-succeeded"),
        "resolve as succeeded",
    )
    .await;
    b.wait_gone(&row, "the resolved task leaves the inbox")
        .await;
    let task = api.get(&format!("/v1/tasks/{second}")).await;
    assert_eq!(task["state"], "SUCCEEDED");

    // --- Pause a queue.
    b.route(&format!("#/queue/{}", f.queue_id)).await;
    b.wait_text("#queue-name", "the queue page", |t| t == "q1")
        .await;
    b.wait_text("#tasks tbody", "the queue's tasks", |t| {
        t.contains(&format!("#{first}")) && t.contains(&format!("#{second}"))
    })
    .await;
    // Filter by state and key.
    b.apply_filter("SUCCEEDED", key).await;
    b.wait_text("#tasks tbody", "only the succeeded task of the key", |t| {
        t.contains(&format!("#{second}")) && !t.contains(&format!("#{first}"))
    })
    .await;
    b.route(&format!("#/queue/{}", f.queue_id)).await;
    b.click("#pause-queue", "pause the queue").await;
    b.wait_text("#queue-status", "the queue shows paused", |t| t == "paused")
        .await;
    assert_eq!(
        api.get(&format!("/v1/queues/{}", f.queue_id)).await["paused"],
        true
    );
    b.screenshot("queue").await;
    b.click("#resume-queue", "resume the queue").await;
    b.wait_text("#queue-status", "the queue runs again", |t| t == "active")
        .await;

    // --- HTML in a payload and in a key renders as text; nothing runs.
    let script = "<script>window.__xss = 1</script>";
    let img = "<img src=x onerror=window.__xss=2>";
    let evil_key = "<img src=x onerror=window.__xss=3>";
    let xss = api
        .submit(&f.queue_id, evil_key, json!({"note": script, "html": img}))
        .await;
    // Hold the key so that the keys page lists it too.
    let held = worker.recv_type("task.assign").await;
    assert_eq!(held["task"]["id"], xss, "{held}");
    b.route(&format!("#/task/{xss}")).await;
    let payload = b
        .wait_text("#payload", "the payload as text", |t| t.contains("note"))
        .await;
    assert!(
        payload.contains(script) && payload.contains(img),
        "{payload}"
    );
    b.wait_text("#task-key", "the key as text", |t| t == evil_key)
        .await;
    b.screenshot("xss").await;
    b.route("#/keys").await;
    b.wait_text("#keys tbody", "the HTML key is listed as text", |t| {
        t.contains(evil_key)
    })
    .await;
    b.click(
        &format!(
            "#keys tr[data-key='{}'] a.key-link",
            evil_key.replace('\'', "\\'")
        ),
        "open the HTML key",
    )
    .await;
    b.wait_text("#key-name", "the key page names it as text", |t| {
        t == evil_key
    })
    .await;
    assert_eq!(
        b.eval("return [window.__xss === undefined, document.querySelectorAll('#main img, #main script').length];")
            .await,
        json!([true, 0]),
        "no element was made from data and no script ran"
    );

    // --- Plans.
    let plan = api
        .post(
            "/v1/plans",
            json!({"name": "nightly <b>report</b>", "queue_id": f.queue_id,
                   "schedule": {"interval_seconds": 3600},
                   "definition": {"task": {"handler": "report.build", "handler_version": "v1",
                                           "payload_version": "v1", "payload": {}}}}),
        )
        .await;
    let plan_id = plan["id"].as_u64().unwrap();
    b.route("#/plans").await;
    let plan_row = format!("#plans tr[data-plan-id='{plan_id}']");
    b.wait_text(&plan_row, "the plan is listed", |t| {
        t.contains("nightly <b>report</b>") && t.contains("every 3600 s")
    })
    .await;
    b.screenshot("plans").await;
    b.click(&format!("#plan-{plan_id}-pause"), "pause the plan")
        .await;
    b.wait_text(&plan_row, "the plan shows paused", |t| t.contains("paused"))
        .await;

    // --- Another tenant's token sees none of it.
    let (bootstrap, other) = orbit::db::queues::Bootstrap::with_new_token(
        "other-app",
        "prod",
        "default",
        "their-queue",
        &orbit::testing::ALL_SCOPES,
        "other tenant",
    );
    f.db.admin_bootstrap(&bootstrap).await.unwrap();
    b.click("#sign-out", "sign out").await;
    b.wait_text("#signin-form h1", "signed out", |t| t == "Sign in")
        .await;
    sign_in(&b, &base, &other).await;
    b.wait_text("#queues tbody", "only their queue", |t| {
        t.contains("their-queue")
    })
    .await;
    let page = b.page_text().await;
    assert!(!page.contains("q1"), "{page}");
    b.route("#/keys").await;
    b.wait_text("#keys tbody", "no keys of ours", |t| {
        t.contains("Nothing here.")
    })
    .await;
    b.route("#/review").await;
    b.wait_text("#review tbody", "no review of ours", |t| {
        t.contains("Nothing here.")
    })
    .await;
    b.route("#/plans").await;
    b.wait_text("#plans tbody", "no plans of ours", |t| {
        t.contains("Nothing here.")
    })
    .await;
    b.route(&format!("#/task/{xss}")).await;
    b.wait_text("#page-error", "our task is not found", |t| {
        t.starts_with("NOT_FOUND")
    })
    .await;
    b.route(&format!(
        "#/key/{}/{}",
        f.namespace_id,
        form_urlencoded::byte_serialize(key.as_bytes()).collect::<String>()
    ))
    .await;
    b.wait_text("#page-error", "our key is not found", |t| {
        t.starts_with("NOT_FOUND")
    })
    .await;
    let page = b.page_text().await;
    assert!(!page.contains(key) && !page.contains(script), "{page}");

    drop(worker);
    let _ = b.client.close().await;
}

/// The console's assets are served without a token, with a strict Content-Security-Policy and
/// `nosniff`; the page loads its script from this origin and holds no inline script.
#[tokio::test]
async fn the_console_is_static_and_strictly_confined() {
    let f = Fixture::new().await;
    let server = Server::start(env!("CARGO_BIN_EXE_orbit"), &f.test_db.dsn).await;
    let http = reqwest::Client::new();
    for (path, kind) in [
        ("/console", "text/html"),
        ("/console/", "text/html"),
        ("/console/console.js", "text/javascript"),
        ("/console/console.css", "text/css"),
    ] {
        let r = http
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers();
        assert!(
            h["content-type"].to_str().unwrap().starts_with(kind),
            "{path}"
        );
        let csp = h["content-security-policy"].to_str().unwrap();
        for rule in [
            "default-src 'none'",
            "script-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(rule), "{path}: {csp}");
        }
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        let body = r.text().await.unwrap();
        if kind == "text/html" {
            assert!(body.contains(r#"<script type="module" src="/console/console.js"></script>"#));
            assert_eq!(body.matches("<script").count(), 1, "no inline script");
        }
        if kind == "text/javascript" {
            assert!(!body.contains("innerHTML") && !body.contains("insertAdjacentHTML"));
        }
    }
    // The API behind it still wants a token.
    let r = http
        .get(format!("{}/v1/queues", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}
