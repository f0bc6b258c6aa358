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
//!
//! # Keys with several holders (a key policy's `limit` N > 1)
//!
//! Up to N attempts hold such a key at once, each with its own token and its
//! [`TaskContext::key_slot`](crate::TaskContext::key_slot) (0..N-1, never shared by two live
//! holders). One highest-token register per key would refuse every live holder whose token is
//! below the newest holder's. Guard such a key with a register per slot instead:
//! [`FenceWrite::in_slot`] and [`Fence::read_slot`]. The holders of one slot follow each other
//! with strictly larger tokens, so a slot's register refuses a stale holder of that slot once the
//! slot's newer holder has written (touch, read, write, as above, per slot). The slot registers
//! and the key's plain register are independent: use one kind per key, the slot registers when
//! its limit is or may become larger than 1 (for limit 1 the slot is always 0). Slots 0-999 are
//! covered, and the key, a separator and the slot's digits must fit in [`KEY_MAX_BYTES`].
//! Operation ids are per register: a retry deduplicates against its own slot only, so an
//! operation that must apply once whatever slot its attempt holds needs an id the resource checks
//! itself. What a slot register cannot see: after a key's limit is lowered, a stale holder of a
//! slot at or above the new limit is refused only once that slot is granted again.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The largest slot a per-slot register takes ([`FenceWrite::in_slot`]).
pub const SLOT_MAX: u32 = 999;

/// The longest register key, in bytes (`orbit_fence_register.resource_key`; a slot's register
/// key is the key, one separator byte and the slot's decimal digits).
pub const KEY_MAX_BYTES: usize = 764;

