//! Property tests against the real database and the real server:
//!
//! - the concurrency_key validator (`orbit_key_validate`, SQL) agrees with a small Rust model of
//!   the rules of SPEC §3 on generated strings and bytes, and the HTTP API applies the same rules;
//! - the worker WebSocket answers every frame (random text, random binary, malformed JSON, valid
//!   message types with garbage fields) with a reply or a documented close within a bound, never
//!   an internal error, and the server stays healthy afterwards.
//!
//! The runners use fixed case counts and no failure files; a failure prints the shrunk input.

mod support;

use std::cell::RefCell;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{json, Value};
use sqlx::MySqlPool;
use support::Api;
use tokio_tungstenite::tungstenite::Message;

/// A runner of `cases` cases. Shrinking a failure stops after a minute: a case that hangs takes
/// the frame's whole bound (10 s) on every try, so unbounded shrinking ran for hours.
fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        max_shrink_time: 60_000,
        ..Config::default()
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// concurrency_key: the SQL validator against a model of the documented rules
// ---------------------------------------------------------------------------------------------

/// Which rule a key breaks, in the order the procedure documents them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Valid,
    NotUtf8,
    TooLong,
    Control,
    Whitespace,
}

/// SPEC §3: "" = no key (valid); otherwise valid UTF-8, 1-191 characters, no control characters
/// (Unicode Cc), no leading or trailing Unicode White_Space.
fn model(bytes: &[u8]) -> Verdict {
    if bytes.is_empty() {
        return Verdict::Valid;
    }
    let Ok(s) = std::str::from_utf8(bytes) else {
        return Verdict::NotUtf8;
    };
    if s.chars().count() > 191 {
        Verdict::TooLong
    } else if s.chars().any(char::is_control) {
        Verdict::Control
    } else if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        Verdict::Whitespace
    } else {
        Verdict::Valid
    }
}

/// What `CALL orbit_key_validate(bytes)` says.
async fn procedure(pool: &MySqlPool, bytes: &[u8]) -> Verdict {
    match sqlx::query("CALL orbit_key_validate(?)")
        .bind(bytes)
        .execute(pool)
        .await
    {
        Ok(_) => Verdict::Valid,
        Err(sqlx::Error::Database(d)) => {
            let m = d.message();
            assert!(
                m.starts_with("INVALID_ARGUMENT: concurrency_key"),
                "unexpected error: {m}"
            );
            if m.contains("valid UTF-8") {
                Verdict::NotUtf8
            } else if m.contains("at most 191") {
                Verdict::TooLong
            } else if m.contains("control characters") {
                Verdict::Control
            } else if m.contains("whitespace") {
                Verdict::Whitespace
            } else {
                panic!("unclassified refusal: {m}")
            }
        }
        Err(e) => panic!("CALL failed: {e}"),
    }
}

/// Characters around the rules' edges: every White_Space character, Cc at both ends of its
/// ranges, look-alikes that are neither (ZWSP, BOM, U+180E, soft hyphen), combining marks, and
/// 1- to 4-byte characters.
fn edge_char() -> impl Strategy<Value = char> {
    let special = select(vec![
        ' ',
        '\t',
        '\n',
        '\u{b}',
        '\u{c}',
        '\r',
        '\u{0}',
        '\u{1}',
        '\u{1f}',
        '\u{7f}',
        '\u{80}',
        '\u{85}',
        '\u{9f}',
        '\u{a0}',
        '\u{ad}',
        '\u{1680}',
        '\u{180e}',
        '\u{2000}',
        '\u{2005}',
        '\u{200a}',
        '\u{200b}',
        '\u{2028}',
        '\u{2029}',
        '\u{202f}',
        '\u{205f}',
        '\u{3000}',
        '\u{feff}',
        '\u{fffd}',
        '\u{fffe}',
        '\u{ffff}',
        'é',
        '\u{301}',
        'É',
        '日',
        '🚀',
        '\u{10000}',
        '\u{10ffff}',
        '/',
        '%',
        '_',
        '\'',
        '"',
        '\\',
    ]);
    prop_oneof![
        4 => proptest::char::range('a', 'z'),
        4 => special,
        2 => any::<char>(),
    ]
}

