"""The model store's pieces that need no flow (`tasks.warehouse.models`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pytest

from tasks.errors import PipelineError
from tasks.scaling import Scaling
from tasks.warehouse.models import (
    ModelFolder,
    NewModel,
    insert_model,
    scaling_from_json,
    scaling_to_json,
)
from tdm.scaling import ColumnScaling
from tests.conftest import small_mount


def test_scaling_survives_json_with_open_bounds() -> None:
    """Means, scales, order, kinds and bounds (an infinite end as null) come back as stored."""
    scaling = Scaling(
        columns=("a", "b"),
        statistics=ColumnScaling(mean=np.array([1.5, -2.0]), scale=np.array([0.1, 3.0])),
        order=("a", "s", "b"),
        kinds={"a": "float", "s": "categorical", "b": "integer"},
        bounds={"a": (-np.inf, 4.0), "b": (0.0, np.inf)},
    )
    back = scaling_from_json(json.loads(json.dumps(scaling_to_json(scaling))))
    assert back.columns == scaling.columns and back.order == scaling.order
    assert dict(back.kinds) == dict(scaling.kinds)
    np.testing.assert_array_equal(back.statistics.mean, scaling.statistics.mean)
    np.testing.assert_array_equal(back.statistics.scale, scaling.statistics.scale)
    assert dict(back.bounds) == {"a": (-np.inf, 4.0), "b": (0.0, np.inf)}


def _model(saved: bytes) -> NewModel:
    """A model of `sales_imputed` whose save file is `saved`."""
    scaling = Scaling(("x",), ColumnScaling(mean=np.array([1.0]), scale=np.array([2.0])))
    return NewModel(
        source_table="sales",
        target_table="sales_imputed",
        run_id="run-1",
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
        columns=("x",),
        key_column="id",
        watermark_column=None,
        settings={},
        seed=0,
        source_hash="abc",
        fit_rows=10,
        profile={},
        scaling=scaling,
        model=saved,
    )


def test_a_model_file_is_the_service_s_own_and_follows_no_planted_link(tmp_path: Path) -> None:
    """Bug (security review): model files (the fitted table, standardised) were written 0644
    in a 0755 folder, through `v<N>.partial`, a name anyone who could write the folder could
    plant as a link to another file, which the write then overwrote."""
    db = tmp_path / "w.duckdb"
    folder = ModelFolder.beside(db, "models")
    own = folder.file("sales_imputed", 1)
    own.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    own.with_suffix(".partial").symlink_to(victim)
    with duckdb.connect(str(db)) as con:
        insert_model(con, _model(b"model bytes"), folder)
    assert victim.read_text() == "precious"
    assert own.read_bytes() == b"model bytes" and own.stat().st_mode & 0o777 == 0o600
    fresh = ModelFolder.beside(db, "new/models")
    with duckdb.connect(str(db)) as con:
        insert_model(con, _model(b"again"), fresh)
    made = fresh.file("sales_imputed", 2).parent
    for place in (made, made.parent, made.parent.parent):  # every folder it made
        assert place.stat().st_mode & 0o777 == 0o700


def test_a_full_model_folder_is_a_clear_error_that_leaves_no_file(tmp_path: Path) -> None:
    """Bug: a full TDM_MODEL_DIR ended an incremental run in "unexpected error: OSError: No
    space left on device ... This is a bug", naming neither the folder nor the table, and left a
    `.partial` file on the full disk. The error names both and what to do; no file is left and
    no row is added."""
    model = _model(bytes(200_000))
    db = tmp_path / "w.duckdb"
    with small_mount(tmp_path / "models", "64k") as where, duckdb.connect(str(db)) as con:
        folder = ModelFolder.beside(db, where)
        with pytest.raises(PipelineError) as raised:
            insert_model(con, model, folder)
        assert str(raised.value).startswith(
            f"The model folder '{where}' (TDM_MODEL_DIR) could not take version 1 of the model "
            'of "sales_imputed": No space left on device; nothing was written.'
        )
        assert not [p for p in where.rglob("*") if p.is_file()]
        assert con.execute("SELECT count(*) FROM tdm_models").fetchone() == (0,)


def test_targets_that_read_alike_keep_their_files_apart_and_a_shared_one_stays(
    tmp_path: Path,
) -> None:
    """Bug (security review): `ventes_é_imputed` and `ventes_è_imputed` both wrote
    `ventes___imputed/v1.tdm`, so one's model was called corrupt and refitted, and dropping one
    deleted the file the other's row named. Now each has its own folder; a file two rows share
    (written so by an earlier release, still read) is deleted with the last row naming it."""
    from dataclasses import replace

    from tasks.warehouse.models import drop_models, model_file_path

    db = tmp_path / "w.duckdb"
    folder = ModelFolder.beside(db, "models")
    acute, grave = "ventes_é_imputed", "ventes_è_imputed"
    assert folder.file(acute, 1) != folder.file(grave, 1)
    with duckdb.connect(str(db)) as con:
        for target, saved in ((acute, b"acute"), (grave, b"grave")):
            insert_model(con, replace(_model(saved), target_table=target), folder)
        assert folder.file(acute, 1).read_bytes() == b"acute"
        assert folder.file(grave, 1).read_bytes() == b"grave"
        shared = folder.files(acute, 1)[1]  # where both were written before
        assert shared == folder.files(grave, 1)[1]
        shared.parent.mkdir()
        shared.write_bytes(b"old")
        stored = folder.stored(shared)
        con.execute("UPDATE tdm_models SET model_path = ?", [stored])
        assert model_file_path(stored, folder, acute, 1) == shared  # an earlier file is read
        assert drop_models(con, acute, folder=folder) == 1
        assert shared.read_bytes() == b"old"  # the other row still names it
        assert drop_models(con, grave, folder=folder) == 1
        assert not shared.exists()
