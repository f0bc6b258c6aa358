//! The one error type of the database layer, and the one place that maps what MySQL/MariaDB
//! reports onto it: SIGNALled business codes (`SQLSTATE 45000`, message `CODE: text`), deadlocks
//! and lock-wait timeouts (retried by [`super::Db::call`]), and servers that cannot serve (lost
//! connections, shutdown, a Galera node outside the primary component: [`super::Db`] moves on).

/// What a procedure call can fail with. Each variant documents the HTTP status the façade gives it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DbError {
    /// 400: a parameter broke a rule; the message names the field.
    #[error("{0}")]
    InvalidArgument(String),
    /// 401: unknown or revoked token.
    #[error("{0}")]
    Unauthenticated(String),
    /// 403: the credential lacks the scope or the queue.
    #[error("{0}")]
    PermissionDenied(String),
    /// 404: no such object, or not visible to this credential.
    #[error("{0}")]
    NotFound(String),
    /// 409: the Idempotency-Key was used with a different request.
    #[error("{0}")]
    IdempotencyConflict(String),
    /// 409: the object is not in a state that allows the change.
    #[error("{0}")]
    StateConflict(String),
    /// 409: the submit's concurrency key is held or has waiting tasks, and the key's policy
    /// (`on_busy: reject`) refuses new tasks; nothing was written.
    #[error("{0}")]
    KeyBusy(String),
    /// 429: an application quota is exhausted.
    #[error("{0}")]
    QuotaExceeded(String),
    /// 503: the database cannot be reached (or kept deadlocking past the retry budget).
    #[error("{0}")]
    Unavailable(String),
    /// 500: anything else; a bug or an unexpected database error.
    #[error("{0}")]
    Internal(String),
}

impl DbError {
    /// The stable code of the error envelope.
    pub fn code(&self) -> &'static str {
        match self {
            DbError::InvalidArgument(_) => "INVALID_ARGUMENT",
            DbError::Unauthenticated(_) => "UNAUTHENTICATED",
            DbError::PermissionDenied(_) => "PERMISSION_DENIED",
            DbError::NotFound(_) => "NOT_FOUND",
            DbError::IdempotencyConflict(_) => "IDEMPOTENCY_CONFLICT",
            DbError::StateConflict(_) => "STATE_CONFLICT",
            DbError::KeyBusy(_) => "KEY_BUSY",
            DbError::QuotaExceeded(_) => "QUOTA_EXCEEDED",
            DbError::Unavailable(_) => "UNAVAILABLE",
            DbError::Internal(_) => "INTERNAL",
        }
    }

    /// The human-readable message (without the code).
    pub fn message(&self) -> &str {
        match self {
            DbError::InvalidArgument(m)
            | DbError::Unauthenticated(m)
            | DbError::PermissionDenied(m)
            | DbError::NotFound(m)
            | DbError::IdempotencyConflict(m)
            | DbError::StateConflict(m)
            | DbError::KeyBusy(m)
            | DbError::QuotaExceeded(m)
            | DbError::Unavailable(m)
            | DbError::Internal(m) => m,
        }
    }

    /// Builds the error for a SIGNALled `CODE: message` text; unknown codes are internal errors.
    pub fn from_signal(text: &str) -> DbError {
        let (code, message) = text.split_once(": ").unwrap_or(("", text));
        let message = message.to_string();
        match code {
            "INVALID_ARGUMENT" => DbError::InvalidArgument(message),
            "UNAUTHENTICATED" => DbError::Unauthenticated(message),
            "PERMISSION_DENIED" => DbError::PermissionDenied(message),
            "NOT_FOUND" => DbError::NotFound(message),
            "IDEMPOTENCY_CONFLICT" => DbError::IdempotencyConflict(message),
            "STATE_CONFLICT" => DbError::StateConflict(message),
            "KEY_BUSY" => DbError::KeyBusy(message),
            "QUOTA_EXCEEDED" => DbError::QuotaExceeded(message),
            _ => DbError::Internal(format!("unexpected signal: {text}")),
        }
    }
}

/// How a driver error should be handled.
pub(crate) enum Classified {
    /// The transaction was rolled back by a deadlock or lock-wait timeout: calling again is safe.
    Retry(String),
    /// The server cannot serve: the connection was refused or lost, the server is shutting down,
    /// or it is a Galera node outside the primary component. The call fails with 503 and the
    /// caller moves on to the next server of its list ([`super::Db`]).
    Down(String),
    /// No pooled connection within the acquire timeout: either the server is unreachable (every
    /// connect attempt was refused or hung) or every connection is busy. The call fails with 503;
    /// the caller probes the server to tell the two apart before moving on.
    Saturated(String),
    Fail(DbError),
}

