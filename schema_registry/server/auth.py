"""Authentication (HTTP Basic or bearer tokens) and role-based authorization, off unless configured.

The config file is TOML; secrets are stored hashed, never in clear::

    [[users]]
    name = "alice"
    password_hash = "pbkdf2_sha256$600000$<salt, base64>$<digest, base64>"   # schema_registry.server.auth.hash_password
    role = "admin"

    [[tokens]]
    name = "ingest-pipeline"        # a label for logs
    sha256 = "<hex SHA-256 of the token>"
    role = "write"

    [limits]                        # optional; these are the defaults
    failures_per_user = 5           # failed logins for one user name from one client address, within window_seconds
    failures_per_client = 20        # failed logins for any user names from one client address, within window_seconds
    window_seconds = 60
    lockout_seconds = 60            # then refused (429 + Retry-After) without hashing; doubles on each new lockout
    max_lockout_seconds = 900
    verify_threads = 1              # password checks at once, off the event loop
    verify_queue = 32               # checks waiting; beyond that a login is refused at once (429)

Roles are ordered ``read < write < admin``:

- ``read``: every GET, lookups (``POST /subjects/{s}``) and compatibility tests (``POST /compatibility/...``);
- ``write``: registering and soft-deleting versions, creating or updating semantic types;
- ``admin``: permanent deletes, ``/config`` and ``/mode`` changes.

``GET /`` (liveness) and ``GET /openapi.json`` need no credentials. Credentials are never logged: only the user or
token *name*.

A Basic login, as the server checks it (:meth:`Authenticator.authenticate_request`)::

    (client address, user) locked out? ──yes──► 429
        │ no
    (user, password) verified before? ──yes──► the user's role     (a keyed hash of the pair, in memory)
        │ no
    client address locked out? ──yes──► 429 (counted for the (address, user) pair too)
        │ no
    PBKDF2 of the user's hash, or of a dummy hash of the same cost for an unknown user, in the verification pool
        │ match ─► remember the pair, clear the pair's failures ─► the user's role
        │ no match ─► count a failure for the address and for the pair ─► 401

so an unknown user costs exactly what a known one does, repeated failures lock out the client that makes them (not
everyone), and the event loop never hashes: requests of other clients, and any request whose credentials were
verified once, are served while checks run or queue. Bearer tokens are compared by SHA-256 digest in constant time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
import threading
import time
import tomllib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import IntEnum
from pathlib import Path
from typing import Any

from schema_registry.errors import AuthenticationError, AuthorizationError, SettingsError, ThrottledError
from schema_registry.server.passwords import (
    DEFAULT_ITERATIONS,
    VerificationPool,
    Verify,
    dummy_hash,
    hash_iterations,
    hash_password,
    verify_password,
)
from schema_registry.server.throttle import FailureThrottle, ThrottleLimits, client_key, retry_after

logger = logging.getLogger(__name__)

VERIFIED_CACHE_SIZE = 10_000
"""(user, password) pairs remembered as verified, at most (the least recently used is forgotten first)."""


class Role(IntEnum):
    """Roles, ordered by what they allow."""

    READ = 1
    WRITE = 2
    ADMIN = 3


@dataclass(frozen=True)
class Principal:
    """Who made a request."""

    name: str
    role: Role


@dataclass(frozen=True)
class AuthLimits:
    """The ``[limits]`` of an auth config: failure throttling and the password verification pool.

    Attributes:
        throttle: how many failed logins a client may have, and the lockouts after that.
        verify_threads: password checks running at once (worker threads).
        verify_queue: password checks waiting at most; beyond that a login is refused at once (429).
    """

    throttle: ThrottleLimits = field(default_factory=ThrottleLimits)
    verify_threads: int = 1
    verify_queue: int = 32


def hash_token(token: str) -> str:
    """A ``sha256`` value for the auth config."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def required_role(method: str, path: str, query: str) -> Role | None:
    """The least role a request needs (None: open)."""
    method = method.upper()
    if path in ("/", "/openapi.json") and method in ("GET", "HEAD"):
        return None
    if method in ("GET", "HEAD", "OPTIONS"):
        return Role.READ
    if method == "POST" and (path.startswith("/compatibility/") or re.fullmatch(r"/subjects/[^/]+/?", path)):
        return Role.READ
    if path.startswith(("/config", "/mode")):
        return Role.ADMIN
    if method == "DELETE" and re.search(r"(^|&)permanent=true(&|$)", query.lower()):
        return Role.ADMIN
    return Role.WRITE


