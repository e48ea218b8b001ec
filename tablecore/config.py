"""``TableConfig``: the persisted configuration of a table, and its mapping to ``.hoodie/hoodie.properties``.

Every key Spark SQL writes for a version-6 table is written (format reference §1.1), including the checksum;
lakegate's own settings (index, file sizing) are stored under their Hudi write-config names, which Hudi readers
ignore.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tablecore.exceptions import ConfigError
from tablecore.format.properties import format_properties, parse_properties, table_checksum

TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
MergeMode = Literal["COMMIT_TIME_ORDERING", "EVENT_TIME_ORDERING"]
IndexType = Literal["SIMPLE", "BLOOM", "BUCKET", "RECORD_INDEX"]
METADATA_BY_LAKEGATE = "lakegate.metadata.table"
"""The ``hoodie.properties`` key (``true``) of a metadata table lakegate built and maintains."""
BLOOM_FILTERS_ENABLED = "hoodie.parquet.bloom.filter.enabled"
"""The ``hoodie.properties`` key (``true``) of a table whose base files carry key bloom filters without the bloom
index (``TableConfig.bloom_filters``)."""
CdcMode = Literal["OP_KEY_ONLY", "DATA_BEFORE", "DATA_BEFORE_AFTER"]

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

KEYGEN_SIMPLE = "org.apache.hudi.keygen.SimpleKeyGenerator"
KEYGEN_COMPLEX = "org.apache.hudi.keygen.ComplexKeyGenerator"
KEYGEN_NONPARTITIONED = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
PAYLOAD_BY_MODE: dict[str, str] = {
    "COMMIT_TIME_ORDERING": "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload",
    "EVENT_TIME_ORDERING": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
}
MODE_BY_PAYLOAD = {v: k for k, v in PAYLOAD_BY_MODE.items()}
DEFAULT_MERGER_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"

KEYGEN_BY_TYPE: dict[str, str] = {  # hoodie.table.keygenerator.type (Hudi 1.x) -> the class it names
    "SIMPLE": KEYGEN_SIMPLE,
    "COMPLEX": KEYGEN_COMPLEX,
    "NON_PARTITION": KEYGEN_NONPARTITIONED,
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
}
TYPE_BY_KEYGEN = {v: k for k, v in KEYGEN_BY_TYPE.items()}
MERGE_STRATEGY_BY_MODE = {  # hoodie.record.merge.strategy.id of Hudi 1.x's built-in merge modes
    "EVENT_TIME_ORDERING": DEFAULT_MERGER_STRATEGY,
    "COMMIT_TIME_ORDERING": "ce9acb64-bde0-424c-9b91-f6ebba25356d",
}
READ_VERSIONS = ("6", "8", "9")
WRITE_VERSIONS = (6, 8)

MB = 1024 * 1024


class TableConfig(BaseModel):
    """The configuration of a table, persisted in ``hoodie.properties``.

    Args:
        name: table name; letters, digits and ``_`` (it becomes an Avro record name).
        record_key: one or several record key fields (several -> ``f1:v1,f2:v2`` keys, ComplexKeyGenerator).
        ordering_field: the precombine field: dedupes a batch; decides merges under event-time ordering.
        partition_fields: none (non-partitioned), one, or several partition columns (kept in the data).
        table_type: ``COPY_ON_WRITE`` or ``MERGE_ON_READ``.
        hive_style_partitioning: ``field=value`` directories (default) or plain ``value`` directories.
        url_encode_partitions: Hive-escape special characters in partition values.
        merge_mode: ``COMMIT_TIME_ORDERING`` (the newest write wins; OverwriteWithLatestAvroPayload) or
            ``EVENT_TIME_ORDERING`` (the higher ordering value wins; DefaultHoodieRecordPayload).
        index_type: ``SIMPLE`` (join with the keys of the affected partitions), ``BLOOM`` (prune the affected
            partitions' base files by the key range and bloom filter in their footers, then read the keys of the
            files that may hold the batch's keys), ``BUCKET`` (hash to a fixed
            number of file groups per partition) or ``RECORD_INDEX`` (look the batch's keys up in the metadata
            table's record-level index: version 8 and later; a new table gets the metadata table with it).
        bloom_filters: write Hudi's record-key bloom filter (``DYNAMIC_V0``, 60,000 keys at 1e-9 per row) into
            every base file's footer (``hoodie.parquet.bloom.filter.enabled``); always on with the ``BLOOM`` index.
            Hudi writes them by default; lakegate only where they are used (a filter costs ~320 KB per file).
        record_index_file_groups: file groups of a record index built for this table (Hudi's minimum is 10).
        bucket_count: buckets per partition for the bucket index.
        target_file_size: target size of base files in bytes.
        small_file_limit: base files below this size receive new inserts.
        database_name: the Hive database name (checksum input).
        inline_compaction_delta_commits: merge-on-read: compact inline after a write once this many delta commits
            have accumulated since the last compaction (0: only on demand, ``Table.compact()``).
        table_version: the Hudi table version (``hoodie.table.version``): 6 (Hudi 0.14/0.15), or 8 / 9 (Hudi 1.0 /
            1.1), whose timeline lives in ``.hoodie/timeline/`` and records completion times.
        populate_meta_fields: whether rows carry Hudi's ``_hoodie_*`` columns (``hoodie.populate.meta.fields``).
        cdc_enabled: write CDC log files as Hudi does (``hoodie.table.cdc.enabled``): each merge into an existing
            base file leaves a ``.cdc`` log file with its inserts, updates and deletes (docs/cdc.md).
        cdc_mode: what the CDC log files hold (``hoodie.table.cdc.supplemental.logging.mode``): ``DATA_BEFORE_AFTER``
            (op, commit, before and after images), ``DATA_BEFORE`` (op, key, before image) or ``OP_KEY_ONLY``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    record_key: tuple[str, ...] = Field(min_length=1)
    ordering_field: str | None = None
    partition_fields: tuple[str, ...] = ()
    table_type: TableType = "COPY_ON_WRITE"
    hive_style_partitioning: bool = True
    url_encode_partitions: bool = False
    merge_mode: MergeMode = "COMMIT_TIME_ORDERING"
    index_type: IndexType = "SIMPLE"
    bucket_count: int | None = Field(default=None, ge=1, le=100_000)
    record_index_file_groups: int = Field(default=10, ge=1, le=9_999)
    bloom_filters: bool = False
    target_file_size: int = Field(default=128 * MB, ge=1024)
    small_file_limit: int = Field(default=100 * MB, ge=0)
    database_name: str = "default"
    key_generator_class: str | None = None
    create_schema: str | None = None
    inline_compaction_delta_commits: int = Field(default=0, ge=0)
    table_version: Literal[6, 8, 9] = 6
    populate_meta_fields: bool = True
    initial_version: int | None = None  # the version the table was created with, if not table_version (upgrades)
    metadata_partitions: tuple[str, ...] = ()  # hoodie.table.metadata.partitions: a metadata table Hudi maintains
    # lakegate.metadata.table=true: lakegate built the metadata table and every lakegate write keeps it
    # (tablecore.metadata_table); one Hudi built is disabled by lakegate's first write
    metadata_by_lakegate: bool = False
    cdc_enabled: bool = False
    cdc_mode: CdcMode = "DATA_BEFORE_AFTER"

    @field_validator("record_key", "partition_fields", "metadata_partitions", mode="before")
    @classmethod
    def _split_fields(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(s.strip() for s in v.split(",") if s.strip())
        return v

    @field_validator("name", "database_name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not _NAME_RE.match(v):
            raise ValueError(
                f"invalid name {v!r}: use letters, digits and '_' only (no path characters such as '/', '.' or spaces)"
            )
        return v

    @model_validator(mode="after")
    def _consistent(self) -> TableConfig:
        fields = [*self.record_key, *self.partition_fields, *([self.ordering_field] if self.ordering_field else [])]
        for f in fields:
            if not f or "," in f or "/" in f:
                raise ValueError(f"invalid field name {f!r}")
        if len(set(self.record_key)) != len(self.record_key):
            raise ValueError("record_key lists a field twice")
        if self.index_type == "BUCKET" and self.bucket_count is None:
            raise ValueError("index_type BUCKET needs bucket_count")
        if self.index_type != "BUCKET" and self.bucket_count is not None:
            raise ValueError("bucket_count is only valid with index_type BUCKET")
        if self.index_type == "RECORD_INDEX" and self.table_version < 8:
            raise ValueError("index_type RECORD_INDEX needs table_version 8 or later (the record index lives in "
                             "Hudi 1.x's metadata table)")
        if self.merge_mode == "EVENT_TIME_ORDERING" and not self.ordering_field:
            raise ValueError("merge_mode EVENT_TIME_ORDERING needs an ordering_field")
        if self.writes_bloom_filters and not self.populate_meta_fields:
            raise ValueError("bloom filters (index_type BLOOM, bloom_filters) need populate_meta_fields: they hold "
                             "the _hoodie_record_key values, as in Hudi")
        if self.cdc_enabled and not self.populate_meta_fields:
            raise ValueError("cdc_enabled needs populate_meta_fields (a CDC read finds a commit's rows by their "
                             "commit time)")
        if self.small_file_limit > self.target_file_size:
            raise ValueError("small_file_limit must not exceed target_file_size")
        return self

    @classmethod
    def build(cls, **kwargs: Any) -> TableConfig:
        """Like the constructor, but raises :class:`ConfigError` instead of pydantic's ValidationError."""
        try:
            return cls(**kwargs)
        except ValidationError as e:
            raise ConfigError(f"invalid table config: {_describe(e)}") from e

    @property
    def completion_times(self) -> bool:
        """True if the timeline records completion times (table versions 8 and 9)."""
        return self.table_version >= 8

    @property
    def key_generator(self) -> str:
        """The key generator class recorded for Hudi."""
        if self.key_generator_class:
            return self.key_generator_class
        if not self.partition_fields:
            return KEYGEN_NONPARTITIONED
        if len(self.record_key) == 1 and len(self.partition_fields) == 1:
            return KEYGEN_SIMPLE
        return KEYGEN_COMPLEX

    @property
    def writes_bloom_filters(self) -> bool:
        """Whether base files get Hudi's key bloom filter in their footers (the ``BLOOM`` index needs them)."""
        return self.bloom_filters or self.index_type == "BLOOM"

    @property
    def complex_keys(self) -> bool:
        """True if record keys are written as ``field:value`` pairs (ComplexKeyGenerator)."""
        if len(self.record_key) > 1:
            return True
        return self.key_generator == KEYGEN_COMPLEX

    def to_properties(self) -> dict[str, str]:
        """The ``hoodie.properties`` keys, in the order Spark SQL writes them, the checksum last."""
        p: dict[str, str] = {}
        if self.ordering_field:
            p["hoodie.table.precombine.field"] = self.ordering_field
        p["hoodie.datasource.write.drop.partition.columns"] = "false"
        if self.partition_fields:
            p["hoodie.table.partition.fields"] = ",".join(self.partition_fields)
        p["hoodie.table.type"] = self.table_type
        p["hoodie.archivelog.folder"] = "archived"
        p["hoodie.compaction.payload.class"] = PAYLOAD_BY_MODE[self.merge_mode]
        if self.table_version >= 8:  # Hudi 1.0 (docs/hudi-v8-format.md)
            p["hoodie.table.initial.version"] = str(self.initial_version or self.table_version)
            p["hoodie.record.merge.mode"] = self.merge_mode
            p["hoodie.record.merge.strategy.id"] = MERGE_STRATEGY_BY_MODE[self.merge_mode]
            p["hoodie.timeline.layout.version"] = "2"
            p["hoodie.timeline.path"] = "timeline"
            p["hoodie.timeline.history.path"] = "history"
            if self.key_generator in TYPE_BY_KEYGEN:
                p["hoodie.table.keygenerator.type"] = TYPE_BY_KEYGEN[self.key_generator]
        else:
            p["hoodie.compaction.record.merger.strategy"] = DEFAULT_MERGER_STRATEGY
            p["hoodie.timeline.layout.version"] = "1"
        p["hoodie.table.version"] = str(self.table_version)
        p["hoodie.table.recordkey.fields"] = ",".join(self.record_key)
        p["hoodie.datasource.write.partitionpath.urlencode"] = str(self.url_encode_partitions).lower()
        p["hoodie.database.name"] = self.database_name
        p["hoodie.table.name"] = self.name
        p["hoodie.table.keygenerator.class"] = self.key_generator
        p["hoodie.datasource.write.hive_style_partitioning"] = str(self.hive_style_partitioning).lower()
        p["hoodie.table.base.file.format"] = "PARQUET"
        p["hoodie.table.log.file.format"] = "HOODIE_LOG"
        p["hoodie.populate.meta.fields"] = str(self.populate_meta_fields).lower()
        p["hoodie.table.timeline.timezone"] = "UTC"
        if self.cdc_enabled:
            p["hoodie.table.cdc.enabled"] = "true"
            p["hoodie.table.cdc.supplemental.logging.mode"] = self.cdc_mode
        p["hoodie.index.type"] = self.index_type
        if self.bloom_filters:
            p[BLOOM_FILTERS_ENABLED] = "true"
        if self.bucket_count is not None:
            p["hoodie.bucket.index.num.buckets"] = str(self.bucket_count)
            p["hoodie.bucket.index.hash.field"] = ",".join(self.record_key)
        p["hoodie.parquet.max.file.size"] = str(self.target_file_size)
        p["hoodie.parquet.small.file.limit"] = str(self.small_file_limit)
        if self.inline_compaction_delta_commits:
            p["hoodie.compact.inline"] = "true"
            p["hoodie.compact.inline.max.delta.commits"] = str(self.inline_compaction_delta_commits)
        if self.create_schema:
            p["hoodie.table.create.schema"] = self.create_schema
        if self.metadata_partitions:
            p["hoodie.table.metadata.partitions"] = ",".join(self.metadata_partitions)
            p["hoodie.table.metadata.partitions.inflight"] = ""
            if self.metadata_by_lakegate:
                p[METADATA_BY_LAKEGATE] = "true"
        p["hoodie.table.checksum"] = str(table_checksum(self.database_name, self.name))
        return p

    def to_properties_text(self) -> str:
        """The full ``hoodie.properties`` file text."""
        return format_properties(self.to_properties())

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> TableConfig:
        """Read a config from parsed ``hoodie.properties``; raises :class:`ConfigError` naming what is wrong."""
        for key in ("hoodie.table.name", "hoodie.table.type"):
            if not props.get(key):
                raise ConfigError(f"hoodie.properties is missing required key {key!r}")
        version = props.get("hoodie.table.version")
        if version not in READ_VERSIONS:
            raise ConfigError(f"unsupported hoodie.table.version {version!r}: lakegate reads versions "
                              f"{', '.join(READ_VERSIONS)}")
        base_format = props.get("hoodie.table.base.file.format", "PARQUET").upper()
        if base_format != "PARQUET":
            raise ConfigError(f"unsupported base file format {base_format!r} (hoodie.table.base.file.format): "
                              "lakegate reads and writes Parquet base files")
        if props.get("hoodie.timeline.path", "timeline") != "timeline":
            raise ConfigError(f"unsupported hoodie.timeline.path {props['hoodie.timeline.path']!r}: lakegate reads "
                              "the default timeline folder, .hoodie/timeline")
        name = props["hoodie.table.name"]
        db = props.get("hoodie.database.name", "")
        checksum = props.get("hoodie.table.checksum")
        if checksum is not None and (not checksum.isdigit() or int(checksum) != table_checksum(db, name)):
            raise ConfigError(
                f"hoodie.properties seems invalid: checksum {checksum!r} does not match table name {name!r}"
            )
        ttype = props["hoodie.table.type"].upper()
        ttype = {"COW": "COPY_ON_WRITE", "MOR": "MERGE_ON_READ"}.get(ttype, ttype)
        payload = props.get("hoodie.compaction.payload.class", PAYLOAD_BY_MODE["COMMIT_TIME_ORDERING"])
        mode = props.get("hoodie.record.merge.mode", "").upper() or MODE_BY_PAYLOAD.get(payload, "COMMIT_TIME_ORDERING")
        if mode not in PAYLOAD_BY_MODE:
            raise ConfigError(f"unsupported hoodie.record.merge.mode {mode!r}: lakegate merges by "
                              f"{' or '.join(PAYLOAD_BY_MODE)}")
        keygen = props.get("hoodie.table.keygenerator.class") or KEYGEN_BY_TYPE.get(
            props.get("hoodie.table.keygenerator.type", "").upper())
        kwargs: dict[str, Any] = {
            "name": name,
            "record_key": props.get("hoodie.table.recordkey.fields", "") or ("_hoodie_record_key",),
            "ordering_field": props.get("hoodie.table.precombine.field") or props.get("hoodie.table.ordering.fields")
            or None,
            "partition_fields": props.get("hoodie.table.partition.fields", ""),
            "table_type": ttype,
            "hive_style_partitioning": _bool(props.get("hoodie.datasource.write.hive_style_partitioning", "false")),
            "url_encode_partitions": _bool(props.get("hoodie.datasource.write.partitionpath.urlencode", "false")),
            "merge_mode": mode,
            "index_type": props.get("hoodie.index.type", "SIMPLE").upper(),
            "database_name": db or "default",
            "key_generator_class": keygen if keygen not in (None, KEYGEN_SIMPLE, KEYGEN_COMPLEX,
                                                            KEYGEN_NONPARTITIONED) else None,
            "create_schema": props.get("hoodie.table.create.schema"),
            "table_version": int(version),
            "populate_meta_fields": _bool(props.get("hoodie.populate.meta.fields", "true")),
        }
        kwargs["metadata_partitions"] = props.get("hoodie.table.metadata.partitions", "")
        kwargs["metadata_by_lakegate"] = _bool(props.get(METADATA_BY_LAKEGATE, "false"))
        if _bool(props.get("hoodie.table.cdc.enabled", "false")):
            kwargs["cdc_enabled"] = True
            # case-insensitive, as Java's valueOf(...toUpperCase()): Hudi 0.13 wrote the modes in lower case
            kwargs["cdc_mode"] = props.get("hoodie.table.cdc.supplemental.logging.mode", "DATA_BEFORE_AFTER").upper()
        initial = props.get("hoodie.table.initial.version", "")
        if initial.isdigit() and initial != version:
            kwargs["initial_version"] = int(initial)
        if "hoodie.bucket.index.num.buckets" in props:
            kwargs["bucket_count"] = int(props["hoodie.bucket.index.num.buckets"])
        for key, field in (("hoodie.parquet.max.file.size", "target_file_size"),
                           ("hoodie.parquet.small.file.limit", "small_file_limit"),
                           ("hoodie.compact.inline.max.delta.commits", "inline_compaction_delta_commits")):
            if key in props:
                kwargs[field] = int(props[key])
        kwargs["bloom_filters"] = _bool(props.get(BLOOM_FILTERS_ENABLED, "false"))
        if kwargs["index_type"] not in ("SIMPLE", "BLOOM", "BUCKET", "RECORD_INDEX") or \
                (kwargs["index_type"] == "RECORD_INDEX" and int(version) < 8):
            kwargs["index_type"] = "SIMPLE"
        if kwargs["merge_mode"] == "EVENT_TIME_ORDERING" and not kwargs["ordering_field"]:
            kwargs["merge_mode"] = "COMMIT_TIME_ORDERING"
        try:
            config = cls(**kwargs)
            if keygen == KEYGEN_COMPLEX and config.key_generator != KEYGEN_COMPLEX:
                # a single-field key written by ComplexKeyGenerator keeps its "field:value" form
                config = cls(**{**kwargs, "key_generator_class": KEYGEN_COMPLEX})
            return config
        except (ValidationError, ValueError) as e:
            raise ConfigError(f"hoodie.properties is invalid: {_describe(e)}") from e

    @classmethod
    def from_properties_text(cls, text: str) -> TableConfig:
        """Parse ``hoodie.properties`` text; raises :class:`ConfigError` if it is corrupt."""
        try:
            props = parse_properties(text)
        except ValueError as e:
            raise ConfigError(f"hoodie.properties is corrupt: {e}") from e
        return cls.from_properties(props)


def _bool(v: str) -> bool:
    return v.strip().lower() == "true"


def _describe(e: Exception) -> str:
    if isinstance(e, ValidationError):
        parts = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err.get("loc", ())) or "config"
            parts.append(f"{loc}: {err.get('msg')}")
        return "; ".join(parts)
    return str(e)


__all__ = ["CdcMode", "IndexType", "MergeMode", "TableConfig", "TableType"]