/// The register a key (and slot) addresses, checked as the SQL procedures check it: the key
/// itself, or for slot `s` the key, U+001F and `s` in decimal (`orbit_fence_write_slot`).
fn register_key(key: &str, slot: Option<u32>) -> Result<String, FenceError> {
    let register = match slot {
        None => key.to_string(),
        Some(s) if s > SLOT_MAX => {
            return Err(FenceError::Invalid(format!(
                "slot must be 0-{SLOT_MAX}, not {s}"
            )))
        }
        Some(s) => format!("{key}\u{1f}{s}"),
    };
    if key.is_empty() || register.len() > KEY_MAX_BYTES {
        return Err(FenceError::Invalid(format!(
            "key must be 1-{KEY_MAX_BYTES} bytes, with a slot's separator and digits"
        )));
    }
    Ok(register)
}

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
    /// The writer's `key_slot`: `Some` writes that slot's register of the key (keys with several
    /// holders, see the module doc), `None` the key's one register. Set with
    /// [`FenceWrite::in_slot`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
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
            slot: None,
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
            slot: None,
        }
    }

    /// The same write (or touch) on the register of slot `slot` of the key: pass the grant's
    /// [`TaskContext::key_slot`](crate::TaskContext::key_slot). Slots 0-[`SLOT_MAX`].
    pub fn in_slot(mut self, slot: u32) -> Self {
        self.slot = Some(slot);
        self
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
    /// The current value of a key (the register), for readers: `(highest token, value)`.
    fn read(
        &self,
        namespace: &str,
        key: &str,
    ) -> impl Future<Output = Result<Option<(u64, String)>, FenceError>> + Send;
    /// The same for the register of slot `slot` of the key (what writes
    /// [`FenceWrite::in_slot`]`(slot)` wrote).
    fn read_slot(
        &self,
        namespace: &str,
        key: &str,
        slot: u32,
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

    /// Every accepted write, in acceptance order: (namespace, key, token, operation id). For a
    /// write in a slot, the key is the slot's register key (the key, U+001F, the slot), as in
    /// `orbit_fence_operation`.
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
        let key = register_key(&w.key, w.slot)?;
        let mut registers = self.registers.lock().expect("fence registers");
        let r = registers
            .entry((w.namespace.clone(), key.clone()))
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
                key,
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

    async fn read_slot(
        &self,
        namespace: &str,
        key: &str,
        slot: u32,
    ) -> Result<Option<(u64, String)>, FenceError> {
        let key = register_key(key, Some(slot))?;
        self.read(namespace, &key).await
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
            slot: None,
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
    async fn each_slot_of_a_key_is_its_own_register() {
        let f = InMemoryFence::new();
        // Two live holders of a limit-2 key: slot 1 with the larger token writes first.
        let slot1 = FenceWrite::write("ns", "k", 8, "b", "by 8".into()).in_slot(1);
        let slot0 = FenceWrite::write("ns", "k", 7, "a", "by 7".into()).in_slot(0);
        assert_eq!(f.write(&slot1).await.unwrap(), FenceDecision::Accepted);
        assert_eq!(f.write(&slot0).await.unwrap(), FenceDecision::Accepted);
        // Slot 0 is granted again (token 9): once it touched, slot 0's old holder is refused.
        let touch = FenceWrite::touch("ns", "k", 9, "c").in_slot(0);
        assert_eq!(f.write(&touch).await.unwrap(), FenceDecision::Accepted);
        let late = FenceWrite::write("ns", "k", 7, "a-late", "late".into()).in_slot(0);
        assert_eq!(
            f.write(&late).await.unwrap(),
            FenceDecision::Stale { highest: 9 }
        );
        assert_eq!(
            f.read_slot("ns", "k", 0).await.unwrap(),
            Some((9, "by 7".into()))
        );
        assert_eq!(
            f.read_slot("ns", "k", 1).await.unwrap(),
            Some((8, "by 8".into()))
        );
        assert_eq!(f.read("ns", "k").await.unwrap(), None, "the plain register");
        assert!(matches!(
            f.write(&FenceWrite::touch("ns", "k", 1, "x").in_slot(SLOT_MAX + 1))
                .await,
            Err(FenceError::Invalid(_))
        ));
        let long = "k".repeat(KEY_MAX_BYTES - 2); // + separator + "10" = one byte too many
        assert!(matches!(
            f.read_slot("ns", &long, 10).await,
            Err(FenceError::Invalid(_))
        ));
        assert_eq!(f.read_slot("ns", &long[1..], 10).await.unwrap(), None);
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

/// The MySQL/MariaDB-backed fence: one `CALL orbit_fence_write` (in a slot:
/// `orbit_fence_write_slot`) per write, in the resource's own database, where
/// `generated-sql/fence/install.sql` has been installed.
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

    /// A failed call: the procedure's `INVALID_ARGUMENT` is [`FenceError::Invalid`].
    fn failure(e: sqlx::Error) -> FenceError {
        let text = e.to_string();
        if text.contains("INVALID_ARGUMENT") {
            FenceError::Invalid(text)
        } else {
            storage(e)
        }
    }

    /// A register's row (`orbit_fence_read`, `orbit_fence_read_slot`): highest token and value.
    fn register(row: Option<sqlx::mysql::MySqlRow>) -> Result<Option<(u64, String)>, FenceError> {
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
                let query = match w.slot {
                    None => sqlx::query("CALL orbit_fence_write(?, ?, ?, ?, ?, ?)")
                        .bind(&w.namespace)
                        .bind(w.key.as_bytes()),
                    Some(slot) => sqlx::query("CALL orbit_fence_write_slot(?, ?, ?, ?, ?, ?, ?)")
                        .bind(&w.namespace)
                        .bind(w.key.as_bytes())
                        .bind(slot),
                };
                let result = query
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
                    Err(e) => return Err(failure(e)),
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
                .map_err(failure)?;
            register(row)
        }

        async fn read_slot(
            &self,
            namespace: &str,
            key: &str,
            slot: u32,
        ) -> Result<Option<(u64, String)>, FenceError> {
            let row = sqlx::query("CALL orbit_fence_read_slot(?, ?, ?)")
                .bind(namespace)
                .bind(key.as_bytes())
                .bind(slot)
                .fetch_optional(&self.pool)
                .await
                .map_err(failure)?;
            register(row)
        }
    }
}
