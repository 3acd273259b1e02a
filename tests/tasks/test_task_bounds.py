"""Bounds of imputed numbers (issue 16): CHECK constraints read from DuckDB, the precedence of
config, observed range, CHECK and type, and ends moved inwards to what the type holds."""

from __future__ import annotations

import math
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pytest

from tasks.bounds import ColumnBounds, column_bounds
from tasks.errors import PipelineInputError
from tasks.impute import impute
from tasks.lineage import LineageRecord, current_run
from tasks.load import load_table
from tasks.quality import check_quality
from tasks.scaling import inverse_scale, standardise
from tasks.validate import validate_input
from tasks.warehouse.constraints import CheckBounds, parse_checks
from tasks.warehouse.tables import ColumnInfo
from tasks.write import write_back
from tests.tables import write_table

D = Decimal


@pytest.mark.parametrize(
    ("expression", "found", "ignored"),
    [
        ("(x >= 0)", {"x": CheckBounds(low=(D(0), False))}, []),
        ("(0 < x)", {"x": CheckBounds(low=(D(0), True))}, []),
        ("(x BETWEEN -1.5 AND 1e3)", {"x": CheckBounds((D("-1.5"), False), (D(1000), False))}, []),
        (
            '(("my col" <= 100) AND ("my col" > -2.5))',
            {"my col": CheckBounds((D("-2.5"), True), (D(100), False))},
            [],
        ),
        ("(u >= CAST(0.0 AS DOUBLE))", {"u": CheckBounds(low=(D(0), False))}, []),
        ("(r >= 1_000)", {"r": CheckBounds(low=(D(1000), False))}, []),
        ("((v >= 0) AND (v != 0.5))", {"v": CheckBounds(low=(D(0), False))}, ["v != 0.5"]),
        ("((s IS NULL) OR (s > 0))", {}, ["(s IS NULL) OR (s > 0)"]),
        ("(a < b)", {}, ["a < b"]),
        ("(NOT (w < 0))", {}, ["NOT (w < 0)"]),
    ],
    ids=[
        "ge", "number-first-strict", "between", "quoted-and", "cast", "underscore",
        "partly-simple", "or", "two-columns", "not",
    ],
)  # fmt: skip
def test_simple_check_forms_are_read_and_others_are_returned(
    expression: str, found: dict, ignored: list
) -> None:
    """Comparisons with a number, BETWEEN and their conjunctions give bounds; the rest is
    returned as not used."""
    assert parse_checks([expression]) == (found, ignored)


def test_the_checks_duckdb_prints_are_read(tmp_path: Path) -> None:
    """Read from a real table: DuckDB's own rendering of each constraint."""
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE t (a INTEGER CHECK (a >= 0), b DOUBLE CHECK (b BETWEEN 0 AND 10), "
            '"c d" DOUBLE CHECK ("c d" <= 1e3 AND "c d" > -2.5), e DOUBLE CHECK (0 < e))'
        )
    checks = load_table.fn(str(db), "t").table.checks
    found, ignored = parse_checks(checks)
    assert ignored == []
    assert found == {
        "a": CheckBounds(low=(D(0), False)),
        "b": CheckBounds((D(0), False), (D(10), False)),
        "c d": CheckBounds((D("-2.5"), True), (D(1000), False)),
        "e": CheckBounds(low=(D(0), True)),
    }


_F32 = np.float32


@pytest.mark.parametrize(
    ("sql_type", "low", "high"),
    [
        ("INTEGER", 1.0, 9.0),
        ("DECIMAL(10,2)", 0.01, 9.99),
        ("FLOAT", float(np.nextafter(_F32(0), _F32(1))), float(np.nextafter(_F32(10), _F32(0)))),
        ("DOUBLE", 5e-324, math.nextafter(10.0, 0.0)),
    ],
)
def test_a_strict_check_moves_one_step_of_the_type_inwards(
    sql_type: str, low: float, high: float
) -> None:
    """`x > 0` and `x < 10` with config bounds open: the bounds are the nearest values of the
    type that satisfy them (the next integer, the next cent, the next float)."""
    check = CheckBounds((D(0), True), (D(10), True))
    found = column_bounds("t", ColumnInfo("x", sql_type), (2.0, 5.0), check, (None, None))
    assert (found.low, found.high) == (low, high)
    assert found.low_from == found.high_from == "CHECK"


def test_config_replaces_the_observed_range_and_check_and_type_still_apply() -> None:
    """Config beats observed; CHECK and the type's range cut it; observed is the default; a
    non-integer observed end of an integer column is rounded inwards."""
    tiny = ColumnInfo("n", "TINYINT")
    check = CheckBounds(low=(D(0), False))
    assert column_bounds("t", tiny, (3.0, 7.0), check, (-50, None)) == column_bounds(
        "t", tiny, (3.0, 7.0), check, (None, None)
    )
    found = column_bounds("t", tiny, (3.0, 7.0), check, (-50, None))
    assert (found.low, found.low_from, found.high, found.high_from) == (0.0, "CHECK", 127.0, "type")
    observed = column_bounds("t", ColumnInfo("n", "INTEGER"), (2.5, 7.5))
    assert (observed.low, observed.high, observed.low_from) == (3.0, 7.0, "observed")
    wide = column_bounds("t", ColumnInfo("u", "UBIGINT"), (0.0, 2.0**64))
    assert wide.high <= 2**64 - 1  # the type's greatest value, as a double inside it
    with pytest.raises(PipelineInputError, match=r'Column "n" \(TINYINT\) of table "t"'):
        column_bounds("t", tiny, (3.0, 7.0), check, (-50, -1))


