"""The model store: fitted imputers kept in the warehouse's `tdm_models` table, one version per
fit, read back by incremental runs.

A model is stored in the transaction of the run that fitted it (`insert_model`). Reading it back
(`load_model`) checks the file's digest, the library's save format, and that it was fitted on
the columns, key and column kinds the run has now; any problem is a `StoredModelError` naming
the table, the version and the problem, which the run reports before it refits.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from schemas.models import MODELS_DDL, MODELS_TABLE
from tasks.errors import PipelineInputError
from tasks.scaling import Scaling
from tasks.warehouse import find_table

__all__ = [
    "ModelInfo",
    "NewModel",
    "StoredModelError",
    "drop_models",
    "insert_model",
    "latest_model",
    "list_models",
    "load_model",
    "pack_imputer",
    "scaling_from_json",
    "scaling_to_json",
]

_META = (
    "source_table, target_table, version, created_at, run_id, tdm_version, format_version, "
    "columns, key_column, watermark_column, settings, seed, source_hash, fit_rows, scaling, "
    "profile, model_sha256, octet_length(model)"
)


class StoredModelError(PipelineInputError):
    """A stored model cannot be used: unreadable, of another library version, or fitted on
    other columns."""


@dataclass(frozen=True)
class ModelInfo:
    """One stored version, without its file: what `tdm models list/show` print."""

    source_table: str
    target_table: str
    version: int
    created_at: datetime
    run_id: str
    tdm_version: str
    format_version: int
    columns: tuple[str, ...]
    key_column: str | None
    watermark_column: str | None
    settings: dict[str, Any]
    seed: int
    source_hash: str
    fit_rows: int
    scaling: dict[str, Any]
    profile: dict[str, Any]
    model_sha256: str
    model_bytes: int

    @property
    def label(self) -> str:
        """`target_table` version N, as messages name it."""
        return f'model version {self.version} of table "{self.target_table}"'


@dataclass(frozen=True, eq=False)
class NewModel:
    """A fitted model about to be stored (its version is the next free one)."""

    source_table: str
    target_table: str
    run_id: str
    columns: tuple[str, ...]
    key_column: str | None
    watermark_column: str | None
    settings: dict[str, Any]
    seed: int
    source_hash: str
    fit_rows: int
    scaling: Scaling
    profile: dict[str, Any]
    model: bytes
    created_at: datetime
    format_version: int = field(default=0)


def pack_imputer(imputer: Any) -> tuple[bytes, int]:
    """The imputer's save file (`save`) as bytes, and its save format."""
    from tdm._persistence import FORMAT_VERSION

    with tempfile.TemporaryDirectory(prefix="tdm-model-") as folder:
        path = Path(folder) / "model.pt"
        imputer.save(path)
        return path.read_bytes(), FORMAT_VERSION


def scaling_to_json(scaling: Scaling) -> dict[str, Any]:
    """`scaling` as plain JSON values (an infinite bound as null)."""
    return {
        "columns": list(scaling.columns),
        "mean": [float(v) for v in scaling.statistics.mean],
        "scale": [float(v) for v in scaling.statistics.scale],
        "order": list(scaling.order),
        "kinds": dict(scaling.kinds),
        "bounds": {
            name: [_finite_or_none(low), _finite_or_none(high)]
            for name, (low, high) in scaling.bounds.items()
        },
    }


def scaling_from_json(saved: Mapping[str, Any]) -> Scaling:
    """The `Scaling` written by `scaling_to_json`."""
    from tdm.scaling import ColumnScaling

    return Scaling(
        columns=tuple(saved["columns"]),
        statistics=ColumnScaling(
            mean=np.asarray(saved["mean"], dtype=float),
            scale=np.asarray(saved["scale"], dtype=float),
        ),
        order=tuple(saved["order"]),
        kinds=dict(saved["kinds"]),
        bounds={
            name: (
                -np.inf if low is None else float(low),
                np.inf if high is None else float(high),
            )
            for name, (low, high) in saved["bounds"].items()
        },
    )


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def insert_model(con: duckdb.DuckDBPyConnection, model: NewModel) -> int:
    """Store `model` as the next version of its target's models (inside the caller's
    transaction); returns the version."""
    con.execute(MODELS_DDL)
    version = 1 + int(
        con.execute(
            f"SELECT coalesce(max(version), 0) FROM {MODELS_TABLE} WHERE target_table = ?",
            [model.target_table],
        ).fetchall()[0][0]
    )
    con.execute(
        f"INSERT INTO {MODELS_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            model.source_table,
            model.target_table,
            version,
            model.created_at,
            model.run_id,
            _library_version(),
            model.format_version,
            json.dumps(list(model.columns)),
            model.key_column,
            model.watermark_column,
            json.dumps(model.settings, sort_keys=True, default=str),
            model.seed,
            model.source_hash,
            model.fit_rows,
            json.dumps(scaling_to_json(model.scaling)),
            json.dumps(model.profile, sort_keys=True),
            hashlib.sha256(model.model).hexdigest(),
            model.model,
        ],
    )
    return version


