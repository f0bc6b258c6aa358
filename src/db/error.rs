//! The one error type of the database layer, and the one place that maps what MySQL/MariaDB
//! reports onto it: SIGNALled business codes (`SQLSTATE 45000`, message `CODE: text`), deadlocks
//! and lock-wait timeouts (retried by [`super::Db::call`]), and lost connections.

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
            "QUOTA_EXCEEDED" => DbError::QuotaExceeded(message),
            _ => DbError::Internal(format!("unexpected signal: {text}")),
        }
    }
}

/// How a driver error should be handled.
pub(crate) enum Classified {
    /// The transaction was rolled back by a deadlock or lock-wait timeout: calling again is safe.
    Retry(String),
    Fail(DbError),
}

/// MySQL error numbers that mean "rolled back, try again".
const ER_LOCK_DEADLOCK: u16 = 1213;
const ER_LOCK_WAIT_TIMEOUT: u16 = 1205;

pub(crate) fn classify(e: sqlx::Error) -> Classified {
    match e {
        sqlx::Error::Database(d) => {
            let mysql = d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>();
            let number = mysql.map(|m| m.number()).unwrap_or(0);
            if d.code().as_deref() == Some("45000") {
                Classified::Fail(DbError::from_signal(d.message()))
            } else if number == ER_LOCK_DEADLOCK || number == ER_LOCK_WAIT_TIMEOUT {
                Classified::Retry(d.message().to_string())
            } else {
                Classified::Fail(DbError::Internal(format!(
                    "database error {number}: {}",
                    d.message()
                )))
            }
        }
        e @ (sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_)) => {
            Classified::Fail(DbError::Unavailable(format!("database unavailable: {e}")))
        }
        other => Classified::Fail(DbError::Internal(other.to_string())),
    }
}
