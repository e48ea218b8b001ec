"""``lakegate schema register|check|show``: schemas in a schema registry, through :class:`RegistryClient`."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from governance.cli.inputs import STDIN, parse_json, read_text_file
from governance.cli.output import CliError, ExitCode, JsonOption, Output

if TYPE_CHECKING:
    from schema_registry import RegistryClient

logger = logging.getLogger(__name__)

DEFAULT_URL = "http://127.0.0.1:8081"

schema_app = typer.Typer(help="Register, check and show Avro schemas in the schema registry.", no_args_is_help=True)

Subject = Annotated[str, typer.Argument(help="Subject name, e.g. trips-value.")]
SchemaFile = Annotated[str, typer.Argument(help="File holding the Avro schema JSON ('-': stdin).")]
Url = Annotated[str, typer.Option("--url", envvar="LAKEGATE_REGISTRY_URL", help="Base URL of the registry.")]
User = Annotated[str | None, typer.Option(
    "--user", envvar="LAKEGATE_REGISTRY_USER", help="HTTP Basic user (with --password).")]
Password = Annotated[str | None, typer.Option(
    "--password", envvar="LAKEGATE_REGISTRY_PASSWORD", help="HTTP Basic password.")]
Token = Annotated[str | None, typer.Option(
    "--token", envvar="LAKEGATE_REGISTRY_TOKEN", help="Bearer token (instead of --user/--password).")]


def _client(url: str, user: str | None, password: str | None, token: str | None) -> RegistryClient:
    from schema_registry import RegistryClient

    if (user is None) != (password is None):
        raise CliError("--user and --password go together", ExitCode.USAGE)
    if token is not None and user is not None:
        raise CliError("give either --token or --user/--password, not both", ExitCode.USAGE)
    logger.debug("registry at %s", url)
    return RegistryClient(url, basic_auth=(user, password) if user is not None and password is not None else None,
                          token=token)


def _read_schema(file: str) -> str:
    """The schema text of ``file`` (``-``: stdin), read before any registry call.

    Raises:
        CliError: (exit 2, naming the file) unreadable, a directory, not UTF-8, empty or not JSON (with the line and
            column).
    """
    text = read_text_file(file, "schema file")
    if not text.strip():
        raise CliError(f"{'<stdin>' if file == STDIN else file}: the schema file is empty", ExitCode.USAGE)
    parse_json(text, file, "schema file")
    return text


@dataclass(frozen=True)
class Reason:
    """One finding of a compatibility test, split out of Confluent's verbose message format."""

    error_type: str | None
    description: str
    additional_info: str | None
    raw: str


_FINDING = re.compile(r"^\{errorType:'(?P<type>[^']*)', description:'(?P<desc>.*)', additionalInfo:'(?P<info>.*)'\}$",
                      re.DOTALL)
_TRAILER = re.compile(r"^\{(oldSchemaVersion|oldSchema|compatibility|validateFields):")


def parse_reasons(messages: tuple[str, ...] | list[str]) -> list[Reason]:
    """The findings of a verbose compatibility answer; the ``{oldSchemaVersion: n}``-style trailers are dropped."""
    reasons = []
    for message in messages:
        m = _FINDING.match(message.strip())
        if m:
            reasons.append(Reason(m["type"], m["desc"], m["info"] or None, message))
        elif not _TRAILER.match(message.strip()):
            reasons.append(Reason(None, message, None, message))
    return reasons


@schema_app.command("register")
def register(
    subject: Subject,
    file: SchemaFile,
    normalize: Annotated[bool, typer.Option(help="Let the registry normalize the schema first.")] = False,
    url: Url = DEFAULT_URL,
    user: User = None,
    password: Password = None,
    token: Token = None,
    json_output: JsonOption = False,
) -> None:
    """Register a schema under SUBJECT (idempotent). Exit 4 when the subject's compatibility level rejects it."""
    out = Output(json_output)
    text = _read_schema(file)
    with _client(url, user, password, token) as client:
        registered = client.register(subject, text, normalize=normalize)
    doc = {"subject": subject, "id": registered.id, "version": registered.version}
    out.result(doc, lambda: out.line(f"registered {subject} version {registered.version} (schema id {registered.id})"))


