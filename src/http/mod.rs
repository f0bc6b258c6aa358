//! `orbit serve`: the slim axum façade. It authenticates (hashing the bearer token), checks the
//! request's shape, turns each request into one `CALL`, and maps the result or the SIGNALled error
//! onto the envelope. Business rules live in the procedures. One router module per resource.

pub mod attempts;
pub mod console;
pub mod envelope;
pub mod error;
pub mod key_policies;
pub mod keys;
pub mod openapi;
pub mod ops;
pub mod plans;
pub mod queues;
pub mod tasks;
pub mod ws;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, DefaultBodyLimit};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt as _;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::db::Db;

pub use crate::dispatch::{Dispatch, Wake, WAKE_HISTORY};

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
    /// Token hash → credential id, for the access log.
    pub credential_ids: Arc<ops::CredentialIds>,
}

/// Every route with its OpenAPI description.
fn api() -> OpenApiRouter<App> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(tasks::router())
        .merge(queues::router())
        .merge(keys::router())
        .merge(key_policies::router())
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

/// The complete router over a database, with the default [`ServeLimits`].
pub fn router(db: Db, dispatch: Arc<Dispatch>, lease_seconds: u32) -> Router {
    router_with(db, dispatch, lease_seconds, &ServeLimits::default())
}

/// The complete router over a database: `limits` gives the request and body timeouts.
pub fn router_with(
    db: Db,
    dispatch: Arc<Dispatch>,
    lease_seconds: u32,
    limits: &ServeLimits,
) -> Router {
    let (routes, doc) = api().split_for_parts();
    let app = App {
        db,
        dispatch,
        metrics: crate::telemetry::handle(),
        node: format!("{}:{}", hostname(), std::process::id()),
        openapi: Arc::new(doc.to_json().expect("the OpenAPI document serialises")),
        lease_seconds,
        credential_ids: Arc::new(ops::CredentialIds::default()),
    };
    routes
        .merge(console::router())
        .fallback(|| async { error::ApiError::NoRoute })
        .method_not_allowed_fallback(|| async { error::ApiError::MethodNotAllowed })
        .with_state(app.clone())
        .layer(DefaultBodyLimit::max(envelope::BODY_READ_CAP))
        .layer(axum::middleware::from_fn_with_state(
            envelope::Timeouts {
                request: limits.request_timeout,
                body: limits.body_timeout,
            },
            envelope::request_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(app, ops::observe))
        .layer(axum::middleware::from_fn(envelope::request_scope))
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(envelope::RequestSpan)
                .on_request(())
                .on_response(ops::AccessLog)
                .on_body_chunk(())
                .on_eos(())
                .on_failure(()),
        )
        .layer(tower_http::request_id::PropagateRequestIdLayer::x_request_id())
        .layer(tower_http::request_id::SetRequestIdLayer::x_request_id(
            envelope::MakeId,
        ))
        .layer(tower::util::MapRequestLayer::new(
            envelope::screen_request_id::<Body>,
        ))
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
    #[error(
        "the Orbit install in this database is damaged: {}. Restore the objects by loading this \
         release's generated-sql/install.sql again (idempotent), then check with `orbit migrate verify`",
        problems.join("; ")
    )]
    Damaged { problems: Vec<String> },
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
    /// Connection limit and timeouts against slow or idle clients.
    pub limits: ServeLimits,
}

/// What one client connection may hold (docs/operations.md, "Limits and timeouts").
#[derive(Clone, Debug)]
pub struct ServeLimits {
    /// Open client sockets at once, WebSocket sessions included (`--max-connections`). At the
    /// limit `serve` stops accepting: new connections wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, counted from when it starts
    /// waiting for them: a new connection, or a keep-alive connection after its last response (so
    /// this is also the idle keep-alive timeout). The server closes it then (`--header-timeout`).
    pub header_timeout: Duration,
    /// How long reading a JSON body may take; then 408 (`--body-timeout`).
    pub body_timeout: Duration,
    /// How long a request may take from its headers to its response, body included; then 503
    /// (`--request-timeout`). Not applied to a WebSocket session once upgraded.
    pub request_timeout: Duration,
}

