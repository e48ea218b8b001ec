"""Fixtures of the registry tests: stores (SQLite and PostgreSQL) and live servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from schema_registry.server import create_app
from schema_registry.server.auth import Authenticator
from schema_registry.settings import Settings

PG_ENV = "LAKEGATE_TEST_PG_URL"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "avro-compat"


def pg_base_url() -> str | None:
    """The PostgreSQL URL of the test server, or None when ``LAKEGATE_TEST_PG_URL`` is unset."""
    return os.environ.get(PG_ENV) or None


def _psycopg_dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


class PgSchema:
    """A fresh PostgreSQL schema; its URL makes the store create and use its tables there."""

    def __init__(self, base: str) -> None:
        import psycopg

        self.base = base
        self.name = f"lakegate_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(_psycopg_dsn(base), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.name}"')
        sep = "&" if "?" in base else "?"
        self.url = f"{base}{sep}options=-csearch_path%3D{self.name}"

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(_psycopg_dsn(self.base), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty store, once per backend (PostgreSQL skipped when LAKEGATE_TEST_PG_URL is unset)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    base = pg_base_url()
    if base is None:
        pytest.skip(f"PostgreSQL store tests need {PG_ENV} (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test); "
                    ".ci/run sets it")
    schema = PgSchema(base)
    try:
        yield schema.url
    finally:
        schema.drop()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """A real uvicorn server in a thread on 127.0.0.1."""

    def __init__(self, settings: Settings, *, authenticator: Authenticator | None = None) -> None:
        self.settings = settings.model_copy(update={"host": "127.0.0.1", "port": settings.port or free_port()})
        self.app = create_app(self.settings, authenticator=authenticator)
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.settings.port,
                                                     log_level="warning", lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, name="registry-test-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the registry test server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.settings.port}"
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def stop(self) -> None:
        self.http.close()
        self._server.should_exit = True
        self._thread.join(timeout=15)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    """A fresh server on a fresh SQLite store."""
    live = LiveServer(Settings(store_url=f"sqlite:///{tmp_path / 'registry.db'}", port=0))
    yield live
    live.stop()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for a whole module (tests use their own subject names)."""
    db = tmp_path_factory.mktemp("registry") / "registry.db"
    live = LiveServer(Settings(store_url=f"sqlite:///{db}", port=0))
    yield live
    live.stop()


@pytest.fixture
def subject() -> str:
    """A subject name no other test uses."""
    return f"s-{uuid.uuid4().hex[:10]}"


def record(name: str, *fields: dict[str, Any], **extra: Any) -> str:
    """The JSON text of a record schema."""
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    """A record field."""
    return {"name": name, "type": type_, **extra}


def body(schema: str, **extra: Any) -> dict[str, Any]:
    """A register request body."""
    return {"schema": schema, **extra}


def load_vectors(name: str) -> list[dict[str, Any]]:
    """A vector file of tests/fixtures/avro-compat."""
    data: list[dict[str, Any]] = json.loads((FIXTURES / name).read_text())
    return data
