"""The model store: fitted imputers kept in the warehouse's `tdm_models` table, one version per
fit, read back by incremental runs; with a `ModelFolder` the save files go to a folder and the
table keeps their path and digest.

A model is stored in the transaction of the run that fitted it (`insert_model`); a file written
to a folder by a transaction that then fails is removed (`tasks.write`). Reading it back
(`load_model`) checks the file's digest, the library's save format, and that it was fitted on
the columns, key and column kinds the run has now; any problem is a `StoredModelError` naming
the table, the version and the problem, which the run reports before it refits.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from schemas.lineage import LINEAGE_TABLE
from schemas.models import MODELS_COLUMNS, MODELS_DDL, MODELS_MIGRATIONS, MODELS_TABLE
from tasks.errors import PipelineError, PipelineInputError
from tasks.scaling import Scaling
from tasks.warehouse.access import check_folder_writable
from tasks.warehouse.names import parse_table_name
from tasks.warehouse.tables import TableInfo, find_table

__all__ = [
    "ModelFolder",
    "ModelInfo",
    "NewModel",
    "StoredModelError",
    "drop_models",
    "insert_model",
    "latest_model",
    "list_models",
    "load_model",
    "model_file_path",
    "model_folder",
    "next_model_version",
    "pack_imputer",
    "scaling_from_json",
    "scaling_to_json",
]

_META = (
    "source_table, target_table, version, created_at, run_id, tdm_version, format_version, "
    "columns, key_column, watermark_column, settings, seed, source_hash, fit_rows, scaling, "
    "profile, model_sha256, coalesce(octet_length(model), 0) AS model_bytes, model_path"
)
_JSON_FIELDS = ("columns", "settings", "scaling", "profile")


class StoredModelError(PipelineInputError):
    """A stored model cannot be used: unreadable, of another library version, or fitted on
    other columns."""


@dataclass(frozen=True)
class _ModelFit:
    """What every stored version records of its fit: the tables, the run, the columns, the
    settings and seed, the source it was fitted on and its per-column profile."""

    source_table: str
    target_table: str
    run_id: str
    created_at: datetime
    columns: tuple[str, ...]
    key_column: str | None
    watermark_column: str | None
    settings: dict[str, Any]
    seed: int
    source_hash: str
    fit_rows: int
    profile: dict[str, Any]


@dataclass(frozen=True)
class ModelInfo(_ModelFit):
    """One stored version, without its file: what `tdm models list/show` print."""

    version: int
    tdm_version: str
    format_version: int
    scaling: dict[str, Any]
    model_sha256: str
    model_bytes: int
    model_path: str | None = None

    @property
    def label(self) -> str:
        """`target_table` version N, as messages name it."""
        return f'model version {self.version} of table "{self.target_table}"'


@dataclass(frozen=True, eq=False)
class NewModel(_ModelFit):
    """A fitted model about to be stored (its version is the next free one)."""

    scaling: Scaling
    model: bytes
    format_version: int = 0


@dataclass(frozen=True)
class ModelFolder:
    """Where model files go instead of the `model` column: `root`; paths are stored relative to
    `base` (the DuckDB file's folder) where the file lies under it, else absolute."""

    root: Path
    base: Path

    @classmethod
    def beside(cls, db_path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> ModelFolder:
        """`folder` as a setting gives it: relative paths are taken from the DuckDB file's
        folder."""
        base = Path(db_path).resolve().parent
        return cls(root=(base / Path(folder)).resolve(), base=base)

    def file(self, target: str, version: int) -> Path:
        """The file of `target`'s `version`: `<root>/<target>-<hash>/v<version>.tdm`
        (characters other than letters, digits, `.`, `_` and `-` in the name become `_`; the
        first 8 hex digits of the name's SHA-256 keep two names that read alike apart)."""
        digest = hashlib.sha256(target.encode()).hexdigest()[:8]
        return self.root / f"{_readable(target)}-{digest}" / f"v{version}.tdm"

    def files(self, target: str, version: int) -> tuple[Path, Path]:
        """Where `target`'s `version` may lie: its file (`file`), and where releases before
        0.20.1 wrote it, `<root>/<target>/v<version>.tdm` (two names that read alike shared
        it)."""
        return self.file(target, version), self.root / _readable(target) / f"v{version}.tdm"

    def named(self, stored: str) -> Path:
        """The file a `model_path` names, resolved (a relative one from the DuckDB file's
        folder)."""
        return (Path(stored) if Path(stored).is_absolute() else self.base / stored).resolve()

    def stored(self, path: Path) -> str:
        """How `path` is written in `model_path`."""
        return str(path.relative_to(self.base)) if path.is_relative_to(self.base) else str(path)


def _readable(target: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", target)


def model_folder(db_path: str | os.PathLike[str], model_dir: str | None) -> ModelFolder | None:
    """The folder of the model files as the `TDM_MODEL_DIR` setting gives it (relative: from
    the DuckDB file's folder), or None when it is unset: the files are kept in the table."""
    return ModelFolder.beside(db_path, model_dir) if model_dir else None


def model_file_path(
    stored: str, folder: ModelFolder | None, target: str, version: int
) -> Path | None:
    """The file a row's `model_path` names (relative ones from the DuckDB file's folder), if it
    is that row's own file in `folder` (`ModelFolder.file` of its target and version); None
    otherwise: a path out of the folder, another row's file, or no folder set. The store reads
    and deletes no other file, whatever the table says."""
    if folder is None:
        return None
    path = folder.named(stored)
    return next((own for own in folder.files(target, version) if path == own.resolve()), None)


def _outside_folder(stored: str, folder: ModelFolder | None) -> str:
    """Why a row's `model_path` is not used, for a message."""
    if folder is None:
        return f"names the file '{stored}', but no model folder is set (TDM_MODEL_DIR)"
    return f"names the file '{stored}', not its own file in the model folder '{folder.root}'"


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


def insert_model(
    con: duckdb.DuckDBPyConnection, model: NewModel, folder: ModelFolder | None = None
) -> tuple[int, Path | None]:
    """Store `model` as the next version of its target's models (inside the caller's
    transaction), its file in `folder` when given; returns the version and the file written
    (None: the file is in the table), which the caller removes if the transaction fails."""
    con.execute(MODELS_DDL)
    _migrate(con)
    version = next_model_version(con, model.target_table)
    written = None if folder is None else folder.file(model.target_table, version)
    if written is not None and folder is not None:
        partial: Path | None = None
        try:
            # The file holds the fitted table: the folders this makes and the file are the
            # service account's own (0700, 0600); the partial file is a new one, never a link
            # planted under a name it would have used.
            for place in reversed(
                [p for p in (written.parent, *written.parents) if not p.exists()]
            ):
                place.mkdir(mode=0o700, exist_ok=True)
            handle, name = tempfile.mkstemp(
                dir=written.parent, prefix=f"v{version}.", suffix=".partial"
            )
            partial = Path(name)
            with os.fdopen(handle, "wb") as out:
                out.write(model.model)
            os.replace(partial, written)  # a file is whole or absent, never half written
        except OSError as error:  # a full or failing disk: nothing of the model is left
            with contextlib.suppress(OSError):
                if partial is not None:
                    partial.unlink(missing_ok=True)
            full = error.errno == errno.ENOSPC
            raise PipelineError(
                f"The model folder '{folder.root}' (TDM_MODEL_DIR) could not take version "
                f'{version} of the model of "{model.target_table}": '
                f"{error.strerror or type(error).__name__}; nothing was written. "
                f"{'Free space there' if full else 'Mend the folder'}, or set TDM_MODEL_DIR to "
                "another folder."
            ) from None
    con.execute(
        f"INSERT INTO {MODELS_TABLE} (source_table, target_table, version, created_at, run_id, "
        "tdm_version, format_version, columns, key_column, watermark_column, settings, seed, "
        "source_hash, fit_rows, scaling, profile, model_sha256, model, model_path) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            model.model if written is None else None,
            None if written is None or folder is None else folder.stored(written),
        ],
    )
    return version, written


def _library_version() -> str:
    from tdm._version import __version__

    return __version__


def _info(names: Sequence[str], row: Sequence[Any]) -> ModelInfo:
    """The `ModelInfo` of a row of `_META`, its JSON fields decoded."""
    fields = dict(zip(names, row, strict=True))
    for name in _JSON_FIELDS:
        fields[name] = json.loads(fields[name])
    return ModelInfo(**{**fields, "columns": tuple(fields["columns"])})


def _find_store(con: duckdb.DuckDBPyConnection) -> TableInfo | None:
    """The model store `tdm_models`, if there is one; a table by that name that lacks the
    store's columns (a table of the user's own) is refused, naming what it lacks."""
    store = find_table(con, MODELS_TABLE, whole_name=False)
    lacking = sorted(MODELS_COLUMNS - {c.name.lower() for c in store.columns}) if store else []
    if lacking:
        raise PipelineInputError(
            f'The table "{MODELS_TABLE}" is not the store of models this pipeline keeps (it '
            f"lacks {', '.join(repr(c) for c in lacking)}), and incremental runs and `tdm "
            "models` read and write it, so nothing was run or written. Rename that table, or "
            "use another database file."
        )
    return store


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Bring an earlier `tdm_models` to this version's columns; a table already there is left
    as it is, its file's bytes too (DuckDB rewrites its catalog for any ALTER, a no-op one
    included)."""
    store = _find_store(con)
    model = None if store is None else store.column("model")
    if store and store.column("model_path") and model and model.nullable:
        return
    for migration in MODELS_MIGRATIONS:
        con.execute(migration)


def _same_target(target: str) -> tuple[str, str]:
    """The SQL condition on `target_table` that finds `target` (`table` or `schema.table`, as
    runs store it: `main.sales` is `sales`), case-insensitively, and its value."""
    return "lower(target_table) = lower(?)", parse_table_name(target).canonical


def next_model_version(con: duckdb.DuckDBPyConnection, target: str) -> int:
    """The version the next model fitted for `target` is stored as: one above any version
    stored or named in lineage, so a number names one model even after `drop_models`."""
    where, name = _same_target(target)
    highest = 0
    for table, column in ((MODELS_TABLE, "version"), (LINEAGE_TABLE, "model_version")):
        found = (
            _find_store(con) if table == MODELS_TABLE else find_table(con, table, whole_name=False)
        )
        if found is not None and found.column(column) is not None:
            query = f"SELECT coalesce(max({column}), 0) FROM {table} WHERE {where}"
            highest = max(highest, int(con.execute(query, [name]).fetchall()[0][0]))
    return highest + 1


def list_models(con: duckdb.DuckDBPyConnection, target: str | None = None) -> list[ModelInfo]:
    """Every stored version (of `target`'s models only, when given), oldest first."""
    store = _find_store(con)
    if store is None:
        return []
    meta = (
        _META if store.column("model_path") else _META.replace("model_path", "NULL AS model_path")
    )
    where, name = _same_target(target) if target else ("TRUE", None)
    found = con.execute(
        f"SELECT {meta} FROM {MODELS_TABLE} WHERE {where} ORDER BY target_table, version",
        [] if name is None else [name],
    )
    names = [column[0] for column in found.description]
    return [_info(names, row) for row in found.fetchall()]


def latest_model(con: duckdb.DuckDBPyConnection, target: str) -> ModelInfo | None:
    """The newest stored version of `target`'s model, or None."""
    versions = list_models(con, target)
    return versions[-1] if versions else None


def drop_models(
    con: duckdb.DuckDBPyConnection,
    target: str,
    version: int | None = None,
    *,
    folder: ModelFolder | None,
) -> int:
    """Delete `target`'s stored versions (only `version`, when given), and the files of those
    kept in `folder`; returns how many versions (0: none matched, and nothing was written). A
    row whose `model_path` is not its own file in `folder` (`model_file_path`) is refused,
    naming it, and nothing is deleted. Version numbers are not reused (`next_model_version`)."""
    store = _find_store(con)
    if store is None:
        return 0
    where, name = _same_target(target)
    values: list[Any] = [name]
    if version is not None:
        where, values = f"{where} AND version = ?", [name, version]
    path_column = "model_path" if store.column("model_path") else "NULL"  # an earlier store
    rows = con.execute(
        f"SELECT target_table, version, {path_column} FROM {MODELS_TABLE} WHERE {where}", values
    ).fetchall()
    files: list[Path] = []
    refused: list[str] = []
    for table, number, stored in rows:
        if stored is None:
            continue
        path = model_file_path(stored, folder, table, number)
        if path is None:
            refused.append(f'version {number} of "{table}" {_outside_folder(stored, folder)}')
        else:
            files.append(path)
    if refused:
        raise PipelineInputError(
            f"In {MODELS_TABLE}, {'; '.join(refused)}, so nothing was dropped. Set "
            "TDM_MODEL_DIR to the folder the models were written to, or delete a row you do "
            "not trust by hand (its file stays)."
        )
    for place in sorted({path.parent for path in files if path.exists()}):
        check_folder_writable(
            place,
            what=f"The model files of {target!r} in '{place}'",
            refused="Nothing was dropped (the rows and their files stay)",
        )
    if rows:
        _migrate(con)  # an earlier store, as a run would: `list_models` reads it afterwards
        con.execute(f"DELETE FROM {MODELS_TABLE} WHERE {where}", values)
    # A file named by a row kept (another target's, written where two names shared a folder
    # before 0.20.1) stays.
    named = f"SELECT {path_column} FROM {MODELS_TABLE} WHERE {path_column} IS NOT NULL"
    kept = {folder.named(p) for (p,) in con.execute(named).fetchall()} if folder else set()
    for path in files:
        if path.resolve() not in kept:
            path.unlink(missing_ok=True)
    return len(rows)


def _model_file(
    con: duckdb.DuckDBPyConnection, info: ModelInfo, folder: ModelFolder | None
) -> bytes:
    """The bytes of `info`'s save file, from the table or its own file in `folder`."""
    if info.model_path is None:
        blob = con.execute(
            f"SELECT model FROM {MODELS_TABLE} WHERE target_table = ? AND version = ?",
            [info.target_table, info.version],
        ).fetchall()[0][0]
        return bytes(blob)
    path = model_file_path(info.model_path, folder, info.target_table, info.version)
    if path is None:
        raise StoredModelError(
            f"The stored {info.label} {_outside_folder(info.model_path, folder)}."
        )
    try:
        return path.read_bytes()
    except OSError as error:
        raise StoredModelError(
            f"The file of the stored {info.label}, '{info.model_path}', cannot be read: "
            f"{error.strerror or type(error).__name__}."
        ) from None


def load_model(
    con: duckdb.DuckDBPyConnection,
    info: ModelInfo,
    *,
    columns: Sequence[str],
    key: str | None,
    kinds: Mapping[str, str],
    folder: ModelFolder | None,
) -> tuple[Any, Scaling]:
    """The stored imputer of `info` and its scaling, once checked against the run's columns,
    key and column kinds (a file kept in a model folder is read from `folder` only); a
    `StoredModelError` says what is wrong otherwise."""
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
    from tdm._persistence import FORMAT_VERSION
    from tdm._version import __version__

    if info.format_version != FORMAT_VERSION:
        raise StoredModelError(
            f"The stored {info.label} was saved in format {info.format_version} by tdm "
            f"{info.tdm_version}; this release (tdm {__version__}) reads format "
            f"{FORMAT_VERSION} only."
        )
    blob = _model_file(con, info, folder)
    if hashlib.sha256(blob).hexdigest() != info.model_sha256:
        raise StoredModelError(
            f"The stored {info.label} is corrupt: its file does not match its digest."
        )
    with tempfile.TemporaryDirectory(prefix="tdm-model-") as scratch:
        path = Path(scratch) / "model.pt"
        path.write_bytes(bytes(blob))
        try:
            imputer = TDMImputer.load(path)
        except Exception as error:  # any unreadable file: reported, then refit
            detail = str(error).splitlines()[0] if str(error) else type(error).__name__
            # The library names the scratch copy, and says what its user should do: the
            # pipeline refits by itself.
            detail = detail.removeprefix(f"{path}: ")
            detail = detail.removesuffix(" Refit the imputer and save it again.")
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
