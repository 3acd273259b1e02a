"""Mixed-type benchmark tables: loading, column kinds and missing-value masks over all columns.

The six tables of ``<data_dir>/mixed/`` (see the README there) are complete tables with float,
integer and categorical columns. :func:`load_mixed_dataset` reads one with the dtypes the
imputers work with: integer columns as pandas nullable ``Int64`` (so that a masked cell is
``pd.NA`` and an imputer returns integers), text columns as ``category`` with the labels of the
table as categories, and float columns as ``float64``. The data are not standardised: the
metrics (:mod:`tdm.metrics`) divide each numeric error by its column's standard deviation.

``diamonds`` has 53,940 rows; the benchmark uses a seeded sample of
:data:`MIXED_SAMPLE_ROWS` of them (the same sample for every mask seed).

Masks (:func:`simulate_mixed`) are boolean, ``True`` = missing, over every column: MCAR draws
each cell independently; MAR uses :func:`tdm.simulate.simulate_mar` on a numeric encoding of the
table (numeric columns as they are, categorical and boolean columns as label codes), so the
fully observed driver columns may be categorical too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from benchmarks.datasets import DATASETS_DIR_ENV, default_data_dir
from tdm.columns import ColumnKind, column_kinds
from tdm.simulate import simulate_mar, simulate_mcar

__all__ = [
    "MIXED_DATASETS",
    "MIXED_MECHANISMS",
    "MIXED_SAMPLE_ROWS",
    "ColumnKind",
    "MixedDataset",
    "apply_mask",
    "column_kinds",
    "encode_numeric",
    "is_mixed_dataset",
    "load_mixed_dataset",
    "simulate_mixed",
]

#: The six mixed-type tables of ``<data_dir>/mixed/``, smallest first.
MIXED_DATASETS: tuple[str, ...] = (
    "penguins",  # 333 x 8
    "credit",  # 400 x 11
    "cps1985",  # 534 x 11
    "houseprices",  # 546 x 12
    "wage",  # 3,000 x 10
    "diamonds",  # 53,940 x 10, sampled to 3,000 rows
)

#: Tables used as a seeded sample of this many rows (seed :data:`SAMPLE_SEED`).
MIXED_SAMPLE_ROWS: dict[str, int] = {"diamonds": 3_000}
SAMPLE_SEED = 0

#: The mechanisms :func:`simulate_mixed` draws.
MIXED_MECHANISMS: tuple[str, ...] = ("mcar", "mar")


@dataclass(frozen=True, eq=False)
class MixedDataset:
    """A complete mixed-type table.

    Attributes
    ----------
    name : str
        File stem, one of :data:`MIXED_DATASETS`.
    frame : pandas.DataFrame of shape (n_samples, n_features)
        The ground truth: ``float64``, ``Int64`` and ``category`` columns, no missing value.
    kinds : dict of str to {"float", "integer", "boolean", "categorical"}
        Kind of each column (:func:`column_kinds`).
    n_rows_file : int
        Rows in the file (more than ``frame`` has when the table was sampled).
    """

    name: str
    frame: pd.DataFrame
    kinds: dict[str, ColumnKind]
    n_rows_file: int

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_samples, n_features)``."""
        n, d = self.frame.shape
        return int(n), int(d)


def is_mixed_dataset(name: str) -> bool:
    """Whether ``name`` is one of the mixed-type tables (:data:`MIXED_DATASETS`)."""
    return name in MIXED_DATASETS


def encode_numeric(frame: pd.DataFrame) -> NDArray[np.float64]:
    """``frame`` as a float matrix: numeric columns as floats, the others as label codes.

    Labels are coded by their sorted order among the column's values; a missing cell is NaN.
    """
    kinds = column_kinds(frame)
    columns = []
    for name, kind in kinds.items():
        column = frame[name]
        if kind in ("float", "integer"):
            columns.append(column.astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan))
        else:
            codes, _ = pd.factorize(column.astype(object), sort=True, use_na_sentinel=True)
            columns.append(np.where(codes < 0, np.nan, codes.astype(np.float64)))
    return np.column_stack(columns) if columns else np.empty((len(frame), 0))


