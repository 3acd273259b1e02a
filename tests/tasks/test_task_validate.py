"""Validate step: every unusable input is refused with one paragraph naming table and column."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from tasks.errors import PipelineInputError
from tasks.load import load_table
from tasks.validate import TableRequest, plan_notes, validate_input


def _table(tmp_path: Path, sql: str, name: str = "t") -> Path:
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE {name} AS {sql}")
    return path


def _validate(path: Path, table: str = "t", **kwargs: object):
    source = load_table.fn(str(path), table, kwargs.get("key"))
    return validate_input.fn(source, **kwargs)


def test_default_columns_are_the_numeric_and_label_ones_but_the_key(warehouse: Path) -> None:
    """Without --columns, every numeric column except the key is imputed, and the complete
    text and boolean columns inform the fit with nothing to impute; counts are reported."""
    plan = _validate(warehouse, "readings", key="id")
    assert plan.columns == ("temperature", "pressure", "humidity", "visits", "site", "ok", "price")
    assert plan.target_table == "readings_imputed"
    assert plan.missing["price"] == plan.missing["site"] == plan.missing["ok"] == 0
    assert plan.labelled == ("site", "ok")
    assert plan.n_missing == sum(plan.missing.values()) > 0
    notes = plan_notes(plan)
    assert (
        notes[-1]
        == 'Complete label columns, inputs of the imputation (nothing to impute): "site", "ok"'
    )
    assert "site" not in notes[0]  # not among the columns to impute


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
            r'column does not exist in table "t": "nope" \(the columns parameter, --columns flag',
        ),
        (
            "SELECT i * 1.0 AS x, DATE '2024-01-01' + i::INTEGER AS day FROM range(10) r(i)",
            {"columns": ["x", "day"]},
            r'Only numeric, text \(VARCHAR\), ENUM and BOOLEAN columns.*"day" \(DATE\)',
        ),
        (
            "SELECT i * 1.0 AS x, NULL::DOUBLE AS empty FROM range(10) r(i)",
            {"columns": ["x", "empty"]},
            r'Table "t" cannot be imputed: column "empty" has no observed value.*pass it '
            r"through with its NULLs \(.*--pass-through",
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
            "SELECT DATE '2026-01-01' + (i % 5)::INT AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "k"},
            r"5 duplicated values, e\.g\. 2026-01-01, 2026-01-02, 2026-01-03, 2026-01-04, ",
        ),
        (
            "SELECT CASE WHEN i = 2 THEN NULL ELSE i END AS k, i * 1.0 AS x FROM range(10) r(i)",
            {"key": "k"},
            r'the key column "k" is NULL in 1 row\b',
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
            r'Table "t" has no column to impute: no numeric column, and no text',
        ),
        (
            "SELECT i * 1.0 AS x, 'a' AS s FROM range(10) r(i)",
            {"pass_through": ["nope"]},
            r'pass-through columns name no column of table "t": "nope"',
        ),
        (
            "SELECT i * 1.0 AS x, 'a' AS s FROM range(10) r(i)",
            {"columns": ["x", "s"], "pass_through": ["S"]},
            r'named both to impute and to pass through: "s"',
        ),
        (
            "SELECT i * 1.0 AS x, CASE WHEN i > 0 THEN 'id-' || i END AS s FROM range(600) r(i)",
            {"columns": ["x", "s"]},  # by default, free text is left out
            r'column "s" holds 599 distinct labels, more than the 500.*--pass-through',
        ),
        (
            "SELECT CASE WHEN i > 0 THEN i END AS x, 'a' AS s FROM range(10) r(i)",
            {"bounds": {"nope": [0, 1]}},
            r'bounds given for column "nope" of table "t".*name no column',
        ),
        (
            "SELECT CASE WHEN i > 0 THEN i END AS x, 'a' AS s FROM range(10) r(i)",
            {"bounds": {"s": [0, 1]}},
            r'bounds given for column "s".*VARCHAR, and bounds apply to numeric columns only',
        ),
        (
            "SELECT CASE WHEN i > 0 THEN i END AS x FROM range(10) r(i)",
            {"bounds": {"x": [2, 1]}},
            r'bounds given for column "x".*low <= high',
        ),
        (
            "SELECT CASE WHEN i > 0 THEN i END::TINYINT AS x FROM range(10) r(i)",
            {"bounds": {"x": [200, None]}},
            r'Column "x" \(TINYINT\) of table "t" has no value.*\[200, 127\] \(config/type\)',
        ),
    ],
    ids=[
        "unknown-column", "unusable-type", "all-missing", "inf", "too-few-rows", "duplicate-key",
        "duplicate-date-key",
        "null-key", "unknown-key", "blob-key", "list-key", "struct-key", "key-in-columns",
        "target-is-source", "replace-and-target", "reserved-target", "no-column",
        "unknown-pass-through", "impute-and-pass-through", "too-many-labels",
        "bounds-unknown-column", "bounds-text-column", "bounds-reversed", "bounds-empty",
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
        _validate(path, key="k", columns=["x", "y"])
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


def test_a_mixed_table_plans_kinds_labels_and_bounds(tmp_path: Path) -> None:
    """Text, enum and boolean columns with a NULL are imputed by default, with their observed
    labels (not a complete one with one label, nor one with nothing observed); a pass-through
    column keeps its
    NULLs; numeric columns get bounds: the observed range, or the config (null = open)."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE t (id INTEGER, n INTEGER CHECK (n > 2), x DOUBLE, d DECIMAL(6,2), "
            "s VARCHAR, e ENUM('lo', 'hi'), b BOOLEAN, note VARCHAR, full_text VARCHAR, "
            "empty VARCHAR)"
        )
        con.execute(
            "INSERT INTO t SELECT i, CASE WHEN i % 4 THEN i + 3 END, "
            "CASE WHEN i % 5 THEN i * 0.5 END, CASE WHEN i % 3 THEN i * 1.25 END, "
            "CASE WHEN i % 6 THEN ['a', 'b'][i % 2 + 1] END, "
            "CASE WHEN i % 7 THEN ['lo', 'hi'][i % 2 + 1] END, "
            "CASE WHEN i % 8 THEN i % 2 = 0 END, CASE WHEN i % 2 THEN 'n' || i END, 'f', NULL "
            "FROM range(1, 25) r(i)"
        )
    plan = _validate(path, key="id", pass_through=["NOTE"], bounds={"x": [None, 100]})
    assert plan.columns == ("n", "x", "d", "s", "e", "b")
    assert plan.pass_through == ("note",)
    assert dict(plan.kinds) == {
        "n": "integer", "x": "float", "d": "float", "s": "categorical", "e": "categorical",
        "b": "boolean",
    }  # fmt: skip
    assert dict(plan.labels) == {"s": ("a", "b"), "e": ("hi", "lo"), "b": (False, True)}
    assert all(plan.missing[name] > 0 for name in plan.columns)
    n, x, d = plan.bounds["n"], plan.bounds["x"], plan.bounds["d"]
    assert (n.low, n.high, n.low_from, n.high_from) == (4.0, 26.0, "observed", "observed")
    assert (x.low, x.high, x.low_from, x.high_from) == (float("-inf"), 100.0, "open", "config")
    assert (d.low, d.high) == (1.25, 28.75)


