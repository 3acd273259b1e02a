"""`tdm impute` on a mixed-type table (issue 16): text, enum, boolean, integer, decimal and
double columns, all with NULLs, and a CHECK constraint, on a real DuckDB file."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from cli.main import main
from tests.tables import differing_cells, table_body, write_table

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

COLUMNS = {
    "id": "INTEGER PRIMARY KEY",
    "t": "TEXT",
    "e": "ENUM('small', 'medium', 'large')",
    "b": "BOOLEAN",
    "i": "INTEGER CHECK (i >= 0)",
    "big": "BIGINT",
    "d": "DECIMAL(10,2) CHECK (d > 0)",
    "x": "DOUBLE",
    "note": "VARCHAR",
}
IMPUTED = ["t", "e", "b", "i", "big", "d", "x"]


def _mixed_table(db: Path, n_rows: int = 60) -> None:
    """Table `mixed`: correlated columns of every kind, each with about a fifth NULL."""
    rng = np.random.default_rng(16)
    sizes = ("small", "medium", "large")
    rows = []
    for k in range(n_rows):
        level = int(rng.integers(3))
        values = [
            f"group {level}",
            sizes[level],
            bool(level == 2),
            int(10 * level + rng.integers(5)),
            2**53 + 1000 * level + int(rng.integers(100)),
            f"{1 + 2 * level + rng.random():.2f}",
            float(level + rng.normal(0, 0.3)),
            f"free text {k}",
        ]
        rows.append((k, *[None if rng.random() < 0.2 else v for v in values]))
    write_table(db, "mixed", COLUMNS, rows)


def _describe(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple]:
    return con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall()


def test_impute_fills_every_kind_of_column_and_keeps_every_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 0; no NULL left in imputed columns; every column's type unchanged; observed cells
    bit for bit; imputed labels observed in their column; numbers whole where the type is and
    within the observed range (and the CHECK); the pass-through column keeps its NULLs; the
    imputed cells record lists the text, enum and boolean cells too. The target keeps the
    PRIMARY KEY and CHECKs, and the terminal says which columns could be declared NOT NULL."""
    db = tmp_path / "w.duckdb"
    _mixed_table(db)
    args = ["impute", "--db", str(db), "--table", "mixed", "--key", "id", "--max-iter", "30"]
    assert main([*args, "--pass-through", "note"]) == 0
    out = capsys.readouterr().out
    assert "Wrote 'mixed_imputed'" in out
    listed = ", ".join(f'"{name}"' for name in IMPUTED)
    assert out.count(f"NOT NULL: {listed} hold no NULL now that their gaps are imputed") == 1
    assert table_body(db, "mixed_imputed") == table_body(db, "mixed")
    with duckdb.connect(str(db), read_only=True) as con:
        assert _describe(con, "mixed_imputed") == _describe(con, "mixed")
        for name in IMPUTED:
            nulls = f'SELECT count(*) FROM mixed_imputed WHERE "{name}" IS NULL'
            assert con.execute(nulls).fetchall()[0][0] == 0, name
        assert set(differing_cells(con, "mixed", "mixed_imputed").values()) == {0}
        for name in ("t", "e", "b"):
            unseen = con.execute(
                f'SELECT count(*) FROM mixed_imputed WHERE "{name}" NOT IN '
                f'(SELECT "{name}" FROM mixed WHERE "{name}" IS NOT NULL)'
            ).fetchall()[0][0]
            assert unseen == 0, name
        for name in ("i", "big", "d", "x"):
            outside = con.execute(
                f'SELECT count(*) FROM mixed_imputed, (SELECT min("{name}") AS lo, '
                f'max("{name}") AS hi FROM mixed) WHERE "{name}" < lo OR "{name}" > hi'
            ).fetchall()[0][0]
            assert outside == 0, name
        notes = "SELECT count(*) FROM {} WHERE note IS NULL"
        kept = con.execute(notes.format("mixed_imputed")).fetchall()[0][0]
        assert kept == con.execute(notes.format("mixed")).fetchall()[0][0] > 0
        recorded = dict(
            con.execute(
                "SELECT column_name, count(*) FROM tdm_imputed_cells GROUP BY ALL"
            ).fetchall()
        )
        missing = {
            name: con.execute(f'SELECT count(*) FROM mixed WHERE "{name}" IS NULL').fetchall()[0][0]
            for name in IMPUTED
        }
        report = json.loads(con.execute("SELECT quality_report FROM tdm_lineage").fetchall()[0][0])
    assert recorded == missing
    assert report["passed"] and report["labels"] == {"t": 3, "e": 3, "b": 2}
    assert report["bounds"]["d"][2:] == ["observed", "observed"]
    names = {check["name"] for check in report["checks"]}
    assert {'integral_values["i"]', 'within_bounds["d"]', "observed_cells_exact"} <= names
