//! Resource-side fencing (SPEC §6): the resource, not Orbit, has the last word on a write.
//!
//! In ONE atomic operation a [`Fence`] checks the namespace and key, rejects a token lower than
//! the highest it has seen, raises the highest, deduplicates by a stable operation id, and records
//! the write. What this can prove, and what not: a highest-token check rejects a write only once
//! the resource has already seen a larger token. If a paused holder writes before its successor
//! ever reaches the resource, the resource cannot tell; when that matters, the successor must
//! touch the resource (with its token) before acting, or the write must carry a business
//! precondition (a version check). The token grants no authority either: the resource still
//! authenticates the caller.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// One fenced write.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FenceWrite {
    pub namespace: String,
    pub key: String,
    /// The `concurrency_token` of the grant the writer holds.
    pub token: u64,
    /// Stable identity of the operation: a retry of the same operation is deduplicated.
    pub operation_id: String,
    /// The value to record; `None` is a touch: raise the highest token, keep the stored value.
    /// A successor that must exclude a paused predecessor touches before it reads (see the
    /// module doc), so the predecessor's late write is refused instead of overwritten unseen.
    pub value: Option<String>,
}

impl FenceWrite {
    /// A write of `value`.
    pub fn write(
        namespace: &str,
        key: &str,
        token: u64,
        operation_id: &str,
        value: String,
    ) -> Self {
        FenceWrite {
            namespace: namespace.into(),
            key: key.into(),
            token,
            operation_id: operation_id.into(),
            value: Some(value),
        }
    }

    /// A touch: claims the register for `token` without changing its value.
    pub fn touch(namespace: &str, key: &str, token: u64, operation_id: &str) -> Self {
        FenceWrite {
            namespace: namespace.into(),
            key: key.into(),
            token,
            operation_id: operation_id.into(),
            value: None,
        }
    }
}

/// The fence's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FenceDecision {
    /// Written; the highest token is now `token`.
    Accepted,
    /// This operation id was already written with this token: nothing written again.
    Duplicate,
    /// Refused: the resource has seen `highest`, which is larger than the writer's token (or the
    /// operation id was used with another token).
    Stale { highest: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    #[error("fence storage failed: {0}")]
    Storage(String),
    #[error("invalid fenced write: {0}")]
    Invalid(String),
}

/// A resource-side fence.
pub trait Fence: Send + Sync {
    fn write(
        &self,
        w: &FenceWrite,
    ) -> impl Future<Output = Result<FenceDecision, FenceError>> + Send;
    /// The current value of a key (the register), for readers.
    fn read(
        &self,
        namespace: &str,
        key: &str,
    ) -> impl Future<Output = Result<Option<(u64, String)>, FenceError>> + Send;
}

#[derive(Default, Debug)]
struct Register {
    highest: u64,
    value: String,
    operations: HashMap<String, u64>,
}

/// An in-memory fence for tests and examples (one process; a mutex makes each write atomic).
#[derive(Default, Debug)]
pub struct InMemoryFence {
    registers: Mutex<HashMap<(String, String), Register>>,
    log: Mutex<Vec<(String, String, u64, String)>>,
}

impl InMemoryFence {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every accepted write, in acceptance order: (namespace, key, token, operation id).
    pub fn accepted(&self) -> Vec<(String, String, u64, String)> {
        self.log.lock().expect("fence log").clone()
    }
}

/// The decision rule shared by every implementation (the MySQL procedure encodes the same).
pub fn decide(highest: u64, previous_for_operation: Option<u64>, token: u64) -> FenceDecision {
    match previous_for_operation {
        Some(t) if t == token => FenceDecision::Duplicate,
        Some(_) => FenceDecision::Stale { highest },
        None if token < highest => FenceDecision::Stale { highest },
        None => FenceDecision::Accepted,
    }
}

impl Fence for InMemoryFence {
    async fn write(&self, w: &FenceWrite) -> Result<FenceDecision, FenceError> {
        if w.token == 0 || w.key.is_empty() || w.operation_id.is_empty() {
            return Err(FenceError::Invalid(
                "key, operation_id and a non-zero token are required".into(),
            ));
        }
        let mut registers = self.registers.lock().expect("fence registers");
        let r = registers
            .entry((w.namespace.clone(), w.key.clone()))
            .or_default();
        let decision = decide(
            r.highest,
            r.operations.get(&w.operation_id).copied(),
            w.token,
        );
        if decision == FenceDecision::Accepted {
            r.highest = w.token;
            if let Some(value) = &w.value {
                r.value = value.clone();
            }
            r.operations.insert(w.operation_id.clone(), w.token);
            self.log.lock().expect("fence log").push((
                w.namespace.clone(),
                w.key.clone(),
                w.token,
                w.operation_id.clone(),
            ));
        }
        Ok(decision)
    }

