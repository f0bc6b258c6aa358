//! Property tests of the SDK's frame parsing: whatever text a server sends, reading it as a
//! [`ServerFrame`] never panics (it is a frame or an error), and an assignment passes
//! [`AssignmentCheck`] exactly when it obeys the protocol's rules (docs/protocol.md, "The
//! concurrency token" and "The key slot"), otherwise it is refused with a typed [`ProtocolError`]
//! naming a rule it breaks.

use orbit_sdk::protocol::{AssignmentCheck, RawAssign, ServerFrame};
use orbit_sdk::ProtocolError;
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Value};

/// How the worker reads a frame (`sdk/src/worker.rs`).
fn parse(text: &str) -> Result<ServerFrame, ProtocolError> {
    serde_json::from_str(text).map_err(|e| ProtocolError::Unreadable(e.to_string()))
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|v| json!(v)),
        any::<u64>().prop_map(|v| json!(v)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|v| json!(v)),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..5).prop_map(Value::Array),
            btree_map(".{0,6}", inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Token values around the rules: canonical decimals, zero, leading zeros, signs, spaces,
/// fractions, 2^64 and beyond, JSON numbers, other JSON.
fn token_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => any::<u64>().prop_map(|t| json!(t.to_string())),
        1 => (1u64..1000).prop_map(|t| json!(format!("00{t}"))),
        2 => select(vec![
            json!("0"), json!(""), json!(" 5"), json!("5 "), json!("-1"), json!("+1"), json!("1.5"),
            json!("1e3"), json!("18446744073709551615"), json!("18446744073709551616"),
            json!("99999999999999999999999"), json!("٣"), json!(5), json!(0), json!(u64::MAX),
            json!(1.5), json!(true), json!([]), json!({}),
        ]),
        1 => "[0-9]{0,25}".prop_map(|s| json!(s)),
        1 => json_value(),
    ]
}

/// Slot values around the rules: small and large integers, negatives, fractions, strings, other
/// JSON.
fn slot_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (0u32..8).prop_map(|s| json!(s)),
        1 => any::<u32>().prop_map(|s| json!(s)),
        2 => select(vec![
            json!(-1), json!(u64::from(u32::MAX) + 1), json!(u64::MAX), json!(1.5), json!(0.0),
            json!("0"), json!("3"), json!(true), json!([]), json!({}),
        ]),
        1 => json_value(),
    ]
}

/// A `task.assign` frame, mostly well-formed: a required field may be missing or of the wrong
/// type, the key may be absent, empty or not a string, the token absent, null or anything, and
/// the slot absent, null or anything.
fn assign_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        2 => Just(None),
        3 => ".{0,10}".prop_map(|k| Some(json!(k))),
        1 => Just(Some(json!(""))),
        1 => json_value().prop_map(Some),
    ];
    let token = prop_oneof![2 => Just(None), 1 => Just(Some(Value::Null)), 5 => token_value().prop_map(Some)];
    let slot = prop_oneof![3 => Just(None), 1 => Just(Some(Value::Null)), 4 => slot_value().prop_map(Some)];
    let damage = vec(
        (
            select(vec![
                "attempt_id",
                "attempt_no",
                "lease_expires_at",
                "task",
                "task.id",
                "task.payload",
                "task.priority",
                "task.state",
                "task.handler",
            ]),
            proptest::option::of(json_value()),
        ),
        0..3,
    );
    (
        any::<u64>(),
        any::<u32>(),
        key,
        (token, slot),
        json_value(),
        prop_oneof![3 => Just(vec![]), 1 => damage],
    )
        .prop_map(|(attempt_id, attempt_no, key, (token, slot), payload, damage)| {
            let mut task = json!({"id": 1, "queue_id": "0f1e", "state": "LEASED", "handler": "h",
                "handler_version": "v1", "payload_version": "v1", "payload": payload, "priority": 5,
                "max_attempts": 3, "attempt_count": 1});
            if let Some(k) = key {
                task["concurrency_key"] = k;
            }
            let mut frame = json!({"type": "task.assign", "attempt_id": attempt_id,
                "attempt_no": attempt_no, "lease_expires_at": "2026-01-01T00:00:00Z", "task": task});
            if let Some(t) = token {
                frame["concurrency_token"] = t;
            }
            if let Some(slot) = slot {
                frame["key_slot"] = slot;
            }
            for (field, value) in damage {
                let (obj, name) = match field.strip_prefix("task.") {
                    Some(f) => (&mut frame["task"], f),
                    None => (&mut frame, field),
                };
                if let Some(o) = obj.as_object_mut() {
                    match value {
                        Some(v) => o.insert(name.to_string(), v),
                        None => o.remove(name),
                    };
                }
            }
            frame
        })
}

