"""Reading a table too large for one fit: its profile, a fit sample and rowid partitions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from tasks.errors import PipelineInputError
from tasks.load import load_table
from tasks.partitions import (
    TableProfile,
    count_rows,
    partition_plan,
    profile_table,
    read_partition,
    read_sample,
)
from tasks.validate import TableRequest, plan_notes, validate_input

NUMERIC = ("temperature", "pressure", "humidity", "visits", "price")
# the complete text and boolean columns (three and two labels) inform the fit
COLUMNS = ("temperature", "pressure", "humidity", "visits", "site", "ok", "price")


def _profile(
    con: duckdb.DuckDBPyConnection,
    db: Path,
    partition_rows: int = 50,
    columns: tuple[str, ...] | None = None,
) -> TableProfile:
    request = TableRequest("readings", key="id", columns=columns)
    return profile_table(
        con, str(db), request, target_suffix="_imputed", partition_rows=partition_rows
    )


@pytest.fixture
def readings(tmp_path: Path, make_readings: Callable[..., pd.DataFrame]) -> Path:
    """120 rows of the mixed-type table, about 20% of the numeric cells missing (seed 4)."""
    db = tmp_path / "w.duckdb"
    make_readings(db, n_rows=120, seed=4)
    return db


def test_count_rows_counts_a_table_and_is_none_for_a_missing_one(readings: Path) -> None:
    """`count_rows` gives the table's rows, and None (not an error) when there is no table."""
    assert count_rows.fn(str(readings), "readings") == 120
    assert count_rows.fn(str(readings), "nowhere") is None


def test_profile_plans_the_columns_counts_the_missing_cells_and_the_observed_range(
    readings: Path,
) -> None:
    """The profile's plan, ranges, deviations and label shares agree with the table read whole
    by pandas (those the checks of a partition or of an incremental run's rows measure
    against); the complete label columns are planned with their labels and nothing to
    impute."""
    from tasks.drift import label_shares

    with duckdb.connect(str(readings), read_only=True) as con:
        profile = _profile(con, readings)
        whole = con.execute("SELECT * FROM readings").df()
    plan = profile.plan
    assert (plan.source_table, plan.target_table, plan.key) == (
        "readings",
        "readings_imputed",
        "id",
    )
    assert plan.columns == COLUMNS and plan.n_rows == 120
    assert dict(plan.missing) == {c: int(whole[c].isna().sum()) for c in COLUMNS}
    assert dict(plan.labels) == {"site": ("east", "north", "south"), "ok": (False, True)}
    values = whole[list(NUMERIC)].astype(float)
    observed = profile.observed
    assert observed.ranges == {c: (values[c].min(), values[c].max()) for c in NUMERIC}
    assert observed.stds == pytest.approx({c: values[c].std(ddof=0) for c in NUMERIC})
    assert observed.shares == {c: pytest.approx(label_shares(whole[c])) for c in plan.labels}
    assert set(observed.shares["ok"]) == {"False", "True"}
    assert profile.fingerprint.rows == 120


def test_profile_moments_are_the_whole_table_s_as_the_imputer_computes_them(
    readings: Path,
) -> None:
    """The mean and std the partitions are scaled by are the whole table's, equal to
    `fit_column_scaling` on the table read whole (not the fit sample's)."""
    from tdm.scaling import fit_column_scaling

    with duckdb.connect(str(readings)) as con:
        con.execute("UPDATE readings SET pressure = 1e300 WHERE id = 7")  # squares overflow
        profile = _profile(con, readings)
        whole = con.execute("SELECT * FROM readings").df()
    expected = fit_column_scaling(whole[list(NUMERIC)].astype(float).to_numpy())
    np.testing.assert_allclose(profile.moments[0], expected.mean, rtol=1e-9)
    np.testing.assert_allclose(profile.moments[1], expected.scale, rtol=1e-9)
    assert np.isfinite(profile.moments[1]).all()


def test_partitions_are_equal_shares_that_cover_every_row_once(readings: Path) -> None:
    """120 rows in partitions of at most 50: three of 40, back to back over the rowids."""
    with duckdb.connect(str(readings), read_only=True) as con:
        profile = _profile(con, readings, partition_rows=50)
        parts = [read_partition(con, profile, start, stop) for start, stop in profile.bounds]
    assert profile.bounds == ((0, 40), (40, 80), (80, 120))
    assert [len(p) for p in parts] == [40, 40, 40]
    ids = pd.concat(parts)["id"].tolist()
    assert ids == [str(i) for i in range(1, 121)]  # storage order, no row twice; keys as text
    assert parts[1].index.name == "rowid" and parts[1].index[0] == 40


def test_partitions_follow_the_gaps_deleted_rows_leave(readings: Path) -> None:
    """After deletes, the partitions still hold equal shares of the rows that are left."""
    with duckdb.connect(str(readings)) as con:
        con.execute("DELETE FROM readings WHERE id % 4 = 0")  # 90 rows left, rowids with gaps
        profile = _profile(con, readings, partition_rows=50)
        sizes = [len(read_partition(con, profile, *bounds)) for bounds in profile.bounds]
    assert sizes == [45, 45]


