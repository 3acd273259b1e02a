"""Exact cells (issue 14): observed cells come back bit for bit in their own type, in a new
target and in place (`--replace-source`, which keeps the table's definition), checked in DuckDB."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import tasks.write
from flows.steps import plan_for_rows
from tasks.errors import ChangedMeanwhileError, PipelineError, QualityCheckError
from tasks.impute import impute
from tasks.lineage import LineageRecord, current_run
from tasks.load import load_table
from tasks.quality import check_quality
from tasks.scaling import inverse_scale, standardise
from tasks.validate import validate_input
from tasks.warehouse import cells
from tasks.write import _insert_rows, check_write, filled_columns, write_back
from tests.tables import (
    column_types,
    differing_cells,
    file_hash,
    random_table,
    strict_changes,
    strict_table,
    table_definition,
    write_table,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TWO_53 = 2**53


def _prepare(
    db: Path, table: str, *, key: str | None = None, replace_source: bool = False
) -> tuple:
    """Every step up to write-back, with `task.fn` (as `conftest.prepare_write`, in place too)."""
    params = {"max_iter": 20, "init": "mean"}  # the start is the library's to test
    source = load_table.fn(str(db), table, key)
    plan = validate_input.fn(source, None, key, None, replace_source)
    scaled = standardise.fn(source.frame, plan.columns, table="t")
    outcome = impute.fn(scaled.frame, params, 0, table=table)
    imputed = inverse_scale.fn(outcome.frame, scaled.scaling, source.frame)
    report = check_quality.fn(source, plan, imputed)
    lineage = LineageRecord(current_run(), source, plan, outcome, report, 0, dict(params))
    return source, plan, imputed, lineage


def _changed_observed(db: Path, source: str, target: str, column: str, sql_type: str) -> int:
    """Observed cells of `source` whose value in `target`, cast back to `sql_type`, differs."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            f'SELECT count(*) FROM "{source}" s POSITIONAL JOIN "{target}" t '
            f'WHERE s."{column}" IS NOT NULL AND '
            f's."{column}"::VARCHAR IS DISTINCT FROM TRY_CAST(t."{column}" AS {sql_type})::VARCHAR'
        ).fetchall()[0][0]


def _wide_rows(sql_type: str, n_rows: int = 40) -> list[tuple]:
    """(id, x, wide) rows: x a DOUBLE, wide values no double holds exactly, every 5th NULL."""
    rng = np.random.default_rng(1)
    rows = []
    for i in range(n_rows):
        x = float(rng.normal())
        if sql_type == "BIGINT":
            wide: object = TWO_53 + 3 + 2 * i  # odd, above 2**53: a double rounds every one
        elif sql_type == "HUGEINT":
            wide = 2**100 + 7 * i + 1
        elif sql_type == "UBIGINT":
            wide = 2**64 - 1 - 3 * (n_rows - i)
        elif sql_type == "UHUGEINT":  # as text: DuckDB casts it on insert
            wide = str(2**128 - 1 - 5 * (n_rows - i))
        else:  # DECIMAL(38,10), 18 significant digits
            wide = f"{rng.uniform(-1e7, 1e7):.10f}"
        rows.append((i, None if i % 6 == 2 else x, None if i % 5 == 0 else wide))
    return rows


@pytest.mark.parametrize("sql_type", ["BIGINT", "HUGEINT", "UBIGINT", "UHUGEINT", "DECIMAL(38,10)"])
def test_wide_observed_values_come_back_exactly_in_their_type(
    tmp_path: Path, sql_type: str
) -> None:
    """Bug: BIGINT above 2**53 (and HUGEINT, UBIGINT, DECIMAL(38,10)) went through float64 into
    a DOUBLE target, every observed cell rounded, and the float-based check passed; UHUGEINT
    could not be read at all."""
    db = tmp_path / "w.duckdb"
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "wide": sql_type}, _wide_rows(sql_type))
    source, plan, imputed, lineage = _prepare(db, "t")
    write_back.fn(source, plan, imputed, lineage)
    assert _changed_observed(db, "t", "t_imputed", "wide", sql_type) == 0
    assert column_types(db, "t_imputed")["wide"] == sql_type
    with duckdb.connect(str(db), read_only=True) as con:
        assert (
            con.execute("SELECT count(*) FROM t_imputed WHERE wide IS NULL").fetchall()[0][0] == 0
        )
        report = json.loads(con.execute("SELECT quality_report FROM tdm_lineage").fetchall()[0][0])
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["observed_cells_exact"]["passed"]
    assert f'"wide" kept its type {sql_type}' in checks["imputed_cell_types"]["detail"]


