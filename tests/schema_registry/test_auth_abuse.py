"""Auth under abuse: unknown users cost a full check, failures lock out the failing client only, password checks
never hold up other requests, and a 405 says which methods are allowed.

These tests assert the mechanisms (which check ran, who is refused, what is served while checks are held); the
timings they lead to are measured by ``benchmarks/registry_auth.py``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from schema_registry.errors import AuthenticationError, SettingsError, ThrottledError, error_from_response
from schema_registry.server.auth import Authenticator, AuthLimits, Role, hash_password, hash_token
from schema_registry.server.passwords import hash_iterations, verify_password
from schema_registry.server.throttle import FailureThrottle, ThrottleLimits, client_key
from schema_registry.settings import Settings
from tests.schema_registry.conftest import LiveServer

pytestmark = pytest.mark.integration

ITERATIONS = 1000
PASSWORDS = {"reader": "r-secret", "writer": "w-secret", "admin": "a-secret"}
ROLES = {"reader": Role.READ, "writer": Role.WRITE, "admin": Role.ADMIN}
TOKEN = "tok-0123456789abcdef"
OTHER_HOST = "127.0.0.2"  # all of 127.0.0.0/8 is loopback on Linux: a second client address on this machine


class Checks:
    """A password check that records what it checked and can hold checks of one password until released."""

    def __init__(self, hold: str | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.hold = hold
        self.entered = threading.Event()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def __call__(self, password: str, stored: str) -> bool:
        with self._lock:
            self.calls.append((password, stored))
        if password == self.hold:
            self.entered.set()
            self.release.wait(30)
        return verify_password(password, stored)


class Clock:
    """A monotonic clock that tests move by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def users() -> dict[str, tuple[str, Role]]:
    return {u: (hash_password(p, iterations=ITERATIONS), ROLES[u]) for u, p in PASSWORDS.items()}


def authenticator(checks: Checks, *, clock: Callable[[], float] = time.monotonic,
                  throttle: ThrottleLimits | None = None, threads: int = 1, queue: int = 32) -> Authenticator:
    limits = AuthLimits(throttle=throttle or ThrottleLimits(), verify_threads=threads, verify_queue=queue)
    return Authenticator(users(), {hash_token(TOKEN): ("pipeline", Role.WRITE)}, limits=limits, verify=checks,
                         clock=clock)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def login(auth: Authenticator, user: str, password: str, client: str = "127.0.0.1") -> Role:
    return asyncio.run(auth.authenticate_request(basic(user, password), client)).role


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[[Authenticator], LiveServer]]:
    started: list[LiveServer] = []

    def start(auth: Authenticator) -> LiveServer:
        live = LiveServer(Settings(store_url=f"sqlite:///{tmp_path / f'r{len(started)}.db'}"), authenticator=auth)
        started.append(live)
        return live

    yield start
    for live in started:
        live.stop()


def client_from(live: LiveServer, host: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, timeout=30, transport=httpx.HTTPTransport(local_address=host))


# --- unknown users cost what known ones do -----------------------------------------------------------------------

def test_unknown_user_is_checked_against_a_hash_of_the_same_cost() -> None:
    checks = Checks()
    auth = authenticator(checks)
    for user in ("reader", "nobody"):
        with pytest.raises(AuthenticationError, match="wrong user name or password"):
            login(auth, user, "wrong")
    (pw_known, known), (pw_unknown, dummy) = checks.calls
    assert pw_known == pw_unknown == "wrong"
    assert dummy != known and hash_iterations(dummy) == hash_iterations(known) == ITERATIONS
    salt_and_digest = [tuple(len(base64.b64decode(x)) for x in h.split("$")[2:]) for h in (known, dummy)]
    assert salt_and_digest[0] == salt_and_digest[1] == (16, 32)
    # the same in the synchronous path tools use
    with pytest.raises(AuthenticationError):
        auth.authenticate(basic("nobody-else", "x"))
    assert checks.calls[-1][1] == dummy and len(checks.calls) == 3


def test_verified_pairs_are_remembered_failures_are_not() -> None:
    checks = Checks()
    auth = authenticator(checks, throttle=ThrottleLimits(failures_per_user=100, failures_per_client=100))
    assert login(auth, "writer", PASSWORDS["writer"]) is Role.WRITE
    assert login(auth, "writer", PASSWORDS["writer"], client="10.1.2.3") is Role.WRITE
    assert auth.authenticate(basic("writer", PASSWORDS["writer"])).role is Role.WRITE
    assert len(checks.calls) == 1  # a correct client pays for one check
    for _ in range(3):
        with pytest.raises(AuthenticationError):
            login(auth, "writer", "wrong")
    assert len(checks.calls) == 4  # every wrong password is checked in full
    # a user name with the password's start in it is another pair
    with pytest.raises(AuthenticationError):
        login(auth, "writer" + PASSWORDS["writer"][:2], PASSWORDS["writer"][2:])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_password_checks_run_at_the_lowest_cpu_priority() -> None:
    seen: list[int] = []

    def check(password: str, stored: str) -> bool:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return verify_password(password, stored)

    auth = Authenticator(users(), {}, verify=check)
    with pytest.raises(AuthenticationError):
        login(auth, "reader", "wrong")
    assert seen == [19]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < 19  # the caller's own priority is untouched


