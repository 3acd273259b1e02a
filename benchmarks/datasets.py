"""The TDM paper's UCI datasets, read from the shared CSV files and standardised as in the paper.

Every CSV has a header row; the features are all columns but the last, and the last column is
``label`` (a class: classification) or ``target`` (a continuous output: regression). The features
are z-scored per column (``sklearn.preprocessing.scale``: mean 0, population standard deviation
1, ``ddof=0``) before any mask is drawn, as in Zhao et al. (2023), Section 5.

Where the files are
-------------------
``load_dataset(name, data_dir=...)`` reads ``<data_dir>/<name>.csv``. Without ``data_dir`` the
directory is the environment variable ``TDM_DATASETS_DIR`` if set, else ``../shared/datasets``
next to the repository root, if that exists.

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

__all__ = ["DATASETS", "DATASETS_DIR_ENV", "Dataset", "default_data_dir", "load_dataset"]

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


def default_data_dir() -> Path | None:
    """The directory of the CSVs: ``$TDM_DATASETS_DIR``, else ``<repo>/../shared/datasets``."""
    from_env = os.environ.get(DATASETS_DIR_ENV)
    if from_env:
        return Path(from_env)
    # benchmarks/datasets.py -> repository root -> its sibling shared/datasets
    candidate = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    return candidate if candidate.is_dir() else None


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
    directory = Path(data_dir) if data_dir is not None else default_data_dir()
    if directory is None:
        raise FileNotFoundError(
            f"no dataset directory for {name!r}: set {DATASETS_DIR_ENV} to the folder holding "
            f"{name}.csv (or pass data_dir=...); ../shared/datasets next to the repository "
            "does not exist"
        )
    path = directory / f"{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(
            f"dataset file {path} does not exist; known datasets: {', '.join(DATASETS)}. Set "
            f"{DATASETS_DIR_ENV} (or pass data_dir=...) to the folder holding {name}.csv"
        )
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