@schema_app.command("check")
def check(
    subject: Subject,
    file: SchemaFile,
    version: Annotated[str | None, typer.Option(
        "--version", help="Check against this one version (a number or 'latest') instead of the subject's level.")
    ] = None,
    url: Url = DEFAULT_URL,
    user: User = None,
    password: Password = None,
    token: Token = None,
    json_output: JsonOption = False,
) -> None:
    """Test a schema against SUBJECT under its compatibility level, as registering it would. Exit 4 when
    incompatible, with the reasons."""
    out = Output(json_output)
    text = _read_schema(file)
    with _client(url, user, password, token) as client:
        report = client.test_compatibility(subject, text, version=version)
        level = client.compatibility(subject, default_to_global=True)
    reasons = parse_reasons(report.messages)
    doc = {"subject": subject, "level": level, "against": version or "level", "is_compatible": report.is_compatible,
           "reasons": reasons, "messages": list(report.messages)}

    def human() -> None:
        target = f"version {version} of {subject}" if version else subject
        if report.is_compatible:
            out.line(f"compatible: the schema can be registered under {target} (level {level})")
            return
        out.line(f"incompatible with {target} (level {level}):")
        for r in reasons:
            out.line(f"  {r.error_type}: {r.description}" if r.error_type else f"  {r.description}")

    out.result(doc, human)
    if not report.is_compatible:
        raise typer.Exit(ExitCode.CONFLICT)


@schema_app.command("show")
def show(
    subject: Subject,
    version: Annotated[str, typer.Option("--version", help="A version number or 'latest'.")] = "latest",
    url: Url = DEFAULT_URL,
    user: User = None,
    password: Password = None,
    token: Token = None,
    json_output: JsonOption = False,
) -> None:
    """Show one version of SUBJECT (default: the latest): id, versions, fields with their semantic types."""
    out = Output(json_output)
    wanted: int | str = int(version) if version.isdigit() else version
    with _client(url, user, password, token) as client:
        registered = client.version(subject, wanted)
        versions = client.versions(subject)
    try:
        parsed: Any = json.loads(registered.schema)
    except ValueError:
        parsed = registered.schema
    doc = {"subject": subject, "version": registered.version, "id": registered.id,
           "schema_type": registered.schema_type, "versions": versions, "schema": parsed,
           "references": [r.model_dump() for r in registered.references]}

    def human() -> None:
        out.fields({"subject": subject, "version": registered.version, "id": registered.id,
                    "type": registered.schema_type, "versions": ", ".join(map(str, versions))},
                   title=f"schema {subject}")
        fields = parsed.get("fields") if isinstance(parsed, dict) else None
        if isinstance(fields, list):
            out.table(["field", "type", "default", "semantic type"],
                      [(f.get("name"), _type_text(f.get("type")), json.dumps(f["default"]) if "default" in f else "",
                        f.get("semanticType") or "") for f in fields if isinstance(f, dict)],
                      title=f"record {parsed.get('name', '')}")
        else:
            out.line(registered.schema)

    out.result(doc, human)


def _type_text(avro_type: Any) -> str:
    if isinstance(avro_type, str):
        return avro_type
    if isinstance(avro_type, list):
        return " | ".join(_type_text(t) for t in avro_type)
    if isinstance(avro_type, dict):
        kind = str(avro_type.get("type"))
        if avro_type.get("logicalType"):
            return f"{kind} ({avro_type['logicalType']})"
        if kind in ("record", "enum", "fixed"):
            return f"{kind} {avro_type.get('name', '')}".strip()
        if kind == "array":
            return f"array<{_type_text(avro_type.get('items'))}>"
        if kind == "map":
            return f"map<{_type_text(avro_type.get('values'))}>"
        return kind
    return json.dumps(avro_type)