def test_bearer_tokens_need_no_password_check() -> None:
    checks = Checks()
    auth = authenticator(checks)
    principal = asyncio.run(auth.authenticate_request(f"Bearer {TOKEN}", "127.0.0.1"))
    assert (principal.name, principal.role) == ("pipeline", Role.WRITE)
    with pytest.raises(AuthenticationError, match="unknown token"):
        asyncio.run(auth.authenticate_request(f"Bearer {TOKEN}x", "127.0.0.1"))
    assert checks.calls == []


# --- failures lock out the failing client ------------------------------------------------------------------------

def test_failed_logins_lock_out_that_client_and_user_then_that_client(served: Callable[[Authenticator], LiveServer]
                                                                      ) -> None:
    checks, clock = Checks(), Clock()
    limits = ThrottleLimits(failures_per_user=3, failures_per_client=5, lockout_seconds=60)
    live = served(authenticator(checks, clock=clock, throttle=limits))
    a, b = live.http, client_from(live, OTHER_HOST)
    with b:
        assert b.get("/subjects", auth=("writer", PASSWORDS["writer"])).status_code == 200  # verified once, remembered
        statuses = [b.get("/subjects", auth=("reader", f"guess-{i}")).status_code for i in range(4)]
        assert statuses == [401, 401, 401, 429]
        checked = len(checks.calls)
        r = b.get("/subjects", auth=("reader", PASSWORDS["reader"]))  # even the right password, from that client
        assert r.status_code == 429 and r.json()["error_code"] == 42901 and r.headers["retry-after"] == "60"
        assert "Too many failed logins" in r.json()["message"] and len(checks.calls) == checked  # refused unhashed
        # another client logs in as the same user
        assert a.get("/subjects", auth=("reader", PASSWORDS["reader"])).status_code == 200
        # user names sprayed from one client: the client's own limit
        assert [b.get("/subjects", auth=(f"user{i}", "x")).status_code for i in range(3)] == [401, 401, 429]
        checked = len(checks.calls)
        assert b.get("/subjects", auth=("admin", PASSWORDS["admin"])).status_code == 429
        assert len(checks.calls) == checked
        # credentials that client had verified before still work; other clients are untouched
        assert b.get("/subjects", auth=("writer", PASSWORDS["writer"])).status_code == 200
        assert b.get("/subjects", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert a.get("/subjects", auth=("admin", PASSWORDS["admin"])).status_code == 200
        # the lockout runs out
        clock.now += 61
        assert b.get("/subjects", auth=("reader", PASSWORDS["reader"])).status_code == 200


def test_password_checks_do_not_hold_up_other_requests(served: Callable[[Authenticator], LiveServer]) -> None:
    checks = Checks(hold="held")
    auth = authenticator(checks, throttle=ThrottleLimits(failures_per_user=100, failures_per_client=100), threads=1,
                         queue=3)
    live = served(auth)
    http = live.http
    assert http.get("/subjects", auth=("reader", PASSWORDS["reader"])).status_code == 200
    assert http.post("/subjects/s/versions", json={"schema": '"string"'}, auth=("writer", PASSWORDS["writer"])
                     ).status_code == 200
    with ThreadPoolExecutor(4) as pool, client_from(live, OTHER_HOST) as flood:
        held = [pool.submit(flood.get, "/subjects", auth=("admin", "held")) for _ in range(4)]
        assert checks.entered.wait(10)
        deadline = time.monotonic() + 10
        while auth.pending_checks < 4:  # one running, three queued: the pool is full
            assert time.monotonic() < deadline, auth.pending_checks
            time.sleep(0.01)
        # meanwhile: remembered credentials, tokens, the fast paths and liveness are served
        assert http.get("/subjects", auth=("reader", PASSWORDS["reader"])).json() == ["s"]
        assert http.get("/schemas/ids/1", auth=("reader", PASSWORDS["reader"])).status_code == 200
        assert http.post("/subjects/s/versions", json={"schema": '"string"'}, auth=("writer", PASSWORDS["writer"])
                         ).json()["version"] == 1
        assert http.get("/subjects", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert http.get("/").status_code == 200
        # a check beyond the queue is refused at once instead of waiting
        r = http.get("/subjects", auth=("admin", PASSWORDS["admin"]))
        assert r.status_code == 429 and r.headers["retry-after"] == "1" and "in progress" in r.json()["message"]
        assert not any(f.done() for f in held)
        checks.release.set()
        assert [f.result(timeout=30).status_code for f in held] == [401] * 4
    assert http.get("/subjects", auth=("admin", PASSWORDS["admin"])).status_code == 200


# --- the throttle itself -------------------------------------------------------------------------------------------

def test_throttle_lockouts_double_and_expire() -> None:
    clock = Clock()
    throttle = FailureThrottle(ThrottleLimits(window_seconds=10, lockout_seconds=5, max_lockout_seconds=12),
                               clock=clock)
    assert [throttle.fail("k", 3) for _ in range(3)] == [0, 0, 5]
    assert throttle.locked_for("k") == 5
    clock.now += 5
    assert throttle.locked_for("k") == 0
    assert [throttle.fail("k", 3) for _ in range(3)] == [0, 0, 10]  # the second lockout doubles
    clock.now += 10
    assert [throttle.fail("k", 3) for _ in range(3)] == [0, 0, 12]  # capped
    clock.now += 12
    throttle.fail("k", 3)
    clock.now += 11  # older failures leave the window
    assert [throttle.fail("k", 3) for _ in range(2)] == [0, 0]
    throttle.succeed("k")
    assert throttle.locked_for("k") == 0 and len(throttle) == 0
    throttle.fail("old", 3)
    clock.now += 100  # nothing left to remember: dropped when met
    assert throttle.locked_for("old") == 0 and len(throttle) == 0


def test_throttle_remembers_a_bounded_number_of_keys() -> None:
    throttle = FailureThrottle(ThrottleLimits(max_keys=3))
    for key in "abcd":
        throttle.fail(key, 1)
    assert len(throttle) == 3 and throttle.locked_for("a") == 0 and throttle.locked_for("d") > 0


def test_client_keys() -> None:
    assert client_key("10.0.0.7") == "10.0.0.7"
    assert client_key("2001:db8::1") == client_key("2001:db8::ffff:1") == "2001:db8::/64"
    assert client_key("::ffff:10.0.0.7") == "10.0.0.7"
    assert client_key(None) == "unknown" and client_key("testclient") == "testclient"


def test_limits_in_the_auth_config(tmp_path: Path) -> None:
    head = f'[[users]]\nname = "a"\npassword_hash = "{hash_password("x", iterations=10)}"\nrole = "read"\n'
    path = tmp_path / "auth.toml"
    path.write_text(head + "[limits]\nfailures_per_user = 2\nlockout_seconds = 1.5\nverify_threads = 2\n")
    limits = Authenticator.from_file(path).limits
    assert (limits.throttle.failures_per_user, limits.throttle.lockout_seconds, limits.verify_threads) == (2, 1.5, 2)
    assert limits.throttle.failures_per_client == 20 and limits.verify_queue == 32
    for bad, text in [("limits = 3", "must be a table"), ("[limits]\nfailures = 1", "unknown \\[limits\\] keys"),
                      ("[limits]\nfailures_per_user = 0", "positive integer"),
                      ("[limits]\nverify_threads = 1.5", "positive integer"),
                      ("[limits]\nwindow_seconds = true", "positive number")]:
        path.write_text(bad + "\n" + head)
        with pytest.raises(SettingsError, match=text):
            Authenticator.from_file(path)


def test_throttled_error_round_trips_through_the_client() -> None:
    error = error_from_response(429, 42901, "Too many failed logins from this client: retry in 5 s")
    assert isinstance(error, ThrottledError) and error.error_code == 42901


# --- 405 ------------------------------------------------------------------------------------------------------------

def test_405_lists_the_methods_of_the_path(served: Callable[[Authenticator], LiveServer]) -> None:
    live = served(authenticator(Checks()))
    http = live.http
    http.auth = httpx.BasicAuth("admin", PASSWORDS["admin"])
    for method, path, allowed in [("PATCH", "/config", "DELETE, GET, PUT"), ("PUT", "/subjects/s/versions",
                                  "GET, POST"), ("POST", "/schemas/ids/1", "GET"), ("DELETE", "/", "GET"),
                                  ("POST", "/semantic-types/t", "GET, PUT"), ("HEAD", "/subjects", "GET")]:
        r = http.request(method, path)
        assert (r.status_code, r.headers.get("allow")) == (405, allowed), (method, path)
        if method != "HEAD":
            assert r.json() == {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}
