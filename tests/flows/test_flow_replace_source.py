"""`--replace-source` end to end (issue 14): the source's missing cells are updated in place and
its definition (constraints, defaults, indexes, types) is kept; the output says so."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from cli.main import main
from flows.impute_table import impute_table
from tests.tables import strict_changes, strict_table, table_definition

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")


def test_replace_source_flow_keeps_the_table_definition(tmp_path: Path) -> None:
    """Bug: the impute-table flow with replace_source dropped PRIMARY KEY, NOT NULL, CHECK,
    DEFAULT and the index, turned INTEGER into DOUBLE and rounded BIGINT above 2**53."""
    path = tmp_path / "w.duckdb"
    strict_table(path, n_rows=40, seed=5)
    definition = table_definition(path, "strict")
    result = impute_table(
        "strict", db_path=path, key="id", replace_source=True, imputer={"max_iter": 15}
    )
    assert result.target_table == "strict" and result.status == "imputed"
    assert table_definition(path, "strict") == definition
    assert strict_changes(path) == (0, 0)
    with duckdb.connect(str(path), read_only=True) as con:
        replaced, report = con.execute(
            "SELECT replaced_source, quality_report FROM tdm_lineage"
        ).fetchall()[0]
    assert replaced
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
    strict_table(path, n_rows=40, seed=5)
    args = ["impute", "--db", str(path), "--table", "strict", "--replace-source"]
    assert main([*args, "--max-iter", "10"]) == 0
    out = capsys.readouterr().out
    assert "in place (only its missing cells were updated; its definition was kept)" in out
    assert "replaced the existing table" not in out