def test_check_bounds_beat_the_observed_range_and_strict_ones_move_inwards(
    tmp_path: Path,
) -> None:
    """A strict CHECK at the observed minimum moves the bound one type step inwards (an integer,
    a DECIMAL's scale); a CHECK tighter than an open config end applies; other CHECKs are
    listed as not used."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE t (n INTEGER CHECK (n > 0), d DECIMAL(8,2) CHECK (d > 0 AND d <= 50), "
            "y DOUBLE CHECK (y IS NULL OR y > 0))"
        )
        con.execute(
            "INSERT INTO t SELECT CASE WHEN i % 3 THEN i END, CASE WHEN i % 4 THEN i END, "
            "CASE WHEN i % 5 THEN i END FROM range(1, 20) r(i)"
        )
    plan = _validate(path, bounds={"n": [0, None], "d": [None, None]})
    n, d = plan.bounds["n"], plan.bounds["d"]
    assert (n.low, n.low_from, n.high, n.high_from) == (1.0, "CHECK", 2147483647.0, "type")
    assert (d.low, d.low_from, d.high, d.high_from) == (0.01, "CHECK", 50.0, "CHECK")
    assert plan.ignored_checks == ("(y IS NULL) OR (y > 0)",)


def test_a_table_wider_than_a_run_imputes_is_refused_naming_the_limit(tmp_path: Path) -> None:
    """Bug: 2,000 columns ran for 17 minutes with no progress line (the start) before a user
    stopped it, and with a mean start the loss became non-finite; such a table is refused
    before any fit, the limit named, and its columns can still be imputed a chosen few at a
    time."""
    from schemas.input import MAX_COLUMNS

    columns = ", ".join(f"CASE WHEN i % 3 = {j % 3} THEN NULL ELSE i * {j} END AS c{j}"
                        for j in range(MAX_COLUMNS + 1))  # fmt: skip
    path = _table(tmp_path, f"SELECT {columns} FROM range(8) t(i)")
    with pytest.raises(PipelineInputError) as refused:
        _validate(path)
    message = str(refused.value)
    assert f'Table "t" has {MAX_COLUMNS + 1} columns to impute' in message
    assert f"at most {MAX_COLUMNS} together" in message and "--columns" in message
    assert len(_validate(path, columns=["c0", "c1"]).columns) == 2


def _label_table(tmp_path: Path) -> Path:
    """1,100 rows: a numeric column with NULLs; complete label columns: a species (3 labels), a
    BOOLEAN, an identifier (every value distinct), one of 550 labels (each twice: more than
    `MAX_LABELS`) and a constant; text columns with NULLs: one of two labels, and a free text
    (every value distinct)."""
    return _table(
        tmp_path,
        "SELECT CASE WHEN i % 7 THEN i * 0.5 END AS x, ['a', 'b', 'c'][i % 3 + 1] AS species, "
        "i % 2 = 0 AS flag, 'k' || i AS code, 'm' || (i % 550) AS many, 'c' AS constant, "
        "CASE WHEN i % 5 THEN ['u', 'v'][i % 2 + 1] END AS note, "
        "CASE WHEN i % 4 = 0 THEN 'said ' || i END AS remark FROM range(1100) r(i)",
    )


@pytest.mark.parametrize("reader", ["validate", "partitions"])
def test_complete_label_columns_with_few_labels_inform_the_fit(tmp_path: Path, reader: str) -> None:
    """By default a complete text, enum or boolean column is a feature when it has few labels
    (two or more, each held by two rows on average, at most `MAX_LABELS`): an identifier, a
    column of too many labels and a constant are left out, not refused. A column with NULLs is
    imputed, but free text (bug: its NULLs all got one label, and the checks passed): it keeps
    its NULLs, and the log says so. The validate step and the partitioned profile (in SQL)
    choose alike; named, a column over the limit is refused, free text is imputed."""
    from tasks.partitions import profile_table

    path = _label_table(tmp_path)
    if reader == "validate":
        plan = _validate(path)
    else:
        with duckdb.connect(str(path), read_only=True) as con:
            request = TableRequest("t")
            plan = profile_table(
                con, str(path), request, target_suffix="_i", partition_rows=500
            ).plan
    assert plan.columns == ("x", "species", "flag", "note")
    assert dict(plan.labels) == {
        "species": ("a", "b", "c"), "flag": (False, True), "note": ("u", "v")
    }  # fmt: skip
    assert plan.missing["species"] == plan.missing["flag"] == 0 < plan.missing["note"]
    assert plan.left_out == ("remark",)
    assert plan_notes(plan)[-1].startswith("Left out with their NULLs, as identifiers or free text")
    assert "remark" in _validate(path, columns=["x", "remark"]).columns
    for named in ("many", "code"):
        with pytest.raises(PipelineInputError, match=rf'column "{named}" holds \d+ distinct'):
            _validate(path, columns=["x", named])


# Per species: flipper length (mm), body mass (g), bill depth (mm), and their spreads.
PENGUINS = {"Adelie": (190, 3700, 18.3), "Chinstrap": (196, 3730, 18.4), "Gentoo": (217, 5076, 15)}
SPREADS = (6.0, 400.0, 1.0)
MEASURES = ("flipper", "mass", "bill_depth")


def _penguins(path: Path, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Table `penguins` as the penguins case: a complete `species` that shifts every measure,
    the first 4 birds of each species with every measure missing, 10% of other cells missing.
    Returns the truth and which rows are blank."""
    rng = np.random.default_rng(seed)
    rows = [
        (name, *(m + s * rng.normal() for m, s in zip(means, SPREADS, strict=True)))
        for name, means in PENGUINS.items()
        for _ in range(20)
    ]
    truth = pd.DataFrame(rows, columns=["species", *MEASURES])
    blank = (np.arange(len(truth)) % 20) < 4
    holed = truth.copy()
    gaps = (rng.random((len(truth), len(MEASURES))) < 0.1) | blank[:, None]
    holed[list(MEASURES)] = truth[list(MEASURES)].mask(gaps)
    with duckdb.connect(str(path)) as con:
        con.register("frame", holed)
        con.execute("CREATE TABLE penguins AS SELECT * FROM frame")
    return truth, blank