class Authenticator:
    """Checks the ``Authorization`` header of each request against the configured users and tokens.

    Args:
        users: user name -> (``password_hash``, role).
        tokens: hex SHA-256 of a token -> (token name, role).
        limits: failure throttling and the verification pool.
        verify: the password check (tests pass one that counts or blocks).
        clock: the throttle's monotonic clock.
    """

    def __init__(self, users: dict[str, tuple[str, Role]], tokens: dict[str, tuple[str, Role]], *,
                 limits: AuthLimits | None = None, verify: Verify = verify_password,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or AuthLimits()
        self._users = users
        self._tokens = [(digest.lower(), Principal(name, role)) for digest, (name, role) in tokens.items()]
        self._verify = verify
        counts = {hash_iterations(stored) or DEFAULT_ITERATIONS for stored, _ in users.values()}
        if len(counts) > 1:
            logger.warning("auth config: password hashes have different iteration counts %s, so the time of a failed "
                           "login tells them apart; rehash them with one count", sorted(counts))
        # unknown users are checked against this, at the cost of the most expensive real hash
        self._dummy = dummy_hash(max(counts, default=DEFAULT_ITERATIONS))
        self._key = os.urandom(32)  # keys the digests of verified (user, password) pairs
        self._verified: OrderedDict[bytes, Principal] = OrderedDict()
        self._verified_lock = threading.Lock()
        self._throttle = FailureThrottle(self.limits.throttle, clock=clock)
        self._pool = VerificationPool(threads=self.limits.verify_threads, queue=self.limits.verify_queue,
                                      verify=verify)

    @property
    def pending_checks(self) -> int:
        """Password checks running or waiting in the verification pool."""
        return self._pool.pending

    @classmethod
    def from_file(cls, path: Path, *, verify: Verify = verify_password) -> Authenticator:
        """Load a TOML auth config.

        Raises:
            SettingsError: unreadable file, unknown role, missing or malformed secrets or limits.
        """
        try:
            raw = tomllib.loads(path.read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise SettingsError(f"cannot read auth config {path}: {e}") from e
        users: dict[str, tuple[str, Role]] = {}
        tokens: dict[str, tuple[str, Role]] = {}
        for entry in raw.get("users", []):
            name, secret = entry.get("name"), entry.get("password_hash")
            if not isinstance(name, str) or not name or not isinstance(secret, str) or not hash_iterations(secret):
                raise SettingsError(f"auth config {path}: each user needs a name and a pbkdf2_sha256 password_hash")
            users[name] = (secret, _role(entry.get("role"), path))
        for entry in raw.get("tokens", []):
            digest = entry.get("sha256")
            if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
                raise SettingsError(f"auth config {path}: each token needs a hex sha256")
            tokens[digest.lower()] = (str(entry.get("name") or f"token-{digest[:8]}"), _role(entry.get("role"), path))
        if not users and not tokens:
            raise SettingsError(f"auth config {path} defines no users and no tokens")
        limits = _limits(raw.get("limits", {}), path)
        logger.info("registry auth on: %d users, %d tokens", len(users), len(tokens))
        return cls(users, tokens, limits=limits, verify=verify)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header, checked in the calling thread without throttling (for
        tools and tests; the server uses :meth:`authenticate_request`).

        Raises:
            AuthenticationError: missing, malformed or wrong credentials (401).
        """
        credentials = self._credentials(authorization)
        if isinstance(credentials, Principal):
            return credentials
        user, password = credentials
        found = self._remembered(user, password)
        if found is not None:
            return found
        entry = self._users.get(user)
        if self._verify(password, entry[0] if entry else self._dummy) and entry is not None:
            return self._remember(user, password, Principal(user, entry[1]))
        raise AuthenticationError("Unauthorized: wrong user name or password")

    async def authenticate_request(self, authorization: str | None, client: str | None) -> Principal:
        """The principal of a request's ``Authorization`` header, from client address ``client``.

        Password checks run in the verification pool; failures are throttled per client address and per (client
        address, user name) (see the module docstring).

        Raises:
            AuthenticationError: missing, malformed or wrong credentials (401).
            ThrottledError: the client is locked out, or too many checks are in progress (429).
        """
        credentials = self._credentials(authorization)
        if isinstance(credentials, Principal):
            return credentials
        user, password = credentials
        address = client_key(client)
        pair = (address, user)
        locked = self._throttle.locked_for(pair)
        if locked:
            raise _throttled(locked)
        found = self._remembered(user, password)
        if found is not None:
            return found
        throttle = self.limits.throttle
        locked = self._throttle.locked_for(address)
        if locked:
            self._throttle.fail(pair, throttle.failures_per_user)
            raise _throttled(locked)
        entry = self._users.get(user)
        matched = await self._pool.check(password, entry[0] if entry else self._dummy)
        if matched and entry is not None:
            self._throttle.succeed(pair)
            return self._remember(user, password, Principal(user, entry[1]))
        self._throttle.fail(address, throttle.failures_per_client)
        self._throttle.fail(pair, throttle.failures_per_user)
        logger.info("failed login from %s as user %r", address, user)
        raise AuthenticationError("Unauthorized: wrong user name or password")

    def authorize(self, principal: Principal, needed: Role, method: str, path: str) -> None:
        """Check a principal's role.

        Raises:
            AuthorizationError: the role is too low (403).
        """
        if principal.role < needed:
            logger.info("denied %s %s to %s (role %s, needs %s)", method, path, principal.name,
                        principal.role.name.lower(), needed.name.lower())
            raise AuthorizationError(
                f"Forbidden: '{principal.name}' has role {principal.role.name.lower()}, "
                f"{method} {path} needs {needed.name.lower()}")

    def _credentials(self, authorization: str | None) -> Principal | tuple[str, str]:
        """A token's principal, or the (user, password) of Basic credentials.

        Raises:
            AuthenticationError: missing or malformed credentials, or an unknown token.
        """
        if not authorization:
            raise AuthenticationError("Unauthorized: credentials are required")
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and value:
            return self._token(value)
        if scheme.lower() == "basic" and value:
            try:
                user, _, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError) as e:
                raise AuthenticationError("Unauthorized: malformed basic credentials") from e
            return user, password
        raise AuthenticationError("Unauthorized: use Basic or Bearer credentials")

    def _token(self, token: str) -> Principal:
        # every configured digest is compared, each in constant time: the answer's timing says nothing of the tokens
        digest = hash_token(token)
        found: Principal | None = None
        for known, principal in self._tokens:
            if hmac.compare_digest(known, digest):
                found = principal
        if found is None:
            raise AuthenticationError("Unauthorized: unknown token")
        return found

    def _pair_digest(self, user: str, password: str) -> bytes:
        raw = f"{len(user)}:{user}{password}".encode("utf-8", "surrogatepass")
        return hmac.new(self._key, raw, hashlib.sha256).digest()

    def _remembered(self, user: str, password: str) -> Principal | None:
        key = self._pair_digest(user, password)
        with self._verified_lock:
            found = self._verified.get(key)
            if found is not None:
                self._verified.move_to_end(key)
            return found

    def _remember(self, user: str, password: str, principal: Principal) -> Principal:
        key = self._pair_digest(user, password)
        with self._verified_lock:
            self._verified[key] = principal
            if len(self._verified) > VERIFIED_CACHE_SIZE:
                self._verified.popitem(last=False)
        return principal


def _throttled(seconds: float) -> ThrottledError:
    wait = retry_after(seconds)
    return ThrottledError(f"Too many failed logins from this client: retry in {wait} s", retry_after=wait)


def _role(value: object, path: Path) -> Role:
    if isinstance(value, str) and value.upper() in Role.__members__:
        return Role[value.upper()]
    raise SettingsError(f"auth config {path}: role must be read, write or admin, not {value!r}")


def _limits(raw: Any, path: Path) -> AuthLimits:
    """The ``[limits]`` table of an auth config.

    Raises:
        SettingsError: not a table, unknown keys, or values that are not positive numbers.
    """
    if not isinstance(raw, dict):
        raise SettingsError(f"auth config {path}: [limits] must be a table")
    throttle_keys = {f.name for f in fields(ThrottleLimits)} - {"max_keys"}
    known = throttle_keys | {"verify_threads", "verify_queue"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise SettingsError(f"auth config {path}: unknown [limits] keys {unknown} (known: {sorted(known)})")
    for key, value in raw.items():
        integral = key.startswith(("failures_", "verify_"))
        if isinstance(value, bool) or not isinstance(value, int if integral else (int, float)) or (
                value < 0 if key == "verify_queue" else value <= 0):
            kind = "a positive integer" if integral else "a positive number of seconds"
            raise SettingsError(f"auth config {path}: [limits] {key} must be {kind}, not {value!r}")
    throttle = ThrottleLimits(**{k: v for k, v in raw.items() if k in throttle_keys})
    return AuthLimits(throttle=throttle, verify_threads=raw.get("verify_threads", 1),
                      verify_queue=raw.get("verify_queue", 32))


__all__ = ["AuthLimits", "Authenticator", "Principal", "Role", "hash_password", "hash_token", "required_role"]
