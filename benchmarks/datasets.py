"""The benchmark's tables: the paper's numeric datasets, standardised per column, and the
mixed-type tables with the dtypes the imputers work with.

``load_dataset(name)`` reads ``<data_dir>/<name>.csv`` (features, then ``label`` or
``target``); ``load_mixed_dataset(name)`` reads ``<data_dir>/mixed/<name>.csv``. Without
``data_dir`` the directory is ``$TDM_DATASETS_DIR``, else ``../shared/datasets`` next to the
repository root.
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
    "dataset_path",
    "default_data_dir",
    "encode_numeric",
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
    """A complete dataset of the paper: standardised features ``X``, the labels ``y`` (``None``
    for a regression target), and the columns the downstream classifier uses (all but those
    that copy the label)."""

    name: str
    X: NDArray[np.float64]
    y: NDArray[np.generic] | None
    task: Task
    feature_names: tuple[str, ...]
    classifier_features: tuple[int, ...] = field(default=())

    @property
    def svm_scored(self) -> bool:
        """Whether trials score the downstream SVM's accuracy: labelled with more than two
        labels, as in the paper (a binary label, as blood_transfusion's, is not scored)."""
        return self.y is not None and np.unique(self.y).size > 2

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
    """A complete mixed-type table: ``frame`` (``float64``, ``Int64``, ``boolean`` and
    ``category`` columns), each column's kind, and the rows of the file before sampling."""

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


def dataset_path(name: str, data_dir: str | os.PathLike[str] | None, *, mixed: bool) -> Path | None:
    """Where dataset ``name`` is read from: ``<data_dir>/[mixed/]<name>.csv``, ``data_dir``
    defaulting to :func:`default_data_dir` (None: no such folder)."""
    directory = Path(data_dir) if data_dir is not None else default_data_dir()
    if directory is None:
        return None
    return directory / "mixed" / f"{name}.csv" if mixed else directory / f"{name}.csv"


def _csv_path(name: str, data_dir: str | os.PathLike[str] | None, *, mixed: bool) -> Path:
    """:func:`dataset_path`; a missing file's error names ``TDM_DATASETS_DIR``."""
    where = (
        f"the folder whose mixed/ holds {name}.csv" if mixed else f"the folder holding {name}.csv"
    )
    path = dataset_path(name, data_dir, mixed=mixed)
    if path is None:
        raise FileNotFoundError(
            f"no dataset directory for {name!r}: set {DATASETS_DIR_ENV} (or pass data_dir=...) "
            f"to {where}; ../shared/datasets next to the repository does not exist"
        )
    if not path.is_file():
        known = MIXED_DATASETS if mixed else DATASETS
        raise FileNotFoundError(
            f"dataset file {path} does not exist; known datasets: {', '.join(known)}. Set "
            f"{DATASETS_DIR_ENV} (or pass data_dir=...) to {where}"
        )
    return path


def load_dataset(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Read ``<data_dir>/<name>.csv`` and z-score its features per column (``ddof=0``).

    Raises ``FileNotFoundError`` (naming ``TDM_DATASETS_DIR``) when the directory or file does
    not exist, and ``ValueError`` when ``name`` is not a file stem, the last column is neither
    ``label`` nor ``target``, or a feature is not numeric or not finite.
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
    """Read ``<data_dir>/mixed/<name>.csv``: integers as ``Int64``, text as ``category``, floats
    as ``float64``; tables in :data:`MIXED_SAMPLE_ROWS` are sampled with :data:`SAMPLE_SEED`.

    Raises ``ValueError`` for a name not in :data:`MIXED_DATASETS` or a file with a missing
    value, and ``FileNotFoundError`` (naming ``TDM_DATASETS_DIR``) for a missing file.
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
    """A mask (``True`` = missing) of a mixed-type table.

    ``"mcar"`` draws each cell of every column independently; ``"mar"`` runs
    :func:`tdm.simulate.simulate_mar` on :func:`encode_numeric`'s matrix: its driver columns
    (label columns among the candidates, by their codes) stay whole and drive the missingness
    of the others. ``p`` is the expected share of missing cells of the whole table.
    """
    if mechanism not in MIXED_MECHANISMS:
        raise ValueError(f"mechanism must be one of {MIXED_MECHANISMS}; got {mechanism!r}")
    X = encode_numeric(frame)
    if mechanism == "mcar":
        return simulate_mcar(X, p, random_state=random_state)
    return simulate_mar(X, p, random_state=random_state)


def apply_mask(frame: pd.DataFrame, mask: NDArray[np.bool_]) -> pd.DataFrame:
    """A copy of ``frame`` with the cells at ``mask`` missing, every dtype kept."""
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
