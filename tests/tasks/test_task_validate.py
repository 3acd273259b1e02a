"""Validate step: every unusable input is refused with one paragraph naming table and column."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tasks.errors import PipelineInputError
from tasks.load import load_table
from tasks.validate import validate_input


def _table(tmp_path: Path, sql: str, name: str = "t") -> Path:
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE {name} AS {sql}")
    return path


def _validate(path: Path, table: str = "t", **kwargs: object):
    source = load_table.fn(str(path), table, kwargs.get("key"))
    return validate_input.fn(source, **kwargs)


def test_default_columns_are_the_numeric_ones_but_the_key(warehouse: Path) -> None:
    """Without --columns, every numeric column except the key is imputed; counts are reported."""
    plan = _validate(warehouse, "readings", key="id")
    assert plan.columns == ("temperature", "pressure", "humidity", "visits", "price")
    assert plan.target_table == "readings_imputed"
    assert plan.missing["price"] == 0
    assert plan.n_missing == sum(plan.missing.values()) > 0


def test_columns_are_matched_case_insensitively(warehouse: Path) -> None:
    """Column names resolve as DuckDB resolves them, and keep their stored spelling."""
    plan = _validate(warehouse, "readings", columns=["Temperature", "PRESSURE"])
    assert plan.columns == ("temperature", "pressure")


@pytest.mark.parametrize(
    ("sql", "kwargs", "message"),
    [
        (
            "SELECT i * 1.0 AS x FROM range(10) r(i)",
            {"columns": ["x", "nope"]},
            r'column does not exist in table "t": "nope"',
        ),
        (
            "SELECT i * 1.0 AS x, 'a' AS label FROM range(10) r(i)",
            {"columns": ["x", "label"]},
            r'non-numeric "label" \(VARCHAR\)',
        ),
        (
            "SELECT i * 1.0 AS x, NULL::DOUBLE AS empty FROM range(10) r(i)",
            {},
            r'Table "t" cannot be imputed: column "empty" has no observed value',
        ),
        (
            "SELECT CASE WHEN i = 3 THEN 'inf'::DOUBLE WHEN i = 4 THEN NULL ELSE i END AS x, "
            "i * 2.0 AS y FROM range(10) r(i)",
            {},
            r'column "x" holds infinite values in 1 row \(0-based row numbers 3\)',
        ),
        (
            "SELECT i * 1.0 AS x FROM range(3) r(i)",
            {},
            r"it has 3 rows, and imputation needs at least 4",
        ),
        (
            "SELECT i % 5 AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "k"},
            r'the key column "k" is not unique \(5 duplicated values',
        ),
        (
            "SELECT CASE WHEN i = 2 THEN NULL ELSE i END AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "k"},
            r'the key column "k" is NULL in 1 rows',
        ),
        (
            "SELECT i AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "nope"},
            r'key column "nope" does not exist in table "t"',
        ),
        (
            "SELECT ('k' || i)::BLOB AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "k"},
            r'key column "k" of table "t" is BLOB, which cannot serve as a key',
        ),
        (
            "SELECT [i] AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "k"},
            r'key column "k" of table "t" is BIGINT\[\], which cannot serve as a key',
        ),
        (
            "SELECT {'a': i} AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "k"},
            r'key column "k" of table "t" is STRUCT\(a BIGINT\), which cannot serve as a key',
        ),
        (
            "SELECT i AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "k", "columns": ["k", "x"]},
            r'key column "k" of table "t" cannot also be imputed',
        ),
        (
            "SELECT i * 1.0 AS x FROM range(10) r(i)",
            {"target": "T"},
            r'target table "T" is the source table "t".*--replace-source',
        ),
        (
            "SELECT i * 1.0 AS x FROM range(10) r(i)",
            {"target": "other", "replace_source": True},
            r"Asked to replace the source table",
        ),
        (
            "SELECT i * 1.0 AS x FROM range(10) r(i)",
            {"target": "tdm_lineage"},
            r"reserved",
        ),
        (
            "SELECT 'a' || i AS label FROM range(10) r(i)",
            {},
            r'Table "t" has no numeric column to impute',
        ),
    ],
    ids=[
        "unknown-column", "non-numeric", "all-missing", "inf", "too-few-rows", "duplicate-key",
        "null-key", "unknown-key", "blob-key", "list-key", "struct-key", "key-in-columns",
        "target-is-source", "replace-and-target", "reserved-target", "no-numeric-column",
    ],
)  # fmt: skip
def test_bad_input_is_refused_with_a_clear_message(
    tmp_path: Path, sql: str, kwargs: dict, message: str
) -> None:
    """Each bad input raises PipelineInputError whose one-paragraph message names the problem."""
    path = _table(tmp_path, sql)
    with pytest.raises(PipelineInputError, match=message) as caught:
        _validate(path, **kwargs)
    assert "\n" not in str(caught.value)


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    """All value problems of a table are listed in the same paragraph."""
    path = _table(
        tmp_path,
        "SELECT CASE WHEN i = 1 THEN '-inf'::DOUBLE ELSE i END AS x, NULL::DOUBLE AS y, "
        "i % 3 AS k FROM range(9) r(i)",
    )
    with pytest.raises(PipelineInputError) as caught:
        _validate(path, key="k")
    text = str(caught.value)
    assert '"x" holds infinite values' in text
    assert '"y" has no observed value' in text
    assert 'key column "k" is not unique' in text


def test_replace_source_targets_the_source(warehouse: Path) -> None:
    """With replace_source and no target, the target is the source table itself."""
    plan = _validate(warehouse, "readings", replace_source=True)
    assert plan.target_table == "readings"
    assert plan.replace_source


def test_a_table_without_missing_values_is_valid(tmp_path: Path) -> None:
    """A complete table passes validation with nothing to impute."""
    path = _table(tmp_path, "SELECT i * 1.0 AS x, i * 2.0 AS y FROM range(10) r(i)")
    plan = _validate(path)
    assert plan.n_missing == 0
