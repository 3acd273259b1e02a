"""Incremental runs end to end on real DuckDB files: a stored model per target, new rows imputed
with it, old imputations unchanged, refits by rule (drift, request, unusable model)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
import torch

from flows.impute_table import impute_table
from flows.steps import describe_dry_run
from tests.conftest import build_readings, read_only_mount
from tests.tables import column_types, constrain_readings, file_hash, table_body

pytestmark = pytest.mark.usefixtures("prefect_harness", "one_torch_thread")

FAST = {"max_iter": 15}
NUMERIC = ["temperature", "pressure", "humidity", "visits"]


def _query(path: Path, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).df()


def _append_rows(path: Path, first_id: int, n_rows: int, *, seed: int, shift: float = 0.0) -> None:
    """Append `n_rows` rows of the readings kind (ids from `first_id`, ~20% missing, days after
    the last), the temperature column shifted by `shift` of its standard deviations."""
    scratch = path.parent / f"new-{seed}.duckdb"
    build_readings(scratch, n_rows=n_rows, seed=seed)
    with duckdb.connect(str(path)) as con:
        con.execute(f"ATTACH '{scratch}' AS new (READ_ONLY)")
        sd = con.execute("SELECT stddev_pop(temperature) FROM readings").fetchall()[0][0]
        con.execute(
            "INSERT INTO readings BY NAME SELECT id + ? AS id, temperature + ? AS temperature, "
            "day + ? AS day, * EXCLUDE (id, temperature, day) FROM new.readings",
            [first_id - 1, shift * sd, first_id - 1],
        )
        con.execute("DETACH new")


def _run(path: Path, **options: object):
    settings: dict[str, object] = {"key": "id", "imputer": FAST, "seed": 1, **options}
    state = impute_table("readings", db_path=path, incremental=True, return_state=True, **settings)
    assert state.is_completed(), state.message
    return state.result()


def _target(path: Path, upto: int) -> pd.DataFrame:
    return _query(path, f"SELECT * FROM readings_imputed WHERE id <= {upto} ORDER BY id")


def test_nightly_run_imputes_new_rows_with_the_stored_model_and_keeps_old_ones(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First run fits and stores version 1, leaving the file free during the fit (bug: it held
    the write lock from load to commit); after rows are appended, a dry run says what the
    night would append and keeps the file's bytes; the next run imputes only them with version
    1, leaves the old imputed cells bit for bit, and says so in the lineage; a run with nothing
    new writes nothing but its lineage row. The target keeps the source's definition (PRIMARY
    KEY, NOT NULL, CHECK, DEFAULT, UNIQUE) when created and appended to."""
    import flows.incremental

    fit, visits = flows.incremental.fit_on_runner, []

    def fit_while_another_process_writes(*args: object, **kwargs: object) -> object:
        code = "import duckdb, sys; duckdb.connect(sys.argv[1]).execute('CHECKPOINT')"
        visit = subprocess.run([sys.executable, "-c", code, str(warehouse)], capture_output=True)
        visits.append(visit)
        return fit(*args, **kwargs)

    monkeypatch.setattr(flows.incremental, "fit_on_runner", fit_while_another_process_writes)
    constrain_readings(warehouse)
    first = _run(warehouse)
    assert [visit.returncode for visit in visits] == [0], visits[0].stderr
    assert (first.status, first.model_version, first.rows_new, first.rows_reused) == (
        "imputed", 1, 80, 0
    )  # fmt: skip
    assert "first run" in first.refit_reason
    # Bug: the first run's fit was timed as "load-validate-read", and "impute" showed 0.00 s.
    steps = ["load-validate-read", "fit", "inverse-scale", "check-quality", "write"]
    assert list(first.seconds) == steps and first.seconds["fit"] >= first.fit_seconds
    before = _target(warehouse, 80)

    _append_rows(warehouse, 81, 20, seed=5)
    digest = file_hash(warehouse)
    dry = _run(warehouse, dry_run=True)  # read-only, says what the night will do
    assert (dry.status, dry.model_version, dry.refit_reason) == ("dry-run", 1, None)
    assert (dry.rows_new, dry.rows_reused, dry.appended) == (20, 80, True)
    text = describe_dry_run(dry)
    assert "a run would append 20 new rows to 'readings_imputed'" in text
    assert "the stored model (version 1), keep the 80 rows before" in text
    assert file_hash(warehouse) == digest
    second = _run(warehouse)
    assert (second.status, second.model_version, second.rows_new, second.rows_reused) == (
        "appended", 1, 20, 80
    )  # fmt: skip
    assert second.refit_reason is None
    assert table_body(warehouse, "readings_imputed") == table_body(warehouse, "readings")
    assert second.could_be_not_null == tuple(NUMERIC)
    assert list(second.seconds) == [steps[0], "impute", *steps[2:]]  # no fit: the stored model
    pd.testing.assert_frame_equal(_target(warehouse, 80), before, check_exact=True)
    source = _query(warehouse, "SELECT * FROM readings WHERE id > 80 ORDER BY id")
    added = _query(warehouse, "SELECT * FROM readings_imputed WHERE id > 80 ORDER BY id")
    assert len(added) == 20 and not added[NUMERIC].isna().any().any()
    observed = source[NUMERIC].notna().to_numpy()
    assert np.array_equal(added[NUMERIC].to_numpy()[observed], source[NUMERIC].to_numpy()[observed])
    assert column_types(warehouse, "readings_imputed") == column_types(warehouse, "readings")

    models = _query(warehouse, "SELECT version, run_id FROM tdm_models")
    assert list(models["version"]) == [1] and models["run_id"][0] == first.run_id
    lineage = _query(
        warehouse, "SELECT status, model_version, rows_new, rows_reused FROM tdm_lineage "
        f"WHERE run_id = '{second.run_id}'",
    )  # fmt: skip
    assert lineage.iloc[0].tolist() == ["appended", 1, 20, 80]
    cells = _query(
        warehouse, "SELECT row_key, row_number, column_name, model_version FROM tdm_imputed_cells "
        f"WHERE run_id = '{second.run_id}'",
    )  # fmt: skip
    assert int(observed.size - observed.sum()) == len(cells)
    assert set(cells["model_version"]) == {1}
    assert set(cells["row_key"].astype(int)) <= set(range(81, 101))
    # each record names the row where it was written (helper-57: one off went unseen)
    target = _query(warehouse, "SELECT id FROM readings_imputed ORDER BY rowid")["id"]
    by_key = source.set_index("id")
    for cell in cells.itertuples():
        assert target.iloc[cell.row_number] == int(cell.row_key)
        assert pd.isna(by_key.at[int(cell.row_key), cell.column_name])

    third = _run(warehouse)
    assert (third.status, third.rows_new, third.rows_reused) == ("appended", 0, 100)
    pd.testing.assert_frame_equal(_target(warehouse, 100), _target(warehouse, 100))
    assert len(_query(warehouse, "SELECT * FROM readings_imputed")) == 100

    # The file is free while new rows are imputed, so the writer checks the target is as read.
    _append_rows(warehouse, 101, 5, seed=7)
    impute_rows = flows.incremental._impute_rows

    def impute_while_another_run_appends(*args: object, **kwargs: object) -> object:
        with duckdb.connect(str(warehouse)) as con:
            con.execute(
                "INSERT INTO readings_imputed SELECT * REPLACE (id + 1000 AS id, day + 1000 AS "
                "day) FROM readings_imputed LIMIT 1"
            )
        return impute_rows(*args, **kwargs)

    monkeypatch.setattr(flows.incremental, "_impute_rows", impute_while_another_run_appends)
    state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=1,
                         incremental=True, return_state=True)  # fmt: skip
    assert state.is_failed() and "Another run or process wrote to table" in str(state.message)
    assert len(_query(warehouse, "SELECT * FROM readings_imputed")) == 101  # its row, not ours