/// `--max-connections` default.
pub const MAX_CONNECTIONS: usize = 4096;
/// `--header-timeout` default, in seconds.
pub const HEADER_TIMEOUT_SECONDS: u64 = 30;
/// `--body-timeout` default, in seconds.
pub const BODY_TIMEOUT_SECONDS: u64 = 15;
/// `--request-timeout` default, in seconds.
pub const REQUEST_TIMEOUT_SECONDS: u64 = 30;

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            max_connections: MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(HEADER_TIMEOUT_SECONDS),
            body_timeout: Duration::from_secs(BODY_TIMEOUT_SECONDS),
            request_timeout: Duration::from_secs(REQUEST_TIMEOUT_SECONDS),
        }
    }
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
    check_install(&db).await?;
    let dispatch = Arc::new(Dispatch::default());
    let app = router_with(db.clone(), dispatch.clone(), cfg.lease_seconds, &cfg.limits);
    let listener = TcpListener::bind(&cfg.addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: cfg.addr.clone(),
            source,
        })?;
    let local: SocketAddr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: cfg.addr.clone(),
        source,
    })?;
    warn_if_few_files(cfg.limits.max_connections, cfg.pool_size);
    // Handled from before `listening on`: a SIGTERM sent as soon as that line appears drains,
    // rather than killing the process with the signal's default action.
    let shutdown = shutdown_signal();
    println!("listening on http://{local}");
    on_listen(local);
    tracing::info!(%local, max_connections = cfg.limits.max_connections, "orbit serve started");
    tracing::info!(url = %format!("http://{local}{}", console::PATH), "operator console");
    let scheduler = tokio::spawn(crate::scheduler::run(
        db.clone(),
        dispatch.clone(),
        cfg.lease_seconds,
    ));
    serve_connections(listener, app, &cfg.limits, shutdown).await;
    scheduler.abort();
    db.close().await;
    Ok(())
}

/// `serve`'s start-up check ([`crate::verify`]): refuses an install with a missing or changed
/// table, index or procedure, naming each.
async fn check_install(db: &Db) -> Result<(), ServeError> {
    let mut conn = db.pool().acquire().await.map_err(|e| {
        ServeError::Connect(crate::migrate::MigrateError::Database {
            doing: "verifying the install",
            reason: crate::migrate::describe(&e),
        })
    })?;
    let report = crate::verify::verify(&mut conn).await?;
    for note in &report.notes {
        tracing::warn!(%note, "install check");
    }
    for limit in &report.limits {
        tracing::warn!(%limit, "install check: run `orbit migrate verify` as the migrating account");
    }
    if report.ok() {
        Ok(())
    } else {
        Err(ServeError::Damaged {
            problems: report.problems.iter().map(|p| p.to_string()).collect(),
        })
    }
}

/// Accepts connections until `shutdown`, then lets in-flight requests finish. At most
/// `limits.max_connections` client sockets are open at once: a permit is taken before each
/// accept and travels with the socket (through a WebSocket upgrade too) until it closes. Each
/// connection is HTTP/1.1 with a header timeout, TCP_NODELAY, and the peer's address as
/// [`ConnectInfo`].
async fn serve_connections(
    listener: TcpListener,
    app: Router,
    limits: &ServeLimits,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    // Connection tasks hold a receiver each; shutdown waits until all are gone.
    let (close_tx, close_rx) = watch::channel(());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            _ = &mut shutdown => break,
        };
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    if !matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionRefused
                            | std::io::ErrorKind::ConnectionAborted
                            | std::io::ErrorKind::ConnectionReset
                    ) {
                        // E.g. out of file descriptors: wait rather than spin.
                        tracing::error!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // Nagle off: a result's acknowledgement and the next assignment are small frames written
        // back to back; with Nagle the second waits for the worker's delayed ACK (~40 ms), which
        // would be the whole of a hot key's hand-off.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let service =
            app.clone()
                .map_request(move |req: axum::http::Request<hyper::body::Incoming>| {
                    let mut req = req.map(Body::new);
                    req.extensions_mut().insert(ConnectInfo(remote));
                    req
                });
        let io = TokioIo::new(Permitted {
            tcp,
            _permit: permit,
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        let mut stop = stop_rx.clone();
        let close = close_rx.clone();
        tokio::spawn(async move {
            let conn = builder
                .serve_connection(io, TowerToHyperService::new(service))
                .with_upgrades();
            let mut conn = pin!(conn);
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::trace!(error = %e, "connection ended");
                    }
                }
                _ = async { drop(stop.wait_for(|stop| *stop).await) } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
            drop(close);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(close_rx);
    close_tx.closed().await;
}

/// A client socket with its connection permit: the permit is released when the socket closes,
/// also after a WebSocket upgrade took the socket over from the HTTP connection.
struct Permitted {
    tcp: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for Permitted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Permitted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
}

/// Warns when the process may run out of file descriptors before `--max-connections` is reached
/// (each connection is one descriptor, each database connection another).
fn warn_if_few_files(max_connections: usize, pool_size: u32) {
    let Ok(limits) = std::fs::read_to_string("/proc/self/limits") else {
        return;
    };
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<usize>().ok());
    let needed = max_connections + pool_size as usize + 64;
    if let Some(soft) = soft.filter(|soft| *soft < needed) {
        tracing::warn!(
            open_files_limit = soft,
            max_connections,
            "the open-files limit (ulimit -n) is below --max-connections plus the pool and 64 spare; \
             raise it, or lower --max-connections, or accepts will fail when it is reached"
        );
    }
}

/// Resolves on SIGTERM or Ctrl-C. The handlers are installed when this is called, not when the
/// future is first polled: until then, either signal would end the process at once.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let (term, interrupt) = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(term) => {},
                _ = wait(interrupt) => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutting down: finishing in-flight requests");
    }
}
