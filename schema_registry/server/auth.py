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

Roles are ordered ``read < write < admin``:

- ``read``: every GET, lookups (``POST /subjects/{s}``) and compatibility tests (``POST /compatibility/...``);
- ``write``: registering and soft-deleting versions, creating or updating semantic types;
- ``admin``: permanent deletes, ``/config`` and ``/mode`` changes.

``GET /`` (liveness) needs no credentials. Credentials are never logged: only the user or token *name*.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
import threading
import tomllib
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from schema_registry.errors import AuthenticationError, AuthorizationError, SettingsError

logger = logging.getLogger(__name__)

_PBKDF2 = re.compile(r"^pbkdf2_sha256\$(\d+)\$([A-Za-z0-9+/=]+)\$([A-Za-z0-9+/=]+)$")


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


def hash_password(password: str, *, iterations: int = 600_000, salt: bytes | None = None) -> str:
    """A ``password_hash`` value for the auth config (PBKDF2-HMAC-SHA256)."""
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return f"pbkdf2_sha256${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def hash_token(token: str) -> str:
    """A ``sha256`` value for the auth config."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def required_role(method: str, path: str, query: str) -> Role | None:
    """The least role a request needs (None: open)."""
    method = method.upper()
    if path == "/" and method in ("GET", "HEAD"):
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
    """Checks the ``Authorization`` header of each request against the configured users and tokens."""

    def __init__(self, users: dict[str, tuple[str, Role]], tokens: dict[str, tuple[str, Role]]) -> None:
        self._users = users  # name -> (password_hash, role)
        self._tokens = tokens  # sha256 hex -> (name, role)
        self._verified: dict[str, bool] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path) -> Authenticator:
        """Load a TOML auth config.

        Raises:
            SettingsError: unreadable file, unknown role, missing or malformed secrets.
        """
        try:
            raw = tomllib.loads(path.read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise SettingsError(f"cannot read auth config {path}: {e}") from e
        users: dict[str, tuple[str, Role]] = {}
        tokens: dict[str, tuple[str, Role]] = {}
        for entry in raw.get("users", []):
            name, secret = entry.get("name"), entry.get("password_hash")
            if not isinstance(name, str) or not name or not isinstance(secret, str) or not _PBKDF2.match(secret):
                raise SettingsError(f"auth config {path}: each user needs a name and a pbkdf2_sha256 password_hash")
            users[name] = (secret, _role(entry.get("role"), path))
        for entry in raw.get("tokens", []):
            digest = entry.get("sha256")
            if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", digest):
                raise SettingsError(f"auth config {path}: each token needs a hex sha256")
            tokens[digest.lower()] = (str(entry.get("name") or f"token-{digest[:8]}"), _role(entry.get("role"), path))
        if not users and not tokens:
            raise SettingsError(f"auth config {path} defines no users and no tokens")
        logger.info("registry auth on: %d users, %d tokens", len(users), len(tokens))
        return cls(users, tokens)

    def authenticate(self, authorization: str | None) -> Principal:
        """The principal of an ``Authorization`` header.

        Raises:
            AuthenticationError: missing, malformed or wrong credentials (401).
        """
        if not authorization:
            raise AuthenticationError("Unauthorized: credentials are required")
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and value:
            found = self._tokens.get(hash_token(value))
            if found is not None:
                return Principal(found[0], found[1])
            raise AuthenticationError("Unauthorized: unknown token")
        if scheme.lower() == "basic" and value:
            try:
                user, _, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError) as e:
                raise AuthenticationError("Unauthorized: malformed basic credentials") from e
            entry = self._users.get(user)
            if entry is not None and self._check_password(user, password, entry[0]):
                return Principal(user, entry[1])
            raise AuthenticationError("Unauthorized: wrong user name or password")
        raise AuthenticationError("Unauthorized: use Basic or Bearer credentials")

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

    def _check_password(self, user: str, password: str, stored: str) -> bool:
        # PBKDF2 is slow on purpose; remember verdicts by a digest of the pair, never the password itself
        key = hashlib.sha256(f"{user}\0{password}\0{stored}".encode()).hexdigest()
        with self._lock:
            hit = self._verified.get(key)
        if hit is not None:
            return hit
        m = _PBKDF2.match(stored)
        if m is None:
            return False
        iterations, salt, digest = int(m.group(1)), base64.b64decode(m.group(2)), base64.b64decode(m.group(3))
        ok = hmac.compare_digest(hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations), digest)
        with self._lock:
            if len(self._verified) > 10_000:
                self._verified.clear()
            self._verified[key] = ok
        return ok


def _role(value: object, path: Path) -> Role:
    if isinstance(value, str) and value.upper() in Role.__members__:
        return Role[value.upper()]
    raise SettingsError(f"auth config {path}: role must be read, write or admin, not {value!r}")