@pytest.mark.parametrize(
    ("sql_type", "value"),
    [
        ("BIGINT", lambda i: 2**62 + 1 + i),
        ("HUGEINT", lambda i: 2**100 + 1 + i),
        ("DECIMAL(38,10)", lambda i: f"12345678901234567.00000000{i:02d}"),
        ("DECIMAL(38,10)", lambda i: "1234567.1234567891"),
    ],
)
def test_numbers_no_double_holds_are_imputed_within_their_observed_range(
    tmp_path: Path, sql_type: str, value: Callable[[int], object]
) -> None:
    """Bug: integers beyond 2**53, and DECIMAL(38,10) values of 17 or more digits, were imputed
    outside their observed range (each a double's rounding of it, which DuckDB's cast to a
    DECIMAL may move further: 12345678901234567.8152597504), and the range check passed,
    comparing in float64. Compared in the column's own type, every imputed cell lies within
    the observed minimum and maximum."""
    db = tmp_path / "w.duckdb"
    rows = [(i, float(i % 7), None if i % 5 == 0 else value(i)) for i in range(40)]
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "big": sql_type}, rows)
    write_back.fn(*_prepare(db, "t"))
    outside = (
        "SELECT count(*) FILTER (big < (SELECT min(big) FROM t) OR big > (SELECT max(big) "
        "FROM t)), count(*) FILTER (big IS NULL) FROM t_imputed"
    )
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute(outside).fetchall() == [(0, 0)]
    assert _changed_observed(db, "t", "t_imputed", "big", sql_type) == 0


def test_decimal_38_10_is_not_refused_as_misaligned(tmp_path: Path) -> None:
    """Bug: a DECIMAL(38,10) column was refused with "imputed rows do not line up", naming no
    column, because the pandas export was compared with a `::DOUBLE` cast."""
    db = tmp_path / "w.duckdb"
    rows = [(i, x, d if i % 4 else None) for i, x, d in _wide_rows("DECIMAL(38,10)", 60)]
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "d": "DECIMAL(38,10)"}, rows)
    source, plan, imputed, lineage = _prepare(db, "t", key="id")
    result = write_back.fn(source, plan, imputed, lineage)
    assert result.cells_imputed == plan.n_missing
    assert _changed_observed(db, "t", "t_imputed", "d", "DECIMAL(38,10)") == 0


@pytest.mark.parametrize(
    ("sql_type", "key"),
    [
        ("HUGEINT", "170141183460469231731687303715884105000 + i"),
        ("DECIMAL(38,10)", "i / 7"),
        ("DECIMAL(10,2)", "i / 4"),
        ("DATE", "DATE '2024-01-01' + i::INTEGER"),
        ("TIMESTAMP", "TIMESTAMP '2024-01-01 00:00:00.123456' + to_days(i::INTEGER)"),
        ("TIMESTAMPTZ", "TIMESTAMPTZ '2024-01-01 00:00:00+00' + to_days(i::INTEGER)"),
        ("VARCHAR", "'k ' || i"),
    ],
)
def test_a_key_is_unique_and_recorded_as_its_text_in_duckdb(
    tmp_path: Path, sql_type: str, key: str
) -> None:
    """Bug: a HUGEINT or DECIMAL key was read as doubles, so distinct keys above 2**53 were
    refused as "not unique"; and tdm_imputed_cells.row_key held pandas' text of the key
    ("1.7014118346046923e+38", "0.0" for 0.00, "2024-01-01T00:00:00.000000" for a DATE), which
    `key::VARCHAR` does not find. Every key is now its own, and row_key is its text in DuckDB."""
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(
            f"CREATE TABLE t AS SELECT ({key})::{sql_type} AS id, "
            "CASE WHEN i % 4 = 1 THEN NULL ELSE sin(i) END AS x, i * 1.0 AS y FROM range(40) r(i)"
        )
    write_back.fn(*_prepare(db, "t", key="id"))
    with duckdb.connect(str(db), read_only=True) as con:
        found = con.execute(
            "SELECT count(*), count(t.id) FROM tdm_imputed_cells c "
            "LEFT JOIN t ON t.id::VARCHAR = c.row_key AND t.x IS NULL"
        ).fetchall()
    assert found == [(10, 10)]


