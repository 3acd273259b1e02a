"""The impute-table flow end to end, on real DuckDB files, under Prefect's test harness."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

import tdm
from flows.impute_table import impute_table
from tasks.errors import PipelineInputError, QualityCheckError
from tests.conftest import auto_device
from tests.failures import held_error, refused
from tests.flows.test_flow_input_checks import BAD_INPUTS
from tests.tables import constrain_readings, table_body

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

FAST = {"max_iter": 15}
DESIGN_LINEAGE_FIELDS = {
    "run_id", "flow_name", "deployment_name", "started_at", "finished_at", "source_table",
    "source_rows", "source_hash", "target_table", "rows", "columns_imputed", "cells_imputed",
    "imputer", "hyperparameters", "seed", "device", "final_loss", "quality_passed",
    "quality_report", "package_versions", "status",
}  # fmt: skip


def _query(path: Path, sql: str, params: list | None = None) -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql, params or []).df()


def _failed(state: Any) -> str:
    """The message of a failed flow run (asserting that it failed)."""
    assert state.is_failed(), state
    return str(state.message)


def test_mixed_table_is_imputed_end_to_end(warehouse: Path) -> None:
    """Numeric cells are imputed, observed cells and other columns pass through, lineage kept;
    the target keeps the source's definition (PRIMARY KEY, NOT NULL, CHECK, DEFAULT, UNIQUE),
    and the result names the nullable columns that now hold no NULL."""
    constrain_readings(warehouse)
    state = impute_table(
        "readings", db_path=warehouse, key="id", imputer=FAST, seed=1, return_state=True
    )
    assert state.is_completed(), state.message
    result = state.result()
    assert result.target_table == "readings_imputed"
    assert result.status == "imputed"
    assert table_body(warehouse, "readings_imputed") == table_body(warehouse, "readings")
    assert result.could_be_not_null == ("temperature", "pressure", "humidity", "visits")

    source = _query(warehouse, "SELECT * FROM readings ORDER BY id")
    target = _query(warehouse, "SELECT * FROM readings_imputed ORDER BY id")
    assert list(target.columns) == list(source.columns)
    numeric = ["temperature", "pressure", "humidity", "visits"]
    assert not target[numeric].isna().any().any()
    observed = source[numeric].notna().to_numpy()
    assert np.array_equal(
        target[numeric].to_numpy(float)[observed],
        source[numeric].to_numpy(float, na_value=np.nan)[observed],
    )
    for untouched in ("id", "site", "day", "ok", "price"):
        pd.testing.assert_series_equal(target[untouched], source[untouched])
    described = _query(warehouse, "DESCRIBE readings_imputed")
    types = dict(zip(described["column_name"], described["column_type"], strict=True))
    assert types["day"] == "DATE" and types["ok"] == "BOOLEAN" and types["price"] == "DECIMAL(8,2)"

    lineage = _query(warehouse, "SELECT * FROM tdm_lineage")
    assert len(lineage) == 1
    row = lineage.iloc[0]
    assert set(lineage.columns) >= DESIGN_LINEAGE_FIELDS
    assert row["run_id"] == str(state.state_details.flow_run_id) == result.run_id
    assert row["flow_name"] == "impute-table"
    assert row["started_at"] < row["finished_at"]
    assert (row["source_table"], row["target_table"], row["rows"]) == (
        "readings", "readings_imputed", 80,
    )  # fmt: skip
    assert row["source_rows"] == 80 and len(row["source_hash"]) == 32
    # the complete text and boolean columns inform the fit, unchanged (above), no cell imputed
    assert json.loads(row["columns_imputed"]) == [*numeric, "site", "ok", "price"]
    cells = json.loads(row["cells_imputed"])
    assert cells == {
        name: int(source[name].isna().sum()) for name in [*numeric, "site", "ok", "price"]
    }
    assert cells["site"] == cells["ok"] == 0
    hyper = json.loads(row["hyperparameters"])
    assert hyper["max_iter"] == 15 and hyper["random_state"] == 1
    assert row["imputer"] == "TDMImputer" and row["seed"] == 1 and row["device"] == auto_device()
    assert np.isfinite(row["final_loss"]) and row["n_iter"] == 15
    assert bool(row["quality_passed"]) and json.loads(row["quality_report"])["passed"]
    assert {"torch", "duckdb", "prefect", "pandera", "great-expectations"} <= set(
        json.loads(row["package_versions"])
    )
    assert row["status"] == "imputed"

    recorded = _query(
        warehouse,
        "SELECT c.column_name, s.temperature, s.pressure, s.humidity, s.visits "
        "FROM tdm_imputed_cells c JOIN readings s ON s.id = CAST(c.row_key AS INTEGER)",
    )
    assert len(recorded) == sum(cells.values())
    assert all(pd.isna(r[r["column_name"]]) for _, r in recorded.iterrows())


def test_same_inputs_and_seed_give_the_same_table_and_a_new_lineage_row(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-running with the same seed replaces the target with identical values (what lets a run
    leave an unchanged table as it is, which is off here)."""
    monkeypatch.setenv("TDM_SKIP_UNCHANGED", "false")
    first = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=5)
    table_1 = _query(warehouse, "SELECT * FROM readings_imputed")
    second = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=5)
    table_2 = _query(warehouse, "SELECT * FROM readings_imputed")
    pd.testing.assert_frame_equal(table_1, table_2)
    assert not first.replaced_existing and second.replaced_existing
    runs = _query(warehouse, "SELECT run_id, source_hash FROM tdm_lineage")
    assert len(runs) == 2 and runs["run_id"].nunique() == 2 and runs["source_hash"].nunique() == 1


