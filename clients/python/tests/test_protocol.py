"""The assignment checks and result limits, without a server (mirrors sdk/src/protocol.rs)."""

import pytest

from orbit_client.protocol import (
    MAX_FRAME_BYTES,
    MAX_RESULT_DEPTH,
    AssignmentCheck,
    BadSlot,
    BadToken,
    ChangedAssignment,
    KeyNotDeclared,
    MissingToken,
    SlotWithoutKey,
    TokenWithoutKey,
    result_frame,
)

_OMITTED = object()


def assign(key=None, token=None, attempt_id=7, slot=_OMITTED):
    task = {"id": 1, "queue_id": "q", "state": "LEASED", "handler": "h", "handler_version": "v1",
            "payload_version": "v1", "payload": {}}
    if key is not None:
        task["concurrency_key"] = key
    frame = {"type": "task.assign", "attempt_id": attempt_id, "attempt_no": 1,
             "lease_expires_at": "2026-01-01T00:00:00Z", "task": task}
    if token is not None:
        frame["concurrency_token"] = token
    if slot is not _OMITTED:
        frame["key_slot"] = slot
    return frame


def test_accepts_a_keyed_assignment_with_a_decimal_string_token():
    a = AssignmentCheck(True).check(assign("k", "18446744073709551615"))
    assert a is not None
    assert (a.concurrency_key, a.concurrency_token) == ("k", 2**64 - 1)


def test_a_keyed_assignment_has_a_slot_missing_means_zero():
    a = AssignmentCheck(True).check(assign("k", "5", slot=3))
    assert a is not None and (a.concurrency_token, a.key_slot) == (5, 3)
    a = AssignmentCheck(True).check(assign("k", "5"))
    assert a is not None and a.key_slot == 0, "a server that predates slots omits it"
    a = AssignmentCheck(True).check(assign("k", "5", slot=None))
    assert a is not None and a.key_slot == 0, "null is omitted, as for the token"
    a = AssignmentCheck(True).check(assign("k", "5", slot=2**32 - 1))
    assert a is not None and a.key_slot == 2**32 - 1
    a = AssignmentCheck(True).check(assign(None, None))
    assert a is not None and a.key_slot is None, "an unkeyed task has no slot"


def test_refuses_a_stray_or_malformed_slot():
    c = AssignmentCheck(True)
    with pytest.raises(SlotWithoutKey):
        c.check(assign(None, None, slot=0))
    for bad in ["1", -1, 1.5, 1.0, 2**32, True, [0]]:
        with pytest.raises(BadSlot):
            c.check(assign("k", "5", slot=bad))


def test_refuses_each_protocol_error():
    c = AssignmentCheck(True)
    with pytest.raises(MissingToken):
        c.check(assign("k", None))
    with pytest.raises(TokenWithoutKey):
        c.check(assign(None, "5"))
    for bad in ["0", "-1", "1.5", "18446744073709551616", 5, "", " 5", "５"]:
        with pytest.raises(BadToken):
            c.check(assign("k", bad))
    undeclared = AssignmentCheck(False)
    with pytest.raises(KeyNotDeclared):
        undeclared.check(assign("k", "1"))
    assert undeclared.check(assign(None, None)) is not None, "unkeyed tasks are fine"


def test_a_repeat_may_not_change_key_token_or_slot():
    c = AssignmentCheck(True)
    assert c.check(assign("k", "3")) is not None
    assert c.check(assign("k", "3")) is None, "an identical repeat is ignored"
    with pytest.raises(ChangedAssignment):
        c.check(assign("k", "4"))
    with pytest.raises(ChangedAssignment):
        c.check(assign("other", "3"))
    assert c.check(assign("k", "3", slot=0)) is None, "an explicit slot 0 is the omitted one"
    with pytest.raises(ChangedAssignment):
        c.check(assign("k", "3", slot=1))


def test_a_result_the_server_cannot_read_becomes_a_failure_with_the_reason():
    deep = 1
    for _ in range(MAX_RESULT_DEPTH):
        deep = [deep]
    assert result_frame(7, "succeeded", False, deep, None)["outcome"] == "succeeded"
    refused = result_frame(7, "succeeded", False, [deep], None)
    assert (refused["outcome"], refused["retryable"], refused["output"]) == ("failed", False, None)
    assert refused["error"]["code"] == "INVALID_ARGUMENT"
    assert refused["error"]["message"].startswith("output nests")
    assert result_frame(7, "failed", True, None, {"d": deep})["error"]["message"].startswith(
        "error nests")
    big = result_frame(7, "succeeded", False, "x" * MAX_FRAME_BYTES, None)
    assert "bytes" in big["error"]["message"]
