"""HTTP proxies in front of the moto S3 server of the tests, on 127.0.0.1, serving in a thread of the test process:

- :class:`S3FaultProxy` fails a given fraction of requests the way S3 and networks fail, from a seeded RNG: a 503
  ``SlowDown`` or a 500 ``InternalError`` (with S3's XML error body) without forwarding the request, a connection
  reset before forwarding, or — the worst case for a writer — the request forwarded (so it took effect) and the
  connection then closed without an answer. The fraction is an attribute, changed at run time
  (``proxy.fail_fraction = 1.0``); every request and what became of it is counted.
- :class:`UnconditionalS3Proxy`, an S3-compatible store that ignores conditional writes: it drops ``If-None-Match``
  from every request (as some S3-compatible stores do), so that a second "create-if-absent" put silently overwrites.

Everything else passes through unchanged.
"""

from __future__ import annotations

import collections
import http.client
import random
import re
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}

FAULTS = ("slowdown", "internal", "reset", "lost")
"""What a failed request becomes: ``slowdown`` (503 SlowDown), ``internal`` (500 InternalError), ``reset`` (the
connection reset, nothing forwarded), ``lost`` (forwarded to the server, then the connection closed unanswered)."""

_ERRORS = {"slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
           "internal": (500, "Internal Server Error", "InternalError",
                        "We encountered an internal error. Please try again.")}


def _handler(proxy: S3Proxy) -> type[BaseHTTPRequestHandler]:
    target = urlparse(proxy.upstream)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return bytes(out)
                    out += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _upstream(self, body: bytes) -> tuple[http.client.HTTPResponse, bytes]:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in _HOP_BY_HOP
                       and not (proxy.drop_if_none_match and k.lower() == "if-none-match")}
            if body or self.command in ("PUT", "POST"):
                headers["Content-Length"] = str(len(body))
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                return resp, resp.read()
            finally:
                conn.close()

        def _drop(self, *, reset: bool) -> None:
            """Close the client's connection without an answer (``reset``: with a TCP RST, else a FIN)."""
            self.close_connection = True
            if reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)

        def _error(self, kind: str) -> None:
            status, reason, code, message = _ERRORS[kind]
            data = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
                    f"<RequestId>lakegate-fault-proxy</RequestId></Error>").encode()
            self.send_response(status, reason)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(0 if self.command == "HEAD" else len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def _forward(self) -> None:
            body = self._body()
            fault = proxy.choose_fault(self.command, self.path)
            proxy.record(self.command, self.path, fault or "ok")
            if fault in _ERRORS:
                return self._error(fault)
            if fault == "reset":
                return self._drop(reset=True)
            resp, data = self._upstream(body)
            if fault == "lost":
                return self._drop(reset=False)
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP_BY_HOP and (k.lower() != "content-length" or self.command == "HEAD"):
                    self.send_header(k, v)  # a HEAD answers the object's length, with no body
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            return None

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    return Forward


class S3Proxy:
    """A proxy in front of ``upstream`` (an S3 endpoint), serving on a free port of 127.0.0.1 in a thread until
    :meth:`stop`.

    Attributes:
        endpoint: where clients reach the proxy.
        fail_fraction: the fraction of requests that fail (0 to 1; read on every request, so it can be changed at run
            time).
        faults: the kinds of failure drawn from (:data:`FAULTS`).
        drop_if_none_match: forward every request without ``If-None-Match`` (a store without conditional writes).
        counts: how many requests ended how (``ok`` or a fault kind).
        requests: every request as (method, path, outcome), in arrival order.
    """

    def __init__(self, upstream: str, *, fail_fraction: float = 0.0, faults: tuple[str, ...] = FAULTS,
                 seed: int = 0, drop_if_none_match: bool = False) -> None:
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {FAULTS}")
        self.upstream = upstream
        self.fail_fraction = fail_fraction
        self.faults = faults
        self.drop_if_none_match = drop_if_none_match
        self.counts: collections.Counter[str] = collections.Counter()
        self.requests: list[tuple[str, str, str]] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._planned: list[tuple[str, str | None, str]] = []
        self._seen = 0
        self._down_at: int | None = None
        self._down_from: tuple[str | None, re.Pattern[str], int] | None = None
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), name="s3-proxy",
                                        daemon=True)
        self._thread.start()

    def fail_next(self, fault: str, *, method: str | None = None, path_contains: str = "", times: int = 1) -> None:
        """Fail the next ``times`` requests that match (``method``, a substring of the path) with ``fault``, whatever
        the fraction."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {FAULTS}")
        with self._lock:
            self._planned += [(fault, method, path_contains)] * times

    def down_after(self, requests: int) -> None:
        """Fail every request after the next ``requests`` ones (the store goes down) until :meth:`up`."""
        with self._lock:
            self._down_at = self._seen + requests

    def down_from(self, pattern: str, *, method: str | None = None, then: int = 0) -> None:
        """Fail every request from the first one whose path matches the regex ``pattern`` (and ``method``) on — or
        from ``then`` requests after it — until :meth:`up`."""
        with self._lock:
            self._down_from = (method, re.compile(pattern), then)

    def up(self) -> None:
        """The store answers again: no request fails (the fraction is 0)."""
        with self._lock:
            self._down_at = None
            self._down_from = None
            self.fail_fraction = 0.0

    def choose_fault(self, method: str, path: str) -> str | None:
        """The fault of a request, or None to forward it: any once the store is down (:meth:`down_after`), a
        planned one (:meth:`fail_next`) if it matches, else drawn (seeded: a run's sequence of draws repeats)."""
        with self._lock:
            self._seen += 1
            if self._down_from is not None:
                want, pattern, then = self._down_from
                if (want is None or want == method) and pattern.search(urlparse(path).path):
                    self._down_from = None
                    self._down_at = self._seen - 1 + then
            if self._down_at is not None and self._seen > self._down_at:
                return self._rng.choice(self.faults)
            for i, (fault, want, part) in enumerate(self._planned):
                if (want is None or want == method) and part in path:
                    del self._planned[i]
                    return fault
            if self._rng.random() >= self.fail_fraction:
                return None
            return self._rng.choice(self.faults)

    def record(self, method: str, path: str, outcome: str) -> None:
        """Count a request."""
        with self._lock:
            self.counts[outcome] += 1
            self.requests.append((method, path, outcome))

    def reset_counts(self) -> None:
        """Forget the requests counted so far."""
        with self._lock:
            self.counts.clear()
            self.requests.clear()

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


class S3FaultProxy(S3Proxy):
    """A proxy that fails ``fail_fraction`` of the requests (see :class:`S3Proxy`)."""


class UnconditionalS3Proxy(S3Proxy):
    """A proxy that drops ``If-None-Match``: an S3-compatible store that ignores conditional writes."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, drop_if_none_match=True)
