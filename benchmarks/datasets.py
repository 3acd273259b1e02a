"""The benchmark's tables, read from the shared CSV files: the TDM paper's numeric UCI datasets,
standardised as in the paper, and the mixed-type tables, with the dtypes the imputers work with.

The paper's datasets
--------------------
Every CSV has a header row; the features are all columns but the last, and the last column is
``label`` (a class: classification) or ``target`` (a continuous output: regression). The features
are z-scored per column (``sklearn.preprocessing.scale``: mean 0, population standard deviation
1, ``ddof=0``) before any mask is drawn, as in Zhao et al. (2023), Section 5.

The mixed-type tables
---------------------
The six tables of ``<data_dir>/mixed/`` (see the README there) are complete tables with float,
integer and categorical columns. :func:`load_mixed_dataset` reads one with integer columns as
pandas nullable ``Int64`` (so that a masked cell is ``pd.NA`` and an imputer returns integers),
text columns as ``category`` with the labels of the table as categories, and float columns as
``float64``; column kinds are :func:`tdm.columns.column_kinds`. The data are not standardised:
the metrics divide each numeric error by its column's standard deviation. ``diamonds`` has
53,940 rows; the benchmark uses a seeded sample of :data:`MIXED_SAMPLE_ROWS` of them (the same
sample for every mask seed).

Masks over a mixed table (:func:`simulate_mixed`) are boolean, ``True`` = missing, over every
column: MCAR draws each cell independently; MAR uses :func:`tdm.simulate.simulate_mar` on a
numeric encoding of the table (numeric columns as they are, categorical and boolean columns as
label codes), so the fully observed driver columns may be categorical too.

Where the files are
-------------------
``load_dataset(name, data_dir=...)`` reads ``<data_dir>/<name>.csv`` and
``load_mixed_dataset(name, data_dir=...)`` reads ``<data_dir>/mixed/<name>.csv``. Without
``data_dir`` the directory is the environment variable ``TDM_DATASETS_DIR`` if set, else
``../shared/datasets`` next to the repository root, if that exists.

References
----------
H. Zhao, K. Sun, A. Dezfouli and E. V. Bonilla. Transformed distribution matching for missing
value imputation. ICML 2023.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.preprocessing import scale

from tdm.columns import ColumnKind, column_kinds
from tdm.simulate import simulate_mar, simulate_mcar

__all__ = [
    "DATASETS",
    "DATASETS_DIR_ENV",
    "MIXED_DATASETS",
    "MIXED_MECHANISMS",
    "MIXED_SAMPLE_ROWS",
    "Dataset",
    "MixedDataset",
    "apply_mask",
    "default_data_dir",
    "encode_numeric",
    "is_mixed_dataset",
    "load_dataset",
    "load_mixed_dataset",
    "simulate_mixed",
]

#: The nine shipped datasets of the paper's table, smallest first (N x D in the comments).
DATASETS: tuple[str, ...] = (
    "concrete_slump",  # 103 x 7, target
    "parkinsons",  # 195 x 23, label (a copy of the feature `status`)
    "seeds",  # 210 x 7, label
    "glass",  # 214 x 9, label
    "blood_transfusion",  # 748 x 4, label
    "wine_quality_white",  # 4,898 x 11, label
    "anuran_calls",  # 7,195 x 22, label
    "letter",  # 20,000 x 16, label
    "california",  # 20,640 x 8, target
)

#: Environment variable naming the directory of the CSV files.
DATASETS_DIR_ENV = "TDM_DATASETS_DIR"

#: Features that leak the label and are dropped for the downstream classifier only.
_LEAKING_FEATURES: dict[str, tuple[str, ...]] = {"parkinsons": ("status",)}

Task = Literal["classification", "regression"]


@dataclass(frozen=True, eq=False)
class Dataset:
    """A complete, standardised dataset of the paper.

    Attributes
    ----------
    name : str
        File stem, one of :data:`DATASETS` (or any other CSV of the same layout).
    X : ndarray of shape (n_samples, n_features), float64
        Features z-scored per column (``ddof=0``); the ground truth that masks are drawn on.
    y : ndarray of shape (n_samples,) or None
        Class labels for a classification dataset; ``None`` for a regression one (the paper
        scores downstream accuracy on labelled datasets only).
    task : {"classification", "regression"}
        ``"classification"`` when the last column is ``label``, ``"regression"`` for ``target``.
    feature_names : tuple of str
        Names of the columns of ``X``, in file order.
    classifier_features : tuple of int
        Columns of ``X`` the downstream classifier uses: all of them except features that copy
        the label (parkinsons' ``status``).
    """

    name: str
    X: NDArray[np.float64]
    y: NDArray[np.generic] | None
    task: Task
    feature_names: tuple[str, ...]
    classifier_features: tuple[int, ...] = field(default=())

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_samples, n_features)``."""
        n, d = self.X.shape
        return int(n), int(d)


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
        Kind of each column (:func:`tdm.columns.column_kinds`).
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


def default_data_dir() -> Path | None:
    """The directory of the CSVs: ``$TDM_DATASETS_DIR``, else ``<repo>/../shared/datasets``."""
    from_env = os.environ.get(DATASETS_DIR_ENV)
    if from_env:
        return Path(from_env)
    # benchmarks/datasets.py -> repository root -> its sibling shared/datasets
    candidate = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    return candidate if candidate.is_dir() else None


def _csv_path(name: str, data_dir: str | os.PathLike[str] | None, *, mixed: bool) -> Path:
    """``<data_dir>/<name>.csv`` (``<data_dir>/mixed/<name>.csv`` for a mixed-type table); a
    missing directory or file names the file and ``TDM_DATASETS_DIR``."""
    where = (
        f"the folder whose mixed/ holds {name}.csv" if mixed else f"the folder holding {name}.csv"
    )
    directory = Path(data_dir) if data_dir is not None else default_data_dir()
    if directory is None:
        raise FileNotFoundError(
            f"no dataset directory for {name!r}: set {DATASETS_DIR_ENV} (or pass data_dir=...) "
            f"to {where}; ../shared/datasets next to the repository does not exist"
        )
    path = directory / "mixed" / f"{name}.csv" if mixed else directory / f"{name}.csv"
    if not path.is_file():
        known = MIXED_DATASETS if mixed else DATASETS
        raise FileNotFoundError(
            f"dataset file {path} does not exist; known datasets: {', '.join(known)}. Set "
            f"{DATASETS_DIR_ENV} (or pass data_dir=...) to {where}"
        )
    return path


def load_dataset(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Read ``<data_dir>/<name>.csv`` and standardise its features.

    Parameters
    ----------
    name : str
        Dataset name (the file stem), e.g. ``"seeds"``; see :data:`DATASETS`.
    data_dir : path-like or None, default=None
        Directory of the CSV files (keyword-only). ``None``: ``$TDM_DATASETS_DIR``, else
        ``../shared/datasets`` relative to the repository root.

    Returns
    -------
    Dataset
        Standardised features, labels (classification) or ``None`` (regression).

    Raises
    ------
    FileNotFoundError
        If the directory or file does not exist; the message names the file and
        ``TDM_DATASETS_DIR``.
    ValueError
        If ``name`` is not a plain file stem, the file has fewer than 2 columns, its last
        column is neither ``label`` nor ``target``, or a feature is not numeric or not finite.
    """
    if not isinstance(name, str) or not name or Path(name).name != name or name.startswith("."):
        raise ValueError(f"name must be a dataset file stem such as 'seeds'; got {name!r}")
    path = _csv_path(name, data_dir, mixed=False)
    frame = pd.read_csv(path)
    if frame.shape[1] < 2:
        raise ValueError(f"{path}: expected feature columns then label/target; got {frame.shape}")
    last = str(frame.columns[-1])
    if last not in ("label", "target"):
        raise ValueError(f"{path}: the last column must be 'label' or 'target'; got {last!r}")
    features = frame.iloc[:, :-1]
    non_numeric = [
        str(c) for c, t in features.dtypes.items() if not pd.api.types.is_numeric_dtype(t)
    ]
    if non_numeric:
        raise ValueError(f"{path}: feature columns must be numeric; not numeric: {non_numeric}")
    raw = features.to_numpy(dtype=np.float64)
    if not np.isfinite(raw).all():
        raise ValueError(f"{path}: features must be complete and finite (the ground truth)")
    names = tuple(str(c) for c in features.columns)
    leaking = _LEAKING_FEATURES.get(name, ())
    task: Task = "classification" if last == "label" else "regression"
    return Dataset(
        name=name,
        X=np.asarray(scale(raw), dtype=np.float64),
        y=frame[last].to_numpy() if task == "classification" else None,
        task=task,
        feature_names=names,
        classifier_features=tuple(i for i, n in enumerate(names) if n not in leaking),
    )


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
        ``None``: as :func:`load_dataset` (``$TDM_DATASETS_DIR``, else
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
    path = _csv_path(name, data_dir, mixed=True)
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