def test_misaligned_rows_are_refused_naming_the_column(
    tmp_path: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """Rows that really do not line up are still refused, now naming the column; nothing is
    written."""
    db = tmp_path / "w.duckdb"
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "b": "BIGINT"}, _wide_rows("BIGINT"))
    source, plan, imputed, lineage = _prepare(db, "t")
    shuffled = imputed.iloc[::-1].reset_index(drop=True)
    before, digest = take_snapshot(db), file_hash(db)
    with pytest.raises(QualityCheckError, match=r'do not line up.*"x" \(\d+ rows\)'):
        write_back.fn(source, plan, shuffled, lineage)
    assert take_snapshot(db) == before and file_hash(db) == digest


def test_rows_another_process_rewrote_unchanged_during_the_fit_are_a_change_to_run_again(
    tmp_path: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """Failure injection: a row deleted and inserted again with its values (as an UPDATE of an
    indexed column or an INSERT OR REPLACE does) while the fit ran kept the table's contents but
    not its order, and the run failed as rows that "do not line up", a quality failure served
    runs do not retry. It is a change made meanwhile: run again."""
    db = tmp_path / "w.duckdb"
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "b": "BIGINT"}, _wide_rows("BIGINT"))
    source, plan, imputed, lineage = _prepare(db, "t")
    with duckdb.connect(str(db)) as con:
        con.execute(
            "BEGIN; CREATE TEMP TABLE moved AS FROM t WHERE id = 3; DELETE FROM t WHERE id = 3; "
            "INSERT INTO t FROM moved; COMMIT"
        )
    before, digest = take_snapshot(db), file_hash(db)
    with pytest.raises(ChangedMeanwhileError, match=r'^Table "t" changed while .* Run again\.$'):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(db) == before and file_hash(db) == digest
    again = _prepare(db, "t")
    write_back.fn(*again)  # read again, the rows line up


def test_rows_of_a_part_that_do_not_line_up_are_still_a_quality_failure_where_rowids_skip(
    tmp_path: Path,
) -> None:
    """Review: rows read again to tell a change made meanwhile from our own misalignment were
    those between a part's least and greatest rowid, so new rows of an incremental run with a
    gap between them (old rows read too) made every misalignment "changed meanwhile"."""
    db = tmp_path / "w.duckdb"
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "b": "BIGINT"}, _wide_rows("BIGINT"))
    source, plan, imputed, _ = _prepare(db, "t", key="id")
    rows = np.r_[0:5, 20:40]  # rowids with a gap
    frame = source.frame.iloc[rows].set_axis(pd.Index(rows), axis=0)
    part = replace(source, frame=frame)
    shuffled = imputed.iloc[rows[::-1]].set_axis(pd.Index(rows), axis=0)
    with duckdb.connect(str(db)) as con, pytest.raises(QualityCheckError, match="do not line up"):
        _insert_rows(
            con, plan_for_rows(plan, frame), part, shuffled, filled_columns(source, plan),
            "temp.out", target=None,
        )  # fmt: skip


