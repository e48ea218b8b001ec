"""``lakegate registry serve`` as a real process: serves, stops on SIGINT, keeps its data across restarts."""

from __future__ import annotations

import base64
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from schema_registry.server.auth import Authenticator
from tests.schema_registry.conftest import field, free_port, record

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "governance.cli", "registry", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_ready(url: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(url + "/", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("server did not start")


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    return out


def test_cli_serve_restart_keeps_data(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    store = f"sqlite:///{tmp_path / 'registry.db'}"
    schema = record("Trip", field("id", "string"))
    proc = start("serve", "--host", "127.0.0.1", "--port", str(port), "--store", store)
    try:
        wait_ready(url, proc)
        assert httpx.post(f"{url}/subjects/trips-value/versions", json={"schema": schema}).json()["id"] == 1
    finally:
        stop(proc)
    assert proc.returncode == 0
    proc = start("serve", "--port", str(port), "--store", store)
    try:
        wait_ready(url, proc)
        assert httpx.get(f"{url}/subjects/trips-value/versions/latest").json()["id"] == 1
    finally:
        stop(proc)


def test_cli_bad_store_exits_with_a_clear_error() -> None:
    proc = start("serve", "--port", str(free_port()), "--store", "mysql://nowhere/x")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2 and "unsupported store URL" in out


def test_cli_hash_password_makes_a_usable_auth_entry(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "governance.cli", "registry", "hash-password"], cwd=ROOT,
                         input="s3cret\n", capture_output=True, text=True, check=True).stdout.strip()
    config = tmp_path / "auth.toml"
    config.write_text(f'[[users]]\nname = "ops"\npassword_hash = "{out}"\nrole = "admin"\n')
    principal = Authenticator.from_file(config).authenticate("Basic " + base64.b64encode(b"ops:s3cret").decode())
    assert principal.name == "ops"


def test_serve_keeps_the_collector_out_of_the_way() -> None:
    """What ``serve`` does to the cyclic collector before listening: start-up frozen, full collections rarer."""
    code = ("import gc; from schema_registry.server import FULL_COLLECTION_THRESHOLD, quiet_collector; "
            "quiet_collector(); assert gc.get_freeze_count() > 10_000, gc.get_freeze_count(); "
            "assert gc.get_threshold()[2] == FULL_COLLECTION_THRESHOLD == 100, gc.get_threshold(); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
