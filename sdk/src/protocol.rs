//! The worker WebSocket protocol (docs/protocol.md): frames, and the checks an assignment must
//! pass before any handler sees it.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::Task;

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
    #[error("attempt {attempt_id}: a repeated assignment changed the key or token")]
    ChangedAssignment { attempt_id: u64 },
    #[error("unreadable frame: {0}")]
    Unreadable(String),
}

/// Frames the server sends.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type")]
pub enum ServerFrame {
    #[serde(rename = "welcome")]
    Welcome {
        session_id: u64,
        lease_seconds: u64,
        renew_interval_seconds: u64,
        #[serde(default)]
        resumed: Vec<u64>,
    },
    #[serde(rename = "task.assign")]
    Assign(RawAssign),
    #[serde(rename = "task.start.ok")]
    StartOk { attempt_id: u64 },
    #[serde(rename = "task.start.rejected")]
    StartRejected { attempt_id: u64, code: String },
    #[serde(rename = "lease.renewed")]
    Renewed { attempts: Vec<Value> },
    #[serde(rename = "task.result.ack")]
    ResultAck { attempt_id: u64, task_state: String },
    #[serde(rename = "drained")]
    Drained,
    #[serde(rename = "error")]
    Error { code: String, message: String },
}

/// A `task.assign` frame before validation.
#[derive(Debug, Clone, Deserialize)]
pub struct RawAssign {
    pub attempt_id: u64,
    pub attempt_no: u32,
    pub lease_expires_at: String,
    pub task: Task,
    /// Kept raw: a JSON number here is a protocol error, not something to convert.
    #[serde(default)]
    pub concurrency_token: Option<Value>,
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
    /// The server started the attempt with the grant: run the handler without `task.start`.
    pub started: bool,
}

/// Frames the worker sends.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type")]
pub enum ClientFrame {
    #[serde(rename = "hello")]
    Hello {
        worker_id: String,
        capacity: u32,
        queue_ids: Vec<String>,
        handlers: Vec<String>,
        concurrency_keys: bool,
        start_on_assign: bool,
        resume: Vec<u64>,
    },
    #[serde(rename = "task.start")]
    Start { attempt_id: u64 },
    #[serde(rename = "lease.renew")]
    Renew { attempt_ids: Vec<u64> },
    #[serde(rename = "task.result")]
    Result {
        attempt_id: u64,
        outcome: &'static str,
        retryable: bool,
        output: Option<Value>,
        error: Option<Value>,
    },
    #[serde(rename = "drain")]
    Drain,
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

/// Checks assignments against the rules of SPEC §5, remembering what each attempt was assigned.
#[derive(Debug, Default)]
pub struct AssignmentCheck {
    declared_keys: bool,
    seen: HashMap<u64, (Option<String>, Option<u64>)>,
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
        if key.as_deref() == Some("") {
            return Err(ProtocolError::Unreadable(format!(
                "attempt {attempt_id}: an empty concurrency_key"
            )));
        }
        if key.is_some() && !self.declared_keys {
            return Err(ProtocolError::KeyNotDeclared { attempt_id });
        }
        if let Some(previous) = self.seen.get(&attempt_id) {
            return if *previous == (key, token) {
                Ok(None)
            } else {
                Err(ProtocolError::ChangedAssignment { attempt_id })
            };
        }
        self.seen.insert(attempt_id, (key.clone(), token));
        Ok(Some(Assignment {
            attempt_id,
            attempt_no: raw.attempt_no,
            lease_expires_at: raw.lease_expires_at,
            task: raw.task,
            concurrency_key: key,
            concurrency_token: token,
            started: raw.started,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assign(key: Option<&str>, token: Value) -> RawAssign {
        let mut task = json!({"id": 1, "queue_id": "q", "state": "LEASED", "handler": "h", "handler_version": "v1",
            "payload_version": "v1", "payload": {}, "priority": 5, "max_attempts": 3, "attempt_count": 1});
        if let Some(k) = key {
            task["concurrency_key"] = json!(k);
        }
        let mut frame = json!({"type": "task.assign", "attempt_id": 7, "attempt_no": 1, "lease_expires_at": "2026-01-01T00:00:00Z", "task": task});
        if !token.is_null() {
            frame["concurrency_token"] = token;
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
    fn a_repeat_may_not_change_key_or_token() {
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
    }
}
