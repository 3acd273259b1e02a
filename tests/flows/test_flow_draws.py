"""Runs with draws: what the target receives (the point or one draw), the per-cell uncertainty
in `tdm_imputed_cells`, and the report's warnings on collapsed spreads and label shares; whole
tables, partitions and incremental runs, against real DuckDB files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from flows.impute_table import impute_table
from tasks.drift import label_shares, share_distance
from tasks.errors import PipelineInputError
from tests.failures import refused

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

REGIONS = {"north": 0.25, "south": 0.2, "east": 0.2, "west": 0.15, "centre": 0.12, "islands": 0.08}


@pytest.fixture
def collapsing(tmp_path: Path) -> Path:
    """`sales`: 300 rows; `price` and `region` independent of the other columns, so that a
    point imputation puts every missing price near the mean and every missing region on the
    commonest label; 30% of each removed at random."""
    rng = np.random.default_rng(4)
    n = 300
    frame = pd.DataFrame(
        {
            "id": np.arange(1, n + 1),
            "units": rng.integers(1, 50, n),
            "price": rng.normal(100, 20, n).round(2),
            "region": rng.choice(list(REGIONS), n, p=list(REGIONS.values())),
        }
    )
    frame["revenue"] = frame["units"] * 3.0 + rng.normal(0, 5, n)
    for name in ("price", "region"):
        frame[name] = frame[name].where(rng.random(n) > 0.3)
    path = tmp_path / "sales.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE sales AS SELECT * FROM frame")
    return path


def read(db: Path, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).df()


def warnings_of(db: Path, run_id: str) -> dict[str, bool]:
    """The run's warning checks, by name: whether each passed."""
    report = json.loads(
        read(db, f"SELECT quality_report FROM tdm_lineage WHERE run_id = '{run_id}'").iloc[0, 0]
    )
    return {c["name"]: c["passed"] for c in report["checks"] if c["warning"]}


def test_the_point_is_flagged_one_draw_keeps_the_table_s_spread_and_label_shares(
    collapsing: Path,
) -> None:
    """Bug: a point imputation put 94% of a label column's missing cells on one label and
    halved a column's spread, and every check passed. Now the report warns (not fails) on
    both; with fill="draw" the target keeps the observed spread and label shares, and with
    draws=20 each imputed cell's record holds its interval or its label's probability."""
    point = impute_table("sales", db_path=str(collapsing), key="id", draws=20)
    drawn = impute_table(
        "sales", db_path=str(collapsing), key="id", target_table="sales_drawn", fill="draw"
    )
    source = read(collapsing, "SELECT * FROM sales ORDER BY id")
    missing = source[["price", "region"]].isna()
    observed_shares = label_shares(source["region"])
    spreads = {}
    for result, table in ((point, "sales_imputed"), (drawn, "sales_drawn")):
        target = read(collapsing, f"SELECT * FROM {table} ORDER BY id")
        for name in ("price", "region"):  # observed cells as they were
            kept = ~missing[name]
            assert target[name][kept].equals(source[name][kept])
        shares = label_shares(target["region"][missing["region"]])
        spread = target["price"][missing["price"]].std() / source["price"].std()
        spreads[table] = (share_distance(observed_shares, shares), spread)
        assert result.status == "imputed"

    (point_tv, point_spread), (drawn_tv, drawn_spread) = spreads.values()
    assert point_spread < 0.5 and point_tv > 0.3  # the collapse the report must flag
    assert warnings_of(collapsing, point.run_id) == {
        'imputed_spread["price"]': False,
        "label_shares": False,
        "observed_share": True,
    }
    assert 0.75 < drawn_spread < 1.3 and drawn_tv < 0.2
    assert all(warnings_of(collapsing, drawn.run_id).values())

    cells = read(
        collapsing,
        "SELECT c.column_name, c.low, c.high, c.probability, t.price, t.region "
        "FROM tdm_imputed_cells c JOIN sales_imputed t ON t.id = CAST(c.row_key AS BIGINT) "
        f"WHERE c.run_id = '{point.run_id}'",
    )
    prices = cells[cells["column_name"] == "price"]
    regions = cells[cells["column_name"] == "region"]
    assert len(prices) == missing["price"].sum() and len(regions) == missing["region"].sum()
    assert prices[["low", "high"]].notna().all().all() and prices["probability"].isna().all()
    assert (prices["low"] < prices["high"]).all()
    inside = (prices["low"] <= prices["price"]) & (prices["price"] <= prices["high"])
    assert inside.mean() > 0.9  # the point sits among its draws
    width = (prices["high"] - prices["low"]).median()
    assert 1.5 < width / source["price"].std() < 5  # about 3.3 sds for a 90% normal interval
    assert regions[["low", "high"]].isna().all().all()
    assert regions["probability"].between(0, 1).all()
    # the commonest label is right about as often as its observed share
    assert abs(regions["probability"].mean() - max(observed_shares.values())) < 0.15
    # a run without draws leaves them NULL
    assert (
        read(
            collapsing,
            f"SELECT count(*) FROM tdm_imputed_cells WHERE run_id = '{drawn.run_id}' "
            "AND (low IS NOT NULL OR probability IS NOT NULL)",
        ).iloc[0, 0]
        == 0
    )


