//! Tenancy and queue procedures: bootstrap, queue create, list, get, pause/resume, retention.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Arg, Cols, Db, DbError};

/// A queue (the "queue columns" of the procedure headers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Queue {
    pub id: String,
    pub namespace_id: u64,
    pub name: String,
    pub paused: bool,
    /// 0 = unlimited.
    pub max_active_attempts: u32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Seconds a finished task is kept before `orbit_task_purge` deletes it.
    pub retention_seconds: u32,
    /// The live counts `orbit_queue_get` and `orbit_queue_list` add; `None` from the procedures
    /// that change a queue.
    pub counts: Option<QueueCounts>,
}

/// A queue's unfinished tasks per state and the worker sessions serving it, read with it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueCounts {
    pub waiting: u64,
    pub leased: u64,
    pub running: u64,
    pub retry_wait: u64,
    pub needs_review: u64,
    /// Open (not draining) worker sessions that consume from the queue.
    pub sessions: u64,
    /// Their distinct worker ids.
    pub workers: u64,
}

impl Queue {
    fn read(c: &mut Cols<'_>) -> Result<Queue, DbError> {
        Ok(Queue {
            id: c.text()?,
            namespace_id: c.u64()?,
            name: c.text()?,
            paused: c.bool()?,
            max_active_attempts: c.u32()?,
            created_at: c.time()?,
            updated_at: c.time()?,
            retention_seconds: c.u32()?,
            counts: None,
        })
    }

    /// The queue columns, then the live counts.
    fn read_with_counts(c: &mut Cols<'_>) -> Result<Queue, DbError> {
        let mut q = Queue::read(c)?;
        q.counts = Some(QueueCounts {
            waiting: c.u64()?,
            leased: c.u64()?,
            running: c.u64()?,
            retry_wait: c.u64()?,
            needs_review: c.u64()?,
            sessions: c.u64()?,
            workers: c.u64()?,
        });
        Ok(q)
    }
}

/// What to create in `orbit_admin_bootstrap`.
#[derive(Clone, Debug, Default)]
pub struct Bootstrap {
    pub application: String,
    pub environment: String,
    pub namespace: String,
    pub queue: String,
    pub new_queue_id: Option<String>,
    pub token_hash: Vec<u8>,
    pub token_hint: String,
    pub scopes: Vec<String>,
    pub label: String,
}

impl Bootstrap {
    /// A bootstrap whose queue gets a new id and whose credential gets a freshly generated token
    /// with `scopes`. Returns the token too: it is shown once and stored only as its hash.
    pub fn with_new_token(
        application: &str,
        environment: &str,
        namespace: &str,
        queue: &str,
        scopes: &[&str],
        label: &str,
    ) -> (Bootstrap, String) {
        let token = crate::auth::generate_token();
        let bootstrap = Bootstrap {
            application: application.into(),
            environment: environment.into(),
            namespace: namespace.into(),
            queue: queue.into(),
            new_queue_id: Some(crate::auth::new_queue_id()),
            token_hash: crate::auth::token_hash(&token).to_vec(),
            token_hint: crate::auth::token_hint(&token),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            label: label.into(),
        };
        (bootstrap, token)
    }
}

/// The ids `orbit_admin_bootstrap` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bootstrapped {
    pub application_id: u64,
    pub environment_id: u64,
    pub namespace_id: u64,
    pub queue_id: String,
    pub credential_id: u64,
}

impl Db {
    /// `orbit_admin_bootstrap`.
    pub async fn admin_bootstrap(&self, b: &Bootstrap) -> Result<Bootstrapped, DbError> {
        let scopes = b.scopes.join(",");
        self.call_one(
            "orbit_admin_bootstrap",
            &[
                b.application.as_str().into(),
                b.environment.as_str().into(),
                b.namespace.as_str().into(),
                b.queue.as_str().into(),
                b.new_queue_id.as_deref().into(),
                Arg::Bytes(&b.token_hash),
                b.token_hint.as_str().into(),
                scopes.as_str().into(),
                b.label.as_str().into(),
            ],
            |c| {
                Ok(Bootstrapped {
                    application_id: c.u64()?,
                    environment_id: c.u64()?,
                    namespace_id: c.u64()?,
                    queue_id: c.text()?,
                    credential_id: c.u64()?,
                })
            },
        )
        .await
    }

    /// `orbit_queue_create` with the default retention.
    pub async fn queue_create(
        &self,
        token_hash: &[u8],
        namespace_id: Option<u64>,
        name: &str,
        max_active_attempts: Option<i64>,
        new_queue_id: Option<&str>,
    ) -> Result<Queue, DbError> {
        self.queue_create_with(
            token_hash,
            namespace_id,
            name,
            max_active_attempts,
            None,
            new_queue_id,
        )
        .await
    }

    /// `orbit_queue_create`; `retention_seconds` `None` = the default
    /// ([`crate::codegen::CONSTS`]`.retention_default_seconds`, the column default).
    pub async fn queue_create_with(
        &self,
        token_hash: &[u8],
        namespace_id: Option<u64>,
        name: &str,
        max_active_attempts: Option<i64>,
        retention_seconds: Option<i64>,
        new_queue_id: Option<&str>,
    ) -> Result<Queue, DbError> {
        self.call_one(
            "orbit_queue_create",
            &[
                Arg::Bytes(token_hash),
                namespace_id.map_or(Arg::Null, Arg::U64),
                name.into(),
                max_active_attempts.into(),
                retention_seconds.into(),
                new_queue_id.into(),
            ],
            Queue::read,
        )
        .await
    }

    /// `orbit_queue_list`: up to `limit` (1-1000) queues in the credential's scope, in id order,
    /// after `after_id` when given (pass the last id of a page to get the next one).
    pub async fn queue_list(
        &self,
        token_hash: &[u8],
        limit: u32,
        after_id: Option<&str>,
    ) -> Result<Vec<Queue>, DbError> {
        self.call(
            "orbit_queue_list",
            &[
                Arg::Bytes(token_hash),
                u64::from(limit).into(),
                after_id.into(),
            ],
            Queue::read_with_counts,
        )
        .await
    }

    /// `orbit_queue_get`: NOT_FOUND for a queue outside the credential's scope.
    pub async fn queue_get(&self, token_hash: &[u8], queue_id: &str) -> Result<Queue, DbError> {
        self.call_one(
            "orbit_queue_get",
            &[Arg::Bytes(token_hash), queue_id.into()],
            Queue::read_with_counts,
        )
        .await
    }

    /// `orbit_queue_set_paused`.
    pub async fn queue_set_paused(
        &self,
        token_hash: &[u8],
        queue_id: &str,
        paused: bool,
    ) -> Result<Queue, DbError> {
        self.call_one(
            "orbit_queue_set_paused",
            &[Arg::Bytes(token_hash), queue_id.into(), paused.into()],
            Queue::read,
        )
        .await
    }

    /// `orbit_queue_set_retention`: INVALID_ARGUMENT outside
    /// [`crate::codegen::CONSTS`]`.retention_min_seconds..=retention_max_seconds`.
    pub async fn queue_set_retention(
        &self,
        token_hash: &[u8],
        queue_id: &str,
        retention_seconds: i64,
    ) -> Result<Queue, DbError> {
        self.call_one(
            "orbit_queue_set_retention",
            &[
                Arg::Bytes(token_hash),
                queue_id.into(),
                Arg::I64(retention_seconds),
            ],
            Queue::read,
        )
        .await
    }
}