def test_a_model_version_stored_meanwhile_by_another_run_fails_the_run_and_writes_nothing(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch, take_snapshot
) -> None:
    """The model a refit stores must be the version its lineage row and imputed cells name;
    another run's model stored meanwhile (simulated: the store answers the next version) fails
    the run with "Another run stored a model" and leaves the warehouse as it was."""
    import tasks.write

    _run(warehouse)
    _append_rows(warehouse, 81, 10, seed=5)
    real = tasks.write.insert_model

    def raced(con, model, folder=None):  # type: ignore[no-untyped-def]
        version, file = real(con, model, folder)
        return version + 1, file

    monkeypatch.setattr(tasks.write, "insert_model", raced)
    before = take_snapshot(warehouse)
    state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=1,
                         incremental=True, refit=True, return_state=True)  # fmt: skip
    assert state.is_failed() and "Another run stored a model" in str(state.message)
    assert take_snapshot(warehouse) == before


def test_an_append_marks_a_target_written_before_markers(warehouse: Path) -> None:
    """Bug (upgrade): appending never marked a target that a release before markers wrote, so
    a table made later at its name would be taken for the pipeline's for good. The night that
    appends marks it, and its lineage row records the marker."""
    _run(warehouse)
    with duckdb.connect(str(warehouse)) as con:  # as a release before markers left it
        con.execute("UPDATE tdm_lineage SET target_marker = NULL")
        con.execute("COMMENT ON TABLE readings_imputed IS NULL")
    _append_rows(warehouse, 81, 5, seed=5)
    night = _run(warehouse)
    assert night.status == "appended"
    comment = _query(
        warehouse, "SELECT comment FROM duckdb_tables() WHERE table_name = 'readings_imputed'"
    )["comment"][0]
    marker = _query(
        warehouse, f"SELECT target_marker FROM tdm_lineage WHERE run_id = '{night.run_id}'"
    )["target_marker"][0]
    assert comment and comment == marker