def test_no_rows_make_no_partition(readings: Path) -> None:
    """A table without rows is planned as no partition at all."""
    with duckdb.connect(str(readings), read_only=True) as con:
        assert partition_plan(con, '"readings"', n_rows=0, first=0, last=0, size=50) == ()


def test_a_sample_is_reproducible_for_a_seed(readings: Path) -> None:
    """The same seed draws the same rows; another seed draws others; the size is as asked."""
    with duckdb.connect(str(readings), read_only=True) as con:
        profile = _profile(con, readings)
        first = read_sample(con, profile, 30, seed=1)
        again = read_sample(con, profile, 30, seed=1)
        other = read_sample(con, profile, 30, seed=2)
    assert len(first) == 30 and list(first.columns) == ["id", *COLUMNS]
    assert first.equals(again)
    assert set(first["id"]) != set(other["id"])


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "UPDATE readings SET pressure = 'inf'::DOUBLE WHERE id = 7",
            '"pressure" has 1 infinite value\\. ',
        ),
        ("UPDATE readings SET humidity = NULL", '"humidity" has no observed value.*--pass-through'),
        (
            "UPDATE readings SET id = 1 WHERE id < 4",
            '"id" is not unique \\(1 duplicated value, e\\.g\\. 1\\)',
        ),
        ("UPDATE readings SET id = NULL WHERE id = 5", 'key "id" has 1 null value\\. '),
        ("ALTER TABLE readings ADD COLUMN rowid INTEGER", 'column named "rowid", which clashes'),
        ('ALTER TABLE readings ADD COLUMN "TDM_Row" DOUBLE', 'named "TDM_Row", which clashes'),
    ],
    ids=["inf", "no-observed", "duplicate-key", "null-key", "rowid-column", "row-alias-column"],
)
def test_bad_values_anywhere_in_the_table_are_named(readings: Path, sql: str, message: str) -> None:
    """Checked in SQL over the whole table: the refusal names the column and the problem."""
    with duckdb.connect(str(readings)) as con:
        con.execute(sql)
        with pytest.raises(PipelineInputError, match=message):
            _profile(con, readings, columns=tuple(COLUMNS))  # named: an empty one is refused


@pytest.mark.parametrize("rows", [0, 3])
def test_a_table_of_too_few_rows_is_refused_for_its_rows(readings: Path, rows: int) -> None:
    """Bug: an incremental run of a table with no rows said each column "has no observed
    value"; it now says what the whole table's run says: too few rows."""
    with duckdb.connect(str(readings)) as con:
        con.execute(f"DELETE FROM readings WHERE id > {rows}")
        with pytest.raises(PipelineInputError) as refused:
            _profile(con, readings)
    assert str(refused.value) == (
        f'Table "readings" cannot be imputed: it has {rows} rows, and imputation needs at '
        "least 4. Nothing was written."
    )


def test_columns_whose_every_cell_is_null_are_left_out_by_default(readings: Path) -> None:
    """Profiled in SQL as a whole-table run validates: an all-NULL number or text column is
    left with its NULLs (named in the plan's notes), not imputed, not refused."""
    with duckdb.connect(str(readings)) as con:
        con.execute("UPDATE readings SET humidity = NULL")
        con.execute("ALTER TABLE readings ADD COLUMN note VARCHAR")
        plan = _profile(con, readings).plan
    whole = validate_input.fn(load_table.fn(str(readings), "readings", "id"), key="id")
    assert plan.unobserved == whole.unobserved == ("humidity", "note")
    assert plan.columns == whole.columns and "humidity" not in plan.columns
    assert '"humidity", "note"' in plan_notes(plan)[-1]


def test_a_column_of_nulls_and_nan_imputed_as_missing_is_left_out_as_an_empty_one(
    readings: Path,
) -> None:
    """Review: with NaN imputed as missing, a column of NULL and NaN holds no value either; it
    was refused as "every cell is NULL ... the columns you named" though none were named."""
    with duckdb.connect(str(readings)) as con:
        con.execute("UPDATE readings SET humidity = CASE WHEN id % 2 = 0 THEN 'nan' END")
        request = TableRequest("readings", key="id", nan_as_missing=True)
        plan = profile_table(
            con, str(readings), request, target_suffix="_imputed", partition_rows=50
        ).plan
    source = load_table.fn(str(readings), "readings", "id")
    whole = validate_input.fn(source, key="id", nan_as_missing=True)
    assert plan.unobserved == whole.unobserved == ("humidity",)


def test_a_table_whose_every_column_is_empty_is_refused_saying_so(tmp_path: Path) -> None:
    """Review: the refusal said "no text, enum or boolean column with a NULL" of a table whose
    columns were all NULL."""
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS id, NULL::DOUBLE AS x, NULL::VARCHAR AS s "
                    "FROM range(10) r(i)")  # fmt: skip
    with pytest.raises(PipelineInputError, match=r'no cell of "x", "s" holds a value to learn'):
        validate_input.fn(load_table.fn(str(db), "t", "id"), key="id")
