"""Optimal-transport losses between two point clouds, differentiable in the points.

Every loss here is ``<P, C(z1, z2)>`` with the transport plan ``P`` computed without autograd and
held fixed in the backward pass. By the envelope theorem this gives the gradient of the optimal
transport cost itself (exact or entropic), at the price of one plan and one cost evaluation.
:func:`transport_terms` also returns the mean of ``C`` over all pairs, the cost of pairing the two
batches at random: the loss divided by it is a scale-free measure of how well they match.

Three solvers:

``"assignment"``
    Two batches of equal size with uniform weights: the exact plan is a permutation (Birkhoff).
    On a CPU it is found by a Jonker-Volgenant solver (the ``lapjv`` package; SciPy's
    :func:`scipy.optimize.linear_sum_assignment` where it is not installed); on another device by
    an auction on that device (:func:`auction_assignment`), so that the cost matrix never goes to
    the host. Both are exact on the costs rounded to a grid (:func:`quantise`). The loss is the
    mean cost over matched pairs, so autograd only sees ``n`` pair costs, not the ``n x m``
    matrix.
``"emd"``
    The general exact solver, POT's network simplex (:func:`ot.emd`), for unequal sizes. Chosen
    automatically when ``"assignment"`` is asked for unequal batches.
``"sinkhorn"``
    Entropic OT, log-domain Sinkhorn iterations on the device, with the debiased Sinkhorn
    divergence ``S(a, b) = OT(a, b) - (OT(a, a) + OT(b, b)) / 2`` as used by OTImputer
    (Muzellec et al., 2020).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import ot
import torch
from torch import Tensor

try:  # A well-maintained LAPJV implementation (MIT), the fastest exact solver here.
    from lapjv import lapjv as _lapjv
except ImportError:  # pragma: no cover - exercised only where lapjv has no wheel
    _lapjv = None

__all__ = [
    "COSTS",
    "SOLVERS",
    "Cost",
    "Solver",
    "TransportTerms",
    "absolute_epsilon",
    "assignment",
    "auction_assignment",
    "pairwise_cost",
    "plan_cost",
    "sinkhorn_plan",
    "transport_terms",
]

Cost = Literal["sqeuclidean", "euclidean"]
Solver = Literal["assignment", "emd", "sinkhorn"]
COSTS: tuple[str, ...] = ("sqeuclidean", "euclidean")
SOLVERS: tuple[str, ...] = ("assignment", "emd", "sinkhorn")


def pairwise_cost(z1: Tensor, z2: Tensor, cost: Cost) -> Tensor:
    """Cost matrix ``C[i, j] = c(z1[i], z2[j])``, shape ``(n, m)``.

    ``"sqeuclidean"`` is ``||z1[i] - z2[j]||²`` (the paper's text); ``"euclidean"`` its square root
    (the published code). Computed from differences, never by the expansion
    ``|a|² + |b|² - 2ab``, which cancels in float32 for points far from the origin.
    """
    dist = torch.cdist(z1, z2, compute_mode="donot_use_mm_for_euclid_dist")
    return dist.square() if cost == "sqeuclidean" else dist


DIFFERENCE_MAX_WIDTH = 16
"""Widest points whose exact-solver costs are computed from differences (up to here they cost
little more than the expansion on a CPU core)."""


def plan_cost(z1: Tensor, z2: Tensor, cost: Cost) -> Tensor:
    """The cost matrix the exact solvers are given, without gradient.

    Up to :data:`DIFFERENCE_MAX_WIDTH` columns, :func:`pairwise_cost`. Wider, the expansion
    ``|a|² + |b|² - 2ab`` (one matrix product) on the points in float64, centred on their joint
    mean, so that its rounding stays far below the solvers' grid (:data:`ASSIGNMENT_GRID`).
    """
    with torch.no_grad():
        if z1.shape[1] <= DIFFERENCE_MAX_WIDTH:
            return pairwise_cost(z1.detach(), z2.detach(), cost)
        a, b = z1.detach().double(), z2.detach().double()
        centre = torch.cat([a, b]).mean(dim=0)
        a, b = a - centre, b - centre
        squared = (a.square().sum(dim=1)[:, None] + b.square().sum(dim=1)[None, :]).addmm_(
            a, b.T, alpha=-2.0
        )
        squared.clamp_(min=0.0)
        return squared if cost == "sqeuclidean" else squared.sqrt_()


def matched_cost(z1: Tensor, z2: Tensor, cost: Cost) -> Tensor:
    """Row-wise cost ``c(z1[i], z2[i])``, shape ``(n,)``; the Euclidean norm has gradient 0 at 0."""
    diff = z1 - z2
    if cost == "sqeuclidean":
        return diff.square().sum(dim=1)
    return torch.linalg.vector_norm(diff, dim=1)


#: Costs are solved on a grid of ``1 / ASSIGNMENT_GRID`` of the largest cost (see `quantise`).
ASSIGNMENT_GRID = 1e6


def quantise(C: np.ndarray) -> np.ndarray:
    """Cost matrix rescaled to ``[0, ASSIGNMENT_GRID]`` by its largest magnitude and rounded to
    integers (float32, exactly representable below 2**24).

    LAPJV crawls on the near-ties of a fit's cost matrices and runs several times faster on
    the rounded ones; the permutation's true cost is within ``n * max|C| / ASSIGNMENT_GRID`` of
    the optimum.
    """
    scale = float(np.abs(C).max()) if C.size else 0.0
    Q = np.asarray(C, dtype=np.float32) * np.float32(ASSIGNMENT_GRID / scale if scale > 0 else 1.0)
    return np.ascontiguousarray(np.rint(Q, out=Q))


def assignment(C: np.ndarray) -> np.ndarray:
    """Solve the linear assignment problem for a square cost matrix.

    Parameters
    ----------
    C : ndarray of shape (n, n)
        Costs, float32 or float64.

    Returns
    -------
    ndarray of shape (n,)
        ``perm`` with row ``i`` matched to column ``perm[i]``; it minimises ``C[i, perm[i]].sum()``.

    Raises
    ------
    FloatingPointError
        If a cost is NaN or infinite (a diverged fit); no solver is called with it.
    """
    if C.ndim != 2 or C.shape[0] != C.shape[1]:
        raise ValueError(f"assignment needs a square cost matrix; got shape {C.shape}")
    if C.size and not np.isfinite(C).all():  # LAPJV corrupts the heap on NaN or inf costs
        raise FloatingPointError("the transport costs became non-finite (NaN or inf)")
    if _lapjv is not None:
        row_to_col, _, _ = _lapjv(quantise(C))
        return np.asarray(row_to_col, dtype=np.int64)
    from scipy.optimize import linear_sum_assignment

    _, cols = linear_sum_assignment(C)
    return cols.astype(np.int64)


#: Bidding rounds of :func:`auction_assignment` between two reads of its termination flag.
AUCTION_CHECK_EVERY = 16

# ε falls by this factor from one phase to the next, from the largest cost over it down to 1.
_AUCTION_SCALING = 8


def auction_assignment(C: Tensor) -> Tensor:
    """Solve the linear assignment problem on ``C``'s device, by the auction algorithm with
    ε-scaling (Bertsekas, 1988; Bertsekas and Castañón, 1991), exact on the quantised costs.

    The costs are rounded to the grid of :func:`quantise` (integers up to
    :data:`ASSIGNMENT_GRID`) and multiplied by ``n + 1``. Each bidding round is Jacobi: every
    unassigned row bids at once for its most profitable column, raising its price by the margin
    over the second most profitable plus ε, and each column takes its highest bid
    (``scatter_reduce``), the row it held becoming unassigned. A phase ends when every row is
    assigned; ε is then divided by 8 and the rows unassigned, the prices kept. At ε = 1 the
    assignment is within ``n`` of the optimum of the scaled costs, less than one of their grid
    steps: it is optimal on the rounded costs, as LAPJV's is in :func:`assignment`, so its true
    cost is within ``n * max|C| / ASSIGNMENT_GRID`` of the optimum. Among columns of equal profit
    row ``i`` prefers the first from column ``i`` on (cyclically), so that rows facing ties bid
    for different columns. Non-finite costs count as 0 (the loss built on them is not finite).

    Integer arithmetic on the device; the only read by the host is the termination flag, one
    per :data:`AUCTION_CHECK_EVERY` bidding rounds.

    Parameters
    ----------
    C : Tensor of shape (n, n) or (b, n, n)
        Costs; a batch of ``b`` matrices is solved at once.

    Returns
    -------
    Tensor of shape (n,) or (b, n), int64
        ``perm`` with row ``i`` matched to column ``perm[i]`` (per matrix of a batch).
    """
    if C.dim() not in (2, 3) or C.shape[-1] != C.shape[-2]:
        raise ValueError(f"auction_assignment needs square cost matrices; got shape {C.shape}")
    n = C.shape[-1]
    if n <= 1:
        return torch.zeros(C.shape[:-1], dtype=torch.long, device=C.device)
    batch = C.detach().reshape(-1, n, n)
    with torch.no_grad():
        state = _Auction.start(batch)
        while True:
            for _ in range(AUCTION_CHECK_EVERY):
                state.bid()
            if bool(state.finished()):
                break
        return state.assignment().reshape(C.shape[:-1])


class _Auction:
    """The state of :func:`auction_assignment` on ``b`` problems of size ``n``, flattened: row
    ``k * n + i`` and column ``k * n + j`` are row ``i`` and column ``j`` of problem ``k``;
    ``owner`` and ``column`` have one slot more, at index ``b * n``, that takes the writes of
    rows and columns with nothing to write (so that no step needs a boolean index)."""

    def __init__(self, benefit: Tensor, epsilon: Tensor) -> None:
        b, n, _ = benefit.shape
        device = benefit.device
        self.n, self.size = n, b * n
        i = torch.arange(n, device=device)
        # Profits are integers; n times them less (j - i) mod n orders row i's ties cyclically.
        self.keys = benefit * n - (i[None, :] - i[:, None]) % n  # (b, n, n)
        self.epsilon = epsilon  # (b,)
        self.prices = torch.zeros(b * n, dtype=torch.long, device=device)
        self.owner = torch.full((b * n + 1,), -1, dtype=torch.long, device=device)
        self.column = torch.full((b * n + 1,), -1, dtype=torch.long, device=device)
        self.index = torch.arange(b * n, device=device)
        self.offsets = (torch.arange(b, device=device) * n)[:, None]

    @classmethod
    def start(cls, C: Tensor) -> _Auction:
        n = C.shape[-1]
        C64 = C.double()
        largest = C64.abs().amax(dim=(1, 2), keepdim=True)
        grid = torch.round(C64 * (ASSIGNMENT_GRID / torch.where(largest > 0, largest, 1.0)))
        grid = torch.where(torch.isfinite(grid), grid, 0.0).long()
        top = int(ASSIGNMENT_GRID) * (n + 1)
        epsilon = torch.full((C.shape[0],), top // _AUCTION_SCALING, device=C.device)
        return cls(-grid * (n + 1), epsilon)

    def bid(self) -> None:
        """One round: phases that are done move to the next ε, then every unassigned row bids."""
        n, size, column, owner = self.n, self.size, self.column, self.owner
        done = (column[:size] >= 0).view(-1, n).all(dim=1)
        advance = done & (self.epsilon > 1)
        self.epsilon = torch.where(
            advance, (self.epsilon // _AUCTION_SCALING).clamp(min=1), self.epsilon
        )
        restart = advance[:, None].expand(-1, n).reshape(size)
        column[:size] = torch.where(restart, -1, column[:size])
        owner[:size] = torch.where(restart, -1, owner[:size])

        prices = self.prices.view(-1, n)
        top = (self.keys - prices[:, None, :] * n).topk(2, dim=2)
        best, second = (-torch.div(-top.values, n, rounding_mode="floor")).unbind(dim=2)
        choice = top.indices[..., 0]
        offer = prices.gather(1, choice) + best - second + self.epsilon[:, None]
        target = (choice + self.offsets).reshape(size)
        bidding = column[:size] < 0
        lowest = torch.iinfo(torch.long).min
        offer = torch.where(bidding, offer.reshape(size), lowest)
        highest = torch.full_like(self.prices, lowest).scatter_reduce(0, target, offer, "amax")
        wins = bidding & (offer == highest[target])
        winner = torch.full_like(self.prices, size).scatter_reduce(
            0, target, torch.where(wins, self.index, size), "amin"
        )
        taken = winner < size
        previous = owner[:size]
        column.scatter_(0, torch.where(taken & (previous >= 0), previous, size), -1)
        owner[:size] = torch.where(taken, winner, previous)
        column.scatter_(0, torch.where(taken, winner, size), self.index)
        self.prices = torch.where(taken, highest, self.prices)

    def finished(self) -> Tensor:
        """Whether every row is assigned at the last ε (a boolean on the device)."""
        return (self.column[: self.size] >= 0).all() & (self.epsilon == 1).all()

    def assignment(self) -> Tensor:
        return (self.column[: self.size].view(-1, self.n) - self.offsets).reshape(-1, self.n)


def sinkhorn_plan(
    C: Tensor, epsilon: float, *, scaling: float = 0.9, max_iter: int = 1000, tol: float = 1e-3
) -> Tensor:
    """Entropic OT plan between uniform weights, by log-domain Sinkhorn iterations.

    The regularisation is annealed from the largest cost down to ``epsilon`` by the factor
    ``scaling`` per iteration (epsilon-scaling), which reaches a small ``epsilon`` in tens of
    iterations instead of thousands; the dual potentials carry over between levels.

    Parameters
    ----------
    C : Tensor of shape (n, m)
        Cost matrix (no gradient is taken through the iterations).
    epsilon : float
        Absolute entropic regularisation, in the units of ``C``.
    scaling : float, default=0.9
        Annealing factor in (0, 1).
    max_iter : int, default=1000
        Cap on Sinkhorn iterations at the final ``epsilon``.
    tol : float, default=1e-3
        Stop when the L1 error of the row marginal is below ``tol`` (checked every 10 iterations).

    Returns
    -------
    Tensor of shape (n, m)
        The plan, whose entries sum to 1.
    """
    n, m = C.shape
    log_a = C.new_full((n,), -math.log(n))
    log_b = C.new_full((m,), -math.log(m))
    f = C.new_zeros(n)
    g = C.new_zeros(m)
    eps = max(float(C.max()), epsilon)
    at_target = 0
    while True:
        f = -eps * torch.logsumexp((g[None, :] - C) / eps + log_b[None, :], dim=1)
        g = -eps * torch.logsumexp((f[:, None] - C) / eps + log_a[:, None], dim=0)
        if eps > epsilon:
            eps = max(eps * scaling, epsilon)
            continue
        at_target += 1
        if at_target >= max_iter:
            break
        if at_target % 10 == 0:
            log_p = (f[:, None] + g[None, :] - C) / eps + log_a[:, None] + log_b[None, :]
            err = (torch.logsumexp(log_p, dim=1).exp() - log_a.exp()).abs().sum()
            if err.item() < tol:
                break
    log_p = (f[:, None] + g[None, :] - C) / eps + log_a[:, None] + log_b[None, :]
    return log_p.exp()


@dataclass(frozen=True)
class TransportTerms:
    """A step's transport loss and the mean pairwise cost of its two batches.

    Attributes
    ----------
    loss : Tensor
        Scalar: the optimal-transport cost, differentiable in the points (see
        :func:`transport_terms`).
    mean_cost : Tensor
        Scalar, without gradient: the mean of ``C[i, j]`` over all ``n * m`` cross-batch pairs,
        the cost of the independent coupling (every pair equally weighted). No coupling costs
        more than the optimal one, so for the exact solvers ``loss / mean_cost`` lies in
        ``[0, 1]``: 0 when the batches coincide, 1 when matching them is no better than pairing
        their points at random.
    """

    loss: Tensor
    mean_cost: Tensor


def transport_terms(
    z1: Tensor,
    z2: Tensor,
    *,
    cost: Cost = "sqeuclidean",
    solver: Solver = "assignment",
    epsilon: float | None = None,
) -> TransportTerms:
    """Optimal-transport cost between the uniform measures on ``z1`` and ``z2``, and the mean of
    the cost matrix it solves (at no extra solve).

    Parameters
    ----------
    z1 : Tensor of shape (n, d)
    z2 : Tensor of shape (m, d)
    cost : {"sqeuclidean", "euclidean"}, default="sqeuclidean"
        Ground cost, see :func:`pairwise_cost`.
    solver : {"assignment", "emd", "sinkhorn"}, default="assignment"
        See the module docstring. ``"assignment"`` is solved by :func:`assignment` for points on
        a CPU and by :func:`auction_assignment` on their device otherwise; it falls back to
        ``"emd"`` when ``n != m``.
    epsilon : float, optional
        Absolute entropic regularisation, required by ``"sinkhorn"``.

    Returns
    -------
    TransportTerms
        ``loss``: a scalar with gradients with respect to ``z1`` and ``z2`` (the plan is held
        fixed); ``mean_cost``: the mean of ``C(z1, z2)``.
    """
    if solver == "assignment" and z1.shape[0] == z2.shape[0]:
        C = plan_cost(z1, z2, cost)
        if C.device.type == "cpu":
            perm = torch.from_numpy(assignment(C.numpy()))
        else:  # the costs stay on the device
            perm = auction_assignment(C)
        return TransportTerms(matched_cost(z1, z2[perm], cost).mean(), C.mean().to(z1.dtype))
    if solver in ("assignment", "emd"):
        C64 = plan_cost(z1, z2, cost).double().cpu().numpy()
        n, m = C64.shape
        plan = ot.emd(np.full(n, 1.0 / n), np.full(m, 1.0 / m), C64)
        rows, cols = np.nonzero(plan)
        weights = torch.as_tensor(plan[rows, cols], dtype=z1.dtype, device=z1.device)
        rows_t = torch.as_tensor(rows, device=z1.device)
        cols_t = torch.as_tensor(cols, device=z1.device)
        loss = (weights * matched_cost(z1[rows_t], z2[cols_t], cost)).sum()
        return TransportTerms(loss, torch.as_tensor(C64.mean(), dtype=z1.dtype, device=z1.device))
    if solver == "sinkhorn":
        if epsilon is None or not epsilon > 0:
            raise ValueError(f"solver='sinkhorn' needs epsilon > 0; got epsilon={epsilon!r}")
        cross, mean_cost = _entropic_term(z1, z2, cost, epsilon)
        loss = (
            cross
            - 0.5 * _entropic_term(z1, z1, cost, epsilon)[0]
            - 0.5 * _entropic_term(z2, z2, cost, epsilon)[0]
        )
        return TransportTerms(loss, mean_cost)
    raise ValueError(f"solver must be one of {SOLVERS}; got solver={solver!r}")


def _entropic_term(z1: Tensor, z2: Tensor, cost: Cost, epsilon: float) -> tuple[Tensor, Tensor]:
    """``<P, C>`` for the entropic plan ``P`` between ``z1`` and ``z2``, and ``C``'s mean."""
    C = pairwise_cost(z1, z2, cost)
    with torch.no_grad():
        plan = sinkhorn_plan(C.detach(), epsilon)
    return (plan * C).sum(), C.detach().mean()


def absolute_epsilon(
    Z: np.ndarray, mask: np.ndarray, rng: np.random.Generator, epsilon: float, cost: Cost
) -> float:
    """``epsilon`` times the median pairwise ``cost`` of the mean-filled data (Muzellec et al.,
    2020), on at most 1,000 rows drawn from ``rng``; the median counts as 1 where it is 0."""
    filled = np.where(mask, np.nanmean(np.where(mask, np.nan, Z), axis=0), Z)
    rows = rng.choice(Z.shape[0], size=min(Z.shape[0], 1000), replace=False)
    sample = torch.as_tensor(filled[rows])
    costs = pairwise_cost(sample, sample, cost)
    off_diagonal = costs[~torch.eye(len(rows), dtype=torch.bool)]
    median = float(off_diagonal.median()) if off_diagonal.numel() else 1.0
    return epsilon * (median if median > 0 else 1.0)
