//! The worker WebSocket protocol (docs/protocol.md): frames, and the checks an assignment must
//! pass before any handler sees it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::Task;

/// The largest frame the server reads (its HTTP body limit, 1 MiB); a larger one closes the
/// connection, so the worker never sends one (a result that would be larger is sent as a failure).
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// How deeply a result's `output` and `error` may nest arrays and objects (the server's limit; the
/// database refuses JSON nested 32 deep and a result travels inside two more levels).
pub const MAX_RESULT_DEPTH: usize = 24;

/// How deeply `v` nests arrays and objects (a scalar is 0).
pub fn json_depth(v: &Value) -> usize {
    // Iterative: a handler's value may nest deeper than a recursion should go.
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(members) => stack.extend(members.values().map(|m| (m, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// What the SDK refuses from a server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("attempt {attempt_id}: a keyed task arrived without a concurrency_token")]
    MissingToken { attempt_id: u64 },
    #[error("attempt {attempt_id}: a concurrency_token arrived for a task without a key")]
    TokenWithoutKey { attempt_id: u64 },
    #[error("attempt {attempt_id}: a keyed task arrived although this worker did not declare concurrency_keys")]
    KeyNotDeclared { attempt_id: u64 },
    #[error(
        "attempt {attempt_id}: concurrency_token {token} is not a non-zero decimal u64 string"
    )]
    BadToken { attempt_id: u64, token: String },
    #[error("attempt {attempt_id}: a key_slot arrived for a task without a key")]
    SlotWithoutKey { attempt_id: u64 },
    #[error("attempt {attempt_id}: key_slot {slot} is not an unsigned 32-bit JSON integer")]
    BadSlot { attempt_id: u64, slot: String },
    #[error("attempt {attempt_id}: a repeated assignment changed the key, token or slot")]
    ChangedAssignment { attempt_id: u64 },
    #[error("unreadable frame: {0}")]
    Unreadable(String),
}

/// A worker's reported outcome of an attempt (`task.result.outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    Unknown,
}

impl Outcome {
    /// The wire name: `succeeded`, `failed` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Unknown => "unknown",
        }
    }
}

/// Frames the server sends (docs/protocol.md, "Server frames"). The server writes them with the
/// task as its own view (`T`); a worker reads the task as a [`Task`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ServerFrame<T = Task> {
    #[serde(rename = "welcome")]
    Welcome {
        session_id: u64,
        lease_seconds: u64,
        renew_interval_seconds: u64,
        #[serde(default)]
        resumed: Vec<u64>,
    },
    #[serde(rename = "task.assign")]
    Assign(RawAssign<T>),
    #[serde(rename = "task.start.ok")]
    StartOk {
        attempt_id: u64,
        /// The lease's expiry after the start.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease_expires_at: Option<String>,
    },
    #[serde(rename = "task.start.rejected")]
    StartRejected { attempt_id: u64, code: String },
    #[serde(rename = "lease.renewed")]
    Renewed { attempts: Vec<RenewAnswer> },
    #[serde(rename = "task.result.ack")]
    ResultAck { attempt_id: u64, task_state: String },
    #[serde(rename = "drained")]
    Drained,
    /// The attempt was ended `CANCELLED` by the server (a key policy's `cancel_running`): it is
    /// no longer this worker's; stop its handler. Its result would be refused, and its fencing
    /// token is already older than the key's next holder's.
    #[serde(rename = "task.cancel")]
    Cancel { attempt_id: u64, reason: String },
    /// `attempt_id` is present when the error answers that attempt's `task.result`.
    #[serde(rename = "error")]
    Error {
        code: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt_id: Option<u64>,
    },
}

impl<T> ServerFrame<T> {
    /// An `error` frame about the session or a frame (no attempt named).
    pub fn error(code: &str, message: &str) -> Self {
        ServerFrame::Error {
            code: code.to_string(),
            message: message.to_string(),
            attempt_id: None,
        }
    }
}

