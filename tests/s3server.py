"""A real S3 API server for the tests: ``moto[server]`` (PyPI) in its own process on 127.0.0.1, with conditional
writes (``If-None-Match: *`` answered 412 when the key exists). Started by the test session itself.

moto checks ``If-None-Match`` and then stores the object, in threads of its own: two concurrent conditional puts of
one key can both pass the check (measured: 7 of 200 eight-writer races had two winners on a loaded machine). S3
makes the check and the write one atomic step, so the server started here does too: its object puts take a lock.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "lakegate-test", "AWS_SECRET_ACCESS_KEY": "lakegate-test-secret",
               "AWS_REGION": "us-east-1"}
BUCKET = "lake"


_MOTO_WITH_ATOMIC_PUTS = """
import sys
import threading

from moto.s3.responses import S3Response
from moto.server import main

_put = S3Response.put_object
_lock = threading.Lock()


def put_object(self):
    with _lock:  # the If-None-Match check and the write, as one step
        return _put(self)


S3Response.put_object = put_object
main(sys.argv[1:])
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class S3Server:
    """A running moto S3 server."""

    process: subprocess.Popen[bytes]
    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        """The ``AWS_*`` environment that points a client at this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    @property
    def storage_options(self) -> dict[str, str]:
        """The same as hudi-rs / object_store storage options."""
        return {"aws_endpoint_url": self.endpoint, "aws_allow_http": "true", "aws_region": CREDENTIALS["AWS_REGION"],
                "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}

    def create_bucket(self, name: str = BUCKET) -> None:
        """Create a bucket (a PUT on its name; idempotent)."""
        req = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def table_uri(self, name: str = "t") -> str:
        """A fresh table location in the test bucket."""
        return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:10]}"

    def stop(self) -> None:
        """Stop the server process."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_s3_server(timeout_s: float = 30.0, log_path: Path | None = None) -> S3Server:
    """Start ``moto.server`` (conditional puts made atomic) on a free port of 127.0.0.1 and wait until it answers;
    with ``log_path``, its output (werkzeug's access log: one line per request, unbuffered) goes there."""
    port = _free_port()
    cmd = [sys.executable, "-c", _MOTO_WITH_ATOMIC_PUTS, "-H", "127.0.0.1", "-p", str(port)]
    env = {**os.environ, **CREDENTIALS, "PYTHONUNBUFFERED": "1"}
    if log_path is None:
        process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    else:
        with log_path.open("wb") as log:  # the child keeps its own descriptor
            process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto S3 server exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                server = S3Server(process, f"http://127.0.0.1:{port}")
                server.create_bucket()
                return server
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"moto S3 server did not answer on 127.0.0.1:{port} in {timeout_s}s")