impl Classified {
    /// The error the call returns: 503 for every kind of unavailability.
    pub(crate) fn into_error(self) -> DbError {
        match self {
            Classified::Retry(m) | Classified::Down(m) | Classified::Saturated(m) => {
                DbError::Unavailable(m)
            }
            Classified::Fail(e) => e,
        }
    }
}

/// MySQL errors 1406 `ER_DATA_TOO_LONG` and 1264 `ER_WARN_DATA_OUT_OF_RANGE`: a value does not
/// fit its column or parameter (a string too long; a number outside an INT parameter, e.g. a
/// key policy's limit of 3,923,794,307). The façade checks values first and the procedures check
/// their ranges; this is the backstop, so a value that cannot even be bound is a 400, never a 500.
const ER_DATA_TOO_LONG: u16 = 1406;
const ER_WARN_DATA_OUT_OF_RANGE: u16 = 1264;

/// The 400 for those errors ("Data too long for column 'p_handler' at row 1", "Out of range
/// value for column 'p_holder_limit' at row 0"): the message starts with the field (the column
/// or parameter name without its `p_`), so the envelope names it; `problem` says what is wrong.
fn value_does_not_fit(message: &str, problem: &str) -> DbError {
    let column = message
        .split('\'')
        .nth(1)
        .map(|c| c.strip_prefix("p_").unwrap_or(c))
        .filter(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    DbError::InvalidArgument(match column {
        Some(field) => format!("{field} is {problem}"),
        None => format!("A value is {problem}: {message}"),
    })
}

/// MySQL error numbers that mean "rolled back, try again".
const ER_LOCK_DEADLOCK: u16 = 1213;
const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;

/// MySQL/MariaDB error numbers that mean "this server cannot serve now; another one may":
/// - 1047 `ER_UNKNOWN_COM_ERROR`: what Galera answers on a node that is not synced with the
///   primary component ("WSREP has not yet prepared node for application use"), e.g. the
///   survivor of a partition that lost quorum, or a joiner still receiving its state transfer;
/// - 1053 `ER_SERVER_SHUTDOWN`: "Server shutdown in progress";
/// - 1180 `ER_ERROR_DURING_COMMIT`: the commit could not be replicated (Galera returns it when
///   the node leaves the primary component during the commit; the transaction did not commit);
/// - 1927 `ER_CONNECTION_KILLED` (MariaDB): the server killed the connection (shutdown).
pub(crate) const SERVER_DOWN: [u16; 4] = [1047, 1053, 1180, 1927];

/// `ER_SP_DOES_NOT_EXIST`: the procedure is not installed.
const ER_SP_DOES_NOT_EXIST: u16 = 1305;

/// How an unexpected server error's internal message begins: the server's error number.
fn database_error_prefix(number: u16) -> String {
    format!("database error {number}: ")
}

/// Whether a call failed because its procedure is not installed (the extension is missing).
pub(crate) fn is_missing_procedure(e: &DbError) -> bool {
    matches!(e, DbError::Internal(m) if m.starts_with(&database_error_prefix(ER_SP_DOES_NOT_EXIST)))
}

pub(crate) fn classify(e: sqlx::Error) -> Classified {
    match e {
        sqlx::Error::Database(d) => {
            let mysql = d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>();
            let number = mysql.map(|m| m.number()).unwrap_or(0);
            if d.code().as_deref() == Some("45000") {
                Classified::Fail(DbError::from_signal(d.message()))
            } else if number == ER_DATA_TOO_LONG {
                Classified::Fail(value_does_not_fit(d.message(), "too long"))
            } else if number == ER_WARN_DATA_OUT_OF_RANGE {
                Classified::Fail(value_does_not_fit(d.message(), "out of range"))
            } else if number == ER_LOCK_DEADLOCK || number == ER_LOCK_WAIT_TIMEOUT {
                Classified::Retry(d.message().to_string())
            } else if SERVER_DOWN.contains(&number) {
                Classified::Down(format!(
                    "database unavailable: error {number}: {}",
                    d.message()
                ))
            } else {
                Classified::Fail(DbError::Internal(format!(
                    "{}{}",
                    database_error_prefix(number),
                    d.message()
                )))
            }
        }
        e @ sqlx::Error::PoolTimedOut => {
            Classified::Saturated(format!("database unavailable: {e}"))
        }
        // The pool was closed: this process is shutting down, no other server helps.
        e @ sqlx::Error::PoolClosed => {
            Classified::Fail(DbError::Unavailable(format!("database unavailable: {e}")))
        }
        e @ (sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_)) => Classified::Down(format!("database unavailable: {e}")),
        other => Classified::Fail(DbError::Internal(other.to_string())),
    }
}