fn key_string() -> impl Strategy<Value = String> {
    let widths = select(vec!['a', 'é', '日', '🚀']);
    prop_oneof![
        1 => Just(String::new()),
        6 => vec(edge_char(), 1..12).prop_map(String::from_iter),
        2 => vec(any::<char>(), 1..40).prop_map(String::from_iter),
        // Around 191 characters and 764 bytes (191 four-byte characters), with an edge character
        // possibly at either end.
        3 => (185usize..=195, widths.clone(), proptest::option::of(edge_char()), proptest::option::of(edge_char()))
            .prop_map(|(n, fill, pre, post)| {
                pre.into_iter()
                    .chain(std::iter::repeat_n(fill, n))
                    .chain(post)
                    .collect()
            }),
        2 => vec(widths, 185..=195).prop_map(String::from_iter),
    ]
}

/// Byte sequences that are not UTF-8: stray continuation bytes, overlong forms, truncated
/// sequences, code points above U+10FFFF, bytes that never occur in UTF-8.
const NOT_UTF8: &[&[u8]] = &[
    b"\x80",
    b"\xbf",
    b"\xc0\x80",
    b"\xc1\xbf",
    b"\xc2",
    b"\xe0\x80\x80",
    b"\xe0\x9f\xbf",
    b"\xe2\x82",
    b"\xf0\x8f\xbf\xbf",
    b"\xf0\x9f\x9a",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xfe",
    b"\xff",
];

/// UTF-16 surrogates encoded as if they were characters (CESU-8 / WTF-8): not UTF-8 either.
const SURROGATES: &[&[u8]] = &[
    b"\xed\xa0\x80",
    b"\xed\xbf\xbf",
    b"\xed\xa0\xbd\xed\xb8\x80",
];

fn key_bytes(bad: Vec<&'static [u8]>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => key_string().prop_map(String::into_bytes),
        3 => (key_string(), select(bad), any::<proptest::sample::Index>()).prop_map(|(s, bad, at)| {
            let mut b = s.into_bytes();
            let at = at.index(b.len() + 1);
            b.splice(at..at, bad.iter().copied());
            b
        }),
        2 => vec(any::<u8>(), 0..40),
        1 => (760usize..=770).prop_map(|n| vec![b'k'; n]),
    ]
}

#[test]
fn key_validator_agrees_with_the_model_on_strings() {
    let rt = runtime();
    let db = rt.block_on(orbit::testing::TestDb::installed());
    let started = std::time::Instant::now();
    runner(500)
        .run(&key_string(), |s| {
            let got = rt.block_on(procedure(&db.pool, s.as_bytes()));
            prop_assert_eq!(got, model(s.as_bytes()), "key {:?}", s);
            Ok(())
        })
        .unwrap();
    eprintln!("500 keys in {:?}", started.elapsed());
}

#[test]
fn key_validator_agrees_with_the_model_on_bytes() {
    let rt = runtime();
    let db = rt.block_on(orbit::testing::TestDb::installed());
    let strategy = key_bytes(NOT_UTF8.to_vec());
    runner(500)
        .run(&strategy, |b| {
            let got = rt.block_on(procedure(&db.pool, &b));
            prop_assert_eq!(got, model(&b), "bytes {:02x?}", b);
            Ok(())
        })
        .unwrap();
}

