"""The missing cells as parameters: one free value per missing numeric cell (bounded as
:mod:`tdm._bounds` says), and one vector of logits per missing categorical cell (a softmax mix of
its column's label points, :mod:`tdm._mixed`). :class:`MissingCells` assembles the data matrix
from them, differentiably, for any subset of rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from tdm._bounds import BoundedCells
from tdm._mixed import TableEncoding, label_distances

__all__ = ["START_TEMPERATURE", "MissingCells"]

START_TEMPERATURE = 0.5
"""Logits of a categorical cell's start: minus the squared distance from the start's point to
each label's point, over this temperature."""


@dataclass(eq=False)
class _Labels:
    """The missing cells of some categorical columns (a bucket of columns of similar label
    counts), all at once: ``slot[i, c]`` is the row of ``logits`` of cell ``(i, c)`` (-1 where
    observed); ``logits`` has a column per label of the bucket's widest column (``pad`` is -inf
    past a column's own labels); ``points[c]`` holds column ``c``'s label points (zero-padded),
    ``coordinates`` the flat index, in the ``(column, coordinate)`` grid, of each coordinate of
    the bucket's blocks, ``column_of`` its column, and ``positions`` its place among the
    categorical coordinates of the optimised space."""

    slot: Tensor
    logits: nn.Parameter
    pad: Tensor
    points: Tensor
    coordinates: Tensor
    column_of: Tensor
    positions: Tensor

    def values(self, X: Tensor, rows: Tensor | None) -> Tensor:
        """``X`` (the categorical coordinates) with this bucket's missing cells filled in."""
        slot = self.slot if rows is None else self.slot[rows]
        logits = self.logits[slot.clamp(min=0)] + self.pad
        probs = torch.softmax(logits, dim=2)
        points = torch.einsum("bck,ckd->bcd", probs, self.points).flatten(1)
        missing = (slot >= 0)[:, self.column_of]
        filled = torch.where(missing, points[:, self.coordinates], X[:, self.positions])
        return X.index_copy(1, self.positions, filled)

    @torch.no_grad()
    def result(self, filled: np.ndarray, start: int) -> None:
        """Put each missing cell of ``filled`` (its categorical coordinates from column
        ``start``) at its most weighted label's point."""
        slot = self.slot.cpu().numpy()
        choice = (self.logits + self.pad[0, self.cell_columns()]).argmax(dim=1).cpu().numpy()
        grid = self.points.double().cpu().numpy()
        n_dims = grid.shape[2]
        coordinates = self.coordinates.cpu().numpy()
        column_of = self.column_of.cpu().numpy()
        positions = self.positions.cpu().numpy()
        for c in range(slot.shape[1]):
            rows = np.flatnonzero(slot[:, c] >= 0)
            cols = np.flatnonzero(column_of == c)
            dims = coordinates[cols] - c * n_dims
            labels = choice[slot[rows, c]]
            filled[np.ix_(rows, start + positions[cols])] = grid[c][labels][:, dims]

    def cell_columns(self) -> Tensor:
        """The (bucket's) categorical column of every row of ``logits``."""
        slot = self.slot
        columns = torch.empty(self.logits.shape[0], dtype=torch.long, device=slot.device)
        where = torch.nonzero(slot >= 0)
        columns[slot[where[:, 0], where[:, 1]]] = where[:, 1]
        return columns


def _bucket(n_labels: int) -> int:
    """The bucket of a column of ``n_labels`` labels: columns whose label counts round up to
    the same power of two share one padded tensor of logits (padding at most doubles it,
    however varied the label counts; a 2-label column is never padded to a 500-label one's)."""
    return max(n_labels - 1, 1).bit_length()


