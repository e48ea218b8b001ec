"""The independent oracle: hudi-rs (PyPI ``hudi``) reads a table; rows are normalized for comparison."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import os
from typing import Any

import pyarrow as pa
from hudi import HudiQueryType, HudiReadOptions, HudiTable

SORT = ("_hoodie_partition_path", "_hoodie_record_key")


def _norm(v: Any) -> Any:
    if isinstance(v, bytes):
        return "b64:" + base64.b64encode(v).decode()
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, dt.datetime):
        return v.astimezone(dt.UTC).isoformat() if v.tzinfo else v.isoformat()
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_norm(x) for x in v]
    return v


def rows(table: pa.Table, *, drop_meta: tuple[str, ...] = ("_hoodie_commit_seqno", "_hoodie_file_name"),
         ) -> list[dict[str, Any]]:
    """Rows as normalized dicts sorted by partition path and record key (then by every value: a read-optimized view
    can hold a key twice, deleted by a log in one file group and written again into another)."""
    keep = [c for c in table.column_names if c not in drop_meta]
    out = [{k: _norm(v) for k, v in r.items()} for r in table.select(keep).to_pylist()]
    return sorted(out, key=lambda r: (tuple(str(r.get(k)) for k in SORT), repr(sorted(r.items()))))


def storage_options(uri: str) -> dict[str, str] | None:
    """hudi-rs storage options of a table URI: the test S3 server's endpoint for ``s3://``, from the environment."""
    if not uri.startswith("s3://"):
        return None
    endpoint = os.environ["AWS_ENDPOINT_URL"]
    return {"aws_endpoint_url": endpoint, "aws_allow_http": str(endpoint.startswith("http://")).lower(),
            "aws_region": os.environ.get("AWS_REGION", "us-east-1"),
            "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"]}


def hudi_table(uri: str) -> HudiTable:
    """hudi-rs's view of the table at ``uri``."""
    return HudiTable(uri, options=storage_options(uri))


def _read(uri: str, opts: HudiReadOptions) -> pa.Table:
    t = hudi_table(uri)
    batches = t.read(opts)
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def hudi_snapshot(uri: str, as_of: str | None = None) -> list[dict[str, Any]]:
    """hudi-rs snapshot (or time travel) rows."""
    opts = HudiReadOptions()
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    return rows(_read(uri, opts))


def hudi_read_optimized(uri: str, as_of: str | None = None) -> list[dict[str, Any]]:
    """hudi-rs read-optimized rows (base files only)."""
    opts = HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    if as_of is not None:
        opts = opts.with_as_of_timestamp(as_of)
    return rows(_read(uri, opts))


def hudi_incremental(uri: str, start: str, end: str) -> list[dict[str, Any]]:
    """hudi-rs incremental rows in (start, end]."""
    opts = (HudiReadOptions().with_query_type(HudiQueryType.Incremental)
            .with_start_timestamp(start).with_end_timestamp(end))
    return rows(_read(uri, opts))


def hudi_completed(uri: str) -> list[str]:
    """Completed commit/deltacommit/replacecommit times hudi-rs sees."""
    tl = hudi_table(uri).get_timeline()
    times = [i.timestamp for i in tl.get_completed_commits()]
    times += [i.timestamp for i in tl.get_completed_deltacommits()]
    times += [i.timestamp for i in tl.get_completed_replacecommits()]
    return sorted(set(times))


def spark_rows(df: Any) -> list[dict[str, Any]]:
    """Our reader's rows, normalized the same way."""
    return rows(df.toArrow())


def assert_same_as_hudi(table: Any) -> None:
    """Snapshot, every as_of and every incremental step read the same through hudi-rs as through our reader."""
    uri = table.uri
    ours = spark_rows(table.read())
    theirs = hudi_snapshot(uri)
    assert ours == theirs, "snapshot differs from hudi-rs"
    assert spark_rows(table.read(view="read_optimized")) == hudi_read_optimized(uri), \
        "read-optimized view differs from hudi-rs"
    writes = [i for i in table.timeline()
              if i.state == "completed" and i.action in ("commit", "deltacommit", "replacecommit")]
    instants = [i.instant for i in writes]
    assert hudi_completed(uri) == instants
    # incremental ranges: instant times on version 6, completion times from version 8 (both readers agree on that)
    position = {i.instant: i.completed or i.instant for i in writes}
    # instants a clean removed slices of are no read targets (our reader raises CleanedRangeError, hudi-rs
    # returns partial data): compare from the earliest retained instant on
    earliest = table.protocol.load_timeline().earliest_retained() or ""
    prev = "19700101000000000"
    for inst in instants:
        if inst < earliest:
            prev = position[inst]
            continue
        assert spark_rows(table.read(as_of=inst)) == hudi_snapshot(uri, inst), f"as_of {inst} differs"
        end = position[inst]
        assert spark_rows(table.read_changes(start=prev, end=end)) == hudi_incremental(uri, prev, end), \
            f"incremental ({prev}, {end}] differs"
        prev = position[inst]