#[test]
fn key_validator_rejects_encoded_surrogates() {
    let rt = runtime();
    let db = rt.block_on(orbit::testing::TestDb::installed());
    for s in SURROGATES {
        for b in [s.to_vec(), [b"a", *s, b"b"].concat()] {
            assert_eq!(
                rt.block_on(procedure(&db.pool, &b)),
                Verdict::NotUtf8,
                "{b:02x?}"
            );
        }
    }
    let all: Vec<&'static [u8]> = NOT_UTF8.iter().chain(SURROGATES).copied().collect();
    runner(300)
        .run(&key_bytes(all), |b| {
            let got = rt.block_on(procedure(&db.pool, &b));
            prop_assert_eq!(got, model(&b), "bytes {:02x?}", b);
            Ok(())
        })
        .unwrap();
}

/// The HTTP API carries only valid UTF-8 (JSON strings); it applies exactly the same rules and
/// stores an accepted key verbatim.
#[test]
fn submit_applies_the_key_rules_and_keeps_the_key_verbatim() {
    let rt = runtime();
    let api = rt.block_on(Api::start());
    let n = std::cell::Cell::new(0u32);
    runner(120)
        .run(&key_string(), |key| {
            n.set(n.get() + 1);
            let body = json!({"queue_id": api.fixture.queue_id, "handler": "h", "handler_version": "v1",
                              "payload_version": "v1", "payload": {}, "concurrency_key": key});
            let r = rt.block_on(api.submit(&format!("prop-{}", n.get()), &body));
            match model(key.as_bytes()) {
                Verdict::Valid => {
                    prop_assert_eq!(r.status, 201, "{:?}: {}", key, r.body);
                    let expected = if key.is_empty() { Value::Null } else { json!(key) };
                    prop_assert_eq!(&r.body["data"]["concurrency_key"], &expected);
                }
                _ => {
                    prop_assert_eq!(r.status, 400, "{:?}: {}", key, r.body);
                    prop_assert_eq!(&r.body["error"]["details"]["field"], "concurrency_key");
                }
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// The worker WebSocket under arbitrary frames
// ---------------------------------------------------------------------------------------------

/// A frame to throw at the server.
#[derive(Debug, Clone)]
enum Fuzz {
    Text(String),
    Binary(Vec<u8>),
}

/// How the server reads a frame (its own parser is the oracle).
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// Not a worker frame: an `error` INVALID_ARGUMENT must answer it.
    Garbage,
    Hello,
    /// Another well-formed worker frame.
    Message,
}

fn kind(f: &Fuzz) -> Kind {
    match f {
        Fuzz::Binary(_) => Kind::Garbage,
        Fuzz::Text(t) => match serde_json::from_str::<orbit::http::ws::ClientFrame>(t) {
            Err(_) => Kind::Garbage,
            Ok(orbit::http::ws::ClientFrame::Hello { .. }) => Kind::Hello,
            Ok(_) => Kind::Message,
        },
    }
}

const SERVER_TYPES: &[&str] = &[
    "welcome",
    "task.assign",
    "task.start.ok",
    "task.start.rejected",
    "lease.renewed",
    "task.result.ack",
    "drained",
    "error",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|v| json!(v)),
        any::<u64>().prop_map(|v| json!(v)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|v| json!(v)),
        ".{0,16}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            btree_map(".{0,8}", inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Values that come close to what the fields expect.
fn plausible(queue: String) -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => json_value(),
        1 => Just(json!(queue.clone())),
        1 => Just(json!([queue])),
        1 => select(vec![json!(0), json!(1), json!(u32::MAX), json!(u64::MAX), json!(-1), json!(1.5),
                         json!(10001), json!([]), json!({}), json!(""), json!("succeeded"),
                         json!("failed"), json!("unknown"), json!("SUCCEEDED"), json!(true)]),
        1 => vec(any::<u64>(), 0..5).prop_map(|v| json!(v)),
        1 => vec(".{0,8}", 0..4).prop_map(|v| json!(v)),
    ]
}

/// Nested arrays `depth` deep.
fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn fuzz_frame(queue: String) -> impl Strategy<Value = Fuzz> {
    let types = select(vec![
        "hello",
        "task.start",
        "lease.renew",
        "task.result",
        "drain",
        "welcome",
        "error",
        "",
        "HELLO",
        "task.result ",
    ]);
    let fields = select(vec![
        "worker_id",
        "capacity",
        "queue_ids",
        "handlers",
        "concurrency_keys",
        "resume",
        "attempt_id",
        "attempt_ids",
        "outcome",
        "retryable",
        "output",
        "error",
        "type",
        "extra",
    ]);
    let garbage_fields =
        (types, btree_map(fields, plausible(queue.clone()), 0..7)).prop_map(|(t, m)| {
            let mut o: serde_json::Map<String, Value> = m
                .into_iter()
                .map(|(k, v): (&str, Value)| (k.to_string(), v))
                .collect();
            o.entry("type").or_insert(json!(t));
            Fuzz::Text(Value::Object(o).to_string())
        });
    let q = queue.clone();
    let well_formed_hello = (
        ".{0,200}",
        any::<u32>(),
        prop_oneof![Just(vec![q.clone()]), vec(".{0,40}", 0..3)],
        vec(".{0,12}", 0..3),
        any::<bool>(),
        vec(any::<u64>(), 0..3),
    )
        .prop_map(|(w, c, qs, hs, k, r)| {
            Fuzz::Text(
                json!({"type": "hello", "worker_id": w, "capacity": c, "queue_ids": qs,
                              "handlers": hs, "concurrency_keys": k, "resume": r})
                .to_string(),
            )
        });
    let well_formed_other = prop_oneof![
        any::<u64>().prop_map(|a| json!({"type": "task.start", "attempt_id": a})),
        vec(any::<u64>(), 0..8).prop_map(|a| json!({"type": "lease.renew", "attempt_ids": a})),
        (
            any::<u64>(),
            select(vec!["succeeded", "failed", "unknown"]),
            any::<bool>(),
            json_value(),
            json_value()
        )
            .prop_map(
                |(a, o, r, out, err)| json!({"type": "task.result", "attempt_id": a,
                    "outcome": o, "retryable": r, "output": out, "error": err})
            ),
        Just(json!({"type": "drain"})),
    ]
    .prop_map(|v| Fuzz::Text(v.to_string()));
    let raw_numbers = (
        select(vec!["task.start\",\"attempt_id", "hello\",\"capacity"]),
        select(vec![
            "1e400",
            "18446744073709551616",
            "-1",
            "1.5",
            "123456789012345678901234567890",
            "-0",
            "0x10",
            "NaN",
            "Infinity",
            "01",
        ]),
    )
        .prop_map(|(prefix, n)| Fuzz::Text(format!("{{\"type\":\"{prefix}\":{n}}}")));
    let deep = (1usize..400, any::<bool>()).prop_map(|(d, inside)| {
        if inside {
            Fuzz::Text(format!(
                "{{\"type\":\"task.result\",\"attempt_id\":1,\"outcome\":\"failed\",\"output\":{}}}",
                nested(d)
            ))
        } else {
            Fuzz::Text(nested(d))
        }
    });
    prop_oneof![
        2 => any::<String>().prop_map(Fuzz::Text),
        2 => "[\\[\\]{}\":,.0-9a-z_ -]{0,60}".prop_map(Fuzz::Text),
        2 => vec(any::<u8>(), 0..64).prop_map(Fuzz::Binary),
        2 => json_value().prop_map(|v| Fuzz::Text(v.to_string())),
        4 => garbage_fields,
        3 => well_formed_hello,
        4 => well_formed_other,
        1 => raw_numbers,
        1 => deep,
    ]
}

struct Ws {
    socket: support::ws::Socket,
}

/// The bound within which the server must answer a frame.
const BOUND: Duration = Duration::from_secs(10);

impl Ws {
    async fn connect(base_url: &str, token: &str) -> Ws {
        Ws {
            socket: support::ws::connect_socket(base_url, token).await,
        }
    }

    async fn send(&mut self, f: &Fuzz) {
        let msg = match f {
            Fuzz::Text(t) => Message::Text(t.clone().into()),
            Fuzz::Binary(b) => Message::Binary(b.clone().into()),
        };
        self.socket.send(msg).await.unwrap();
    }

    /// The next frame within [`BOUND`]: `Ok(Some(json))`, `Ok(None)` on close, `Err` on a hang
    /// or a frame that is not a JSON text frame.
    async fn next(&mut self) -> Result<Option<Value>, String> {
        loop {
            let msg = tokio::time::timeout(BOUND, self.socket.next())
                .await
                .map_err(|_| format!("no frame and no close within {BOUND:?}"))?;
            return match msg {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => Ok(None),
                Some(Ok(Message::Text(t))) => serde_json::from_str(&t)
                    .map(Some)
                    .map_err(|e| format!("a text frame that is not JSON ({e}): {t}")),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(other)) => Err(format!("an unexpected frame: {other:?}")),
            };
        }
    }
}

