"""Mixed-type tables: how the columns of a DataFrame (float, integer, boolean, categorical) are
put in the numeric space the imputers optimise in, and how imputed values come back in each
column's own dtype.

Numeric columns (float and integer) are one coordinate each. A categorical column of ``K``
observed labels (a boolean column: the labels False and True) is a block of
``min(K - 1, MAX_EMBEDDING_DIM)`` coordinates in which each label is a fixed point: the vertices
of a regular simplex (every two labels at distance sqrt(2), as one-hot vectors are), projected to
``MAX_EMBEDDING_DIM`` dimensions when there are more labels. An observed label is its vertex; a
missing cell is a point of the simplex, a softmax-weighted mix of the vertices over logits that
are optimised with the rest (:mod:`tdm._cells`), and is decoded to the label of largest weight.
A column of more labels than that keeps its start's labels, not optimised
(:func:`tdm._starts.settle_many_labels`): among projected points the label of largest weight
follows their geometry more than the row.
The points are fixed, not learned: a learned embedding could collapse the labels and make the
transport cost zero for nothing. Numeric columns come first in that space, then one block per
categorical column, in column order.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tdm.columns import BOOLEAN, FLOAT, NUMERIC_KINDS, column_kind

__all__ = [
    "MAX_EMBEDDING_DIM",
    "ColumnCoding",
    "TableEncoding",
    "label_distances",
    "label_embedding",
]


MAX_EMBEDDING_DIM = 8
"""Most coordinates a categorical column takes in the optimised space."""


def label_embedding(n_labels: int) -> np.ndarray:
    """Fixed points of ``n_labels`` labels, shape ``(n_labels, d)`` with
    ``d = min(n_labels - 1, MAX_EMBEDDING_DIM)`` (1 for a single label): a regular simplex with
    edges sqrt(2), or, for more than ``MAX_EMBEDDING_DIM + 1`` labels, its projection on a fixed
    (seeded by ``n_labels``) random subspace, scaled to a root-mean-square distance of sqrt(2)
    between two labels. Its cost grows linearly with ``n_labels``."""
    if n_labels <= 1:
        return np.zeros((max(n_labels, 1), 1))
    if n_labels - 1 <= MAX_EMBEDDING_DIM:
        centred = np.eye(n_labels) - 1.0 / n_labels
        # The rows of ``centred`` span a (K-1)-dimensional subspace: its coordinates there keep
        # the one-hot distances (sqrt(2) between any two labels).
        _, _, vt = np.linalg.svd(centred)
        return centred @ vt[: n_labels - 1].T
    # An orthonormal basis ``Q`` of a random d-dimensional subspace orthogonal to the ones: the
    # simplex's vertices e_i - 1/K project onto it as the rows of ``Q``, whose mean squared
    # distance between two rows is 2 d / (K - 1).
    rng = np.random.default_rng(n_labels)
    gaussian = rng.standard_normal((n_labels, MAX_EMBEDDING_DIM))
    basis, _ = np.linalg.qr(gaussian - gaussian.mean(axis=0))
    return basis * math.sqrt((n_labels - 1) / MAX_EMBEDDING_DIM)


LABEL_CHUNK = 1 << 22
"""Most numbers :func:`label_distances` holds at once beyond its result."""


def label_distances(points: np.ndarray, embedding: np.ndarray) -> np.ndarray:
    """Squared distances from each row of ``points`` (shape ``(n, d)``) to each label's point
    of ``embedding`` (shape ``(n_labels, d)``), shape ``(n, n_labels)``; computed a block of
    rows at a time, so a column of many labels needs no ``(n, d, n_labels)`` array."""
    out = np.empty((points.shape[0], embedding.shape[0]))
    rows = max(1, LABEL_CHUNK // embedding.size)
    for i in range(0, points.shape[0], rows):
        out[i : i + rows] = ((points[i : i + rows, :, None] - embedding.T[None]) ** 2).sum(axis=1)
    return out


def _nearest_labels(points: np.ndarray, embedding: np.ndarray) -> np.ndarray:
    """The code of the label whose point is nearest each row of ``points``."""
    rows = max(1, LABEL_CHUNK // embedding.shape[0])
    codes = [
        label_distances(points[i : i + rows], embedding).argmin(axis=1)
        for i in range(0, points.shape[0], rows)
    ]
    return np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class ColumnCoding:
    """One column: its name (a DataFrame's label, or a position), kind and output dtype; for a
    categorical or boolean column, the labels observed in ``fit`` and their fixed points."""

    name: Hashable
    kind: str
    dtype: Any
    labels: np.ndarray | None = None
    embedding: np.ndarray | None = None

    @property
    def width(self) -> int:
        """Coordinates of the column in the optimised space."""
        return 1 if self.embedding is None else int(self.embedding.shape[1])

    @property
    def many_labels(self) -> bool:
        """Whether its labels outnumber its coordinates plus one: their points are projected,
        not a simplex's vertices (:func:`label_embedding`)."""
        return self.embedding is not None and self.embedding.shape[0] > self.width + 1


def _observed_labels(series: pd.Series, kind: str) -> np.ndarray:
    observed = series[series.notna()]
    if isinstance(series.dtype, pd.CategoricalDtype):
        present = set(observed.unique())
        return np.asarray([c for c in series.dtype.categories if c in present], dtype=object)
    unique = list(pd.unique(observed))
    if kind == BOOLEAN:
        unique = [bool(v) for v in unique]
    with contextlib.suppress(TypeError):  # labels of mixed types keep their first-seen order
        unique = sorted(unique)
    return np.asarray(unique, dtype=object)


class TableEncoding:
    """The columns of a fitted table and the map between them and the optimised space.

    Built by :meth:`from_frame` or :meth:`from_array` in ``fit``; :meth:`encode` gives the
    numeric matrix (NaN where missing) of any table with the same columns, :meth:`decode` the
    table with its missing cells filled from a completed matrix.
    """

    def __init__(self, columns: Sequence[ColumnCoding], *, frame: bool) -> None:
        self.columns = tuple(columns)
        self.frame = frame
        self.numeric = tuple(j for j, c in enumerate(self.columns) if c.kind in NUMERIC_KINDS)
        self.categorical = tuple(
            j for j, c in enumerate(self.columns) if c.kind not in NUMERIC_KINDS
        )
        blocks, start = [], len(self.numeric)
        for j in self.categorical:
            width = self.columns[j].width
            blocks.append((start, start + width))
            start += width
        self.blocks: tuple[tuple[int, int], ...] = tuple(blocks)
        self.width = start
        # The original column of every coordinate of the optimised space.
        groups = list(self.numeric)
        for j, (a, b) in zip(self.categorical, self.blocks, strict=True):
            groups.extend([j] * (b - a))
        self.groups = np.asarray(groups, dtype=np.int64)

    def many_label_cells(self, mask: np.ndarray) -> np.ndarray:
        """The cells of ``mask`` (the optimised space) in the blocks of columns of many labels
        (:attr:`ColumnCoding.many_labels`)."""
        coordinates = np.zeros(self.width, dtype=bool)
        for j, (a, b) in zip(self.categorical, self.blocks, strict=True):
            coordinates[a:b] = self.columns[j].many_labels
        return mask & coordinates

    @property
    def mixed(self) -> bool:
        """Whether any column is categorical or boolean."""
        return bool(self.categorical)

    @classmethod
    def from_array(cls, n_features: int) -> TableEncoding:
        """Every column float, named by its position (NumPy input)."""
        return cls([ColumnCoding(j, FLOAT, np.float64) for j in range(n_features)], frame=False)

    @classmethod
    def from_frame(cls, X: pd.DataFrame, owner: str) -> TableEncoding:
        """The kinds and observed labels of ``X``'s columns; a column of another dtype
        (datetime, timedelta, complex, ...) is refused with a ``ValueError`` naming it."""
        codings = []
        for name in X.columns:
            series = X[name]
            try:
                kind = column_kind(series.dtype)
            except TypeError:
                raise ValueError(
                    f"{owner}: column {name!r} has dtype {series.dtype}, which cannot be "
                    "imputed; pass float, integer, boolean or categorical (object, string, "
                    "category) columns, or drop it."
                ) from None
            if kind in NUMERIC_KINDS:
                codings.append(ColumnCoding(name, kind, series.dtype))
                continue
            try:
                labels = _observed_labels(series, kind)
            except TypeError:  # unhashable: lists, dicts, arrays
                raise ValueError(
                    f"{owner}: column {name!r} holds values that cannot be labels (such as "
                    f"{series.dropna().iloc[0]!r}); a label is a number, text or boolean."
                ) from None
            codings.append(
                ColumnCoding(name, kind, series.dtype, labels, label_embedding(len(labels)))
            )
        return cls(codings, frame=True)

    def encode(self, X: Any) -> np.ndarray:
        """The optimised-space matrix of ``X`` (float64, NaN where missing).

        A label not seen in ``fit`` is observed but unknown: it is put at the centre of its
        column's labels, and its cell is never changed.
        """
        if not self.frame:
            return np.asarray(X, dtype=np.float64)
        n_samples = len(X)
        out = np.empty((n_samples, self.width))
        for k, j in enumerate(self.numeric):
            out[:, k] = _as_float(X.iloc[:, j])
        for j, (a, b) in zip(self.categorical, self.blocks, strict=True):
            coding = self.columns[j]
            assert coding.embedding is not None and coding.labels is not None
            series = X.iloc[:, j]
            missing = series.isna().to_numpy()
            codes = pd.Index(coding.labels).get_indexer(_as_labels(series, coding.kind))
            block = np.where(
                (codes >= 0)[:, None], coding.embedding[codes], coding.embedding.mean(axis=0)
            )
            block[missing] = np.nan
            out[:, a:b] = block
        return out

    def column_mask(self, encoded_mask: np.ndarray) -> np.ndarray:
        """Missing cells per original column, from the mask of the optimised space."""
        out = np.zeros((encoded_mask.shape[0], len(self.columns)), dtype=bool)
        out[:, np.asarray(self.numeric, dtype=np.int64)] = encoded_mask[:, : len(self.numeric)]
        for j, (a, _) in zip(self.categorical, self.blocks, strict=True):
            out[:, j] = encoded_mask[:, a]
        return out

    def decode_labels(self, filled: np.ndarray) -> list[np.ndarray]:
        """Per categorical column, the code of the label nearest each row's point."""
        codes = []
        for j, (a, b) in zip(self.categorical, self.blocks, strict=True):
            embedding = self.columns[j].embedding
            assert embedding is not None
            codes.append(_nearest_labels(filled[:, a:b], embedding))
        return codes

    def decode(self, X: pd.DataFrame, numeric: np.ndarray, filled: np.ndarray) -> pd.DataFrame:
        """``X`` with its missing cells filled: numeric columns from ``numeric`` (original
        units, integer columns already rounded), categorical ones by the labels nearest the
        points in ``filled`` (the optimised space). Observed cells are ``X``'s own values; every
        column keeps its dtype."""
        out = X.copy()
        blocks = dict(zip(self.categorical, self.blocks, strict=True))
        for k, j in enumerate(self.numeric):
            series = X.iloc[:, j]
            missing = series.isna().to_numpy()
            if missing.any():
                out.isetitem(j, _filled(series, missing, numeric[missing, k]))
        for j in self.categorical:
            series = X.iloc[:, j]
            missing = series.isna().to_numpy()
            if missing.any():
                labels, embedding = self.columns[j].labels, self.columns[j].embedding
                assert labels is not None and embedding is not None
                a, b = blocks[j]
                codes = _nearest_labels(filled[missing, a:b], embedding)  # those cells only
                out.isetitem(j, _filled(series, missing, labels[codes]))
        return out


def _as_float(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype=np.float64, na_value=np.nan)


def _as_labels(series: pd.Series, kind: str) -> list[Any]:
    values = series.astype(object).where(series.notna(), None).tolist()
    if kind == BOOLEAN:
        return [None if v is None else bool(v) for v in values]
    return values


def _filled(series: pd.Series, missing: np.ndarray, values: np.ndarray) -> pd.Series:
    """``series`` with ``values`` in its ``missing`` positions, in its own dtype (an unordered
    category gains the labels of ``values`` it lacks)."""
    new = series.copy()
    if isinstance(series.dtype, np.dtype) and series.dtype.kind == "f":
        new.iloc[np.flatnonzero(missing)] = values.astype(series.dtype)
        return new
    if series.dtype == object:
        new.iloc[np.flatnonzero(missing)] = list(values)
        return new
    if isinstance(series.dtype, pd.CategoricalDtype):  # unordered: ordered ones are checked
        labels = pd.Series(values, dtype=object)
        absent = labels[~labels.isin(series.dtype.categories)].unique()
        new = new.cat.add_categories(absent) if len(absent) else new
    new.iloc[np.flatnonzero(missing)] = pd.array(list(values), dtype=new.dtype)
    return new