def load_mixed_dataset(
    name: str, *, data_dir: str | os.PathLike[str] | None = None
) -> MixedDataset:
    """Read ``<data_dir>/mixed/<name>.csv`` with the benchmark's dtypes.

    Parameters
    ----------
    name : str
        One of :data:`MIXED_DATASETS`.
    data_dir : path-like or None, default=None
        The datasets directory (keyword-only); the tables are in its ``mixed/`` folder.
        ``None``: as :func:`benchmarks.datasets.load_dataset` (``$TDM_DATASETS_DIR``, else
        ``../shared/datasets`` next to the repository).

    Returns
    -------
    MixedDataset
        Integer columns as ``Int64``, text columns as ``category``, floats as ``float64``;
        ``diamonds`` sampled to :data:`MIXED_SAMPLE_ROWS` rows with seed 0.

    Raises
    ------
    ValueError
        If ``name`` is not a mixed-type table, or the file has a missing value.
    FileNotFoundError
        If the file does not exist; the message names it and ``TDM_DATASETS_DIR``.
    """
    if name not in MIXED_DATASETS:
        raise ValueError(
            f"name must be one of the mixed-type tables {MIXED_DATASETS}; got {name!r}"
        )
    directory = Path(data_dir) if data_dir is not None else default_data_dir()
    path = (directory / "mixed" / f"{name}.csv") if directory is not None else None
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"mixed-type table {name!r} not found ({path or 'no dataset directory'}); set "
            f"{DATASETS_DIR_ENV} (or pass data_dir=...) to the folder whose mixed/ holds {name}.csv"
        )
    raw = pd.read_csv(path)
    if raw.isna().any().any():
        bad = [str(c) for c in raw.columns[raw.isna().any()]]
        raise ValueError(f"{path}: the ground truth must be complete; missing values in {bad}")
    n_rows_file = len(raw)
    if name in MIXED_SAMPLE_ROWS and n_rows_file > MIXED_SAMPLE_ROWS[name]:
        raw = raw.sample(n=MIXED_SAMPLE_ROWS[name], random_state=SAMPLE_SEED)
    raw = raw.reset_index(drop=True)
    frame = pd.DataFrame(index=raw.index)
    for column in raw.columns:
        values = raw[column]
        if pd.api.types.is_bool_dtype(values.dtype):
            frame[column] = values.astype("boolean")
        elif pd.api.types.is_integer_dtype(values.dtype):
            frame[column] = values.astype("Int64")
        elif pd.api.types.is_float_dtype(values.dtype):
            frame[column] = values.astype(np.float64)
        else:
            frame[column] = values.astype(str).astype("category")
    return MixedDataset(name, frame, column_kinds(frame), n_rows_file)


def simulate_mixed(
    frame: pd.DataFrame,
    mechanism: str,
    p: float,
    *,
    random_state: int | np.random.Generator | None = None,
) -> NDArray[np.bool_]:
    """A missing-value mask over every column of a mixed-type table.

    Parameters
    ----------
    frame : pandas.DataFrame
        The complete table.
    mechanism : {"mcar", "mar"}
        :func:`tdm.simulate.simulate_mcar`, or :func:`tdm.simulate.simulate_mar` on the
        numeric encoding (:func:`encode_numeric`: categorical drivers enter as label codes).
    p : float
        Expected share of missing cells in the whole table, in (0, 1).
    random_state : int, numpy.random.Generator or None, default=None
        Seed or generator (keyword-only).

    Returns
    -------
    ndarray of bool, shape (n_samples, n_features)
        ``True`` where the cell is missing; no column is entirely missing.
    """
    if mechanism not in MIXED_MECHANISMS:
        raise ValueError(f"mechanism must be one of {MIXED_MECHANISMS}; got {mechanism!r}")
    X = encode_numeric(frame)
    if mechanism == "mcar":
        return simulate_mcar(X, p, random_state=random_state)
    return simulate_mar(X, p, random_state=random_state)


def apply_mask(frame: pd.DataFrame, mask: NDArray[np.bool_]) -> pd.DataFrame:
    """A copy of ``frame`` with the cells at ``mask`` missing, every dtype kept.

    Missing is ``NaN`` in float columns, ``pd.NA`` in nullable integer and boolean columns and
    ``NaN`` in ``category`` columns.
    """
    if mask.shape != frame.shape:
        raise ValueError(f"mask must have the frame's shape {frame.shape}; got {mask.shape}")
    out = frame.copy()
    for j, column in enumerate(frame.columns):
        if mask[:, j].any():
            dtype = frame[column].dtype
            if isinstance(dtype, np.dtype) and dtype.kind in "iub":
                raise ValueError(
                    f"column {column!r} has dtype {dtype}, which cannot hold a "
                    "missing value; use a nullable dtype (Int64, boolean) or category"
                )
            out[column] = frame[column].mask(mask[:, j])
    return out