/// One attempt of a `lease.renewed` frame: exactly one of `lease_expires_at` and `rejected`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewAnswer {
    pub attempt_id: u64,
    /// The new expiry when renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// The code when the renewal was refused (`LEASE_EXPIRED`, `STATE_CONFLICT`, `NOT_FOUND`,
    /// `PERMISSION_DENIED`): the attempt is no longer this worker's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

/// A `task.assign` frame before validation ([`AssignmentCheck`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawAssign<T = Task> {
    pub attempt_id: u64,
    pub attempt_no: u32,
    pub lease_expires_at: String,
    /// The task as `GET /v1/tasks/{id}` returns it.
    pub task: T,
    /// A decimal string, present exactly when the task has a key. Kept raw: a JSON number here
    /// is a protocol error, not something to convert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_token: Option<Value>,
    /// The grant's slot of its key (0..limit-1), a JSON integer, present exactly when the task
    /// has a key; a server that predates slots omits it (read as slot 0). Kept raw like the
    /// token, so a wrong type is a [`ProtocolError::BadSlot`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_slot: Option<Value>,
    /// Already RUNNING (the session declared `start_on_assign`): no `task.start`.
    #[serde(default)]
    pub started: bool,
}

/// A validated assignment.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub attempt_id: u64,
    pub attempt_no: u32,
    pub lease_expires_at: String,
    pub task: Task,
    pub concurrency_key: Option<String>,
    pub concurrency_token: Option<u64>,
    /// The grant's slot of its key: `Some` exactly when the task has a key (0 from a server that
    /// predates slots).
    pub key_slot: Option<u32>,
    /// The server started the attempt with the grant: run the handler without `task.start`.
    pub started: bool,
}

/// Frames the worker sends (docs/protocol.md, "Worker frames"). The server reads them with
/// these defaults and refuses unknown fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum ClientFrame {
    #[serde(rename = "hello")]
    Hello {
        worker_id: String,
        capacity: u32,
        queue_ids: Vec<String>,
        #[serde(default)]
        handlers: Vec<String>,
        /// Optional (SPEC §5): a worker written before keys existed omits it and gets unkeyed
        /// tasks only.
        #[serde(default)]
        concurrency_keys: bool,
        #[serde(default)]
        start_on_assign: bool,
        #[serde(default)]
        resume: Vec<u64>,
    },
    #[serde(rename = "task.start")]
    Start { attempt_id: u64 },
    #[serde(rename = "lease.renew")]
    Renew { attempt_ids: Vec<u64> },
    #[serde(rename = "task.result")]
    Result {
        attempt_id: u64,
        outcome: Outcome,
        #[serde(default)]
        retryable: bool,
        #[serde(default)]
        output: Option<Value>,
        #[serde(default)]
        error: Option<Value>,
    },
    #[serde(rename = "drain")]
    Drain,
}

impl ClientFrame {
    /// A `task.result` frame the server can read: when `output` or `error` nests deeper than
    /// [`MAX_RESULT_DEPTH`] or the frame would exceed [`MAX_FRAME_BYTES`], a permanent failure
    /// whose error says why, instead (a result the server refuses would hold its attempt).
    pub fn result(
        attempt_id: u64,
        outcome: Outcome,
        retryable: bool,
        output: Option<Value>,
        error: Option<Value>,
    ) -> ClientFrame {
        let too_deep = [("output", &output), ("error", &error)]
            .into_iter()
            .find_map(|(field, v)| {
                let depth = v.as_ref().map(json_depth).unwrap_or(0);
                (depth > MAX_RESULT_DEPTH).then(|| {
                    format!("{field} nests {depth} levels deep; at most {MAX_RESULT_DEPTH} are accepted")
                })
            });
        let frame = ClientFrame::Result {
            attempt_id,
            outcome,
            retryable,
            output,
            error,
        };
        let problem = too_deep.or_else(|| {
            let bytes = serde_json::to_string(&frame)
                .map(|t| t.len())
                .unwrap_or(usize::MAX);
            (bytes > MAX_FRAME_BYTES).then(|| {
                format!("the result is {bytes} bytes; a frame is limited to {MAX_FRAME_BYTES}")
            })
        });
        match problem {
            None => frame,
            Some(message) => ClientFrame::refused_result(attempt_id, "INVALID_ARGUMENT", &message),
        }
    }