/// Any server frame type (and some that are not), with arbitrary fields.
fn any_frame_value() -> impl Strategy<Value = Value> {
    let types = select(vec![
        json!("welcome"),
        json!("task.assign"),
        json!("task.start.ok"),
        json!("task.start.rejected"),
        json!("lease.renewed"),
        json!("task.result.ack"),
        json!("drained"),
        json!("error"),
        json!("hello"),
        json!(""),
        json!(1),
        json!(null),
    ]);
    let fields = select(vec![
        "session_id",
        "lease_seconds",
        "renew_interval_seconds",
        "resumed",
        "attempt_id",
        "code",
        "message",
        "attempts",
        "task_state",
        "task",
        "concurrency_token",
        "key_slot",
    ]);
    (
        proptest::option::of(types),
        btree_map(fields, json_value(), 0..6),
    )
        .prop_map(|(t, m)| {
            let mut o: serde_json::Map<String, Value> =
                m.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            if let Some(t) = t {
                o.insert("type".into(), t);
            }
            Value::Object(o)
        })
}

/// The rules an assignment may break (docs/protocol.md), each checked on its own.
fn broken_rules(declared: bool, raw: &RawAssign) -> Vec<&'static str> {
    let key = raw.task.concurrency_key.as_deref();
    let token = raw.concurrency_token.as_ref();
    let slot = raw.key_slot.as_ref();
    let mut broken = Vec::new();
    if key.is_some() && token.is_none() {
        broken.push("MissingToken");
    }
    if key.is_none() && token.is_some() {
        broken.push("TokenWithoutKey");
    }
    if key.is_some() && !declared {
        broken.push("KeyNotDeclared");
    }
    if key == Some("") {
        broken.push("Unreadable");
    }
    if let (Some(_), Some(t)) = (key, token) {
        let ok = t.as_str().is_some_and(|s| {
            !s.is_empty()
                && s.bytes().all(|b| b.is_ascii_digit())
                && s.parse::<u64>().is_ok_and(|v| v != 0)
        });
        if !ok {
            broken.push("BadToken");
        }
    }
    if key.is_none() && slot.is_some() {
        broken.push("SlotWithoutKey");
    }
    if let (Some(_), Some(s)) = (key, slot) {
        if !s.as_u64().is_some_and(|v| v <= u64::from(u32::MAX)) {
            broken.push("BadSlot");
        }
    }
    broken
}

fn rule(e: &ProtocolError) -> &'static str {
    match e {
        ProtocolError::MissingToken { .. } => "MissingToken",
        ProtocolError::TokenWithoutKey { .. } => "TokenWithoutKey",
        ProtocolError::KeyNotDeclared { .. } => "KeyNotDeclared",
        ProtocolError::BadToken { .. } => "BadToken",
        ProtocolError::SlotWithoutKey { .. } => "SlotWithoutKey",
        ProtocolError::BadSlot { .. } => "BadSlot",
        ProtocolError::ChangedAssignment { .. } => "ChangedAssignment",
        ProtocolError::Unreadable(_) => "Unreadable",
    }
}