def test_an_imputed_value_outside_the_kept_type_is_refused(
    tmp_path: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """An imputed cell that does not fit its kept type (DECIMAL(4,2) here) is refused, naming
    the column, rather than written as NULL or as another type."""
    db = tmp_path / "w.duckdb"
    rng = np.random.default_rng(2)
    rows = [(i, float(rng.normal()), None if i % 5 == 0 else 90 + i / 10) for i in range(40)]
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "p": "DECIMAL(4,2)"}, rows)
    source, plan, imputed, lineage = _prepare(db, "t")
    imputed.loc[source.frame["p"].isna().to_numpy(), "p"] = 150.0  # as if the imputer overshot
    before, digest = take_snapshot(db), file_hash(db)
    with pytest.raises(QualityCheckError, match=r'"p" \(DECIMAL\(4,2\)\): 8 cells out of'):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(db) == before and file_hash(db) == digest


def test_replace_source_updates_missing_cells_and_keeps_the_definition(tmp_path: Path) -> None:
    """Bug: --replace-source rebuilt the table with CREATE TABLE AS, dropping PRIMARY KEY,
    NOT NULL, CHECK, DEFAULT and indexes and turning INTEGER into DOUBLE."""
    db = tmp_path / "w.duckdb"
    strict_table(db)
    definition = table_definition(db, "strict")
    source, plan, imputed, lineage = _prepare(db, "strict", key="id", replace_source=True)
    result = write_back.fn(source, plan, imputed, lineage)
    assert result.target_table == "strict" and result.cells_imputed == plan.n_missing
    assert table_definition(db, "strict") == definition
    assert column_types(db, "strict") == column_types(db, "original")
    assert strict_changes(db) == (0, 0)
    with duckdb.connect(str(db), read_only=True) as con:
        imputed_n = con.execute(
            "SELECT s.n FROM original o JOIN strict s USING (id) WHERE o.n IS NULL"
        ).fetchall()
        report = json.loads(con.execute("SELECT quality_report FROM tdm_lineage").fetchall()[0][0])
    expected = np.round(imputed["n"].to_numpy()[source.frame["n"].isna().to_numpy()])
    assert [row[0] for row in imputed_n] == expected.astype(int).tolist()
    notes = {c["name"]: c["detail"] for c in report["checks"]}["imputed_cell_types"]
    assert '"n" kept its type INTEGER: imputed cells rounded to the nearest integer' in notes