def test_one_draw_is_refused_with_the_setting_named(collapsing: Path) -> None:
    with refused(PipelineInputError, match=r"draws: .*0 \(none\) or at least 2"):
        impute_table("sales", db_path=str(collapsing), draws=1)
    assert "sales_imputed" not in set(read(collapsing, "SHOW TABLES")["name"])


def test_partitions_and_incremental_runs_record_their_draws(
    tmp_path: Path, make_readings: Callable[..., pd.DataFrame], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table imputed in partitions with the model fitted on a sample, then the rows appended
    later imputed by the stored model: every imputed cell of each gets its draws, and each
    lineage row says so (bug: partitioned and appending runs recorded no draws)."""
    db = tmp_path / "warehouse.duckdb"
    make_readings(db, table="readings", n_rows=120, seed=5)
    monkeypatch.setenv("TDM_MAX_FIT_ROWS", "60")
    monkeypatch.setenv("TDM_PARTITION_ROWS", "50")
    monkeypatch.setenv("TDM_MAX_ITER", "10")
    monkeypatch.setenv("TDM_DRAWS", "5")  # the setting's variable, as a scheduled run has it
    parts = impute_table("readings", db_path=str(db), key="id")
    first = impute_table(
        "readings", db_path=str(db), key="id", target_table="nightly", incremental=True
    )
    with duckdb.connect(str(db)) as con:
        con.execute("INSERT INTO readings SELECT * REPLACE (id + 1000 AS id) FROM readings")
    second = impute_table(
        "readings", db_path=str(db), key="id", target_table="nightly", incremental=True
    )
    assert (second.status, second.rows_new) == ("appended", 120)
    for run in (parts, first, second):
        cells = read(db, f"SELECT * FROM tdm_imputed_cells WHERE run_id = '{run.run_id}'")
        assert len(cells) == sum(run.cells_imputed.values()) > 0
        labelled = cells["column_name"].isin(["site", "ok"])
        assert cells.loc[~labelled, ["low", "high"]].notna().all().all()
        assert (cells.loc[~labelled, "low"] <= cells.loc[~labelled, "high"]).all()
        assert cells.loc[labelled, "probability"].between(0, 1).all()
        recorded = read(
            db, f"SELECT hyperparameters FROM tdm_lineage WHERE run_id = '{run.run_id}'"
        )
        settings = json.loads(recorded.iloc[0, 0])
        assert (settings["fill"], settings["draws"]) == ("point", 5), run.status


def test_a_decimal_column_s_draws_are_recorded_at_its_scale(tmp_path: Path) -> None:
    """Bug: `low` and `high` of a DECIMAL(6,2) column had more digits than its imputed cells,
    so a cell written as 4.31 sat below its own low of 4.3139."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=120)
    price = np.round(10 + 3 * x + rng.normal(size=120), 2)
    frame = pd.DataFrame({"id": np.arange(120), "x": x, "price": price})
    frame["price"] = frame["price"].where(rng.random(120) > 0.25)
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT id, x, price::DECIMAL(6,2) AS price FROM frame")
    run = impute_table("t", db_path=str(db), key="id", draws=5, imputer={"max_iter": 20})
    cells = read(db, f"SELECT low, high FROM tdm_imputed_cells WHERE run_id = '{run.run_id}'")
    assert len(cells) == frame["price"].isna().sum() > 0
    ends = cells.to_numpy()
    np.testing.assert_array_equal(ends, np.round(ends, 2))
    assert (ends[:, 0] <= ends[:, 1]).all()


def test_a_partition_without_observed_values_of_a_column_records_no_interval_for_it(
    tmp_path: Path,
    make_readings: Callable[..., pd.DataFrame],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Bug: a partition whose rows held no value of a column (a column added lately, rows in
    time order) recorded zero-width intervals for its cells, claiming a certainty nobody
    measured. They get none (low, high NULL), and the run warns naming table, partition and
    column; the other partitions' cells keep theirs."""
    db = tmp_path / "warehouse.duckdb"
    make_readings(db, table="readings", n_rows=150, seed=5)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE readings SET humidity = NULL WHERE id <= 50")  # partition 1
    monkeypatch.setenv("TDM_MAX_FIT_ROWS", "60")
    monkeypatch.setenv("TDM_PARTITION_ROWS", "50")
    monkeypatch.setenv("TDM_MAX_ITER", "10")
    run = impute_table("readings", db_path=str(db), key="id", draws=3)
    cells = read(
        db,
        "SELECT row_key::INTEGER AS id, low, high FROM tdm_imputed_cells "
        f"WHERE run_id = '{run.run_id}' AND column_name = 'humidity'",
    )
    first = cells["id"] <= 50
    assert first.sum() == 50 and cells.loc[first, ["low", "high"]].isna().all().all()
    assert cells.loc[~first, ["low", "high"]].notna().all().all() and (~first).sum() > 0
    assert (
        'Table "readings", partition 1 of 3: the imputation\'s error of "humidity" could not be '
        "measured" in caplog.text
    )
    every = read(
        db,
        "SELECT low, high FROM tdm_imputed_cells WHERE column_name IN ('temperature', "
        f"'pressure', 'humidity') AND run_id = '{run.run_id}'",  # DOUBLE: no rounding
    )
    numbers = every.dropna()  # review: no zero-width interval is recorded for any of them
    assert len(numbers) > 0 and (numbers["low"] < numbers["high"]).all()
