"""A schema registry server running in a background thread of this process (the demo, notebooks, tests).

``with EmbeddedRegistry(store_url="sqlite:///registry.db") as reg: RegistryClient(reg.url)`` starts the real
server (:func:`schema_registry.server.create_app` under uvicorn) on a free port of 127.0.0.1, waits until it accepts
requests, and stops it on exit. It is the same server ``lakegate registry serve`` runs, only in a thread.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from types import TracebackType
from typing import Any

logger = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class EmbeddedRegistry:
    """A registry server in a daemon thread on ``host`` (default 127.0.0.1).

    Args:
        store_url: the store (``sqlite:///path/registry.db``; a PostgreSQL URL works too).
        port: the TCP port (0: a free one).
        host: the interface to bind.
        start_timeout: seconds to wait for the server to accept requests.
        **settings: more :class:`schema_registry.settings.Settings` fields (``default_compatibility``...).

    Attributes:
        url: ``http://host:port`` once started.
    """

    def __init__(self, store_url: str, *, port: int = 0, host: str = "127.0.0.1", start_timeout: float = 20.0,
                 **settings: Any) -> None:
        self.store_url = store_url
        self.host = host
        self.port = port or free_port(host)
        self.start_timeout = start_timeout
        self.extra = settings
        self.url = f"http://{host}:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> EmbeddedRegistry:
        """Start the server and wait until it listens.

        Raises:
            RuntimeError: the server did not start within ``start_timeout`` (or its thread died).
        """
        import uvicorn

        from schema_registry.server import create_app
        from schema_registry.settings import Settings

        settings = Settings(host=self.host, port=self.port, store_url=self.store_url, **self.extra)
        app = create_app(settings)
        self._server = uvicorn.Server(uvicorn.Config(app, host=self.host, port=self.port, log_level="warning",
                                                     lifespan="on"))
        self._thread = threading.Thread(target=self._server.run, name="lakegate-embedded-registry", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the embedded schema registry did not start on {self.url}")
            time.sleep(0.02)
        logger.info("embedded schema registry on %s (store %s)", self.url, self.store_url)
        return self

    def stop(self) -> None:
        """Ask the server to exit and wait for its thread (idempotent)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=15)
        self._server = None
        self._thread = None

    def __enter__(self) -> EmbeddedRegistry:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


__all__ = ["EmbeddedRegistry", "free_port"]