def _labels(
    Z: np.ndarray,
    mask: np.ndarray,
    encoding: TableEncoding,
    rng: np.random.Generator,
    noise: float,
    fill: np.ndarray | None,
    start: np.ndarray | None,
    device: torch.device,
    dtype: torch.dtype,
) -> list[_Labels]:
    """The label cells, one :class:`_Labels` per bucket (:func:`_bucket`) that has any.

    The starting logits are drawn column by column in column order, whatever the buckets."""
    p = len(encoding.numeric)
    columns = []  # (block, embedding, start logits) per categorical column, in column order
    for j, (a, b) in zip(encoding.categorical, encoding.blocks, strict=True):
        embedding = encoding.columns[j].embedding
        assert embedding is not None
        missing = mask[:, a]
        m = int(missing.sum())
        if start is not None:
            centre = start[missing, a:b]
        else:
            mean = fill[a:b] if fill is not None else np.nanmean(Z[~missing, a:b], axis=0)
            centre = np.broadcast_to(mean, (m, b - a))
        distances = label_distances(centre, embedding)
        k = embedding.shape[0]
        logits = -distances / START_TEMPERATURE + noise * rng.standard_normal((m, k))
        columns.append(((a - p, b - p), embedding, missing, logits))
    buckets: dict[int, list[int]] = {}
    for c, (_, embedding, _, _) in enumerate(columns):
        buckets.setdefault(_bucket(embedding.shape[0]), []).append(c)
    made = [
        _bucket_labels([columns[c] for c in members], device, dtype)
        for _, members in sorted(buckets.items())
    ]
    return [labels for labels in made if labels.logits.numel()]


def _bucket_labels(
    columns: list[tuple[tuple[int, int], np.ndarray, np.ndarray, np.ndarray]],
    device: torch.device,
    dtype: torch.dtype,
) -> _Labels:
    k_max = max(e.shape[0] for _, e, _, _ in columns)
    d_max = max(e.shape[1] for _, e, _, _ in columns)
    n_rows = columns[0][2].shape[0]
    points = np.zeros((len(columns), k_max, d_max))
    pad = np.full((len(columns), k_max), -np.inf)
    slot = np.full((n_rows, len(columns)), -1, dtype=np.int64)
    logits = np.zeros((sum(len(lg) for _, _, _, lg in columns), k_max))
    coordinates: list[int] = []
    column_of: list[int] = []
    positions: list[int] = []
    n_cells = 0
    for c, ((a, b), embedding, missing, cell_logits) in enumerate(columns):
        k, d = embedding.shape
        points[c, :k, :d] = embedding
        pad[c, :k] = 0.0
        coordinates.extend(c * d_max + np.arange(d))
        column_of.extend([c] * d)
        positions.extend(range(a, b))
        m = len(cell_logits)
        slot[missing, c] = n_cells + np.arange(m)
        logits[n_cells : n_cells + m, :k] = cell_logits
        n_cells += m

    def index(values: list[int]) -> Tensor:
        return torch.as_tensor(np.asarray(values, dtype=np.int64), device=device)

    return _Labels(
        slot=torch.as_tensor(slot, device=device),
        logits=nn.Parameter(torch.as_tensor(logits, device=device, dtype=dtype)),
        pad=torch.as_tensor(pad, device=device, dtype=dtype)[None],
        points=torch.as_tensor(points, device=device, dtype=dtype),
        coordinates=index(coordinates),
        column_of=index(column_of),
        positions=index(positions),
    )


