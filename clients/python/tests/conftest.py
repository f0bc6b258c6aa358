"""Fixtures: a fresh database per test on MariaDB (ORBIT_TEST_MYSQL_DSN, default
mysql://root@127.0.0.1:3306), the extension installed with ``orbit migrate up``, a credential from
``orbit admin bootstrap --worker-access``, and a real ``orbit serve`` (ORBIT_BIN, default
target/debug/orbit; build it with ``cargo build``)."""

from __future__ import annotations

import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Optional
from urllib.parse import urlparse

import pymysql
import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = Path(__file__).resolve().parents[1]
ORBIT_BIN = os.environ.get("ORBIT_BIN", str(ROOT / "target" / "debug" / "orbit"))
BASE_DSN = os.environ.get("ORBIT_TEST_MYSQL_DSN", "mysql://root@127.0.0.1:3306").rstrip("/")


def mysql_args(database: Optional[str] = None) -> dict[str, Any]:
    u = urlparse(BASE_DSN)
    args: dict[str, Any] = {
        "host": u.hostname or "127.0.0.1",
        "port": u.port or 3306,
        "user": u.username or "root",
        "password": u.password or "",
        "autocommit": True,
    }
    if database:
        args["database"] = database
    return args


def sql(database: Optional[str], statement: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = pymysql.connect(**mysql_args(database))
    try:
        with conn.cursor() as cur:
            cur.execute(statement, params or None)
            return list(cur.fetchall())
    finally:
        conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Orbit:
    """A database with the extension, a credential, and ``orbit serve`` on a fixed port (so a
    restarted server is where its workers expect it)."""

    def __init__(self, tmp: Path, lease_seconds: int = 30) -> None:
        if not os.access(ORBIT_BIN, os.X_OK):
            pytest.fail(f"{ORBIT_BIN} is missing: run `cargo build` first (or set ORBIT_BIN)")
        self.db = f"orbit_py_{secrets.token_hex(6)}"
        self.dsn = f"{BASE_DSN}/{self.db}"
        self.lease_seconds = lease_seconds
        self.tmp = tmp
        sql(None, f"CREATE DATABASE `{self.db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
        self._run_cli("migrate", "up")
        self.credentials_file = tmp / "orbit.credentials.json"
        self._run_cli(
            "admin", "bootstrap", "--application", "py", "--namespace", "default",
            "--environment", "test", "--queue", "initial", "--worker-access",
            "--output", str(self.credentials_file),
        )
        creds = json.loads(self.credentials_file.read_text())
        self.token: str = creds["token"]
        self.queue_id: str = creds["queue_id"]
        self.addr = f"127.0.0.1:{free_port()}"
        self.url = f"http://{self.addr}"
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log = tmp / "orbit-serve.log"
        self.start()

    def _run_cli(self, *args: str) -> None:
        env = dict(os.environ, ORBIT_MYSQL_DSN=self.dsn)
        out = subprocess.run([ORBIT_BIN, *args], env=env, capture_output=True, timeout=120)
        assert out.returncode == 0, f"orbit {' '.join(args)}: {out.stderr.decode()}"

    def start(self) -> None:
        env = dict(os.environ, ORBIT_MYSQL_DSN=self.dsn, RUST_LOG="warn")
        log = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [ORBIT_BIN, "serve", "--addr", self.addr, "--pool-size", "8",
             "--lease-seconds", str(self.lease_seconds)],
            env=env, stdout=subprocess.PIPE, stderr=log,
        )
        log.close()
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline().decode() if ready else ""
        if not line.startswith("listening on "):
            self.proc.kill()
            raise AssertionError(f"orbit serve did not start: {line!r} {self.log.read_text()}")
        out = self.proc.stdout
        threading.Thread(target=lambda: [None for _ in out], daemon=True).start()

    def kill(self) -> None:
        """SIGKILL, like a crash."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        self.kill()
        # The port is free again at once (the server set SO_REUSEADDR); retry briefly if not.
        deadline = time.monotonic() + 10
        while True:
            try:
                self.start()
                return
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def expire_lease(self, attempt_id: int) -> None:
        """Moves an attempt's lease and permits past their expiry (a pause longer than the lease)."""
        sql(
            self.db,
            "UPDATE orbit_attempt SET lease_expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE id = %s",
            attempt_id,
        )

    def close(self) -> None:
        self.kill()
        sql(None, f"DROP DATABASE IF EXISTS `{self.db}`")


@pytest.fixture
def orbit(tmp_path: Path) -> Iterator[Orbit]:
    o = Orbit(tmp_path)
    yield o
    o.close()


@pytest.fixture
def orbit_short_lease(tmp_path: Path) -> Iterator[Orbit]:
    """A server with a 3 s lease (renewals every second)."""
    o = Orbit(tmp_path, lease_seconds=3)
    yield o
    o.close()


@pytest.fixture
def resource_db() -> Iterator[str]:
    """A resource database with the shipped fence installed (generated-sql/fence/install.sql)."""
    name = f"orbit_py_res_{secrets.token_hex(6)}"
    sql(None, f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    args = mysql_args()
    with open(ROOT / "generated-sql" / "fence" / "install.sql", "rb") as f:
        out = subprocess.run(
            ["mariadb", "-h", args["host"], "-P", str(args["port"]), "-u", args["user"],
             *([f"-p{args['password']}"] if args["password"] else []), name],
            stdin=f, capture_output=True, timeout=60,
        )
    assert out.returncode == 0, out.stderr.decode()
    yield name
    sql(None, f"DROP DATABASE IF EXISTS `{name}`")


class Proc:
    """A Python worker process (tests/worker_proc.py) whose output lines arrive on a queue."""

    def __init__(self, *args: str, env: Optional[dict[str, str]] = None) -> None:
        import queue

        self.lines: "queue.Queue[str]" = queue.Queue()
        self.proc = subprocess.Popen(
            [sys.executable, str(PACKAGE / "tests" / "worker_proc.py"), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, **(env or {})),
        )
        assert self.proc.stdout is not None
        out = self.proc.stdout

        def pump() -> None:
            for raw in out:
                self.lines.put(raw.decode().rstrip("\n"))

        threading.Thread(target=pump, daemon=True).start()

    def expect(self, prefix: str, timeout: float = 20) -> str:
        import queue

        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.01, left))
            except queue.Empty:
                err = self.proc.stderr.read().decode() if self.proc.poll() is not None else ""
                raise AssertionError(f"no line starting {prefix!r} within {timeout} s {err}")
            if line.startswith(prefix):
                return line

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def wait(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
