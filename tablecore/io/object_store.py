"""``S3FileIO``: tables on S3 and S3-compatible object stores, with atomic create-if-absent and retried requests.

One client, ``obstore`` (Rust ``object_store``), makes every request:

- every whole-object write is one ``PutObject`` (``write_bytes``, ``open_output``): an object appears complete or
  not at all. ``create_if_absent`` is a *conditional* put (``If-None-Match: *``): the store itself refuses the second
  writer (HTTP 412), so two processes can never both publish an instant or both hold the commit lock. Measured on the
  test server: 2.2 ms per conditional create against 4.6 ms for boto3 and 10 ms for a pyarrow output stream.
- reads: ``read_bytes`` is one ``GetObject``; ``open_input`` gets a whole object of up to :data:`WHOLE_READ_MAX`
  bytes in that one request (table files mostly are), and reads larger ones by ranges, as the Parquet reader asks.
- listing (``ListObjectsV2``), deletes (``DeleteObjects``), moves (``CopyObject`` + delete).

Every request is retried when it fails transiently (throttling, 5xx, dropped connections, timeouts) with exponential
back-off and full jitter, within a budget of retries and seconds (:mod:`tablecore.io.retry`); when the budget runs
out the call raises :class:`~tablecore.exceptions.StorageUnavailableError`. A conditional create is retried too, and
never into a double or a lost commit: each one carries a token of its own (``x-amz-meta-lakegate-put``), so a 412
answered to a retry — after an attempt that may have written the object, its answer lost — is resolved by reading
the token back: ours, it was our create; another, someone else's. A 412 to the first attempt needs no check.

Configuration follows the ecosystem: the standard ``AWS_*`` environment variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL_S3`` /
``AWS_ENDPOINT_URL``, ``AWS_MAX_ATTEMPTS``), overridden per table by storage options with the names hudi-rs and
``object_store`` use: ``aws_access_key_id``, ``aws_secret_access_key``, ``aws_session_token``, ``aws_region``,
``aws_endpoint_url``, ``aws_allow_http``; and lakegate's own retry budget, ``lakegate_max_retries`` and
``lakegate_retry_timeout`` (seconds; or ``LAKEGATE_S3_RETRY_TIMEOUT``). The FileIO pickles, so engines hand it to
their executors.
"""

from __future__ import annotations

import io as pyio
import logging
import os
import posixpath
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar, cast
from urllib.parse import urlparse

import pyarrow as pa

from tablecore.exceptions import StorageError
from tablecore.io.fileio import FileInfo, FileIO
from tablecore.io.retry import Retry, RetryPolicy, call_with_retries

logger = logging.getLogger(__name__)

T = TypeVar("T")

OPTION_NAMES = frozenset({
    "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "aws_region", "aws_endpoint_url",
    "aws_allow_http", "lakegate_max_retries", "lakegate_retry_timeout",
})
DEFAULT_REGION = "us-east-1"
RETRY_TIMEOUT_ENV = "LAKEGATE_S3_RETRY_TIMEOUT"
TOKEN_ATTRIBUTE = "lakegate-put"
"""The user metadata (``x-amz-meta-lakegate-put``) a conditional create stores its own token in."""
WHOLE_READ_MAX = 8 << 20
"""``open_input`` reads an object of up to this many bytes with its first GET; a larger one by ranges."""

_CONDITIONAL_PUTS: dict[tuple[str | None, str], bool] = {}
"""(endpoint, bucket) -> whether the store refuses a second conditional create (probed once per process)."""


def _truthy(value: str | None) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _retry_policy(opts: Mapping[str, str], env: Mapping[str, str]) -> RetryPolicy:
    """The retry budget of the storage options over ``AWS_MAX_ATTEMPTS`` / ``LAKEGATE_S3_RETRY_TIMEOUT``."""
    default = RetryPolicy()
    retries, timeout = default.max_retries, default.timeout_s
    try:
        if opts.get("lakegate_max_retries"):
            retries = int(opts["lakegate_max_retries"])
        elif env.get("AWS_MAX_ATTEMPTS"):
            retries = int(env["AWS_MAX_ATTEMPTS"]) - 1  # attempts count the first one
        timeout = float(opts.get("lakegate_retry_timeout") or env.get(RETRY_TIMEOUT_ENV) or timeout)
    except ValueError as e:
        raise StorageError(f"bad S3 retry setting: {e} (lakegate_max_retries / AWS_MAX_ATTEMPTS take a whole "
                           f"number, lakegate_retry_timeout / {RETRY_TIMEOUT_ENV} seconds)") from e
    if retries < 0 or not timeout > 0:
        raise StorageError(f"bad S3 retry budget: {retries} retries, {timeout}s (retries >= 0, seconds > 0)")
    return RetryPolicy(max_retries=retries, timeout_s=timeout)


