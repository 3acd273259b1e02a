"""Saving and loading fitted batch optimal-transport imputers (one ``torch.save`` file each)."""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import numpy as np
import pandas as pd
import torch
from torch import nn

from tdm._mixed import ColumnCoding, TableEncoding
from tdm._validation import resolve_device, resolve_dtype
from tdm._version import __version__
from tdm.columns import NUMERIC_KINDS

__all__ = ["FORMAT_VERSION", "SavedImputer", "load_imputer", "save_imputer"]

FORMAT_VERSION = 7
"""Layout of the saved state; a file of another layout is refused."""


class SavedImputer(Protocol):
    """What saving and loading call on an imputer (:class:`tdm.TDMImputer`, ...); the fitted
    attributes they read and set are those of :class:`tdm._estimator.BatchOTImputer`."""

    @classmethod
    def _configured(cls, **settings: Any) -> Self: ...

    def _settings(self) -> dict[str, Any]: ...

    def get_params(self, deep: bool = True) -> dict[str, Any]: ...

    def set_params(self, **params: Any) -> Self: ...

    def _make_network(self, n_features: int, generator: torch.Generator | None) -> nn.Module: ...


Imputer = TypeVar("Imputer", bound=SavedImputer)

_ARRAYS = ("mean_", "scale_", "X_fit_", "loss_history_", "cost_ratio_history_")


def save_imputer(imputer: Any, path: str | os.PathLike[str]) -> None:
    """Write the fitted ``imputer`` to ``path`` atomically (``callback`` is not saved)."""
    owner = type(imputer).__name__
    params = {k: v for k, v in imputer._settings().items() if k != "callback"}
    if isinstance(params.get("random_state"), np.integer):
        params["random_state"] = int(params["random_state"])
    if not isinstance(params.get("random_state"), int | None):
        raise ValueError(
            f"{owner}.save: random_state must be an int or None to be saved; got "
            f"{type(params['random_state']).__name__}"
        )
    params["device"] = str(params["device"])
    scores = imputer.validation_scores_
    state: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "tdm_version": __version__,
        "class": owner,
        "params": params,
        "network": {k: v.detach().cpu() for k, v in imputer.network_.state_dict().items()},
        **{name: torch.from_numpy(getattr(imputer, name)) for name in _ARRAYS},
        "n_iter_": imputer.n_iter_,
        "batch_size_": imputer.batch_size_,
        "n_features_in_": imputer.n_features_in_,
        "feature_names_in_": list(getattr(imputer, "feature_names_in_", [])) or None,
        "epsilon_": imputer.epsilon_,
        "fit_fingerprint_": imputer.fit_fingerprint_,
        "validation_scores_": None if scores is None else torch.from_numpy(scores),
        "best_iteration_": imputer.best_iteration_,
        "init_": imputer.init_,
        "start_scores_": imputer.start_scores_,
        "device_": str(imputer.device_),
        "encoding_": save_encoding(imputer.encoding_),
        "bounds_": [[_plain(k), lo, hi] for k, (lo, hi) in imputer.bounds_.items()],
    }
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(
            f"{owner}.save: cannot write {str(target)!r}: its folder {str(target.parent)!r} does "
            "not exist"
        )
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(state, tmp)
        try:  # a label torch's safe loading refuses (a Timestamp, a tuple) would not load again
            torch.load(tmp, map_location="cpu", weights_only=True)
        except Exception:
            raise ValueError(
                f"{owner}.save: the fitted imputer holds a value its file could not be loaded "
                f"with{_odd_labels(imputer.encoding_)}; a label column's labels must be "
                "numbers, text or booleans"
            ) from None
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_imputer(
    cls: type[Imputer], path: str | os.PathLike[str], *, device: str | None = None
) -> Imputer:
    """Read an imputer of class ``cls`` written by :func:`save_imputer`.

    ``device`` overrides the saved setting (refused with a ``ValueError`` where it names no
    device, or CUDA this machine lacks). A file of another class, of another save format
    than :data:`FORMAT_VERSION` (saying to refit), not written by ``save`` or damaged is refused
    with a ``ValueError``.
    """
    if device is not None:  # a device this machine lacks is refused now, not at transform
        resolve_device(device, cls.__name__)
    with open(path, "rb") as file:  # save writes a zip archive: anything else is not read
        archive = zipfile.is_zipfile(file)
    if not archive:
        raise _not_saved(path, cls, "not the zip archive save writes")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError, KeyError) as error:
        if isinstance(error, FileNotFoundError | IsADirectoryError | PermissionError):
            raise
        # torch's refusal of a pickle suggests loading it unsafely: the reason is ours.
        reason = UNSAFE if isinstance(error, pickle.UnpicklingError) else _first_line(error)
        raise _not_saved(path, cls, reason) from None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a saved {cls.__name__} (it holds a {type(state).__name__})")
    if state.get("class") != cls.__name__:
        raise ValueError(f"{path}: not a saved {cls.__name__} (class {state.get('class')!r})")
    if state.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: saved in format {state.get('format_version')!r} (by tdm "
            f"{state.get('tdm_version', 'unknown')}); tdm {__version__} reads format "
            f"{FORMAT_VERSION} only. Refit the imputer and save it again."
        )
    try:
        return _restore(cls, state, device)
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as error:
        raise ValueError(
            f"{path}: a damaged {cls.__name__} file, which cannot be restored "
            f"({type(error).__name__}: {_first_line(error)}). Refit the imputer and save it again."
        ) from None


