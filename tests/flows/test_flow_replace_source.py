"""`--replace-source` end to end (issue 14): the source's missing cells are updated in place and
its definition (constraints, defaults, indexes, types) is kept; the output says so."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from cli.main import main
from flows.impute_table import impute_table
from tasks.params import ImputerParams

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")


def _strict_table(path: Path) -> tuple:
    """Table `strict` (PRIMARY KEY, NOT NULL, DEFAULT, CHECK, an index, INTEGER and BIGINT
    columns with NULLs); returns its definition as DuckDB reports it."""
    rng = np.random.default_rng(5)
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE strict (id INTEGER PRIMARY KEY, "
            "x DOUBLE NOT NULL DEFAULT 0 CHECK (x > -100), n INTEGER CHECK (n >= 0), "
            "y DOUBLE, b BIGINT)"
        )
        con.execute("CREATE INDEX strict_y ON strict (y)")
        rows = [
            [
                i,
                float(rng.normal()),
                None if i % 4 == 0 else int(rng.integers(10, 50)),
                None if i % 5 == 2 else float(rng.normal()),
                None if i % 6 == 3 else 2**53 + 1 + 2 * i,
            ]
            for i in range(40)
        ]
        con.executemany("INSERT INTO strict VALUES (?, ?, ?, ?, ?)", rows)
        con.execute("CREATE TABLE original AS SELECT * FROM strict")
        return _definition(con)


def _definition(con: duckdb.DuckDBPyConnection) -> tuple:
    table = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = 'strict'").fetchall()
    indexes = con.execute("SELECT sql FROM duckdb_indexes() WHERE table_name = 'strict'").fetchall()
    return table, indexes


def test_replace_source_flow_keeps_the_table_definition(tmp_path: Path) -> None:
    """Bug: the impute-table flow with replace_source dropped PRIMARY KEY, NOT NULL, CHECK,
    DEFAULT and the index, turned INTEGER into DOUBLE and rounded BIGINT above 2**53."""
    path = tmp_path / "w.duckdb"
    definition = _strict_table(path)
    result = impute_table(
        "strict", db_path=path, key="id", replace_source=True, imputer=ImputerParams(max_iter=15)
    )
    assert result.target_table == "strict" and result.status == "imputed"
    with duckdb.connect(str(path), read_only=True) as con:
        assert _definition(con) == definition
        changed = con.execute(
            "SELECT count(*) FROM original o JOIN strict s USING (id) WHERE "
            "(o.n IS NOT NULL AND o.n IS DISTINCT FROM s.n) OR "
            "(o.y IS NOT NULL AND o.y::VARCHAR IS DISTINCT FROM s.y::VARCHAR) OR "
            "(o.b IS NOT NULL AND o.b IS DISTINCT FROM s.b) OR o.x::VARCHAR <> s.x::VARCHAR"
        ).fetchall()[0][0]
        left = con.execute(
            "SELECT count(*) FROM strict WHERE n IS NULL OR y IS NULL OR b IS NULL"
        ).fetchall()[0][0]
        replaced, report = con.execute(
            "SELECT replaced_source, quality_report FROM tdm_lineage"
        ).fetchall()[0]
    assert changed == 0 and left == 0 and replaced
    notes = {c["name"]: c["detail"] for c in json.loads(report)["checks"]}
    assert (
        '"n" kept its type INTEGER: imputed cells rounded to the nearest integer'
        in (notes["imputed_cell_types"])
    )


def test_replace_source_output_says_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: `tdm impute --replace-source` said only that it "replaced" the table; it now says
    the missing cells were updated in place and the definition kept."""
    path = tmp_path / "w.duckdb"
    _strict_table(path)
    args = ["impute", "--db", str(path), "--table", "strict", "--replace-source"]
    assert main([*args, "--max-iter", "10"]) == 0
    out = capsys.readouterr().out
    assert "in place (only its missing cells were updated; its definition was kept)" in out
    assert "replaced the existing table" not in out