@dataclass(frozen=True)
class S3Options:
    """Where and as whom to reach an S3 API, and how long to retry: storage options over the ``AWS_*``
    environment."""

    region: str
    endpoint_url: str | None = None
    allow_http: bool = False
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @classmethod
    def resolve(cls, storage_options: Mapping[str, str] | None = None,
                environ: Mapping[str, str] | None = None) -> S3Options:
        """Storage options first, then the environment; a misspelt option name is refused by name."""
        opts = {k.lower(): str(v) for k, v in (storage_options or {}).items()}
        unknown = sorted(set(opts) - OPTION_NAMES)
        if unknown:
            raise StorageError(f"unknown S3 storage option(s) {', '.join(unknown)}; "
                               f"known: {', '.join(sorted(OPTION_NAMES))}")
        env = os.environ if environ is None else environ

        def pick(option: str, *variables: str) -> str | None:
            if opts.get(option):
                return opts[option]
            return next((env[v] for v in variables if env.get(v)), None)

        endpoint = pick("aws_endpoint_url", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
        allow_http = (_truthy(opts["aws_allow_http"]) if "aws_allow_http" in opts
                      else bool(endpoint and endpoint.startswith("http://")))
        return cls(region=pick("aws_region", "AWS_REGION", "AWS_DEFAULT_REGION") or DEFAULT_REGION,
                   endpoint_url=endpoint, allow_http=allow_http,
                   access_key_id=pick("aws_access_key_id", "AWS_ACCESS_KEY_ID"),
                   secret_access_key=pick("aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
                   session_token=pick("aws_session_token", "AWS_SESSION_TOKEN"),
                   retry=_retry_policy(opts, env))

    def object_store(self, bucket: str) -> Any:
        """An ``obstore`` S3 store of ``bucket`` with these settings (its own retries off: :mod:`tablecore.io.retry`
        retries every call)."""
        from obstore.store import S3Store

        config: dict[str, Any] = {"region": self.region}
        if self.endpoint_url:
            config["endpoint"] = self.endpoint_url
        if self.access_key_id and self.secret_access_key:
            config.update(access_key_id=self.access_key_id, secret_access_key=self.secret_access_key)
            if self.session_token:
                config["session_token"] = self.session_token
        client = {"allow_http": True} if self.allow_http else None
        options: Any = client  # obstore's TypedDicts (S3Config, ClientConfig, RetryConfig) take these keys
        return S3Store(bucket, config=cast(Any, config), client_options=options,
                       retry_config=cast(Any, self.retry.obstore_config()))


class _Upload:
    """``open_output`` of an object store: the bytes are buffered and put as one object when the ``with`` block
    ends without an error (an error uploads nothing: no partial object is ever visible)."""

    def __init__(self, io: S3FileIO, path: str) -> None:
        self.io = io
        self.path = path
        self.sink = pa.BufferOutputStream()

    def __enter__(self) -> pa.BufferOutputStream:
        return self.sink

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        data = self.sink.getvalue()
        if exc_type is None:
            self.io.put(self.path, data)


class _RangeReader(pyio.RawIOBase):
    """A seekable file over an object larger than :data:`WHOLE_READ_MAX`: each read is one ranged GET (retried)."""

    def __init__(self, fio: S3FileIO, path: str, size: int) -> None:
        super().__init__()
        self.fio = fio
        self.path = path
        self.size = size
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def read(self, size: int | None = -1) -> bytes:
        end = self.size if size is None or size < 0 else min(self.size, self.pos + size)
        if end <= self.pos:
            return b""
        data = self.fio.read_range(self.path, self.pos, end)
        self.pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


class S3FileIO(FileIO):
    """A table on S3 or an S3-compatible store (``s3://bucket/prefix``, also ``s3a://``).

    Args:
        base_path: the table URI.
        storage_options: per-table settings over the ``AWS_*`` environment (names in :data:`OPTION_NAMES`).
    """

    hadoop_compatible = False  # Spark reads these files through the FileIO unless the cluster has an S3 connector
    whole_object_writes = True  # a PutObject is all or nothing
    remote = True  # a request each

    def __init__(self, base_path: str, storage_options: Mapping[str, str] | None = None) -> None:
        parsed = urlparse(base_path)
        if not parsed.netloc:
            raise StorageError(f"an S3 table URI names a bucket: s3://bucket/path, not {base_path!r}")
        self.options = S3Options.resolve(storage_options)
        self.storage_options = dict(storage_options or {})
        self.base = f"{parsed.netloc}{parsed.path}".rstrip("/")
        self.uri = base_path
        self.bucket = parsed.netloc
        self._store: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_store"] = None  # rebuilt lazily where it is used
        return state

    @property
    def store(self) -> Any:
        """The ``obstore`` client (made on first use)."""
        if self._store is None:
            self._store = self.options.object_store(self.bucket)
        return self._store

    def key_of(self, path: str) -> str:
        """The object key of a full path (``bucket/key``)."""
        bucket, _, key = path.partition("/")
        if bucket != self.bucket:
            raise StorageError(f"{path!r} is not in bucket {self.bucket!r}")
        return key

    def table_uri(self) -> str:
        """``s3://bucket/prefix``."""
        return self.uri_of(self.base)

    def uri_of(self, path: str) -> str:
        """``s3://`` (or the table's ``s3a://``) + ``path``."""
        return f"{urlparse(self.uri).scheme}://{path}"

    def _call(self, verb: str, path: str, fn: Callable[[], T]) -> T:
        """``fn()`` retried under the table's retry budget (:func:`tablecore.io.retry.call_with_retries`)."""
        return call_with_retries(self.options.retry, f"S3 {verb} {self.uri_of(path)}", fn)

    # reads -------------------------------------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        """One HEAD for a file; a one-key LIST when the name is a prefix ("directory")."""
        import obstore

        key = self.key_of(path)

        def probe() -> bool:
            try:
                obstore.head(self.store, key)
                return True
            except FileNotFoundError:
                pass
            for chunk in obstore.list(self.store, key.rstrip("/") + "/", chunk_size=1):
                return bool(chunk)
            return False

        return self._call("HEAD", path, probe)

    def read_bytes(self, path: str) -> bytes:
        """The whole object in one ``GetObject``: one version of it, whatever is written meanwhile (a HEAD then a GET
        could pair the length of one version with the bytes of the next). FileNotFoundError if there is none."""
        import obstore

        key = self.key_of(path)
        return self._call("GET", path, lambda: bytes(obstore.get(self.store, key).bytes()))

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of an object (one ranged GET)."""
        import obstore

        key = self.key_of(path)
        return self._call("GET", path, lambda: bytes(obstore.get_range(self.store, key, start=start, end=end)))

    def open_input(self, path: str) -> Any:
        """A seekable ``pyarrow`` input file: the whole object, got in one GET, when it has at most
        :data:`WHOLE_READ_MAX` bytes; else a file reading ranges on demand (the body of that first GET is dropped)."""
        import obstore

        key = self.key_of(path)

        def fetch() -> tuple[int, Any]:
            got = obstore.get(self.store, key)
            size = int(got.meta["size"])
            return size, (got.bytes() if size <= WHOLE_READ_MAX else None)

        size, data = self._call("GET", path, fetch)
        if data is not None:
            return pa.BufferReader(pa.py_buffer(data))
        return pa.PythonFile(_RangeReader(self, path, size), mode="r")

    def _objects(self, directory: str, *, recursive: bool) -> list[Any]:
        """The listed objects under ``directory`` (``ObjectMeta`` of obstore)."""
        import obstore

        key = self.key_of(directory) if directory != self.bucket else ""
        prefix = key.strip("/") or None

        def fetch() -> list[Any]:
            if recursive:
                return [m for chunk in obstore.list(self.store, prefix, chunk_size=1000) for m in chunk]
            return list(obstore.list_with_delimiter(self.store, prefix)["objects"])

        return self._call("LIST", directory, fetch)

    def list(self, directory: str, *, recursive: bool = False) -> list[FileInfo]:
        """Files (not "directories") under ``directory``; empty if there are none. One LIST request per 1000
        objects."""
        out = []
        for meta in self._objects(directory, recursive=recursive):
            key = str(meta["path"])
            if key.endswith("/"):
                continue  # a directory marker
            out.append(FileInfo(f"{self.bucket}/{key}", posixpath.basename(key), int(meta["size"]),
                                int(meta["last_modified"].timestamp() * 1_000_000_000)))
        return out

    # writes ------------------------------------------------------------------------------------------------------
    def put(self, path: str, data: bytes | pa.Buffer, *, create: bool = False) -> bool:
        """One ``PutObject`` (``create``: conditional on the key being absent; False if it existed), retried.

        A create carries a token of its own. A 412 to its first attempt is another writer's object. A 412 to a retry
        may answer our own earlier attempt, which wrote the object but whose answer was lost: the token read back
        (one HEAD) tells — ours is our success, another is another writer's object."""
        import obstore
        from obstore.exceptions import AlreadyExistsError

        key = self.key_of(path)
        body = data.to_pybytes() if isinstance(data, pa.Buffer) else data  # obstore takes bytes, not Buffers
        if not create:
            self._call("PUT", path, lambda: obstore.put(self.store, key, body, use_multipart=False))
            return True
        token = uuid.uuid4().hex
        sent = [False]  # whether an earlier attempt may have written the object

        def attempt() -> bool:
            try:
                obstore.put(self.store, key, body, mode="create", use_multipart=False,
                            attributes={TOKEN_ATTRIBUTE: token})
                return True
            except AlreadyExistsError:
                if not sent[0]:
                    return False
            except Exception:
                sent[0] = True
                raise
            try:
                found = obstore.get(self.store, key, options={"head": True}).attributes.get(TOKEN_ATTRIBUTE)
            except FileNotFoundError:
                raise Retry(f"{key} was deleted after it refused our create") from None
            if found == token:
                logger.info("conditional put of %s: an earlier attempt had written it (its answer was lost)", key)
            return bool(found == token)

        return self._call("PUT (create)", path, attempt)

    def makedirs(self, directory: str) -> None:
        """Nothing: an object store has no directories."""

    def open_output(self, path: str) -> Any:
        """A context manager giving a ``pyarrow`` output stream; the object is put (once, whole) on a clean exit."""
        return _Upload(self, path)

    def write_bytes(self, path: str, data: bytes) -> None:
        """One ``PutObject``: readers see the old or the new object, never a part."""
        self.put(path, data)

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """A conditional put (``If-None-Match: *``): atomic on the store, whoever else tries."""
        return self.put(path, data, create=True)

    def supports_atomic_create(self) -> bool:
        """Whether the store honours conditional puts, probed once per endpoint and bucket in this process: a new
        object created twice with ``If-None-Match: *`` must be refused the second time (S3, MinIO, moto do; some
        S3-compatible stores ignore the header and overwrite). Three requests under the table's lakegate folder."""
        key = (self.options.endpoint_url, self.bucket)
        known = _CONDITIONAL_PUTS.get(key)
        if known is None:
            probe = self.join(".hoodie", ".aux", "lakegate", f".conditional-put-probe-{uuid.uuid4().hex}")
            try:
                known = self.put(probe, b"1", create=True) and not self.put(probe, b"2", create=True)
            finally:
                self.delete(probe)
            _CONDITIONAL_PUTS[key] = known
            if not known:
                logger.warning("the S3 store %s (bucket %s) ignores conditional puts (If-None-Match)",
                               self.options.endpoint_url or "of AWS", self.bucket)
        return known

    def move(self, source: str, target: str) -> None:
        """Copy, then delete the source (S3 has no rename; the copy is atomic for readers of ``target``)."""
        import obstore

        src, dst = self.key_of(source), self.key_of(target)
        self._call("COPY", source, lambda: obstore.copy(self.store, src, dst, overwrite=True))
        self._call("DELETE", source, lambda: obstore.delete(self.store, src))

    def delete(self, path: str, *, missing_ok: bool = True) -> None:
        """One ``DeleteObjects`` (S3 answers success for a missing key; ``missing_ok=False`` checks first)."""
        import obstore

        if not missing_ok and not self.exists(path):
            raise FileNotFoundError(path)
        key = self.key_of(path)
        self._call("DELETE", path, lambda: obstore.delete(self.store, key))

    def delete_dir(self, directory: str) -> None:
        """Delete every object under ``directory``: a LIST, then a ``DeleteObjects`` per 1000 keys."""
        import obstore

        keys = [str(m["path"]) for m in self._objects(directory, recursive=True)]
        if keys:
            self._call("DELETE", directory, lambda: obstore.delete(self.store, keys))


def is_s3(uri: str) -> bool:
    """True for ``s3://`` and ``s3a://`` URIs."""
    return urlparse(uri).scheme in ("s3", "s3a")


def check_storage_options(io: FileIO, storage_options: Mapping[str, str] | None) -> None:
    """Refuse storage options for a backend that takes none."""
    if storage_options and not isinstance(io, S3FileIO):
        raise StorageError(f"storage options are for s3:// tables; {io.uri!r} takes none")