/// Checks one server frame: JSON with a known type, never an internal error.
fn well_formed(f: &Value) -> Result<(), TestCaseError> {
    let t = f["type"].as_str().unwrap_or("");
    prop_assert!(SERVER_TYPES.contains(&t), "unknown frame type: {}", f);
    if t == "error" {
        prop_assert!(f["code"].is_string() && f["message"].is_string(), "{}", f);
        prop_assert_ne!(
            &f["code"],
            "INTERNAL",
            "bad input answered as an internal error: {}",
            f
        );
    }
    Ok(())
}

async fn hello(w: &mut Ws, worker_id: &str, queue: &str) -> Value {
    w.send(&Fuzz::Text(
        json!({"type": "hello", "worker_id": worker_id, "capacity": 2, "queue_ids": [queue],
               "handlers": [], "concurrency_keys": true, "resume": []})
        .to_string(),
    ))
    .await;
    w.next().await.unwrap().expect("an answer to hello")
}

/// One frame on a session that has said hello, followed by a probe (a renew of an attempt id no
/// one holds) whose answer marks the end of what the frame caused.
async fn after_hello(w: &mut Ws, f: &Fuzz, marker: u64) -> Result<(), TestCaseError> {
    w.send(f).await;
    w.send(&Fuzz::Text(
        json!({"type": "lease.renew", "attempt_ids": [marker]}).to_string(),
    ))
    .await;
    let mut caused = Vec::new();
    loop {
        let frame = w
            .next()
            .await
            .map_err(TestCaseError::fail)?
            .ok_or_else(|| TestCaseError::fail("the server closed an open session"))?;
        well_formed(&frame)?;
        if frame["type"] == "lease.renewed" && frame["attempts"][0]["attempt_id"] == marker {
            prop_assert_eq!(&frame["attempts"][0]["rejected"], "NOT_FOUND");
            break;
        }
        caused.push(frame);
    }
    match kind(f) {
        Kind::Garbage => {
            prop_assert_eq!(caused.len(), 1, "one answer: {:?}", caused);
            prop_assert_eq!(
                (&caused[0]["type"], &caused[0]["code"]),
                (&json!("error"), &json!("INVALID_ARGUMENT"))
            );
        }
        Kind::Hello => {
            prop_assert_eq!(caused.len(), 1, "one answer: {:?}", caused);
            prop_assert_eq!(&caused[0]["code"], "STATE_CONFLICT");
        }
        // A first `drain` answers `drained`, a repeated one nothing; everything else once.
        Kind::Message => prop_assert!(caused.len() <= 1, "{:?}", caused),
    }
    Ok(())
}

