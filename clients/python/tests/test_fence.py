"""The fences' per-slot registers (keys several attempts hold at once), in memory and on MariaDB
(the shipped generated-sql/fence procedures); mirrors tests/fence.rs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conftest import mysql_args, sql
from orbit_client import Accepted, Duplicate, FenceInvalid, FenceWrite, InMemoryFence, MySqlFence, Stale
from orbit_client.fence import KEY_MAX_BYTES


def fences(resource_db: str) -> list[Any]:
    return [MySqlFence("py-test", **mysql_args(resource_db)), InMemoryFence()]


def write(key: str, slot: int, token: int, op: str, value: Any = "") -> FenceWrite:
    return FenceWrite("py", key, token, op, value if value != "" else f"v{token}", slot=slot)


def test_each_slot_of_a_key_is_its_own_register(resource_db: str) -> None:
    async def run(fence: Any) -> None:
        # Live holders: slot 1 with token 8 writes before slot 0 with token 7.
        assert await fence.write(write("acct/1", 1, 8, "b")) == Accepted()
        assert await fence.write(write("acct/1", 0, 7, "a")) == Accepted()
        assert await fence.write(write("acct/1", 0, 7, "a")) == Duplicate()
        assert await fence.read_slot("py", "acct/1", 0) == (7, "v7")
        assert await fence.read_slot("py", "acct/1", 1) == (8, "v8")
        assert await fence.read_slot("py", "acct/1", 2) is None
        assert await fence.read("py", "acct/1") is None, "the plain register is another one"
        assert await fence.write(FenceWrite("py", "acct/1", 1, "plain", "p")) == Accepted()
        assert await fence.read("py", "acct/1") == (1, "p")

    for fence in fences(resource_db):
        asyncio.run(run(fence))
    keys = [r[0] for r in sql(resource_db, "SELECT resource_key FROM orbit_fence_register ORDER BY resource_key")]
    assert keys == [b"acct/1", b"acct/1\x1f0", b"acct/1\x1f1"]


def test_a_stale_holder_of_a_slot_is_refused_once_the_slot_s_newer_holder_wrote(resource_db: str) -> None:
    async def run(fence: Any) -> list[Any]:
        return [
            await fence.write(write("obj", 0, 3, "t3/a", "x")),
            await fence.write(write("obj", 1, 4, "t4/a", "y")),
            # Slot 0 goes to token 5 (token 3 lost its lease), which touches first.
            await fence.write(write("obj", 0, 5, "t5/touch", None)),
            await fence.read_slot("py", "obj", 0),
            await fence.write(write("obj", 0, 3, "t3/late", "lost?")),
            await fence.write(write("obj", 1, 4, "t4/b", "y y")),
        ]

    for fence in fences(resource_db):
        assert asyncio.run(run(fence)) == [
            Accepted(), Accepted(), Accepted(), (5, "x"), Stale(5), Accepted(),
        ]


def test_a_bad_slot_or_a_key_too_long_for_a_slot_register_is_invalid(resource_db: str) -> None:
    fits, too_long = "k" * (KEY_MAX_BYTES - 4), "k" * (KEY_MAX_BYTES - 3)

    async def run(fence: Any) -> None:
        for slot in (1000, -1):
            with pytest.raises(FenceInvalid):
                await fence.write(write("k", slot, 1, "op"))
            with pytest.raises(FenceInvalid):
                await fence.read_slot("py", "k", slot)
        with pytest.raises(FenceInvalid):
            await fence.write(write("", 0, 1, "op"))
        with pytest.raises(FenceInvalid):
            await fence.write(write(too_long, 999, 1, "op"))
        with pytest.raises(FenceInvalid):
            await fence.read_slot("py", too_long, 999)
        assert await fence.write(write(fits, 999, 1, "op")) == Accepted()
        assert await fence.read_slot("py", fits, 999) == (1, "v1")

    for fence in fences(resource_db):
        asyncio.run(run(fence))
