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
from tasks.warehouse.models import ModelFolder, NewModel, insert_model
from tdm.scaling import ColumnScaling
from tests.conftest import read_only_mount
from tests.tables import file_hash


def store_two_versions(db: Path, folder: ModelFolder | None = None) -> None:
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
        insert_model(con, model, folder)
        insert_model(con, model, folder)


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

    main_schema = ["--target", "MAIN.readings_imputed", "--version", "1"]
    assert main(["models", "show", "--db", str(db), *main_schema]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 1

    assert main(["models", "show", "--db", str(db), "--target", "t", "--version", "1"]) == 2
    assert "No stored model of 't' with version 1" in capsys.readouterr().err

    assert main(["models", "drop", "--db", str(db), "--target", "readings_imputed"]) == 0
    assert main(["models", "list", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "Dropped 2 stored model(s)" in out and "No stored model in" in out


@pytest.mark.parametrize("model_dir", [None, "models"])
def test_drop_deletes_no_file_but_the_row_s_own_in_the_model_folder(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    model_dir: str | None,
) -> None:
    """Bug: `drop` deleted whatever file a row's model_path named (absolute, or `../` out of the
    model folder), so whoever could write the warehouse could make the operator delete any
    file. Such a row is refused by name and nothing is deleted; the row's own file is."""
    db = tmp_path / "w.duckdb"
    store_two_versions(db, ModelFolder.beside(db, "models"))
    own_folder = ModelFolder.beside(db, "models").file("readings_imputed", 1).parent
    folder = own_folder.relative_to(tmp_path).as_posix()
    victims = [tmp_path / "precious.txt", own_folder / "v1.tdm"]
    victims[0].write_text("keep me")
    if model_dir is not None:
        monkeypatch.setenv("TDM_MODEL_DIR", model_dir)
    drop = ["models", "drop", "--db", str(db), "--target", "readings_imputed"]
    for forged in (str(victims[0]), f"{folder}/../../precious.txt", f"{folder}/v1.tdm"):
        with duckdb.connect(str(db)) as con:
            con.execute("UPDATE tdm_models SET model_path = ? WHERE version = 2", [forged])
        digest = file_hash(db)
        assert main(drop) == 2
        assert file_hash(db) == digest
        err = capsys.readouterr().err
        assert f"version 2 of \"readings_imputed\" names the file '{forged}'" in err
        assert "nothing was dropped" in err and "Traceback" not in err
        assert all(victim.exists() for victim in victims)
        with duckdb.connect(str(db), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM tdm_models").fetchall() == [(2,)]
    if model_dir is not None:
        with duckdb.connect(str(db)) as con:
            own = f"{folder}/v2.tdm"
            con.execute("UPDATE tdm_models SET model_path = ? WHERE version = 2", [own])
        assert main([*drop, "--version", "1"]) == 0
        assert victims[0].exists() and not victims[1].exists()


def test_a_drop_that_matches_nothing_is_refused_and_leaves_the_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: `drop --target nope` exited 0 ("Dropped 0") where `show` refused the name, and a
    drop that deleted nothing still changed the file's bytes (a no-op migration rewrote
    DuckDB's catalog)."""
    db = tmp_path / "w.duckdb"
    store_two_versions(db)
    digest = file_hash(db)
    for chosen, said in (
        (["--target", "nope"], "No stored model of 'nope' in"),
        (["--target", "readings_imputed", "--version", "3"], "'readings_imputed' with version 3"),
    ):
        assert main(["models", "drop", "--db", str(db), *chosen]) == 2
        assert said in capsys.readouterr().err
        assert file_hash(db) == digest


def test_a_drop_from_a_read_only_file_says_why_and_drops_nothing(
    read_only_warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: `drop` on a file it could not write failed with DuckDB's raw "IO Error"."""
    drop = ["models", "drop", "--db", str(read_only_warehouse), "--target", "readings_imputed"]
    assert main(drop) == 2
    err = capsys.readouterr().err
    assert "cannot be written: it is on a read-only file system. No model was dropped" in err
    assert "IO Error" not in err and "Traceback" not in err


def test_a_drop_whose_model_files_cannot_be_deleted_is_refused_before_the_rows_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: with the model folder read-only, `drop` deleted the rows, then failed deleting
    their files (a traceback, and files no row names). It now refuses first: rows and files
    stay, and the file's bytes too."""
    db = tmp_path / "w.duckdb"
    monkeypatch.setenv("TDM_MODEL_DIR", "models")
    with read_only_mount(
        tmp_path / "models", lambda _: store_two_versions(db, ModelFolder.beside(db, "models"))
    ) as folder:
        digest = file_hash(db)
        assert main(["models", "drop", "--db", str(db), "--target", "readings_imputed"]) == 2
        err = capsys.readouterr().err
        place = folder / ModelFolder.beside(db, "models").file("readings_imputed", 1).parent.name
        assert f"The model files of 'readings_imputed' in '{place}' cannot be written" in err
        assert "Nothing was dropped (the rows and their files stay)" in err
        assert "Traceback" not in err
        assert file_hash(db) == digest
        assert sorted(p.name for p in place.iterdir()) == [
            "v1.tdm", "v2.tdm",
        ]  # fmt: skip


def test_a_store_written_before_model_folders_is_listed_and_dropped_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `tdm_models` of an earlier version (no model_path column, model NOT NULL) is listed
    read-only as it is, and a drop migrates it as a run would (bug: the drop deleted the rows,
    then failed reading the store back)."""
    db = tmp_path / "w.duckdb"
    store_two_versions(db)
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE earlier AS SELECT * EXCLUDE (model_path) FROM tdm_models")
        con.execute("DROP TABLE tdm_models")
        con.execute("ALTER TABLE earlier RENAME TO tdm_models")
        con.execute("ALTER TABLE tdm_models ALTER COLUMN model SET NOT NULL")
    digest = file_hash(db)
    assert main(["models", "list", "--db", str(db)]) == 0
    assert capsys.readouterr().out.count("readings_imputed  v") == 2 and file_hash(db) == digest
    drop = ["models", "drop", "--db", str(db), "--target", "readings_imputed", "--version", "2"]
    assert main(drop) == 0
    assert "uses version 1, the newest left" in capsys.readouterr().out
    assert main(["models", "list", "--db", str(db)]) == 0
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == ["v1"]


def test_a_tdm_models_table_of_the_user_s_own_is_refused_by_name(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: a table of the user's own called tdm_models made an incremental run fail as an
    unexpected BinderException (exit 1). It is refused before the fit, naming what it lacks,
    by runs and by `tdm models`, and the file is left as it was."""
    with duckdb.connect(str(warehouse)) as con:
        con.execute("CREATE TABLE tdm_models (note VARCHAR)")
    digest = file_hash(warehouse)
    db = ["--db", str(warehouse)]
    for command in (
        ["impute", "-q", *db, "--table", "readings", "--key", "id", "--incremental"],
        ["models", "list", *db],
    ):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert 'The table "tdm_models" is not the store of models this pipeline keeps' in err
        assert "'columns', 'created_at'" in err and "Traceback" not in err
        assert file_hash(warehouse) == digest