    /// The permanent failure sent in place of a result the server cannot take: its error carries
    /// `code` and (at most 1,000 characters of) `message`.
    pub fn refused_result(attempt_id: u64, code: &str, message: &str) -> ClientFrame {
        let message: String = message.chars().take(1000).collect();
        ClientFrame::Result {
            attempt_id,
            outcome: Outcome::Failed,
            retryable: false,
            output: None,
            error: Some(serde_json::json!({"code": code, "message": message})),
        }
    }
}

/// Parses a token: a non-zero decimal `u64` in a JSON string (never a JSON number, which may
/// have passed through a float).
fn parse_token(attempt_id: u64, raw: &Value) -> Result<u64, ProtocolError> {
    let bad = || ProtocolError::BadToken {
        attempt_id,
        token: raw.to_string(),
    };
    let text = raw.as_str().ok_or_else(bad)?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match text.parse::<u64>() {
        Ok(0) | Err(_) => Err(bad()),
        Ok(v) => Ok(v),
    }
}

/// Parses a slot: a JSON integer from 0 to `u32::MAX` (not a string, not a fraction).
fn parse_slot(attempt_id: u64, raw: &Value) -> Result<u32, ProtocolError> {
    raw.as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| ProtocolError::BadSlot {
            attempt_id,
            slot: raw.to_string(),
        })
}

/// What an attempt was assigned: key, token, slot.
type Assigned = (Option<String>, Option<u64>, Option<u32>);

/// Checks assignments against the rules of SPEC §5, remembering what each attempt was assigned.
#[derive(Debug, Default)]
pub struct AssignmentCheck {
    declared_keys: bool,
    seen: HashMap<u64, Assigned>,
}

impl AssignmentCheck {
    pub fn new(declared_keys: bool) -> Self {
        AssignmentCheck {
            declared_keys,
            seen: HashMap::new(),
        }
    }