/// One frame as the first frame of a fresh connection.
async fn before_hello(api: &Api, f: &Fuzz, case: u64) -> Result<(), TestCaseError> {
    let q = api.fixture.queue_id.clone();
    let mut w = Ws::connect(&api.server.url, &api.fixture.token).await;
    w.send(f).await;
    let first = w
        .next()
        .await
        .map_err(TestCaseError::fail)?
        .ok_or_else(|| TestCaseError::fail("closed without an answer"))?;
    well_formed(&first)?;
    match kind(f) {
        Kind::Hello if first["type"] == "welcome" => {}
        Kind::Hello => {
            // A refused hello ends the connection (after saying why).
            prop_assert_eq!(&first["type"], "error");
            prop_assert_eq!(w.next().await.map_err(TestCaseError::fail)?, None);
            return Ok(());
        }
        Kind::Garbage | Kind::Message => {
            prop_assert_eq!(
                (&first["type"], &first["code"]),
                (&json!("error"), &json!("INVALID_ARGUMENT"))
            );
            // The connection stays usable: a proper hello is welcomed.
            let welcome = hello(&mut w, &format!("pre-{case}"), &q).await;
            prop_assert_eq!(&welcome["type"], "welcome", "{}", welcome);
        }
    }
    // A session is open now; it still answers.
    after_hello(&mut w, &Fuzz::Text("{}".into()), u64::MAX - case).await
}

