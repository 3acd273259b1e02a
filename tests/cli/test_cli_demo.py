"""The demo warehouse of `tdm demo`: the wine table with cells knocked out, and its score."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from cli.demo import DEMO_KEY, build_demo_warehouse, score_demo


def test_demo_warehouse_knocks_out_the_cells_it_says_and_keeps_the_truth(tmp_path: Path) -> None:
    """The holed table misses exactly `missing_cells` numeric cells and `missing_labels`
    cultivar labels; the truth table misses none."""
    demo = build_demo_warehouse(tmp_path / "demo.duckdb", missing_rate=0.2, seed=3)
    nulls = " + ".join(f'count(*) - count("{c}")' for c in demo.numeric_columns)
    labels = "count(*) - count(cultivar)"
    with duckdb.connect(str(demo.db_path), read_only=True) as con:
        holed = con.execute(f"SELECT {nulls}, {labels}, count(*) FROM {demo.table}").fetchall()
        truth = con.execute(f"SELECT {nulls}, {labels} FROM {demo.truth_table}").fetchall()
        described = con.execute(f"DESCRIBE {demo.table}").fetchall()
    assert holed[0] == (demo.missing_cells, demo.missing_labels, demo.rows) and demo.rows == 178
    assert demo.missing_labels > 0 and truth[0] == (0, 0)
    types = {name: kind for name, kind, *_ in described}
    assert demo.categorical_columns == ("cultivar",)
    assert [types[c] for c in (DEMO_KEY, "cultivar", *demo.pass_through_columns)] == [
        "INTEGER",
        "VARCHAR",
        "DATE",
        "BOOLEAN",
    ]
    assert (types["alcohol"], types["magnesium"], types["proline"]) == (
        "DOUBLE",
        "INTEGER",
        "INTEGER",
    )


def test_demo_warehouse_is_the_same_for_the_same_seed(tmp_path: Path) -> None:
    """Two builds with one seed knock out the same cells; another seed knocks out others."""
    first = build_demo_warehouse(tmp_path / "a.duckdb", seed=1)
    again = build_demo_warehouse(tmp_path / "b.duckdb", seed=1)
    other = build_demo_warehouse(tmp_path / "c.duckdb", seed=2)
    read = "SELECT * FROM wines ORDER BY wine_id"
    frames = []
    for demo in (first, again, other):
        with duckdb.connect(str(demo.db_path), read_only=True) as con:
            frames.append(con.execute(read).df())
    assert frames[0].equals(frames[1])
    assert not frames[0].equals(frames[2])


def test_scoring_the_truth_gives_no_error_and_mean_imputation_some(tmp_path: Path) -> None:
    """Scored against itself the complete table has error 0; the mean's error is positive, and
    so is the most frequent label's."""
    demo = build_demo_warehouse(tmp_path / "demo.duckdb", seed=0)
    score = score_demo(demo, demo.truth_table)
    assert score.cells == demo.missing_cells and score.labels == demo.missing_labels
    assert score.mae_imputed == 0.0 and score.mae_mean > 0.1
    assert score.label_error_imputed == 0.0 and score.label_error_mode > 0.3


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness", "one_torch_thread")
def test_demo_tdm_beats_mean_imputation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At the demo's settings, TDM's error on the removed cells is well below the mean's, and
    its share of wrong labels well below the most frequent label's."""
    from flows.impute_table import impute_table

    for name in ("TDM_INIT", "TDM_MAX_ITER"):  # the suite's cheap fit: this checks the default
        monkeypatch.delenv(name)

    demo = build_demo_warehouse(tmp_path / "demo.duckdb", seed=0)
    result = impute_table(demo.table, db_path=demo.db_path, key=DEMO_KEY, seed=0)
    score = score_demo(demo, result.target_table)
    assert score.mae_imputed < 0.95 * score.mae_mean
    assert score.label_error_imputed < 0.5 * score.label_error_mode