def test_replace_source_with_open_bounds_never_breaks_a_strict_check(tmp_path: Path) -> None:
    """Bounds opened by the config below the observed minimum: the strict CHECK (d > 0) of a
    DECIMAL(10,2) column still holds every imputed cell at 0.01 or above, so the update in place
    (which DuckDB checks) succeeds; the regression the data pulls towards would go negative."""
    db = tmp_path / "w.duckdb"
    rng = np.random.default_rng(5)
    rows = []
    for k in range(60):
        x = float(rng.uniform(0, 10))
        d = None if x < 1.5 else f"{x - 2.5 + 0.1 * rng.random():.2f}"
        rows.append((k, x, d if d is None or float(d) > 0 else "0.05"))
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "d": "DECIMAL(10,2) CHECK (d > 0)"}, rows)
    params = {"max_iter": 30}
    source = load_table.fn(str(db), "t", "id")
    plan = validate_input.fn(source, None, "id", None, True, bounds={"d": [None, None]})
    assert (plan.bounds["d"].low, plan.bounds["d"].low_from) == (0.01, "CHECK")
    limits = {name: b.for_imputer() for name, b in plan.bounds.items()}
    scaled = standardise.fn(source.frame, plan.columns, kinds=plan.kinds, bounds=limits, table="t")
    outcome = impute.fn(scaled.frame, params, 0, table="t", bounds=scaled.bounds)
    imputed = inverse_scale.fn(outcome.frame, scaled.scaling, source.frame)
    report = check_quality.fn(source, plan, imputed)
    lineage = LineageRecord(current_run(), source, plan, outcome, report, 0, dict(params))
    write_back.fn(source, plan, imputed, lineage)
    with duckdb.connect(str(db), read_only=True) as con:
        filled = [r[0] for r in con.execute("SELECT d FROM t WHERE x < 1.5").fetchall()]
        smallest = con.execute("SELECT min(d) FROM t WHERE x >= 1.5").fetchall()[0][0]
    assert filled and min(filled) >= D("0.01")
    assert min(filled) < smallest  # the open config bound took effect below the observed range


def test_bounds_open_at_both_ends_lift_the_range_of_a_double(tmp_path: Path) -> None:
    """`bounds: {x: [null, null]}` on a DOUBLE without a CHECK leaves its imputed cells
    unbounded: the quality checks pass and the table is written, an imputed cell may lie
    outside the observed range (the regression on y runs past it)."""
    db = tmp_path / "w.duckdb"
    rows = [(k, None if k % 4 == 0 else 2.0 * k + 1.0, float(k)) for k in range(60)]
    rows[0] = (0, 1.0, 0.0)  # observed at the ends: x's low end is y = 0's
    rows[59] = (59, None, 59.0)  # beyond y's observed rows' largest x
    write_table(db, "t", {"id": "INTEGER", "x": "DOUBLE", "y": "DOUBLE"}, rows)
    params = {"max_iter": 30, "init": "ice"}
    source = load_table.fn(str(db), "t", "id")
    plan = validate_input.fn(source, None, "id", "t_imputed", bounds={"x": [None, None]})
    assert (plan.bounds["x"].low, plan.bounds["x"].high) == (-math.inf, math.inf)
    limits = {name: b.for_imputer() for name, b in plan.bounds.items()}
    scaled = standardise.fn(source.frame, plan.columns, kinds=plan.kinds, bounds=limits, table="t")
    outcome = impute.fn(scaled.frame, params, 0, table="t", bounds=scaled.bounds)
    imputed = inverse_scale.fn(outcome.frame, scaled.scaling, source.frame)
    report = check_quality.fn(source, plan, imputed)
    assert report.passed
    lineage = LineageRecord(current_run(), source, plan, outcome, report, 0, dict(params))
    write_back.fn(source, plan, imputed, lineage)
    with duckdb.connect(str(db), read_only=True) as con:
        last = con.execute("SELECT x FROM t_imputed WHERE id = 59").fetchall()[0][0]
    assert last > 2.0 * 55 + 1.0  # above the largest observed x (id 55)


def test_bounds_show_whole_numbers_in_full_but_not_a_309_digit_float() -> None:
    """Bug: a DOUBLE column observed up to 1.79e308 was logged with a 309-digit upper bound
    ("whole numbers in full"). Integers of the warehouse's types still show every digit."""
    assert ColumnBounds(-2.5, 1.79e308).describe() == "[-2.5, 1.79e+308] (observed)"
    assert ColumnBounds(0.0, float(2**63)).describe() == "[0, 9223372036854775808] (observed)"