def test_a_table_without_missing_values_is_copied_through(tmp_path: Path) -> None:
    """No missing value: the target is an exact copy and the lineage says 'copied'."""
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE complete AS SELECT i AS n, i * 0.5 AS x, 'a' AS s FROM range(9) r(i)"
        )
    result = impute_table("complete", db_path=path, imputer=FAST)
    assert result.status == "copied" and sum(result.cells_imputed.values()) == 0
    pd.testing.assert_frame_equal(
        _query(path, "SELECT * FROM complete"), _query(path, "SELECT * FROM complete_imputed")
    )
    assert _query(path, "SELECT status, imputer FROM tdm_lineage").values.tolist() == [
        ["copied", "none"]
    ]


def test_names_with_quotes_spaces_and_sql_are_quoted_not_run(
    tmp_path: Path, make_readings: Callable[..., pd.DataFrame]
) -> None:
    """A table named like an injection is imputed as a name; no other table is touched."""
    path = tmp_path / "w.duckdb"
    name = 'x"; DROP TABLE t; --'
    make_readings(path, table=name, n_rows=30)
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS keep")
        con.execute('ALTER TABLE "x""; DROP TABLE t; --" RENAME COLUMN humidity TO "hum id""ity"')
    result = impute_table(name, db_path=path, key="id", imputer=FAST)
    assert result.target_table == f"{name}_imputed"
    tables = set(_query(path, "SELECT table_name FROM duckdb_tables()")["table_name"])
    assert {name, f"{name}_imputed", "t"} <= tables
    target = _query(path, 'SELECT "hum id""ity" FROM "x""; DROP TABLE t; --_imputed"')
    assert not target.isna().any().any()


@pytest.mark.parametrize(
    ("case", "hints"),
    [("missing-database", ["the db_path parameter", "--db flag or TDM_DB_PATH"]),
     ("injection-in-column-name", [])],
)  # fmt: skip
def test_bad_input_fails_the_run_with_a_clear_message_and_changes_nothing(
    tmp_path: Path, take_snapshot: Callable[[Path], dict], case: str, hints: list[str]
) -> None:
    """The flow run fails with one paragraph naming the problem, and a hint names the flow
    parameter as well as the CLI flag (bug: a UI-triggered run was told to use `--db`); the
    warehouse is unchanged."""
    build, kwargs, message = BAD_INPUTS[case]
    path = build(tmp_path)
    before = take_snapshot(path) if path.exists() else None
    arguments = {"source_table": "t", "db_path": path, "imputer": FAST, **kwargs}
    state = impute_table(**arguments, return_state=True)
    text = _failed(state)
    assert re.search(message, text), text
    error = held_error(state, PipelineInputError)
    assert text == str(error) and "\n" not in text  # the state message is the one paragraph
    assert all(hint in text for hint in hints), text
    if before is None:
        assert not path.exists()
    else:
        assert take_snapshot(path) == before


class _WildImputer(tdm.TDMImputer):
    """Fills every missing cell with an absurd value, to make the quality checks fail."""

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        filled = super().fit_transform(X)
        return filled.mask(X.isna(), 1e9)