def test_replace_source_refuses_values_that_break_a_constraint(
    tmp_path: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """In place, an imputed value that breaks a CHECK constraint is refused before the update,
    naming the column and the constraint, and saying to pass the column through (bug: DuckDB's
    error, and advice to impute into another table, which keeps the CHECK too); the file is
    left byte for byte as it was."""
    db = tmp_path / "w.duckdb"
    strict_table(db, index=False)
    source, plan, imputed, lineage = _prepare(db, "strict", replace_source=True)
    imputed.loc[source.frame["n"].isna().to_numpy(), "n"] = -5.0  # CHECK (n >= 0) fails
    before, digest = take_snapshot(db), file_hash(db)
    expected = r'"n" break CHECK.* of table "strict" .*update in place keeps.*--pass-through'
    with pytest.raises(PipelineError, match=expected):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(db) == before and file_hash(db) == digest


def test_replace_source_refuses_values_outside_the_column_type(
    tmp_path: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """In place, an imputed value outside the column's type (TINYINT here) is refused, naming
    the column."""
    db = tmp_path / "w.duckdb"
    rng = np.random.default_rng(4)
    rows = [(float(rng.normal()), None if i % 5 == 0 else 120 + i % 7) for i in range(40)]
    write_table(db, "t", {"x": "DOUBLE", "small": "TINYINT"}, rows)
    source, plan, imputed, lineage = _prepare(db, "t", replace_source=True)
    imputed.loc[source.frame["small"].isna().to_numpy(), "small"] = 300.0
    before, digest = take_snapshot(db), file_hash(db)
    with pytest.raises(QualityCheckError, match=r'"small" \(TINYINT\): 8 cells out of'):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(db) == before and file_hash(db) == digest


# The property test: random tables of every column type the pipeline imputes or passes through.
@pytest.mark.parametrize("in_place", [False, True], ids=["new-target", "replace-source"])
@pytest.mark.parametrize("seed", [0, 1, 4, 5])
def test_every_column_type_keeps_its_observed_cells(
    tmp_path: Path, take_snapshot: Callable[[Path], dict], seed: int, in_place: bool
) -> None:
    """Property: over random tables of every column type (extremes, -0.0, subnormals, NULLs;
    text, enum and boolean columns), every observed cell comes back identical in its own type,
    every type is kept, every imputed cell is set, and no other table changes; or, where an
    imputed value does not fit its column's type, the run is refused and the file is left byte
    for byte as it was."""
    db = tmp_path / "w.duckdb"
    random_table(db, seed)
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE original AS SELECT * FROM every_type")
    source_types = column_types(db, "every_type")
    before, digest = take_snapshot(db), file_hash(db)
    source, plan, imputed, lineage = _prepare(db, "every_type", key="id", replace_source=in_place)
    try:
        write_back.fn(source, plan, imputed, lineage)
    except QualityCheckError as error:  # an imputed value beyond its type's range
        assert "do not fit their column's type" in str(error)
        assert take_snapshot(db) == before and file_hash(db) == digest
        return
    target = "every_type" if in_place else "every_type_imputed"
    after = take_snapshot(db)
    kept = {"other", "original"} | ({"every_type"} if not in_place else set())
    assert {name: after[name] for name in kept} == {name: before[name] for name in kept}
    with duckdb.connect(str(db), read_only=True) as con:
        assert set(differing_cells(con, "original", target).values()) == {0}
        unset = [
            name for name in plan.columns
            if con.execute(f'SELECT count(*) FROM {target} WHERE "{name}" IS NULL').fetchall()[0][0]
        ]  # fmt: skip
    assert unset == []
    assert {"s", "e", "ok"} <= set(plan.columns)  # text, enum and boolean are imputed too
    assert column_types(db, target) == source_types  # every type kept, a new target's too


def test_a_wide_table_is_written_without_pandas_fragmentation_warnings(tmp_path: Path) -> None:
    """Bug: a table of 300 columns showed the user pandas' "DataFrame is highly fragmented"
    PerformanceWarning, from frames (quality checks, imputed cells) built a column at a time."""
    db = tmp_path / "w.duckdb"
    columns = ", ".join(
        f"CASE WHEN (i + {j}) % 5 = 0 THEN NULL ELSE sin(i * {j + 1}) END AS x{j}"
        for j in range(120)
    )
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE t AS SELECT i AS id, {columns} FROM range(40) r(i)")
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        write_back.fn(*_prepare(db, "t", key="id"))


def test_numbers_near_the_largest_double_are_checked_without_overflow(tmp_path: Path) -> None:
    """Bug: a column of doubles near 1.7e308 printed NumPy's "overflow encountered in reduce"
    (its mean and standard deviation summed past the largest double), and the spread check,
    the statistics and a stored model's drift profile read inf. They are computed scaled."""
    from tasks.artifacts.statistics import column_statistics
    from tasks.drift import profile_columns
    from tasks.quality import spread_range

    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE t AS SELECT i AS id, CASE WHEN i % 5 = 0 THEN NULL ELSE "
            "1.7e308 - i * 1e306 END AS a, sin(i) AS b FROM range(40) r(i)"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        source, plan, imputed, lineage = _prepare(db, "t", key="id")
        write_back.fn(source, plan, imputed, lineage)
        given = source.frame["a"]
        spread = spread_range(given, 0.5)
        (row, _) = column_statistics(source.frame, imputed, {"a": 8, "b": 0})
        profile = profile_columns(source.frame, ["a"], {"a": "float"})
    unit = given.dropna() / 1e306  # the same numbers, far from overflow
    assert spread is not None and np.isclose(spread.observed, unit.std() * 1e306)
    assert np.isclose(row["mean before"], unit.mean() * 1e306) and np.isfinite(row["std after"])
    assert np.isclose(profile["a"]["std"], unit.std(ddof=0) * 1e306)


def test_the_rounding_note_counts_decimal_places() -> None:
    """The lineage's note of rounded cells says "1 decimal place" (bug: "1 decimal places")."""
    from tasks.warehouse.cells import FilledColumn, write_checks

    filled = [FilledColumn("price", "DECIMAL(2,1)", 0), FilledColumn("rate", "DECIMAL(9,4)", 1)]
    notes = {c.name: c.detail for c in write_checks(filled, 3)}["imputed_cell_types"]
    assert '"price" kept its type DECIMAL(2,1): imputed cells rounded to 1 decimal place;' in notes
    assert '"rate" kept its type DECIMAL(9,4): imputed cells rounded to 4 decimal places' in notes


def test_a_write_that_would_change_observed_cells_is_refused_and_writes_nothing(
    tmp_path: Path, take_snapshot: Callable[[Path], dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failure injection for the exactness proof (`verify_cells`): were the target's cells
    taken from the imputed frame (float64) for observed cells too, BIGINT values above 2**53
    would change. The proof in DuckDB refuses the write, names the column, and the file is
    left as it was (docs/operator.md, "Observed values are never changed")."""

    db = tmp_path / "w.duckdb"
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "b": "BIGINT"}, _wide_rows("BIGINT"))
    source, plan, imputed, lineage = _prepare(db, "t")
    monkeypatch.setattr(tasks.write, "target_expression", cells._fill_value)  # observed too
    before, digest = take_snapshot(db), file_hash(db)
    with pytest.raises(QualityCheckError, match=r'would change observed cells \("b" \(BIGINT\)'):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(db) == before and file_hash(db) == digest


def test_an_in_place_update_that_gives_other_values_than_proved_is_refused(
    tmp_path: Path, take_snapshot: Callable[[Path], dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Failure injection for `update_in_place`'s after-check (`_check_same_values`): an UPDATE
    that lands on other rows than the proved ones (here: the row after each) is refused, and
    the source is left as it was."""

    db = tmp_path / "w.duckdb"
    strict_table(db, index=False)
    source, plan, imputed, lineage = _prepare(db, "strict", replace_source=True)
    execute = duckdb.DuckDBPyConnection.execute

    class Shifted:  # the connection, its UPDATE matched on the next row
        def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
            self._con = con

        def execute(self, sql: str, *args: object) -> object:
            if sql.startswith("UPDATE "):
                sql = sql.replace("rowid = i.tdm_row", "rowid = i.tdm_row + 1")
            return execute(self._con, sql, *args)

        def __getattr__(self, name: str) -> object:
            return getattr(self._con, name)

    real = cells.update_in_place
    monkeypatch.setattr("tasks.write.update_in_place", lambda con, *a: real(Shifted(con), *a))
    before, digest = take_snapshot(db), file_hash(db)
    with pytest.raises(PipelineError, match=r"in place did not give the values that were checked"):
        write_back.fn(source, plan, imputed, lineage)
    assert take_snapshot(db) == before and file_hash(db) == digest


def test_a_dry_run_refuses_an_imputed_value_outside_the_kept_type_as_the_write_does(
    tmp_path: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """docs/operator.md: a dry run makes the write's checks, "raising as the write would";
    an imputed cell that does not fit its column's type (DECIMAL(4,2)) is refused by the dry
    run's check too, naming the column, with the file left as it was."""

    db = tmp_path / "w.duckdb"
    rng = np.random.default_rng(2)
    rows = [(i, float(rng.normal()), None if i % 5 == 0 else 90 + i / 10) for i in range(40)]
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "p": "DECIMAL(4,2)"}, rows)
    source, plan, imputed, _ = _prepare(db, "t")
    imputed.loc[source.frame["p"].isna().to_numpy(), "p"] = 150.0  # as if the imputer overshot
    before, digest = take_snapshot(db), file_hash(db)
    with pytest.raises(QualityCheckError, match=r'"p" \(DECIMAL\(4,2\)\): 8 cells out of'):
        check_write(source, plan, imputed)
    assert take_snapshot(db) == before and file_hash(db) == digest
