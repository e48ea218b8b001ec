"""Auth (off by default): Basic and bearer credentials, roles read < write < admin, Confluent-style 401/403."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from schema_registry.errors import AuthenticationError, AuthorizationError, SettingsError
from schema_registry.server.auth import Authenticator, Role, hash_password, hash_token
from schema_registry.settings import Settings
from tests.schema_registry.conftest import LiveServer, field, record

pytestmark = pytest.mark.integration

SCHEMA = record("R", field("a", "string"))
PASSWORDS = {"reader": "r-secret", "writer": "w-secret", "admin": "a-secret"}
TOKEN = "tok-0123456789abcdef"


def auth_file(tmp_path: Path) -> Path:
    lines = []
    for user, password in PASSWORDS.items():
        role = {"reader": "read", "writer": "write", "admin": "admin"}[user]
        lines += ["[[users]]", f'name = "{user}"', f'password_hash = "{hash_password(password, iterations=1000)}"',
                  f'role = "{role}"', ""]
    lines += ["[[tokens]]", 'name = "pipeline"', f'sha256 = "{hash_token(TOKEN)}"', 'role = "write"']
    path = tmp_path / "auth.toml"
    path.write_text("\n".join(lines))
    return path


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[LiveServer]:
    live = LiveServer(Settings(store_url=f"sqlite:///{tmp_path / 'r.db'}", auth_config=auth_file(tmp_path)))
    yield live
    live.stop()


def as_user(user: str) -> httpx.BasicAuth:
    return httpx.BasicAuth(user, PASSWORDS[user])


def test_auth_missing_or_wrong_credentials_are_401(secured: LiveServer) -> None:
    http = secured.http
    for kwargs in ({}, {"auth": httpx.BasicAuth("reader", "wrong")}, {"auth": httpx.BasicAuth("nobody", "x")},
                   {"headers": {"Authorization": "Bearer not-a-token"}}, {"headers": {"Authorization": "Digest x"}}):
        r = http.get("/subjects", **kwargs)  # type: ignore[arg-type]
        assert r.status_code == 401, kwargs
        assert r.json()["error_code"] == 40101 and r.json()["message"].startswith("Unauthorized")
        assert "Basic" in r.headers["www-authenticate"]
    assert http.get("/").status_code == 200  # liveness stays open


def test_auth_roles(secured: LiveServer) -> None:
    http = secured.http
    body = {"schema": SCHEMA}
    r = http.post("/subjects/s/versions", json=body, auth=as_user("reader"))
    assert (r.status_code, r.json()["error_code"]) == (403, 40301)
    assert "has role read" in r.json()["message"] and "needs write" in r.json()["message"]
    assert http.post("/subjects/s/versions", json=body, auth=as_user("writer")).status_code == 200
    assert http.post("/subjects/s/versions", json=body, headers={"Authorization": f"Bearer {TOKEN}"}
                     ).status_code == 200
    # reading, lookups and compatibility tests need read only
    assert http.get("/subjects/s/versions/1", auth=as_user("reader")).status_code == 200
    assert http.post("/subjects/s", json=body, auth=as_user("reader")).status_code == 200
    assert http.post("/compatibility/subjects/s/versions/latest", json=body, auth=as_user("reader")).json() == {
        "is_compatible": True}
    # config, mode and permanent deletes need admin
    assert http.put("/config", json={"compatibility": "FULL"}, auth=as_user("writer")).status_code == 403
    assert http.put("/config", json={"compatibility": "FULL"}, auth=as_user("admin")).status_code == 200
    assert http.put("/mode/s", json={"mode": "READONLY"}, auth=as_user("writer")).status_code == 403
    assert http.delete("/subjects/s", auth=as_user("writer")).json() == [1]
    assert http.delete("/subjects/s?permanent=true", auth=as_user("writer")).status_code == 403
    assert http.delete("/subjects/s?permanent=true", auth=as_user("admin")).json() == [1]
    assert http.get("/metrics", auth=as_user("reader")).status_code == 200


def test_auth_credentials_never_logged(secured: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        secured.http.get("/subjects", auth=httpx.BasicAuth("reader", "wrong-password-123"))
        secured.http.post("/subjects/s/versions", json={"schema": SCHEMA}, auth=as_user("reader"))
        secured.http.get("/subjects", headers={"Authorization": f"Bearer {TOKEN}x"})
    text = caplog.text
    assert caplog.records  # the denial was logged ...
    for secret in ("wrong-password-123", PASSWORDS["reader"], TOKEN):
        assert secret not in text  # ... without any secret


def test_auth_off_by_default(server: LiveServer) -> None:
    assert server.http.get("/subjects").status_code == 200


def test_auth_config_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    for content, text in [("[[users]]\nname='a'\npassword_hash='plain'\nrole='read'", "pbkdf2_sha256"),
                          (f"[[tokens]]\nsha256='{hash_token('x')}'\nrole='root'", "role must be"),
                          ("", "no users and no tokens"), ("[[users", "cannot read")]:
        bad.write_text(content)
        with pytest.raises(SettingsError, match=text):
            Authenticator.from_file(bad)


def test_authenticator_bearer_and_roles() -> None:
    authenticator = Authenticator({}, {hash_token("t"): ("ci", Role.READ)})
    principal = authenticator.authenticate("Bearer t")
    assert (principal.name, principal.role) == ("ci", Role.READ)
    with pytest.raises(AuthenticationError):
        authenticator.authenticate("Basic !!!")
    with pytest.raises(AuthorizationError):
        authenticator.authorize(principal, Role.WRITE, "POST", "/subjects/x/versions")
    authenticator.authorize(principal, Role.READ, "GET", "/subjects")
