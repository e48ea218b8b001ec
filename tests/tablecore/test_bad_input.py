"""Acceptance 4: bad input raises a clear, specific exception and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tablecore import (
    ConfigError,
    InvalidInputError,
    SchemaEvolutionError,
    Table,
    TableConfig,
    TableCorruptError,
    TableExistsError,
    TableNotFoundError,
)
from tablecore.table_properties import recover_properties

DDL = "id string, part string, ts long, v int"


def snapshot_of_files(root: str) -> set[str]:
    return {str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file() and ".aux" not in p.parts}


@pytest.fixture
def table(table_path: str, spark) -> Table:
    t = Table.create(table_path, TableConfig(name="b", record_key=["id"], ordering_field="ts",
                                             partition_fields=["part"]), spark=spark)
    t.upsert(spark.createDataFrame([("a", "p1", 1, 1), ("b", "p2", 1, 2)], DDL))
    return t


@pytest.mark.spark
@pytest.mark.parametrize(("rows", "ddl", "error", "match"), [
    ([(None, "p1", 1, 1)], DDL, InvalidInputError, "null or empty record key"),
    ([("", "p1", 1, 1), ("c", "p1", 1, 1)], DDL, InvalidInputError, "1 input rows have a null or empty record key"),
    ([("p1", 1, 1)], "part string, ts long, v int", InvalidInputError, "no record key column 'id'"),
    ([("c", "p1", 1)], "id string, part string, v int", InvalidInputError, "no ordering column 'ts'"),
    ([("c", 1, 1)], "id string, ts long, v int", InvalidInputError, "no partition column 'part'"),
    ([("c", "p1", 1, "x")], "id string, part string, ts long, v string", SchemaEvolutionError, "'v'"),
    ([("c", "p1", 1)], "id string, part string, ts long", SchemaEvolutionError, "'v' is missing"),
    ([("c", "p1", 1, 1, None)], DDL + ", at timestamp_ntz", InvalidInputError, "'at' holds timestamp_ntz"),
    ([("c", "p1", 1, 1, None)], DDL + ", s struct<a: array<timestamp_ntz>>", InvalidInputError, "'s' holds"),
])
def test_bad_batch_raises_and_writes_nothing(table: Table, spark, rows, ddl, error, match) -> None:
    before_files = snapshot_of_files(table.path)
    before_timeline = table.timeline()
    with pytest.raises(error, match=match):
        table.upsert(spark.createDataFrame(rows, ddl))
    assert snapshot_of_files(table.path) == before_files
    assert table.timeline() == before_timeline


@pytest.mark.spark
def test_delete_without_partition_column_raises(table: Table, spark) -> None:
    with pytest.raises(InvalidInputError, match="no partition column 'part'"):
        table.delete(spark.createDataFrame([("a",)], "id string"))


@pytest.mark.spark
def test_open_a_path_that_is_not_a_table(tmp_path: Path, spark) -> None:
    with pytest.raises(TableNotFoundError, match="no table at"):
        Table.open(str(tmp_path), spark=spark)


@pytest.mark.spark
def test_create_twice_raises(table: Table, spark) -> None:
    with pytest.raises(TableExistsError):
        Table.create(table.path, table.config, spark=spark)


@pytest.mark.spark
@pytest.mark.parametrize(("mutate", "match"), [
    (lambda s: s.replace("hoodie.table.version=6", "hoodie.table.version=5"), "version"),
    (lambda s: s.replace("hoodie.table.type=COPY_ON_WRITE", "hoodie.table.type=BANANA"), "table_type"),
])
def test_unsupported_properties_raise_config_error(table: Table, spark, mutate, match) -> None:
    props = Path(table.path) / ".hoodie" / "hoodie.properties"
    props.write_text(mutate(props.read_text()))
    with pytest.raises(ConfigError, match=match):
        Table.open(table.path, spark=spark)


@pytest.mark.spark
@pytest.mark.parametrize(("mutate", "match"), [
    (lambda s: s.replace("hoodie.table.checksum=", "hoodie.table.checksum=1"), "checksum"),
    (lambda s: s.replace("hoodie.table.name=b\n", ""), "does not match the table name"),
    (lambda s: "\\u12", "does not parse"),
    (lambda s: s[: s.index("hoodie.table.checksum")], "no hoodie.table.checksum"),
    (lambda s: "", "empty"),
])
def test_damaged_properties_raise_table_corrupt_error_then_read_from_the_backup(table: Table, spark, mutate,
                                                                                match) -> None:
    props = Path(table.path) / ".hoodie" / "hoodie.properties"
    good = props.read_text()
    props.write_text(mutate(good))
    with pytest.raises(TableCorruptError, match=match) as err:
        Table.open(table.path, spark=spark)
    assert err.value.path is not None and err.value.path.endswith("hoodie.properties")
    # with Hudi's backup beside it (a rewrite killed midway), the table opens from the backup
    (props.parent / "hoodie.properties.backup").write_text(good)
    assert Table.open(table.path, spark=spark).config == table.config
    assert recover_properties(table.io) is True
    assert props.read_text() == good and not (props.parent / "hoodie.properties.backup").exists()
    assert recover_properties(table.io) is False


@pytest.mark.parametrize("name", ["a/b", "../x", "my table", "a.b", "", "x\\y"])
def test_table_name_with_path_characters_is_rejected(name: str) -> None:
    with pytest.raises(ConfigError, match="invalid"):
        TableConfig.build(name=name, record_key=["id"])
