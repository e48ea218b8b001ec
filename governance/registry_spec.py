"""The ``registry:`` section of a pipeline file and the client it describes."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict

from governance.errors import PipelineConfigError

__all__ = ["RegistrySpec", "registry_client"]


class RegistrySpec(BaseModel):
    """The schema registry the gate checks batches against.

    Attributes:
        url: base URL (``${VAR}`` is expanded from the environment).
        subject: the table's subject (default ``<table name>-value``).
        token_env / username_env / password_env: environment variables holding credentials (never the secrets).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    subject: str | None = None
    token_env: str | None = None
    username_env: str | None = None
    password_env: str | None = None


def registry_client(spec: RegistrySpec | None) -> Any:
    """A registry client for ``spec`` (None without one).

    Raises:
        PipelineConfigError: the URL names an environment variable that is not set.
    """
    if spec is None:
        return None
    from schema_registry import RegistryClient

    url = os.path.expandvars(spec.url)
    if "$" in url:
        raise PipelineConfigError(f"registry.url {spec.url!r}: an environment variable it names is not set")
    token = os.environ.get(spec.token_env) if spec.token_env else None
    basic = None
    if spec.username_env and spec.password_env:
        basic = (os.environ.get(spec.username_env, ""), os.environ.get(spec.password_env, ""))
    return RegistryClient(url, token=token, basic_auth=basic)
