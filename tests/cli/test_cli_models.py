"""`tdm models list|show|drop` on a warehouse's model store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pytest

from cli.main import main
from tasks.scaling import Scaling
from tasks.warehouse.models import NewModel, insert_model
from tdm.scaling import ColumnScaling


def store_two_versions(db: Path) -> None:
    scaling = Scaling(("x",), ColumnScaling(mean=np.array([1.0]), scale=np.array([2.0])))
    model = NewModel(
        source_table="readings",
        target_table="readings_imputed",
        run_id="run-1",
        created_at=datetime(2026, 1, 2, 3, 4, tzinfo=UTC),
        columns=("x",),
        key_column="id",
        watermark_column=None,
        settings={"max_iter": 5},
        seed=7,
        source_hash="abc",
        fit_rows=40,
        profile={"x": {"mean": 1.0}},
        scaling=scaling,
        model=b"model bytes",
    )
    with duckdb.connect(str(db)) as con:
        insert_model(con, model)
        insert_model(con, model)


def test_list_show_and_drop_the_stored_versions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`list` prints a line per version, `show` the newest version's fields as JSON (by their
    tdm_models column names, the model's scaling left out), `drop` deletes them."""
    db = tmp_path / "w.duckdb"
    store_two_versions(db)

    assert main(["models", "list", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["readings_imputed", "v1"],
        ["readings_imputed", "v2"],
    ]

    assert main(["models", "show", "--db", str(db), "--target", "readings_imputed"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 2 and shown["columns"] == ["x"] and shown["seed"] == 7
    assert shown["settings"] == {"max_iter": 5} and shown["model_bytes"] == len(b"model bytes")
    assert "scaling" not in shown

    assert main(["models", "show", "--db", str(db), "--target", "t", "--version", "1"]) == 2
    assert "No stored model of 't' with version 1" in capsys.readouterr().err

    assert main(["models", "drop", "--db", str(db), "--target", "readings_imputed"]) == 0
    assert main(["models", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "Dropped 2 stored model(s)" in out and "No stored model in" in out