    async fn read(&self, namespace: &str, key: &str) -> Result<Option<(u64, String)>, FenceError> {
        let registers = self.registers.lock().expect("fence registers");
        Ok(registers
            .get(&(namespace.to_string(), key.to_string()))
            .map(|r| (r.highest, r.value.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(token: u64, op: &str) -> FenceWrite {
        FenceWrite {
            namespace: "ns".into(),
            key: "k".into(),
            token,
            operation_id: op.into(),
            value: Some(format!("v{token}")),
        }
    }

    #[tokio::test]
    async fn stale_tokens_are_rejected_and_duplicates_deduplicated() {
        let f = InMemoryFence::new();
        assert_eq!(f.write(&w(5, "a")).await.unwrap(), FenceDecision::Accepted);
        assert_eq!(f.write(&w(5, "a")).await.unwrap(), FenceDecision::Duplicate);
        assert_eq!(
            f.write(&w(4, "b")).await.unwrap(),
            FenceDecision::Stale { highest: 5 }
        );
        assert_eq!(
            f.write(&w(5, "c")).await.unwrap(),
            FenceDecision::Accepted,
            "the same holder writes again"
        );
        assert_eq!(
            f.write(&w(7, "a")).await.unwrap(),
            FenceDecision::Stale { highest: 5 },
            "an operation id keeps its token"
        );
        assert_eq!(f.read("ns", "k").await.unwrap(), Some((5, "v5".into())));
    }

    #[tokio::test]
    async fn sixteen_concurrent_writers_leave_a_strictly_increasing_accepted_sequence() {
        let f = std::sync::Arc::new(InMemoryFence::new());
        let mut handles = Vec::new();
        for writer in 0..16u64 {
            let f = f.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..50u64 {
                    let token = i * 16 + writer + 1;
                    f.write(&w(token, &format!("op-{token}"))).await.unwrap();
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        let tokens: Vec<u64> = f.accepted().iter().map(|a| a.2).collect();
        assert!(!tokens.is_empty());
        assert!(
            tokens.windows(2).all(|p| p[0] <= p[1]),
            "accepted tokens never go back: {tokens:?}"
        );
    }
}

/// The MySQL/MariaDB-backed fence: one `CALL orbit_fence_write` per write, in the resource's own
/// database, where `generated-sql/fence/install.sql` has been installed.
#[cfg(feature = "mysql")]
pub mod mysql {
    use sqlx::{MySqlPool, Row};

    use super::{Fence, FenceDecision, FenceError, FenceWrite};

    #[derive(Clone, Debug)]
    pub struct MySqlFence {
        pool: MySqlPool,
        caller: String,
    }

    impl MySqlFence {
        /// `caller` is recorded with each accepted write.
        pub fn new(pool: MySqlPool, caller: &str) -> Self {
            MySqlFence {
                pool,
                caller: caller.to_string(),
            }
        }
    }

    fn storage(e: sqlx::Error) -> FenceError {
        FenceError::Storage(e.to_string())
    }

    fn bytes_text(row: &sqlx::mysql::MySqlRow, i: usize) -> Result<String, FenceError> {
        let b: Vec<u8> = row
            .try_get::<Vec<u8>, _>(i)
            .or_else(|_| row.try_get::<String, _>(i).map(String::into_bytes))
            .map_err(storage)?;
        String::from_utf8(b).map_err(|e| FenceError::Storage(e.to_string()))
    }

    fn unsigned(row: &sqlx::mysql::MySqlRow, i: usize) -> Result<u64, FenceError> {
        row.try_get::<u64, _>(i)
            .or_else(|_| row.try_get::<i64, _>(i).map(|v| v as u64))
            .map_err(storage)
    }

    /// Deadlock (1213) or lock-wait timeout (1205): the transaction was rolled back, try again.
    fn retryable(e: &sqlx::Error) -> bool {
        e.as_database_error()
            .and_then(|d| d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
            .is_some_and(|m| m.number() == 1213 || m.number() == 1205)
    }

    impl Fence for MySqlFence {
        async fn write(&self, w: &FenceWrite) -> Result<FenceDecision, FenceError> {
            let mut attempt = 0;
            loop {
                // Positional reads: a prepared CALL carries no column names.
                let result = sqlx::query("CALL orbit_fence_write(?, ?, ?, ?, ?, ?)")
                    .bind(&w.namespace)
                    .bind(w.key.as_bytes())
                    .bind(w.token)
                    .bind(&w.operation_id)
                    .bind(&self.caller)
                    .bind(&w.value)
                    .fetch_one(&self.pool)
                    .await;
                match result {
                    Ok(row) => {
                        let highest = unsigned(&row, 1)?;
                        return match bytes_text(&row, 0)?.as_str() {
                            "accepted" => Ok(FenceDecision::Accepted),
                            "duplicate" => Ok(FenceDecision::Duplicate),
                            _ => Ok(FenceDecision::Stale { highest }),
                        };
                    }
                    Err(e) if retryable(&e) && attempt < 8 => attempt += 1,
                    Err(e) => {
                        let text = e.to_string();
                        return Err(if text.contains("INVALID_ARGUMENT") {
                            FenceError::Invalid(text)
                        } else {
                            storage(e)
                        });
                    }
                }
            }
        }

        async fn read(
            &self,
            namespace: &str,
            key: &str,
        ) -> Result<Option<(u64, String)>, FenceError> {
            let row = sqlx::query("CALL orbit_fence_read(?, ?)")
                .bind(namespace)
                .bind(key.as_bytes())
                .fetch_optional(&self.pool)
                .await
                .map_err(storage)?;
            match row {
                None => Ok(None),
                Some(r) => {
                    let value = match r.try_get::<Option<Vec<u8>>, _>(1) {
                        Ok(v) => v.map(|b| String::from_utf8_lossy(&b).into_owned()),
                        Err(_) => r.try_get::<Option<String>, _>(1).map_err(storage)?,
                    };
                    Ok(Some((unsigned(&r, 0)?, value.unwrap_or_default())))
                }
            }
        }
    }
}