/// Checks one assignment against the rules, then a repeat of it, then a repeat that changes the
/// token.
fn check_assignment(declared: bool, raw: RawAssign) -> Result<(), TestCaseError> {
    let broken = broken_rules(declared, &raw);
    let mut check = AssignmentCheck::new(declared);
    match check.check(raw.clone()) {
        Ok(None) => prop_assert!(false, "a first assignment is never a repeat"),
        Ok(Some(a)) => {
            prop_assert!(
                broken.is_empty(),
                "accepted although it breaks {:?}",
                broken
            );
            prop_assert_eq!(a.attempt_id, raw.attempt_id);
            prop_assert_eq!(&a.concurrency_key, &raw.task.concurrency_key);
            prop_assert_eq!(a.concurrency_key.is_some(), a.concurrency_token.is_some());
            prop_assert_eq!(a.concurrency_key.is_some(), a.key_slot.is_some());
            if let Some(s) = a.key_slot {
                // An omitted slot (a server that predates slots) is slot 0.
                let sent = raw.key_slot.as_ref().map_or(0, |v| v.as_u64().unwrap());
                prop_assert_eq!(u64::from(s), sent);
            }
            if let Some(t) = a.concurrency_token {
                prop_assert!(t != 0);
                let text = raw.concurrency_token.as_ref().unwrap().as_str().unwrap();
                prop_assert_eq!(text.parse::<u64>().unwrap(), t);
            }
            // An identical repeat is ignored; one with another token or slot is refused.
            prop_assert_eq!(check.check(raw.clone()), Ok(None));
            if let Some(s) = a.key_slot {
                let mut changed = raw.clone();
                changed.key_slot = Some(json!(s.wrapping_add(1)));
                prop_assert_eq!(
                    check.check(changed),
                    Err(ProtocolError::ChangedAssignment {
                        attempt_id: raw.attempt_id
                    })
                );
            }
            if let Some(t) = a.concurrency_token {
                let mut changed = raw.clone();
                changed.concurrency_token = Some(json!(t.wrapping_add(1).max(1).to_string()));
                if changed.concurrency_token != raw.concurrency_token {
                    prop_assert_eq!(
                        check.check(changed),
                        Err(ProtocolError::ChangedAssignment {
                            attempt_id: raw.attempt_id
                        })
                    );
                }
            }
        }
        Err(e) => {
            prop_assert!(
                broken.contains(&rule(&e)),
                "refused with {:?}, which is not among the broken rules {:?}",
                e,
                broken
            );
        }
    }
    Ok(())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(500))]

    /// Any text at all: a frame or an error, never a panic.
    #[test]
    fn arbitrary_text_is_a_frame_or_an_error(text in any::<String>()) {
        let _ = parse(&text);
    }

    /// Text made of JSON's punctuation, digits and letters (reaches deeper into the parser).
    #[test]
    fn json_like_text_is_a_frame_or_an_error(text in "[\\[\\]{}\":,.0-9a-z_ -]{0,80}") {
        let _ = parse(&text);
    }

    /// Deeply nested input is refused, not a stack overflow.
    #[test]
    fn deep_nesting_is_an_error(depth in 1usize..5000, brace in any::<bool>()) {
        let (open, close) = if brace { ("{\"a\":", "}") } else { ("[", "]") };
        let text = format!("{{\"type\":\"error\",\"code\":\"x\",\"message\":{}1{}}}",
                           open.repeat(depth), close.repeat(depth));
        prop_assert!(parse(&text).is_err());
        let assign = format!("{{\"type\":\"task.assign\",\"attempt_id\":1,\"attempt_no\":1,\"lease_expires_at\":\"t\",\"task\":{{\"id\":1,\"queue_id\":\"q\",\"state\":\"s\",\"handler\":\"h\",\"handler_version\":\"v\",\"payload_version\":\"v\",\"payload\":{}1{},\"priority\":1,\"max_attempts\":1,\"attempt_count\":1}}}}",
                             open.repeat(depth), close.repeat(depth));
        let _ = parse(&assign);
    }

    /// Frames of every type with arbitrary fields.
    #[test]
    fn arbitrary_frames_are_frames_or_errors(v in any_frame_value()) {
        let text = v.to_string();
        if let Ok(ServerFrame::Assign(raw)) = parse(&text) {
            check_assignment(true, raw.clone())?;
            check_assignment(false, raw)?;
        }
    }

    /// Assignment-shaped frames: whatever parses is accepted exactly when it obeys the rules.
    #[test]
    fn assignments_pass_the_check_exactly_when_they_obey_the_rules(v in assign_value(), declared in any::<bool>()) {
        match parse(&v.to_string()) {
            Ok(ServerFrame::Assign(raw)) => check_assignment(declared, raw)?,
            Ok(other) => prop_assert!(false, "a task.assign read as {:?}", other),
            Err(ProtocolError::Unreadable(_)) => {}
            Err(e) => prop_assert!(false, "parsing gave {:?}", e),
        }
    }
}

/// The assignment generator does produce both outcomes (the property above is not vacuous).
#[test]
fn the_assignment_generator_covers_accepted_and_refused() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut accepted, mut refused, mut unreadable) = (0, 0, 0);
    for _ in 0..500 {
        let v = assign_value().new_tree(&mut runner).unwrap().current();
        match parse(&v.to_string()) {
            Ok(ServerFrame::Assign(raw)) => match AssignmentCheck::new(true).check(raw) {
                Ok(_) => accepted += 1,
                Err(_) => refused += 1,
            },
            _ => unreadable += 1,
        }
    }
    eprintln!("accepted {accepted}, refused {refused}, unreadable {unreadable}");
    assert!(
        accepted > 50 && refused > 50 && unreadable > 10,
        "accepted {accepted}, refused {refused}, unreadable {unreadable}"
    );
}

