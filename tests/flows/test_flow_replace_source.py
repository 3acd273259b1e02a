"""`--replace-source` end to end (issue 14): the source's missing cells are updated in place and
its definition (constraints, defaults, indexes, types) is kept; the output says so."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from cli.main import main
from tests.tables import strict_changes, strict_table, table_definition

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")


def test_replace_source_updates_in_place_keeps_the_definition_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: the impute-table flow with replace_source dropped PRIMARY KEY, NOT NULL, CHECK,
    DEFAULT and the index, turned INTEGER into DOUBLE and rounded BIGINT above 2**53; and
    `tdm impute --replace-source` said only that it "replaced" the table. The source's missing
    cells are now updated in place, its definition kept, and the output says so."""
    path = tmp_path / "w.duckdb"
    strict_table(path, n_rows=40, seed=5)
    definition = table_definition(path, "strict")
    args = ["impute", "--db", str(path), "--table", "strict", "--key", "id", "--replace-source"]
    assert main([*args, "--max-iter", "15"]) == 0
    out = capsys.readouterr().out
    assert "in place (only its missing cells were updated; its definition was kept)" in out
    assert "replaced the existing table" not in out
    assert table_definition(path, "strict") == definition
    assert strict_changes(path) == (0, 0)  # observed cells as they were, none missing
    with duckdb.connect(str(path), read_only=True) as con:
        replaced, target, status, report = con.execute(
            "SELECT replaced_source, target_table, status, quality_report FROM tdm_lineage"
        ).fetchall()[0]
    assert replaced and target == "strict" and status == "imputed"
    notes = {c["name"]: c["detail"] for c in json.loads(report)["checks"]}
    assert (
        '"n" kept its type INTEGER: imputed cells rounded to the nearest integer'
        in (notes["imputed_cell_types"])
    )
