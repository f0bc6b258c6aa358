//! `orbit serve`: the slim axum façade. It authenticates (hashing the bearer token), checks the
//! request's shape, turns each request into one `CALL`, and maps the result or the SIGNALled error
//! onto the envelope. Business rules live in the procedures. One router module per resource.

pub mod attempts;
pub mod envelope;
pub mod error;
pub mod openapi;
pub mod ops;
pub mod plans;
pub mod queues;
pub mod tasks;
pub mod ws;

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::extract::DefaultBodyLimit;
use axum::serve::ListenerExt;
use axum::Router;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::sync::watch;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::db::Db;

/// Wakes the worker sessions of this process when there may be new work, only those that serve
/// the queues concerned: a submit here (its queue), a release, cancel or resolve here (the queues
/// where the procedure reports it readied work), or ready queues seen by the scheduler's probe
/// (work from other processes, recovered leases, due retries). One application's changes never
/// wake another application's sessions (their queues differ). A watch channel holding the last
/// [`WAKE_HISTORY`] wake-ups, so a session busy with a frame when several fire still sees each.
#[derive(Debug)]
pub struct Dispatch {
    work: watch::Sender<Wake>,
}

/// How many recent wake-ups a session can catch up on; one that fell further behind claims once.
pub const WAKE_HISTORY: usize = 256;

/// The recent wake-ups: each a generation and the queues that may have work.
#[derive(Clone, Debug, Default)]
pub struct Wake {
    pub generation: u64,
    recent: Arc<VecDeque<(u64, Arc<HashSet<String>>)>>,
}

impl Wake {
    /// Whether a session consuming `queues`, which last looked at generation `seen`, should try
    /// to claim: a wake-up since then named one of its queues (or it missed some).
    pub fn concerns(&self, seen: u64, queues: &[String]) -> bool {
        if self.generation <= seen {
            return false;
        }
        match self.recent.front() {
            Some((oldest, _)) if *oldest <= seen + 1 => self
                .recent
                .iter()
                .filter(|(g, _)| *g > seen)
                .any(|(_, ready)| queues.iter().any(|q| ready.contains(q))),
            _ => true,
        }
    }
}

impl Default for Dispatch {
    fn default() -> Self {
        Dispatch {
            work: watch::channel(Wake::default()).0,
        }
    }
}

impl Dispatch {
    /// Work appeared on these queues.
    pub fn notify_queues(&self, queues: HashSet<String>) {
        if queues.is_empty() {
            return;
        }
        let queues = Arc::new(queues);
        self.work.send_modify(|w| {
            w.generation += 1;
            // In place unless a session is reading the history right now.
            let recent = Arc::make_mut(&mut w.recent);
            if recent.len() == WAKE_HISTORY {
                recent.pop_front();
            }
            recent.push_back((w.generation, queues));
        });
    }

    pub fn subscribe(&self) -> watch::Receiver<Wake> {
        self.work.subscribe()
    }
}

/// Shared state of every handler.
#[derive(Clone)]
pub struct App {
    pub db: Db,
    pub dispatch: Arc<Dispatch>,
    pub metrics: PrometheusHandle,
    /// This process's name in `orbit_session.node`.
    pub node: String,
    /// The OpenAPI document, rendered once.
    pub openapi: Arc<String>,
    /// Lease granted with each assignment, in seconds.
    pub lease_seconds: u32,
}

/// One Prometheus recorder per process.
fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Every route with its OpenAPI description.
fn api() -> OpenApiRouter<App> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(tasks::router())
        .merge(queues::router())
        .merge(attempts::router())
        .merge(plans::router())
        .merge(ops::router())
        .routes(utoipa_axum::routes!(ws::connect))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "orbit".into())
}

/// The OpenAPI document of every route (also used by tests and `orbit openapi`).
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    api().split_for_parts().1
}

/// The complete router over a database.
pub fn router(db: Db, dispatch: Arc<Dispatch>, lease_seconds: u32) -> Router {
    let (routes, doc) = api().split_for_parts();
    let app = App {
        db,
        dispatch,
        metrics: metrics_handle(),
        node: format!("{}:{}", hostname(), std::process::id()),
        openapi: Arc::new(doc.to_json().expect("the OpenAPI document serialises")),
        lease_seconds,
    };
    routes
        .fallback(|| async { error::ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { error::ApiError::MethodNotAllowed })
        .with_state(app)
        .layer(DefaultBodyLimit::max(envelope::BODY_READ_CAP))
        .layer(axum::middleware::from_fn(ops::record))
        .layer(axum::middleware::from_fn(envelope::request_id))
}

/// Why `serve` could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Connect(#[from] crate::migrate::MigrateError),
    #[error(
        "the database has Orbit extension version {found}, but this orbit binary serves version {expected}; \
         {hint}. Old and new servers never mix on one database"
    )]
    WrongVersion {
        found: u32,
        expected: u32,
        hint: &'static str,
    },
    #[error("cannot read the extension version: {0}")]
    Version(crate::db::DbError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

/// Settings of `orbit serve`.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub dsn: String,
    pub addr: String,
    pub pool_size: u32,
    /// Lease granted with each assignment (default [`ws::LEASE_SECONDS`]).
    pub lease_seconds: u32,
}

/// Connects, refuses a database at another extension version, then serves until SIGTERM/Ctrl-C
/// (in-flight requests finish). Prints `listening on http://ADDR` once bound.
pub async fn serve(cfg: ServeConfig) -> Result<(), ServeError> {
    serve_with(cfg, |_| {}).await
}

/// [`serve`], calling `on_listen` with the bound address before serving.
pub async fn serve_with(
    cfg: ServeConfig,
    on_listen: impl FnOnce(SocketAddr),
) -> Result<(), ServeError> {
    let db = Db::connect(&cfg.dsn, cfg.pool_size).await?;
    let found = db.extension_version().await.map_err(ServeError::Version)?;
    let expected = crate::codegen::EXTENSION_VERSION;
    if found != expected {
        let hint = if found == 0 {
            "the extension is not installed: run `orbit migrate up`"
        } else if found < expected {
            "upgrade the database with `orbit migrate up` (after stopping older servers)"
        } else {
            "the database is newer: run the orbit release that installed it"
        };
        return Err(ServeError::WrongVersion {
            found,
            expected,
            hint,
        });
    }
    let dispatch = Arc::new(Dispatch::default());
    let app = router(db.clone(), dispatch.clone(), cfg.lease_seconds);
    let listener = tokio::net::TcpListener::bind(&cfg.addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: cfg.addr.clone(),
            source,
        })?;
    let local: SocketAddr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: cfg.addr.clone(),
        source,
    })?;
    println!("listening on http://{local}");
    on_listen(local);
    tracing::info!(%local, "orbit serve started");
    let scheduler = tokio::spawn(crate::scheduler::run(
        db.clone(),
        dispatch.clone(),
        cfg.lease_seconds,
    ));
    // Nagle off: a result's acknowledgement and the next assignment are small frames written
    // back to back; with Nagle the second waits for the worker's delayed ACK (~40 ms), which
    // would be the whole of a hot key's hand-off.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    let result = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown_signal())
    .await;
    scheduler.abort();
    db.close().await;
    result.map_err(|source| ServeError::Bind {
        addr: cfg.addr,
        source,
    })
}

/// Resolves on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