class MissingCells:
    """The missing cells of a table in the optimised space, and the table they complete.

    Build with :meth:`build`; :meth:`values` is the completed matrix (or some of its rows),
    differentiable in :meth:`parameters`.
    """

    def __init__(
        self,
        X0: Tensor,
        mask: Tensor,
        slot: Tensor,
        theta: nn.Parameter,
        bounds: BoundedCells,
        labels: list[_Labels],
        n_numeric: int,
    ) -> None:
        self.X0, self.mask, self.slot, self.theta = X0, mask, slot, theta
        self.bounds = bounds
        self.labels = labels
        self.n_numeric = n_numeric
        self._columns = torch.nonzero(mask)[:, 1] if n_numeric else mask.new_zeros(0).long()

    @classmethod
    def build(
        cls,
        Z: np.ndarray,
        mask: np.ndarray,
        encoding: TableEncoding,
        bounds: BoundedCells,
        rng: np.random.Generator,
        noise: float,
        *,
        fill: np.ndarray | None = None,
        start: np.ndarray | None = None,
    ) -> MissingCells:
        """Parameters of the ``mask`` cells of ``Z`` (the optimised space, NaN where missing).

        A numeric cell starts at its column's observed mean (``fill`` instead, if given) or at
        its value in ``start``, plus N(0, ``noise``²); a categorical cell's logits start from
        the same point (:data:`START_TEMPERATURE`), plus the same noise.
        """
        device, dtype = bounds.low.device, bounds.low.dtype
        p = len(encoding.numeric)
        num_mask = mask[:, :p]
        rows, cols = np.nonzero(num_mask)
        if start is not None:
            centre = start[rows, cols]
        else:
            means = fill if fill is not None else np.nanmean(np.where(mask, np.nan, Z), axis=0)
            centre = means[cols]
        init = centre + noise * rng.standard_normal(rows.size)
        theta = nn.Parameter(
            torch.as_tensor(bounds.parameter(init, cols), device=device, dtype=dtype)
        )
        X0 = torch.as_tensor(np.where(mask, 0.0, Z), device=device, dtype=dtype)
        slot = np.zeros(num_mask.shape, dtype=np.int64)
        slot[rows, cols] = np.arange(rows.size)
        labels: list[_Labels] = []
        if encoding.mixed:
            labels = _labels(Z, mask, encoding, rng, noise, fill, start, device, dtype)
        cells = cls(
            theta=theta,
            X0=X0,
            mask=torch.as_tensor(num_mask, device=device),
            slot=torch.as_tensor(slot, device=device),
            bounds=bounds,
            labels=labels,
            n_numeric=p,
        )
        cells.project_()  # a start outside the bounds begins on them
        return cells

    def parameters(self) -> list[nn.Parameter]:
        """The free parameters that have cells (numeric values first, then logits)."""
        return [p for p in self._all() if p.numel()]

    def _all(self) -> list[nn.Parameter]:
        return [self.theta] + [bucket.logits for bucket in self.labels]

    def values(self, rows: Tensor | None = None) -> Tensor:
        """The completed matrix (observed values where observed), or its ``rows``."""
        X = self.X0 if rows is None else self.X0[rows]
        numeric = X[:, : self.n_numeric]
        if self.theta.numel():
            mask = self.mask if rows is None else self.mask[rows]
            slot = self.slot if rows is None else self.slot[rows]
            numeric = torch.where(mask, self.bounds.value(self.theta[slot]), numeric)
        if X.shape[1] == self.n_numeric:
            return numeric
        labels = X[:, self.n_numeric :]
        for bucket in self.labels:
            labels = bucket.values(labels, rows)
        return torch.cat([numeric, labels], dim=1)

    @torch.no_grad()
    def project_(self) -> None:
        """Clamp the numeric cells into their bounds (``bounds_method="project"``)."""
        if self.theta.numel() and self.bounds.method == "project":
            self.bounds.project_(self.theta, self._columns)

    @torch.no_grad()
    def state(self) -> list[Tensor]:
        """A copy of every parameter (for :meth:`load_state`)."""
        return [p.detach().clone() for p in self._all()]

    @torch.no_grad()
    def load_state(self, state: list[Tensor]) -> None:
        """Put back parameters saved by :meth:`state`."""
        for p, saved in zip(self._all(), state, strict=True):
            p.copy_(saved)

    @torch.no_grad()
    def result(self) -> np.ndarray:
        """The completed matrix, float64, each categorical cell at the point of its most
        weighted label."""
        filled = self.values().double().cpu().numpy()
        for bucket in self.labels:
            bucket.result(filled, self.n_numeric)
        return filled