def _library_version() -> str:
    from tdm._version import __version__

    return __version__


def _info(row: Sequence[Any]) -> ModelInfo:
    return ModelInfo(
        source_table=row[0],
        target_table=row[1],
        version=int(row[2]),
        created_at=row[3],
        run_id=row[4],
        tdm_version=row[5],
        format_version=int(row[6]),
        columns=tuple(json.loads(row[7])),
        key_column=row[8],
        watermark_column=row[9],
        settings=json.loads(row[10]),
        seed=int(row[11]),
        source_hash=row[12],
        fit_rows=int(row[13]),
        scaling=json.loads(row[14]),
        profile=json.loads(row[15]),
        model_sha256=row[16],
        model_bytes=int(row[17]),
    )


def _has_store(con: duckdb.DuckDBPyConnection) -> bool:
    return find_table(con, MODELS_TABLE, whole_name=False) is not None


def list_models(con: duckdb.DuckDBPyConnection, target: str | None = None) -> list[ModelInfo]:
    """Every stored version (of `target`'s models only, when given), oldest first."""
    if not _has_store(con):
        return []
    where, values = ("WHERE lower(target_table) = lower(?)", [target]) if target else ("", [])
    rows = con.execute(
        f"SELECT {_META} FROM {MODELS_TABLE} {where} ORDER BY target_table, version", values
    ).fetchall()
    return [_info(row) for row in rows]


def latest_model(con: duckdb.DuckDBPyConnection, target: str) -> ModelInfo | None:
    """The newest stored version of `target`'s model, or None."""
    versions = list_models(con, target)
    return versions[-1] if versions else None


def drop_models(con: duckdb.DuckDBPyConnection, target: str, version: int | None = None) -> int:
    """Delete `target`'s stored versions (only `version`, when given); returns how many."""
    if not _has_store(con):
        return 0
    where, values = "lower(target_table) = lower(?)", [target]
    if version is not None:
        where, values = f"{where} AND version = ?", [target, version]
    count = int(
        con.execute(f"SELECT count(*) FROM {MODELS_TABLE} WHERE {where}", values).fetchall()[0][0]
    )
    con.execute(f"DELETE FROM {MODELS_TABLE} WHERE {where}", values)
    return count


def load_model(
    con: duckdb.DuckDBPyConnection,
    info: ModelInfo,
    *,
    columns: Sequence[str],
    key: str | None,
    kinds: Mapping[str, str],
    device: str | None = None,
) -> tuple[Any, Scaling]:
    """The stored imputer of `info` and its scaling, once checked against the run's columns,
    key and column kinds; a `StoredModelError` says what is wrong otherwise."""
    from tdm import TDMImputer

    if tuple(columns) != info.columns or key != info.key_column:
        raise StoredModelError(
            f"The stored {info.label} was fitted on columns {list(info.columns)} with key "
            f"{info.key_column!r}; this run imputes {list(columns)} with key {key!r}."
        )
    saved_kinds = info.scaling.get("kinds", {})
    changed = [c for c in columns if saved_kinds.get(c, "float") != kinds.get(c, "float")]
    if changed:
        raise StoredModelError(
            f"The stored {info.label} imputes columns {changed} as another kind than their "
            "type is now."
        )
    blob = con.execute(
        f"SELECT model FROM {MODELS_TABLE} WHERE target_table = ? AND version = ?",
        [info.target_table, info.version],
    ).fetchall()[0][0]
    if hashlib.sha256(blob).hexdigest() != info.model_sha256:
        raise StoredModelError(
            f"The stored {info.label} is corrupt: its file does not match its digest."
        )
    with tempfile.TemporaryDirectory(prefix="tdm-model-") as folder:
        path = Path(folder) / "model.pt"
        path.write_bytes(bytes(blob))
        try:
            imputer = TDMImputer.load(path, device=device)
        except Exception as error:  # any unreadable file: reported, then refit
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise StoredModelError(
                f"The stored {info.label} (saved by tdm {info.tdm_version}) cannot be read: "
                f"{detail}"
            ) from None
    try:
        scaling = scaling_from_json(info.scaling)
    except (KeyError, TypeError, ValueError) as error:
        raise StoredModelError(
            f"The stored {info.label} has an unreadable scaling: {error}"
        ) from None
    return imputer, scaling