@pytest.mark.usefixtures("one_torch_thread")
def test_a_complete_label_column_informs_the_fit_by_default(tmp_path: Path) -> None:
    """Bug (the penguins case): a complete `species` was left out of the fit, so a bird with
    every measure missing got the all-penguin average. By default it is a feature: such birds
    come out closer to their species than with `species` passed through; it is not imputed, and
    its observed cells come back unchanged."""
    from tasks.impute import impute
    from tasks.quality import check_quality
    from tasks.scaling import inverse_scale, standardise

    path = tmp_path / "w.duckdb"
    truth, blank = _penguins(path)
    errors = {}
    for passed in ([], ["species"]):
        source = load_table.fn(str(path), "penguins", None, passed)
        plan = validate_input.fn(source, pass_through=passed)
        scaled = standardise.fn(source.frame, plan.columns, kinds=plan.kinds, table="t")
        fitted = impute.fn(scaled.frame, {"max_iter": 10, "init": "ice"}, 0, bounds=scaled.bounds)
        imputed = inverse_scale.fn(fitted.frame, scaled.scaling, source.frame)
        assert check_quality.fn(source, plan, imputed).passed  # observed cells unchanged
        off = (imputed.loc[blank, list(MEASURES)] - truth.loc[blank, list(MEASURES)]).abs()
        errors["species" in plan.columns] = float((off / SPREADS).to_numpy().mean())
        assert plan.missing.get("species", 0) == 0
    assert errors[True] < 0.6 * errors[False], errors