#[test]
fn the_worker_socket_answers_every_frame_and_the_server_stays_healthy() {
    let rt = runtime();
    let api = rt.block_on(Api::start());
    let q = api.fixture.queue_id.clone();
    let started = std::time::Instant::now();

    // Frames on an open session.
    let session = RefCell::new(rt.block_on(async {
        let mut w = Ws::connect(&api.server.url, &api.fixture.token).await;
        assert_eq!(hello(&mut w, "fuzz", &q).await["type"], "welcome");
        w
    }));
    let case = std::cell::Cell::new(0u64);
    runner(600)
        .run(&fuzz_frame(q.clone()), |f| {
            case.set(case.get() + 1);
            let marker = 9_000_000_000_000_000 + case.get();
            rt.block_on(after_hello(&mut session.borrow_mut(), &f, marker))
        })
        .unwrap();

    // Frames as the first frame of a connection.
    runner(200)
        .run(&fuzz_frame(q.clone()), |f| {
            case.set(case.get() + 1);
            rt.block_on(before_hello(&api, &f, case.get()))
        })
        .unwrap();
    eprintln!("{} frames in {:?}", case.get(), started.elapsed());

    // The server is alive and well: health, a fresh session, and no panic in its log.
    rt.block_on(async {
        let health = api
            .http
            .get(format!("{}/healthz", api.server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status().as_u16(), 200);
        let mut fresh = Ws::connect(&api.server.url, &api.fixture.token).await;
        let welcome = hello(&mut fresh, "fresh", &q).await;
        assert_eq!(welcome["type"], "welcome", "{welcome}");
        // The old session answers too.
        after_hello(&mut session.borrow_mut(), &Fuzz::Text("x".into()), 1)
            .await
            .unwrap();
    });
    let log = std::fs::read_to_string(&api.server.log).unwrap_or_default();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
}

#[test]
fn a_hello_with_a_capacity_beyond_int_is_invalid_not_internal() {
    let rt = runtime();
    let api = rt.block_on(Api::start());
    rt.block_on(async {
        for capacity in [0u64, 10_001, i32::MAX as u64 + 1, u32::MAX as u64] {
            let mut w = Ws::connect(&api.server.url, &api.fixture.token).await;
            w.send(&Fuzz::Text(
                json!({"type": "hello", "worker_id": "w", "capacity": capacity,
                       "queue_ids": [api.fixture.queue_id], "handlers": [],
                       "concurrency_keys": true, "resume": []})
                .to_string(),
            ))
            .await;
            let r = w.next().await.unwrap().expect("an answer");
            assert_eq!(
                (&r["type"], &r["code"]),
                (&json!("error"), &json!("INVALID_ARGUMENT")),
                "capacity {capacity}: {r}"
            );
            assert!(
                r["message"].as_str().unwrap().contains("capacity"),
                "names the field: {r}"
            );
        }
    });
}
