"""examples/keyed_concurrency.py against a real server prints exactly the Rust example's lines."""

import os
import subprocess
import sys

from conftest import PACKAGE


EXPECTED = (
    "queues=2 completed=2 tokens_increasing=true\n"
    "resource_writes=2 stale_write_rejected=true worker_drained=true\n"
)


def test_the_keyed_concurrency_example_prints_the_two_lines(orbit):
    out = subprocess.run(
        [sys.executable, str(PACKAGE / "examples" / "keyed_concurrency.py")],
        env=dict(os.environ, ORBIT_URL=orbit.url, ORBIT_CREDENTIALS_FILE=str(orbit.credentials_file)),
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == EXPECTED


def test_the_example_without_configuration_exits_2():
    env = {k: v for k, v in os.environ.items() if k not in ("ORBIT_URL", "ORBIT_CREDENTIALS_FILE")}
    out = subprocess.run(
        [sys.executable, str(PACKAGE / "examples" / "keyed_concurrency.py")],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 2 and "ORBIT_URL" in out.stderr