/// The frames of docs/protocol.md, read and written back with the one definition the server and
/// the SDK share (`orbit_sdk::protocol`): the server parses [`ClientFrame`] and writes
/// [`ServerFrame`] with these types, the worker does the reverse.
mod round_trip {
    use orbit_sdk::protocol::{ClientFrame, Outcome, RawAssign, RenewAnswer, ServerFrame};
    use serde_json::{json, Value};

    /// Reads `wire` as a frame of type `F`, writes it back, and reads that again: both reads
    /// give the same frame, and the written JSON is `written`.
    fn round_trip<F>(wire: Value, written: Value) -> F
    where
        F: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let frame: F =
            serde_json::from_value(wire.clone()).unwrap_or_else(|e| panic!("{wire}: {e}"));
        let text = serde_json::to_string(&frame).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            written,
            "{wire}"
        );
        let again: F = serde_json::from_str(&text).unwrap();
        assert_eq!(again, frame);
        frame
    }

    fn same<F>(wire: Value) -> F
    where
        F: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        round_trip(wire.clone(), wire)
    }

    #[test]
    fn every_worker_frame_reads_and_writes_back_unchanged() {
        let hello = json!({"type":"hello","worker_id":"billing-7f3a","capacity":4,"queue_ids":["q1"],
            "handlers":["object.update"],"concurrency_keys":true,"start_on_assign":true,"resume":[7]});
        assert_eq!(
            same::<ClientFrame>(hello),
            ClientFrame::Hello {
                worker_id: "billing-7f3a".into(),
                capacity: 4,
                queue_ids: vec!["q1".into()],
                handlers: vec!["object.update".into()],
                concurrency_keys: true,
                start_on_assign: true,
                resume: vec![7],
            }
        );
        assert_eq!(
            same::<ClientFrame>(json!({"type":"task.start","attempt_id":812})),
            ClientFrame::Start { attempt_id: 812 }
        );
        assert_eq!(
            same::<ClientFrame>(json!({"type":"lease.renew","attempt_ids":[812,813]})),
            ClientFrame::Renew {
                attempt_ids: vec![812, 813]
            }
        );
        for (name, outcome) in [
            ("succeeded", Outcome::Succeeded),
            ("failed", Outcome::Failed),
            ("unknown", Outcome::Unknown),
        ] {
            let frame = same::<ClientFrame>(json!({"type":"task.result","attempt_id":812,
                "outcome":name,"retryable":true,"output":null,"error":{"reason":"timeout"}}));
            assert!(
                matches!(frame, ClientFrame::Result { outcome: o, retryable: true, .. } if o == outcome),
                "{frame:?}"
            );
            assert_eq!(outcome.as_str(), name);
        }
        assert_eq!(
            same::<ClientFrame>(json!({"type":"drain"})),
            ClientFrame::Drain
        );
    }

    #[test]
    fn a_worker_frame_gets_the_documented_defaults_and_nothing_unknown() {
        // docs/protocol.md: handlers, concurrency_keys, start_on_assign and resume are optional.
        round_trip::<ClientFrame>(
            json!({"type":"hello","worker_id":"w","capacity":1,"queue_ids":["q"]}),
            json!({"type":"hello","worker_id":"w","capacity":1,"queue_ids":["q"],"handlers":[],
                "concurrency_keys":false,"start_on_assign":false,"resume":[]}),
        );
        round_trip::<ClientFrame>(
            json!({"type":"task.result","attempt_id":1,"outcome":"succeeded"}),
            json!({"type":"task.result","attempt_id":1,"outcome":"succeeded","retryable":false,
                "output":null,"error":null}),
        );
        for refused in [
            json!({"type":"task.start","attempt_id":1,"extra":true}),
            json!({"type":"task.result","attempt_id":1,"outcome":"SUCCEEDED"}),
            json!({"type":"task.result","attempt_id":1,"outcome":"done"}),
            json!({"type":"task.start","attempt_id":-1}),
            json!({"type":"welcome","session_id":1,"lease_seconds":30,"renew_interval_seconds":10}),
            json!({"attempt_id":1}),
        ] {
            assert!(
                serde_json::from_value::<ClientFrame>(refused.clone()).is_err(),
                "{refused}"
            );
        }
    }

    #[test]
    fn every_server_frame_reads_and_writes_back_unchanged() {
        assert_eq!(
            same::<ServerFrame>(json!({"type":"welcome","session_id":41,"lease_seconds":30,
                "renew_interval_seconds":10,"resumed":[812]})),
            ServerFrame::Welcome {
                session_id: 41,
                lease_seconds: 30,
                renew_interval_seconds: 10,
                resumed: vec![812],
            }
        );
        same::<ServerFrame>(
            json!({"type":"task.start.ok","attempt_id":812,"lease_expires_at":"2026-12-02T12:00:30Z"}),
        );
        same::<ServerFrame>(
            json!({"type":"task.start.rejected","attempt_id":812,"code":"LEASE_EXPIRED"}),
        );
        let renewed = same::<ServerFrame>(json!({"type":"lease.renewed","attempts":[
            {"attempt_id":812,"lease_expires_at":"2026-12-02T12:00:30.25Z"},
            {"attempt_id":813,"rejected":"NOT_FOUND"}]}));
        assert_eq!(
            renewed,
            ServerFrame::Renewed {
                attempts: vec![
                    RenewAnswer {
                        attempt_id: 812,
                        lease_expires_at: Some("2026-12-02T12:00:30.25Z".into()),
                        rejected: None,
                    },
                    RenewAnswer {
                        attempt_id: 813,
                        lease_expires_at: None,
                        rejected: Some("NOT_FOUND".into()),
                    },
                ],
            }
        );
        same::<ServerFrame>(
            json!({"type":"task.result.ack","attempt_id":812,"task_state":"RETRY_WAIT"}),
        );
        assert_eq!(
            same::<ServerFrame>(json!({"type":"drained"})),
            ServerFrame::Drained
        );
        // An error names an attempt only when it answers that attempt's result.
        same::<ServerFrame>(
            json!({"type":"error","code":"INVALID_ARGUMENT","message":"m","attempt_id":812}),
        );
        let plain = ServerFrame::<Value>::error("STATE_CONFLICT", "hello was already received");
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            json!({"type":"error","code":"STATE_CONFLICT","message":"hello was already received"})
        );
    }

    #[test]
    fn an_assignment_the_server_writes_is_the_one_the_worker_reads() {
        // The server writes its own task view (here: the JSON of docs/protocol.md's example).
        let task = json!({"id":90,"queue_id":"q","state":"LEASED","handler":"object.update",
            "handler_version":"v1","payload_version":"v1","payload":{"object_ref":"objects/42"},
            "concurrency_key":"object/42","priority":5,"max_attempts":3,"attempt_count":1,
            "retry_base_ms":1000,"retry_max_ms":300000,"retry_unknown":false});
        let written: ServerFrame<Value> = ServerFrame::Assign(RawAssign {
            attempt_id: 812,
            attempt_no: 1,
            lease_expires_at: "2026-12-02T12:00:30Z".into(),
            task: task.clone(),
            concurrency_token: Some(json!("17")),
            key_slot: Some(json!(1)),
            started: false,
        });
        let wire = serde_json::to_value(&written).unwrap();
        assert_eq!(
            wire,
            json!({"type":"task.assign","attempt_id":812,"attempt_no":1,
                "lease_expires_at":"2026-12-02T12:00:30Z","task":task,"concurrency_token":"17",
                "key_slot":1,"started":false})
        );
        assert_eq!(same::<ServerFrame<Value>>(wire.clone()), written);
        // The worker reads it with its Task type and the protocol's checks.
        let ServerFrame::Assign(raw) = serde_json::from_value::<ServerFrame>(wire).unwrap() else {
            panic!("not an assignment");
        };
        assert_eq!(raw.task.concurrency_key.as_deref(), Some("object/42"));
        assert_eq!(raw.task.rest["retry_base_ms"], json!(1000));
        let a = orbit_sdk::protocol::AssignmentCheck::new(true)
            .check(raw)
            .unwrap()
            .unwrap();
        assert_eq!(a.concurrency_token, Some(17));
        assert_eq!(a.key_slot, Some(1));
        // An unkeyed task's assignment carries no token and no slot at all.
        let unkeyed: ServerFrame<Value> = ServerFrame::Assign(RawAssign {
            attempt_id: 9,
            attempt_no: 2,
            lease_expires_at: "2026-12-02T12:00:30Z".into(),
            task: json!({}),
            concurrency_token: None,
            key_slot: None,
            started: true,
        });
        let unkeyed = serde_json::to_value(&unkeyed).unwrap();
        assert!(unkeyed.get("concurrency_token").is_none());
        assert!(unkeyed.get("key_slot").is_none());
    }
}