UNSAFE = "not a PyTorch file of tensors and plain values; no other object is ever loaded"


def _not_saved(path: str | os.PathLike[str], cls: type, reason: str) -> ValueError:
    """The refusal of a file at `path` that ``cls.save`` did not write, or that is damaged."""
    return ValueError(
        f"{path}: not a file written by {cls.__name__}.save, or a damaged one ({reason})"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _restore(cls: type[Imputer], state: dict[str, Any], device: str | None) -> Imputer:
    """The imputer ``state`` (read by :func:`load_imputer`) describes."""
    est: Any = cls._configured(**state["params"])
    if device is not None:
        est.set_params(device=device)
    for name in _ARRAYS:
        setattr(est, name, state[name].numpy())
    est.encoding_ = load_encoding(state["encoding_"])
    est.bounds_ = {_key(k): (float(lo), float(hi)) for k, lo, hi in state["bounds_"]}
    # In the fitted precision: loading float64 weights into a float32 network would round them.
    # Its first weights are overwritten: drawn from a generator of its own, not torch's global one.
    network = est._make_network(est.X_fit_.shape[1], torch.Generator().manual_seed(0))
    est.network_ = network.to(dtype=resolve_dtype(est.dtype, cls.__name__))
    est.network_.load_state_dict(state["network"])
    est.column_kinds_ = {c.name: c.kind for c in est.encoding_.columns}
    est.categories_ = {c.name: c.labels for c in est.encoding_.columns if c.labels is not None}
    est.n_iter_ = int(state["n_iter_"])
    est.batch_size_ = int(state["batch_size_"])
    est.n_features_in_ = int(state["n_features_in_"])
    if state["feature_names_in_"] is not None:
        est.feature_names_in_ = np.asarray(state["feature_names_in_"], dtype=object)
    est.epsilon_ = state["epsilon_"]
    est.fit_fingerprint_ = state["fit_fingerprint_"]
    scores = state["validation_scores_"]
    est.validation_scores_ = None if scores is None else scores.numpy()
    est.best_iteration_ = state["best_iteration_"]
    est.init_ = state["init_"]
    est.start_scores_ = state["start_scores_"]
    est.device_ = torch.device(state["device_"])
    loaded: Imputer = est
    return loaded


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value (the safe loader reads plain values only)."""
    return value.item() if isinstance(value, np.generic) else value


def _odd_labels(encoding: TableEncoding) -> str:
    """`` (column 'c', label (1, 2), a tuple)`` for the first column of ``encoding`` with a label
    that is not a number, text or boolean; empty if none."""
    for column in encoding.columns:
        for label in () if column.labels is None else column.labels:
            if not isinstance(label, str | bool | int | float | np.generic):
                return f" (column {column.name!r}, label {label!r}, a {type(label).__name__})"
    return ""


def _key(value: Any) -> Any:
    """A saved column name: tuples (MultiIndex columns) come back as tuples."""
    return tuple(value) if isinstance(value, list) else value


def save_encoding(encoding: TableEncoding) -> dict[str, Any]:
    """The encoding as plain values and tensors."""
    return {
        "frame": encoding.frame,
        "columns": [
            {
                "name": _plain(c.name) if not isinstance(c.name, tuple) else list(c.name),
                "kind": c.kind,
                "dtype": str(c.dtype),
                "labels": None if c.labels is None else [_plain(v) for v in c.labels],
                "embedding": None if c.embedding is None else torch.from_numpy(c.embedding),
            }
            for c in encoding.columns
        ],
    }


def _column_dtype(saved: dict[str, Any], *, frame: bool) -> Any:
    """A saved column's dtype: a data frame's numeric column's as pandas reads its name (its
    bounds depend on it); otherwise its name, which nothing reads."""
    if frame and saved["kind"] in NUMERIC_KINDS:
        return pd.api.types.pandas_dtype(saved["dtype"])
    return saved["dtype"]


def load_encoding(saved: dict[str, Any]) -> TableEncoding:
    """The encoding saved by :func:`save_encoding`."""
    columns = [
        ColumnCoding(
            _key(c["name"]),
            c["kind"],
            _column_dtype(c, frame=bool(saved["frame"])),
            None if c["labels"] is None else np.asarray(c["labels"], dtype=object),
            None if c["embedding"] is None else c["embedding"].numpy(),
        )
        for c in saved["columns"]
    ]
    return TableEncoding(columns, frame=bool(saved["frame"]))