def test_failed_quality_check_fails_the_run_and_writes_nothing(
    warehouse: Path, take_snapshot: Callable[[Path], dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Imputed values far outside the observed range fail the run before anything is written;
    the checks are the run's, so they fail a dry run too."""
    before = take_snapshot(warehouse)
    monkeypatch.setattr(tdm, "TDMImputer", _WildImputer)
    state = impute_table("readings", db_path=warehouse, imputer=FAST, return_state=True)
    text = _failed(state)
    held_error(state, QualityCheckError)
    assert "expect_column_values_to_be_between" in text
    assert take_snapshot(warehouse) == before
    with refused(QualityCheckError):
        impute_table("readings", db_path=warehouse, imputer=FAST, dry_run=True)
    assert take_snapshot(warehouse) == before


def test_environment_settings_reach_the_imputer(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TDM_MAX_ITER and TDM_SEED are used when the flow gets no explicit hyperparameters."""
    monkeypatch.setenv("TDM_MAX_ITER", "7")
    monkeypatch.setenv("TDM_SEED", "3")
    result = impute_table("readings", db_path=warehouse)
    assert result.n_iter == 7
    row = _query(warehouse, "SELECT hyperparameters, seed FROM tdm_lineage").iloc[0]
    assert json.loads(row["hyperparameters"])["max_iter"] == 7 and row["seed"] == 3


def test_a_partial_imputer_override_keeps_the_other_settings(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `tdm run --max-iter` sends: one setting overridden, the TDM_* ones kept."""
    monkeypatch.setenv("TDM_N_BLOCKS", "1")
    monkeypatch.setenv("TDM_MAX_ITER", "50")
    result = impute_table("readings", db_path=str(warehouse), imputer={"max_iter": 4})
    assert result.n_iter == 4
    with duckdb.connect(str(warehouse), read_only=True) as con:
        used = json.loads(con.execute("SELECT hyperparameters FROM tdm_lineage").fetchall()[0][0])
    assert (used["n_blocks"], used["max_iter"]) == (1, 4)
    # the library's limits: max_iter=0 is allowed (the start alone), a negative count is not
    with refused(PipelineInputError, match=r'table "readings" are invalid: .*max_iter=-1'):
        impute_table("readings", db_path=str(warehouse), imputer={"max_iter": -1})


def test_a_table_in_a_schema_is_imputed_into_a_table_in_a_schema(
    warehouse: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """`schema.table` works for source and target (each part quoted for SQL, so a schema name
    may hold a space, a table name any letters); tables of the same name in other schemas are
    untouched. Bug: a non-ASCII name failed after the fit (its artifact keys)."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute('CREATE SCHEMA "Sales Data"; CREATE SCHEMA out')
        con.execute('CREATE TABLE "Sales Data"."Ünïcode表" AS SELECT * FROM readings')
        con.execute(
            "CREATE TABLE out.readings_imputed AS SELECT 1 AS decoy"
        )  # same name, other schema
    before = take_snapshot(warehouse)
    result = impute_table(
        "Sales Data.Ünïcode表",
        db_path=warehouse,
        key="id",
        target_table="out.filled",
        imputer=FAST,
    )
    assert result.target_table == "out.filled"
    filled = _query(warehouse, "SELECT * FROM out.filled ORDER BY id")
    source = _query(warehouse, 'SELECT * FROM "Sales Data"."Ünïcode表" ORDER BY id')
    assert len(filled) == len(source) and not filled["temperature"].isna().any()
    after = take_snapshot(warehouse)
    assert {name: after[name] for name in before} == before
    lineage = _query(warehouse, "SELECT source_table, target_table FROM tdm_lineage")
    assert lineage.values.tolist() == [["Sales Data.Ünïcode表", "out.filled"]]


def test_an_unrelated_table_is_replaced_only_with_replace_target(
    warehouse: Path, take_snapshot: Callable[[Path], dict]
) -> None:
    """A target this pipeline did not write is refused (the file unchanged) until the run says
    replace_target; the table it wrote is then its own, rewritten without the flag, until it is
    dropped and a table of one's own made at its name."""

    def refused_over(own_table: str) -> str:
        """Make `own_table` the table "report" by hand; a run without the flag is refused and
        leaves the file as it was; its message."""
        with duckdb.connect(str(warehouse)) as con:
            con.execute(f"DROP TABLE IF EXISTS report; {own_table}")
        before = take_snapshot(warehouse)
        state = impute_table(
            "readings", db_path=warehouse, target_table="report", imputer=FAST, return_state=True
        )
        assert take_snapshot(warehouse) == before
        return _failed(state)

    constrain_readings(warehouse)
    message = refused_over("CREATE TABLE report AS SELECT 42 AS answer")
    assert "replace-target" in message and '"report"' in message
    impute_table("readings", db_path=warehouse, target_table="report", imputer=FAST,
                 replace_target=True)  # fmt: skip
    assert table_body(warehouse, "report") == table_body(warehouse, "readings")
    impute_table("readings", db_path=warehouse, target_table="report", imputer=FAST)
    assert _query(warehouse, "SELECT count(*) AS n FROM tdm_lineage")["n"][0] == 2
    # Bug: a table of one's own, made at a former target's name, was replaced without the flag.
    message = refused_over("CREATE TABLE report AS SELECT 'mine' AS note, 1.5 AS amount")
    assert "replace-target" in message and "marker" in message


def test_nan_is_a_value_refused_unless_imputed_as_missing(
    warehouse: Path, take_snapshot: Callable[[Path], dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: NaN, a value in DuckDB, was taken for missing and overwritten while the lineage said
    the observed cells were exact. A column to impute that holds NaN is refused by name, whole
    or in partitions, the file unchanged; `nan_as_missing` imputes NaN cells with the NULLs."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE readings SET temperature = 'nan'::DOUBLE WHERE id IN (2, 4, 6)")
        nulls = con.execute("SELECT count(*) - count(temperature) FROM readings").fetchall()[0][0]
    before = take_snapshot(warehouse)
    for partitions in (False, True):
        with monkeypatch.context() as patch:
            if partitions:
                patch.setenv("TDM_MAX_FIT_ROWS", "40")
            state = impute_table("readings", db_path=warehouse, key="id", return_state=True)
        message = _failed(state)
        assert 'NaN values in "temperature" (3)' in message and "not overwritten" in message
        assert "TDM_NAN_AS_MISSING=true" in message and "Traceback" not in message
        assert take_snapshot(warehouse) == before

    result = impute_table(
        "readings", db_path=warehouse, key="id", imputer=FAST, nan_as_missing=True
    )
    assert result.cells_imputed["temperature"] == nulls + 3
    left = (
        "SELECT count(*) FILTER (isnan(temperature) OR temperature IS NULL) FROM readings_imputed"
    )
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute(left).fetchall() == [(0,)]


def test_a_generated_column_is_computed_not_imputed(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: `b AS (a * 2)` became a plain column imputed on its own (b != 2a in every imputed
    row), and in place the run failed only at write time, after the fit. A generated column is
    never imputed (named, it is refused before the fit); the target, whole or in partitions,
    computes it from the imputed cells; in place the table computes it itself."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE gen (id INTEGER, a DOUBLE, c DOUBLE, b AS (a * 2))")
        con.execute("INSERT INTO gen SELECT id, temperature, pressure FROM readings")
    state = impute_table("gen", db_path=warehouse, key="id", columns=["a", "b"], return_state=True)
    assert 'computes "b" AS (' in _failed(state) and "computed, not imputed" in _failed(state)

    wrong = "SELECT count(*) FILTER (a IS NULL OR b IS DISTINCT FROM a * 2) AS n FROM {}"
    result = impute_table("gen", db_path=warehouse, key="id", imputer=FAST)
    assert set(result.cells_imputed) == {"a", "c"} and result.cells_imputed["a"] > 0
    assert _query(warehouse, wrong.format("gen_imputed"))["n"][0] == 0
    with monkeypatch.context() as patch:
        patch.setenv("TDM_MAX_FIT_ROWS", "40")
        impute_table("gen", db_path=warehouse, key="id", target_table="parts", imputer=FAST)
    assert _query(warehouse, wrong.format("parts"))["n"][0] == 0
    impute_table("gen", db_path=warehouse, key="id", replace_source=True, imputer=FAST)
    assert _query(warehouse, wrong.format("gen"))["n"][0] == 0


def test_a_bad_run_setting_is_refused_naming_the_table_the_setting_and_its_value(
    warehouse: Path,
) -> None:
    """Bug: "Invalid run settings: range_factor: Input should be greater than 0." named neither
    the table nor the value given."""
    state = impute_table("readings", db_path=warehouse, range_factor=-3, return_state=True)
    assert _failed(state) == (
        'Invalid run settings for table "readings": range_factor: Input should be greater than '
        "0 (given: -3.0)."
    )


def test_a_served_run_writes_no_database_file_but_the_served_ones(
    warehouse: Path, tmp_path: Path, take_snapshot: Callable[[Path], dict], monkeypatch
) -> None:
    """Bug (security review): a run served by `tdm serve --db shop.duckdb` took any `db_path`
    parameter, so whoever reached the server could have the service rewrite another file.
    Under `tdm serve` (TDM_SERVED_DB) another file is refused, unchanged; the served one runs."""
    other = tmp_path / "other.duckdb"
    shutil.copy(warehouse, other)
    before = take_snapshot(other)
    monkeypatch.setenv("TDM_SERVED_DB", str(warehouse.resolve()))
    arguments = {"source_table": "readings", "imputer": FAST, "replace_source": True}
    text = _failed(impute_table(db_path=other, **arguments, return_state=True))
    served = f"'{warehouse.resolve()}' only (TDM_SERVED_DB)"
    assert f"asks for the database file '{other}', but this service writes {served}" in text
    assert take_snapshot(other) == before
    state = impute_table(db_path=warehouse, **arguments, return_state=True)
    assert state.is_completed(), state.message