def test_identifiers_are_passed_through_unless_named(tmp_path: Path) -> None:
    """A column that is a PRIMARY KEY or UNIQUE on its own is an identifier: by default it is
    neither imputed nor a feature (an imputed cell would repeat or invent a value), though a
    column in a UNIQUE of several columns is; named, it is imputed (and the writer refuses a
    value held twice)."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, ref DOUBLE UNIQUE, x DOUBLE, y DOUBLE, "
            "UNIQUE (x, y))"
        )
        con.execute(
            "INSERT INTO t SELECT i, CASE WHEN i % 4 THEN i * 1.5 END, "
            "CASE WHEN i % 5 THEN i * 0.5 END, i * 2.0 FROM range(30) r(i)"
        )
    plan = _validate(path)
    assert plan.columns == ("x", "y")
    assert _validate(path, columns=["ref", "x"]).columns == ("ref", "x")


def test_nulls_of_a_type_not_imputed_are_counted_and_logged(tmp_path: Path) -> None:
    """Bug: DATE and TIMESTAMP columns kept their NULLs without a word (only operator.md said
    such types pass through). The plan counts them, the whole table's as one fit or in
    partitions, and the run's log says they stay NULL; the key and complete ones are not named."""
    from tasks.partitions import profile_table

    db = _table(
        tmp_path,
        "SELECT i AS id, CASE WHEN i % 4 = 0 THEN NULL ELSE i * 1.0 END AS x, "
        "CASE WHEN i % 3 = 0 THEN NULL ELSE DATE '2020-01-01' + i::INTEGER END AS day, "
        "CASE WHEN i % 5 = 0 THEN NULL ELSE TIMESTAMP '2020-01-01 10:00:00' END AS seen, "
        "DATE '2021-01-01' AS complete FROM range(30) r(i)",
    )
    plan = _validate(db, key="id")
    assert plan.untyped_nulls == {"day": 10, "seen": 6}
    with duckdb.connect(str(db), read_only=True) as con:
        request = TableRequest("t", key="id")
        profiled = profile_table(con, str(db), request, target_suffix="_imputed", partition_rows=10)
    assert profiled.plan.untyped_nulls == plan.untyped_nulls
    assert plan_notes(plan)[-1] == (
        'Left with their NULLs, as the pipeline imputes no column of their type: "day" (10 NULLs), '
        '"seen" (6 NULLs)'
    )
