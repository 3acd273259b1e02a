"""The checks `impute-table` runs before any fit (load, validate), as plain functions: each bad
input is refused with one paragraph naming the problem, and nothing changes. Two of them also
go through a flow run in `test_flow_impute_table.py`."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tasks.errors import PipelineInputError
from tasks.load import load_table
from tasks.scaling import standardise
from tasks.validate import validate_input


def _db_with(sql: str) -> Callable[[Path], Path]:
    def build(tmp_path: Path) -> Path:
        path = tmp_path / "w.duckdb"
        with duckdb.connect(str(path)) as con:
            con.execute(f"CREATE TABLE t AS {sql}")
        return path

    return build


_GOOD = "SELECT i AS k, CASE WHEN i % 4 = 0 THEN NULL ELSE i * 1.5 END AS x, 'a' AS s, " \
    "i * 2.0 AS y, DATE '2024-01-01' AS day FROM range(12) r(i)"  # fmt: skip

BAD_INPUTS: dict[str, tuple[Callable[[Path], Path], dict[str, Any], str]] = {
    "missing-database": (
        lambda tmp: tmp / "absent.duckdb", {}, r"absent\.duckdb' does not exist",
    ),
    "missing-table": (_db_with(_GOOD), {"source_table": "nope"}, r'Table "nope" does not exist'),
    "unknown-column": (
        _db_with(_GOOD), {"columns": ["x", "zz"]}, r'not exist in table "t": "zz"',
    ),
    "unusable-column": (
        _db_with(_GOOD), {"columns": ["x", "day"]}, r'has "day" \(DATE\) among the chosen',
    ),
    "no-observed-value": (
        _db_with("SELECT i * 1.0 AS x, NULL::DOUBLE AS gone FROM range(9) r(i)"),
        {"columns": ["x", "gone"]}, r'column "gone" has no observed value',
    ),
    "inf": (
        _db_with("SELECT CASE WHEN i = 2 THEN 'inf'::DOUBLE WHEN i = 3 THEN NULL ELSE i END AS x "
                 "FROM range(9) r(i)"), {},
        r'column "x" holds infinite values',
    ),
    "too-few-rows": (
        _db_with("SELECT CASE WHEN i = 0 THEN NULL ELSE i END AS x FROM range(3) r(i)"), {},
        r"it has 3 rows, and imputation needs at least 4",
    ),
    "duplicate-key": (
        _db_with("SELECT i % 3 AS k, CASE WHEN i = 0 THEN NULL ELSE i END AS x "
                 "FROM range(9) r(i)"), {"key": "k"},
        r'key column "k" is not unique',
    ),
    "null-key": (
        _db_with("SELECT NULLIF(i, 4) AS k, CASE WHEN i = 0 THEN NULL ELSE i END AS x "
                 "FROM range(9) r(i)"), {"key": "k"},
        r'key column "k" is NULL in 1 row\b',
    ),
    "rowid-column-updated-in-place": (
        _db_with("SELECT 11 - i AS rowid, CASE WHEN i % 3 = 0 THEN NULL ELSE i * 1.5 END AS x, "
                 "i * 2.0 AS y FROM range(12) r(i)"), {"replace_source": True},
        r'column named "rowid", which clashes with DuckDB.s row id, used by an update in place',
    ),
    "bounds-on-the-key": (
        _db_with(_GOOD), {"key": "k", "bounds": {"K": [0, 5]}},
        r'bounds given for column "K" of table "t" cannot apply: it is the key, which is never',
    ),
    "target-is-source": (
        _db_with(_GOOD), {"target_table": "t"}, r'target table "t" is the source table "t"',
    ),
    "injection-in-table-name": (
        _db_with(_GOOD), {"source_table": 't; DROP TABLE t; --'},
        r'Table "t; DROP TABLE t; --" does not exist',
    ),
    "injection-in-column-name": (
        _db_with(_GOOD), {"columns": ['x" FROM t; DROP TABLE t; --']},
        r'not exist in table "t": "x" FROM t; DROP TABLE t; --"',
    ),
}  # fmt: skip


@pytest.mark.parametrize(("build", "kwargs", "message"), BAD_INPUTS.values(), ids=BAD_INPUTS)
def test_bad_input_is_refused_by_the_checks_before_the_fit(
    tmp_path: Path,
    take_snapshot: Callable[[Path], dict],
    build: Callable[[Path], Path],
    kwargs: dict[str, Any],
    message: str,
) -> None:
    """The load and validate steps the flow runs first refuse each bad input with one paragraph
    naming the problem, and leave the warehouse unchanged."""
    path = build(tmp_path)
    before = take_snapshot(path) if path.exists() else None
    arguments = {"source_table": "t", "columns": None, "key": None, "target_table": None, **kwargs}
    with pytest.raises(PipelineInputError) as refused:
        source = load_table.fn(str(path), arguments.pop("source_table"), arguments["key"])
        validate_input.fn(source, target=arguments.pop("target_table"), **arguments)
    text = str(refused.value)
    assert re.search(message, text) and "\n" not in text, text
    if before is None:
        assert not path.exists()
    else:
        assert take_snapshot(path) == before


def test_a_missing_relative_database_file_says_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: a config's relative db_path, run from another folder, was "'wh.duckdb' does not
    exist" with no word of where it was looked for; an absolute path needs none."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PipelineInputError, match="relative to the working folder") as refused:
        load_table.fn("wh.duckdb", "t", None)
    assert repr(str(tmp_path)) in str(refused.value)
    with pytest.raises(PipelineInputError) as absolute:
        load_table.fn(str(tmp_path / "wh.duckdb"), "t", None)
    assert "working folder" not in str(absolute.value)


def test_values_too_far_apart_to_standardise_are_refused_naming_table_and_column(
    tmp_path: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """Bug: a DOUBLE column holding +-1.79e308 (finite codes for "unknown") was refused as
    holding "1 infinite value(s)", which `isinf` in the warehouse denies: the standardise step
    overflowed. It is refused there, naming the table, the column, the value and its row."""
    path = _db_with(
        "SELECT i AS k, CASE WHEN i = 1 THEN -1.79e308 WHEN i IN (0, 2) THEN 1.79e308 "
        "WHEN i = 5 THEN NULL ELSE i END AS a FROM range(20) r(i)"
    )(tmp_path)
    before = take_snapshot(path)
    source = load_table.fn(str(path), "t", "k")
    plan = validate_input.fn(source, columns=None, key="k", target=None)
    with pytest.raises(PipelineInputError) as refused:
        standardise.fn(source.frame, plan.columns, kinds=plan.kinds, table=plan.source_table)
    assert re.search(
        r'^Table "t" cannot be imputed: column "a" holds -1\.79e\+308 \(0-based row 1\), too far',
        str(refused.value),
    ), refused.value
    assert take_snapshot(path) == before