    /// Validates one assignment; `Ok(None)` for an identical repeat (already being handled).
    pub fn check(&mut self, raw: RawAssign) -> Result<Option<Assignment>, ProtocolError> {
        let attempt_id = raw.attempt_id;
        let key = raw.task.concurrency_key.clone();
        let token = match (&key, &raw.concurrency_token) {
            (Some(_), None) => return Err(ProtocolError::MissingToken { attempt_id }),
            (None, Some(_)) => return Err(ProtocolError::TokenWithoutKey { attempt_id }),
            (Some(_), Some(t)) => Some(parse_token(attempt_id, t)?),
            (None, None) => None,
        };
        let slot = match (&key, &raw.key_slot) {
            (None, Some(_)) => return Err(ProtocolError::SlotWithoutKey { attempt_id }),
            // A server that predates key slots: every key has one holder, in slot 0.
            (Some(_), None) => Some(0),
            (Some(_), Some(s)) => Some(parse_slot(attempt_id, s)?),
            (None, None) => None,
        };
        if key.as_deref() == Some("") {
            return Err(ProtocolError::Unreadable(format!(
                "attempt {attempt_id}: an empty concurrency_key"
            )));
        }
        if key.is_some() && !self.declared_keys {
            return Err(ProtocolError::KeyNotDeclared { attempt_id });
        }
        if let Some(previous) = self.seen.get(&attempt_id) {
            return if *previous == (key, token, slot) {
                Ok(None)
            } else {
                Err(ProtocolError::ChangedAssignment { attempt_id })
            };
        }
        self.seen.insert(attempt_id, (key.clone(), token, slot));
        Ok(Some(Assignment {
            attempt_id,
            attempt_no: raw.attempt_no,
            lease_expires_at: raw.lease_expires_at,
            task: raw.task,
            concurrency_key: key,
            concurrency_token: token,
            key_slot: slot,
            started: raw.started,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assign(key: Option<&str>, token: Value) -> RawAssign {
        assign_in_slot(key, token, Value::Null)
    }

    /// An assignment with `key_slot` (omitted when `slot` is null).
    fn assign_in_slot(key: Option<&str>, token: Value, slot: Value) -> RawAssign {
        let mut task = json!({"id": 1, "queue_id": "q", "state": "LEASED", "handler": "h", "handler_version": "v1",
            "payload_version": "v1", "payload": {}, "priority": 5, "max_attempts": 3, "attempt_count": 1});
        if let Some(k) = key {
            task["concurrency_key"] = json!(k);
        }
        let mut frame = json!({"type": "task.assign", "attempt_id": 7, "attempt_no": 1, "lease_expires_at": "2026-01-01T00:00:00Z", "task": task});
        if !token.is_null() {
            frame["concurrency_token"] = token;
        }
        if !slot.is_null() {
            frame["key_slot"] = slot;
        }
        match serde_json::from_value::<ServerFrame>(frame).unwrap() {
            ServerFrame::Assign(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn accepts_a_keyed_assignment_with_a_decimal_string_token() {
        let a = AssignmentCheck::new(true)
            .check(assign(Some("k"), json!("18446744073709551615")))
            .unwrap()
            .unwrap();
        assert_eq!(a.concurrency_token, Some(u64::MAX));
        assert_eq!(a.concurrency_key.as_deref(), Some("k"));
    }

    #[test]
    fn a_keyed_assignment_has_a_slot_missing_means_zero() {
        let a = AssignmentCheck::new(true)
            .check(assign_in_slot(Some("k"), json!("5"), json!(3)))
            .unwrap()
            .unwrap();
        assert_eq!((a.concurrency_token, a.key_slot), (Some(5), Some(3)));
        let a = AssignmentCheck::new(true)
            .check(assign(Some("k"), json!("6")))
            .unwrap()
            .unwrap();
        assert_eq!(a.key_slot, Some(0), "a server that predates slots omits it");
        let a = AssignmentCheck::new(true)
            .check(assign_in_slot(Some("k"), json!("6"), json!(u32::MAX)))
            .unwrap()
            .unwrap();
        assert_eq!(a.key_slot, Some(u32::MAX));
        let a = AssignmentCheck::new(true)
            .check(assign(None, Value::Null))
            .unwrap()
            .unwrap();
        assert_eq!(a.key_slot, None, "an unkeyed task has no slot");
    }

    #[test]
    fn refuses_a_stray_or_malformed_slot() {
        let mut c = AssignmentCheck::new(true);
        assert_eq!(
            c.check(assign_in_slot(None, Value::Null, json!(0))),
            Err(ProtocolError::SlotWithoutKey { attempt_id: 7 })
        );
        for bad in [
            json!("1"),
            json!(-1),
            json!(1.5),
            json!(1.0),
            json!(u64::from(u32::MAX) + 1),
            json!(true),
            json!([0]),
        ] {
            assert_eq!(
                c.check(assign_in_slot(Some("k"), json!("5"), bad.clone())),
                Err(ProtocolError::BadSlot {
                    attempt_id: 7,
                    slot: bad.to_string()
                }),
                "{bad}"
            );
        }
    }

    #[test]
    fn refuses_each_protocol_error() {
        let mut c = AssignmentCheck::new(true);
        assert_eq!(
            c.check(assign(Some("k"), Value::Null)),
            Err(ProtocolError::MissingToken { attempt_id: 7 })
        );
        assert_eq!(
            c.check(assign(None, json!("5"))),
            Err(ProtocolError::TokenWithoutKey { attempt_id: 7 })
        );
        for bad in [
            json!("0"),
            json!("-1"),
            json!("1.5"),
            json!("18446744073709551616"),
            json!(5),
            json!(""),
            json!(" 5"),
        ] {
            assert!(
                matches!(
                    c.check(assign(Some("k"), bad.clone())),
                    Err(ProtocolError::BadToken { .. })
                ),
                "{bad}"
            );
        }
        let mut undeclared = AssignmentCheck::new(false);
        assert_eq!(
            undeclared.check(assign(Some("k"), json!("1"))),
            Err(ProtocolError::KeyNotDeclared { attempt_id: 7 })
        );
        assert!(
            undeclared
                .check(assign(None, Value::Null))
                .unwrap()
                .is_some(),
            "unkeyed tasks are fine"
        );
    }

    #[test]
    fn a_result_the_server_cannot_read_becomes_a_failure_with_the_reason() {
        let mut deep = json!(1);
        for _ in 0..MAX_RESULT_DEPTH {
            deep = json!([deep]);
        }
        let at_limit = ClientFrame::result(7, Outcome::Succeeded, false, Some(deep.clone()), None);
        assert!(
            matches!(
                &at_limit,
                ClientFrame::Result {
                    outcome: Outcome::Succeeded,
                    ..
                }
            ),
            "{at_limit:?}"
        );
        let refused = |frame: ClientFrame| match frame {
            ClientFrame::Result {
                attempt_id: 7,
                outcome: Outcome::Failed,
                retryable: false,
                output: None,
                error: Some(e),
            } => e,
            other => panic!("{other:?}"),
        };
        let e = refused(ClientFrame::result(
            7,
            Outcome::Succeeded,
            false,
            Some(json!([deep])),
            None,
        ));
        assert_eq!(e["code"], "INVALID_ARGUMENT");
        assert!(
            e["message"].as_str().unwrap().starts_with("output nests"),
            "{e}"
        );
        let e = refused(ClientFrame::result(
            7,
            Outcome::Failed,
            true,
            None,
            Some(json!({"deep": deep})),
        ));
        assert!(
            e["message"].as_str().unwrap().starts_with("error nests"),
            "{e}"
        );
        let big = json!("x".repeat(MAX_FRAME_BYTES));
        let e = refused(ClientFrame::result(
            7,
            Outcome::Succeeded,
            false,
            Some(big),
            None,
        ));
        assert!(e["message"].as_str().unwrap().contains("bytes"), "{e}");
        let e = refused(ClientFrame::refused_result(
            7,
            "INVALID_ARGUMENT",
            &"m".repeat(5000),
        ));
        assert_eq!(
            e["message"].as_str().unwrap().len(),
            1000,
            "the reason stays small"
        );
    }

    #[test]
    fn a_repeat_may_not_change_key_token_or_slot() {
        let mut c = AssignmentCheck::new(true);
        assert!(c.check(assign(Some("k"), json!("3"))).unwrap().is_some());
        assert_eq!(
            c.check(assign(Some("k"), json!("3"))),
            Ok(None),
            "an identical repeat is ignored"
        );
        assert_eq!(
            c.check(assign(Some("k"), json!("4"))),
            Err(ProtocolError::ChangedAssignment { attempt_id: 7 })
        );
        assert_eq!(
            c.check(assign(Some("other"), json!("3"))),
            Err(ProtocolError::ChangedAssignment { attempt_id: 7 })
        );
        assert_eq!(
            c.check(assign_in_slot(Some("k"), json!("3"), json!(0))),
            Ok(None),
            "an explicit slot 0 is the omitted one"
        );
        assert_eq!(
            c.check(assign_in_slot(Some("k"), json!("3"), json!(1))),
            Err(ProtocolError::ChangedAssignment { attempt_id: 7 }),
            "nor its slot"
        );
    }
}