def test_a_model_stored_by_another_release_is_said_to_be(
    warehouse: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Bug (upgrade): a model stored by 0.15.2 imputed new rows otherwise under 0.18 (its
    `transform` changed) while each night said only that the stored model imputed them. A
    night with a model of another release says which, and how to fit a new one."""
    import tdm

    _run(warehouse)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE tdm_models SET tdm_version = '0.15.2'")
    _append_rows(warehouse, 81, 5, seed=5)
    caplog.clear()
    assert _run(warehouse).refit_reason is None  # still used
    said = f"was fitted by tdm 0.15.2; this is tdm {tdm.__version__}, whose imputation of new"
    assert said in caplog.text and "--refit fits a new model" in caplog.text


def test_drift_refits_a_new_version_and_keeps_the_old_imputations(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New rows whose temperature is shifted by 3 SDs refit the model (version 2) and the
    lineage says why (a dry run says so first and writes nothing); with TDM_ON_DRIFT=warn the
    stored model imputes them and the drift is still recorded."""
    _run(warehouse)
    before = _target(warehouse, 80)
    _append_rows(warehouse, 81, 30, seed=6, shift=3.0)
    digest = file_hash(warehouse)
    drifted = _run(warehouse, dry_run=True)
    assert drifted.model_version == 2 and "temperature" in drifted.refit_reason
    assert "a model fitted now (version 2: drift" in describe_dry_run(drifted)
    assert file_hash(warehouse) == digest
    monkeypatch.setenv("TDM_ON_DRIFT", "warn")
    warned = _run(warehouse)
    assert warned.refit_reason is None and warned.model_version == 1
    drift = _query(warehouse, f"SELECT drift FROM tdm_lineage WHERE run_id = '{warned.run_id}'")
    figures = json.loads(drift["drift"][0])
    assert figures["temperature"]["exceeded"] and figures["temperature"]["value"] > 2.0
    assert not figures["pressure"]["exceeded"]
    assert warned.drift == figures and warned.appended  # the result (and its report) say so

    monkeypatch.setenv("TDM_ON_DRIFT", "refit")
    _append_rows(warehouse, 111, 30, seed=7, shift=3.0)
    refit = _run(warehouse)
    assert refit.model_version == 2 and refit.rows_new == 30
    assert "drift" in refit.refit_reason and "temperature" in refit.refit_reason
    pd.testing.assert_frame_equal(_target(warehouse, 80), before, check_exact=True)
    versions = _query(warehouse, "SELECT version FROM tdm_models ORDER BY version")["version"]
    assert list(versions) == [1, 2]


def test_refit_on_request_can_rewrite_the_old_imputations(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--refit stores a new version; old rows keep their values unless TDM_REWRITE_ON_REFIT,
    which replaces the target with the new model's imputation of every row."""
    _run(warehouse)
    before = _target(warehouse, 80)
    kept = _run(warehouse, refit=True)
    assert kept.model_version == 2 and kept.refit_reason == "refit asked for"
    pd.testing.assert_frame_equal(_target(warehouse, 80), before, check_exact=True)

    monkeypatch.setenv("TDM_REWRITE_ON_REFIT", "true")
    rewritten = _run(warehouse, refit=True, seed=9)
    assert (rewritten.model_version, rewritten.rows_new, rewritten.status) == (3, 80, "imputed")
    after = _target(warehouse, 80)
    assert not after[NUMERIC].equals(before[NUMERIC])  # imputed again, by another seed's model


def test_dropping_versions_rolls_back_or_refits_and_never_reuses_a_number(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bug: after `tdm models drop` of every version the next fit was stored as version 1 again,
    so lineage's model_version 1 named two models; the docs said a drop of one version refits,
    where the next run used the newest version left without saying so. A drop now says what
    the next run does, and it does that."""
    from cli.main import main

    _run(warehouse)
    _run(warehouse, refit=True)
    drop = ["models", "drop", "--db", str(warehouse), "--target", "main.readings_imputed"]
    assert main([*drop, "--version", "2"]) == 0
    assert "its next incremental run uses version 1, the newest left" in capsys.readouterr().out
    rolled_back = _run(warehouse)
    assert (rolled_back.model_version, rolled_back.refit_reason) == (1, None)

    assert main(drop) == 0
    assert "fits a new model, stored as version 3" in capsys.readouterr().out
    refitted = _run(warehouse)
    assert refitted.model_version == 3 and refitted.refit_reason is not None
    named = _query(warehouse, "SELECT model_version FROM tdm_lineage ORDER BY finished_at")
    assert list(named["model_version"]) == [1, 2, 1, 3]


def test_an_unusable_stored_model_is_reported_and_refitted(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A truncated file, a file of a save format this library does not read, or a model of
    other columns: each night says why, fits a new version, and imputes the new rows. A column
    whose type changed kind (bug: INTEGER to VARCHAR ended every night in "KeyError: 'mean'")
    cannot be appended to its target: the night, and its dry run, say which column changed and
    how to write the target anew, before any fit (bug: the dry run said the night would append,
    and the night refused only after fitting). The first night's fit is a note, an unusable
    model's a warning (bug: both warned)."""

    def fitting() -> list[str]:
        return [r.levelname for r in caplog.records if "fitting a model" in r.getMessage()]

    _run(warehouse)
    assert fitting() == ["INFO"]
    expected = {
        "truncated": "corrupt",
        "other-format": "cannot be read: saved in format 1 (by tdm 0.1); tdm",
        "recorded-format": "was saved in format 6 by tdm 0.12.0; this release (tdm",
        "other-columns": "columns",
    }
    for night, (damage, reason) in enumerate(expected.items()):
        with duckdb.connect(str(warehouse)) as con:
            if damage == "truncated":
                con.execute("UPDATE tdm_models SET model = model[1:100]")
            elif damage == "other-format":
                import io

                import torch

                buffer = io.BytesIO()
                header = {"format_version": 1, "class": "TDMImputer", "tdm_version": "0.1"}
                torch.save(header, buffer)
                blob = buffer.getvalue()
                con.execute(
                    "UPDATE tdm_models SET model = ?, model_sha256 = ?",
                    [blob, hashlib.sha256(blob).hexdigest()],
                )
            elif damage == "recorded-format":  # as a release of format 6 recorded it
                con.execute("UPDATE tdm_models SET format_version = 6, tdm_version = '0.12.0'")
            else:
                con.execute("""UPDATE tdm_models SET columns = '["temperature"]'""")
        first = 81 + 10 * night
        _append_rows(warehouse, first, 10, seed=8 + night)
        caplog.clear()
        result = _run(warehouse)
        assert fitting() == ["WARNING"], damage
        assert reason in result.refit_reason, damage
        assert "/model.pt" not in result.refit_reason and "Refit the" not in result.refit_reason
        assert result.model_version == 2 + night and result.rows_new == 10
        added = _query(warehouse, f"SELECT * FROM readings_imputed WHERE id >= {first}")
        assert len(added) == 10 and not added[NUMERIC].isna().any().any()

    with duckdb.connect(str(warehouse)) as con:
        con.execute("ALTER TABLE readings ALTER visits TYPE VARCHAR")
    _append_rows(warehouse, 121, 10, seed=11)
    for dry_run in (True, False):
        caplog.clear()
        state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=1,
                             incremental=True, dry_run=dry_run, return_state=True)  # fmt: skip
        message = str(state.message)
        assert state.is_failed() and "no longer has the columns of its target" in message
        assert '("visits" INTEGER now VARCHAR)' in message
        assert "TDM_REWRITE_ON_REFIT=true" in message
        assert "fitting a model" not in caplog.text
    monkeypatch.setenv("TDM_REWRITE_ON_REFIT", "true")
    result = _run(warehouse)
    assert "columns ['visits'] as another kind" in result.refit_reason
    assert column_types(warehouse, "readings_imputed")["visits"] == "VARCHAR"
    assert not _query(warehouse, "SELECT visits FROM readings_imputed")["visits"].isna().any()


def test_incremental_run_needs_a_key_or_a_watermark(
    warehouse: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a key or watermark there is no telling new rows: refused before anything runs,
    as is a watermark without an incremental run; with a watermark, rows above the target's
    highest value are the new ones, and rows that arrived late below it are counted in a
    warning (bug: they were left out silently)."""
    state = impute_table(
        "readings", db_path=warehouse, imputer=FAST, incremental=True, return_state=True
    )
    assert state.is_failed() and "key" in str(state.message) and "watermark" in str(state.message)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        tables = {row[0] for row in con.execute("SHOW TABLES").fetchall()}
    assert tables == {"readings"}
    state = impute_table("readings", db_path=warehouse, imputer=FAST, watermark="day",
                         return_state=True)  # fmt: skip
    assert state.is_failed() and "is for incremental runs" in str(state.message)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("SHOW TABLES").fetchall() == [("readings",)]

    state = impute_table(
        "readings", db_path=warehouse, imputer=FAST, incremental=True, watermark="day",
        return_state=True,
    )  # fmt: skip
    assert state.is_completed(), state.message
    _append_rows(warehouse, 81, 5, seed=9)
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE readings SET day = day + INTERVAL 200 DAY WHERE id > 80")
        con.execute("UPDATE readings SET day = (SELECT min(day) FROM readings) WHERE id > 83")
    state = impute_table(
        "readings", db_path=warehouse, imputer=FAST, incremental=True, watermark="day",
        return_state=True,
    )  # fmt: skip
    assert state.is_completed(), state.message
    assert (state.result().rows_new, state.result().rows_reused) == (3, 80)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("2 source rows at or below the target's highest 'day'" in w for w in warned)


def test_rows_kept_that_no_longer_match_the_source_are_named_in_a_warning(
    warehouse: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Bug: an observed cell edited in an old row, or a row deleted from the source, never
    reached the target and nothing said so. An append keeps those rows as they were and warns,
    naming how many and their keys, with the way to write the target anew; a night after
    appended rows alone does not warn."""

    def stale_warnings() -> list[str]:
        found = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        return [w for w in found if "no longer match" in w]

    _run(warehouse)
    _append_rows(warehouse, 81, 5, seed=9)
    caplog.clear()
    assert _run(warehouse).rows_new == 5 and stale_warnings() == []
    with duckdb.connect(str(warehouse)) as con:
        con.execute("UPDATE readings SET site = 'edited' WHERE id = 5")
        con.execute("DELETE FROM readings WHERE id IN (3, 7)")
    caplog.clear()
    assert _run(warehouse).rows_new == 0
    (warning,) = stale_warnings()
    assert '1 row whose observed cells changed ("id" 5)' in warning
    assert '2 rows deleted from the source ("id" 3, 7)' in warning
    assert "TDM_REWRITE_ON_REFIT=true" in warning
    kept = _query(warehouse, "SELECT site FROM readings_imputed WHERE id = 5")["site"]
    assert list(kept) != ["edited"]


def test_a_numeric_watermark_is_not_imputed_by_default_and_refused_when_named(
    warehouse: Path,
) -> None:
    """Bug: a numeric watermark (here the INTEGER `id`, no key given) was among the default
    columns, so the run failed asking to pass it through; it is left out like a key, and
    refused only when named among the columns to impute."""
    state = impute_table(
        "readings", db_path=warehouse, imputer=FAST, incremental=True, watermark="id",
        columns=["temperature", "ID"], return_state=True,
    )  # fmt: skip
    assert state.is_failed() and "is never imputed: leave it out" in str(state.message)
    state = impute_table(
        "readings", db_path=warehouse, imputer=FAST, incremental=True, watermark="ID",
        return_state=True,
    )  # fmt: skip
    assert state.is_completed(), state.message
    stored = _query(warehouse, "SELECT columns, watermark_column FROM tdm_models")
    fitted_on = json.loads(stored["columns"][0])
    assert "temperature" in fitted_on and "id" not in fitted_on
    assert stored["watermark_column"][0] == "id"  # as the table spells it
    _append_rows(warehouse, 81, 5, seed=9)
    state = impute_table(
        "readings", db_path=warehouse, imputer=FAST, incremental=True, watermark="id",
        return_state=True,
    )  # fmt: skip
    assert (state.result().rows_new, state.result().rows_reused) == (5, 80)


def test_a_watermark_whose_values_cannot_grow_is_refused(warehouse: Path) -> None:
    """Bug: a BOOLEAN (or ENUM, LIST, INTERVAL...) watermark was taken; the next night's rows,
    never above the highest, were left out with a warning only. It is refused before anything
    runs, naming its type; the file is left as it was."""
    digest = file_hash(warehouse)
    state = impute_table(
        "readings", db_path=warehouse, imputer=FAST, incremental=True, watermark="ok",
        return_state=True,
    )  # fmt: skip
    assert state.is_failed()
    assert str(state.message).startswith(
        'The watermark column "ok" of table "readings" is BOOLEAN, whose values cannot mark'
    )
    assert file_hash(warehouse) == digest


def test_warehouse_config_entry_runs_incrementally(warehouse: Path, tmp_path: Path) -> None:
    """A config entry with `incremental: true` stores a model on the first nightly run and
    appends only the new rows on the next (a dry run before it writes nothing); an entry
    without key or watermark is refused."""
    import yaml

    from flows.impute_warehouse import impute_warehouse
    from schemas.warehouse import WarehouseConfigError, load_warehouse_config

    config = tmp_path / "nightly.yaml"
    entry = {"table": "readings", "key": "id", "incremental": True, "imputer": {"max_iter": 15}}
    config.write_text(yaml.safe_dump({"db_path": str(warehouse), "tables": [entry]}))
    first = impute_warehouse(str(config), return_state=True)
    assert first.is_completed(), first.message
    _append_rows(warehouse, 81, 10, seed=4)
    before = file_hash(warehouse)
    dry = impute_warehouse(str(config), dry_run=True, return_state=True)
    assert dry.is_completed(), dry.message
    assert dry.result().tables["readings"].rows_new == 10 and file_hash(warehouse) == before
    second = impute_warehouse(str(config), return_state=True)
    assert second.is_completed(), second.message
    done = second.result().tables["readings"]
    assert (done.status, done.model_version, done.rows_new, done.rows_reused) == (
        "appended", 1, 10, 80
    )  # fmt: skip

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"tables": [{"table": "readings", "incremental": True}]}))
    with pytest.raises(WarehouseConfigError, match="key or a watermark"):
        load_warehouse_config(str(bad))


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda",
            marks=[
                pytest.mark.gpu,
                pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
            ],
        ),
    ],
)
def test_new_rows_are_imputed_in_partitions_on_a_dask_cluster_as_on_threads(
    device: str, warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New rows go to the task runner in partitions of TDM_PARTITION_ROWS: 30 new rows in
    partitions of 12 are all imputed, and two Dask worker processes give the thread pool's
    numbers bit for bit (same model, same partitions), on the CPU and on CUDA."""
    import shutil

    on_device = {"max_iter": 15, "device": device}
    _run(warehouse, imputer=on_device)
    _append_rows(warehouse, 81, 30, seed=5)
    copy = tmp_path / "copy.duckdb"
    shutil.copy(warehouse, copy)
    monkeypatch.setenv("TDM_PARTITION_ROWS", "12")
    by_threads = _run(warehouse, imputer=on_device)
    monkeypatch.setenv("TDM_TASK_RUNNER", "dask")
    monkeypatch.setenv("TDM_DASK_WORKERS", "2")
    by_dask = _run(copy, imputer=on_device)
    assert by_threads.rows_new == by_dask.rows_new == 30
    assert by_threads.model_version == by_dask.model_version == 1
    new_rows = "SELECT * FROM readings_imputed WHERE id > 80 ORDER BY id"
    threads, dask = _query(warehouse, new_rows), _query(copy, new_rows)
    assert len(threads) == 30 and not threads[NUMERIC].isna().any().any()
    pd.testing.assert_frame_equal(dask, threads, check_exact=True)


def test_a_model_folder_keeps_the_files_and_the_table_their_path_and_digest(
    warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With TDM_MODEL_DIR the save file goes to <folder>/<target>-<hash>/v<N>.tdm beside the DuckDB
    file and tdm_models keeps its relative path and digest (no blob); the next night reads it
    from there. A failed write removes the file it wrote; a missing file is reported and
    refitted; `tdm models drop` deletes the files with the rows."""
    import tasks.write
    from cli.main import main
    from tasks.warehouse.models import ModelFolder

    monkeypatch.setenv("TDM_MODEL_DIR", "models")
    folder = ModelFolder.beside(warehouse, "models").file("readings_imputed", 1).parent
    assert folder.parent == warehouse.parent / "models"
    assert folder.name.startswith("readings_imputed-")
    first = _run(warehouse)
    stored = _query(warehouse, "SELECT model IS NULL AS no_blob, model_path, model_sha256 "
                               "FROM tdm_models")  # fmt: skip
    assert stored.iloc[0].tolist()[:2] == [True, f"models/{folder.name}/v1.tdm"]
    v1 = folder / "v1.tdm"
    assert hashlib.sha256(v1.read_bytes()).hexdigest() == stored["model_sha256"][0]
    _append_rows(warehouse, 81, 10, seed=5)
    night = _run(warehouse)
    assert (night.model_version, night.refit_reason, night.rows_new) == (
        first.model_version,
        None,
        10,
    )

    def broken(*args: object) -> None:
        raise RuntimeError("disk full")

    _append_rows(warehouse, 91, 10, seed=6)
    before = _query(warehouse, "SELECT count(*) AS n FROM readings_imputed")["n"][0]
    with monkeypatch.context() as patch:
        patch.setattr(tasks.write, "insert_lineage", broken)
        state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=1,
                             incremental=True, refit=True, return_state=True)  # fmt: skip
    assert state.is_failed() and "disk full" in state.message
    assert sorted(p.name for p in folder.iterdir()) == ["v1.tdm"]  # v2's file went with it
    assert _query(warehouse, "SELECT count(*) AS n FROM readings_imputed")["n"][0] == before

    v1.unlink()
    result = _run(warehouse)
    assert "cannot be read" in result.refit_reason and "v1.tdm" in result.refit_reason
    assert str(warehouse.parent) not in result.refit_reason  # the stored, relative path
    assert result.model_version == 2 and (folder / "v2.tdm").exists()
    assert main(["models", "drop", "--db", str(warehouse), "--target", "readings_imputed"]) == 0
    assert not list(folder.iterdir())
    assert _query(warehouse, "SELECT count(*) AS n FROM tdm_models")["n"][0] == 0


def test_a_model_folder_it_cannot_write_is_refused_before_the_fit(
    warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: with TDM_MODEL_DIR on a read-only folder, a run fitted its model and then failed
    writing the file with an OSError. It is refused before the fit, and the
    warehouse is left as it was."""
    import flows.incremental

    def no_fit(*args: object) -> None:
        raise AssertionError("fitted before the folder was checked")

    monkeypatch.setattr(flows.incremental, "_fit", no_fit)
    with read_only_mount(tmp_path / "models", lambda _: None) as folder:
        monkeypatch.setenv("TDM_MODEL_DIR", str(folder))
        digest = file_hash(warehouse)
        state = impute_table("readings", db_path=warehouse, key="id", imputer=FAST, seed=1,
                             incremental=True, return_state=True)  # fmt: skip
        assert state.is_failed()
        assert str(state.message).startswith(
            f"The model folder '{folder}' (TDM_MODEL_DIR) cannot be written: it is on a "
            "read-only file system. A run could not write what it imputes, so nothing was "
            "imputed"
        )
        assert file_hash(warehouse) == digest
