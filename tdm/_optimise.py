"""The optimisation shared by the batch optimal-transport imputers: the RMSprop rate of the
missing cells (:mod:`tdm._cells` holds the cells themselves), and the step loop with its
progress reports.

Each step draws two batches of rows (disjoint, or independent: :func:`draw_batch_rows`, on the
fit's device: :class:`RowSampler`), maps both through a network ``f`` (the identity for
OTImputer), and lowers the optimal-transport cost between the two mapped batches (Zhao et al.,
2023, Algorithm 1; Muzellec et al., 2020, Algorithm 1). Each step's cost is recorded, and so is
its ratio to the mean pairwise cost of the two batches: TDM's latent space contracts as the
network learns, so the raw cost falls whether or not the batches match better, while the ratio
does not depend on the scale.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from tdm.transport import TransportTerms

__all__ = [
    "BATCH_DRAWS",
    "FitProgress",
    "RMSprop",
    "RowSampler",
    "StepHistory",
    "StopMonitor",
    "cell_rate",
    "default_transform_iter",
    "draw_batch_rows",
    "paper_batch_size",
    "run_steps",
    "visit_step_factor",
]

_RMSPROP_ALPHA = 0.99  # torch's default smoothing of RMSprop's running mean of squared gradients
# The cell-rate correction keeps each visit's step at most what it is when this share is drawn.
_REFERENCE_SHARE = 0.5


@dataclass(frozen=True)
class FitProgress:
    """What a ``callback`` receives after each optimisation step.

    Attributes
    ----------
    iteration : int
        Steps done so far (1-based).
    max_iter : int
        Steps planned.
    loss : float
        Transport cost of this step's batches.
    stage : str
        ``"start"`` (the start's models: ``iteration`` of ``max_iter`` fitted, ``loss`` NaN),
        ``"fit"`` or ``"transform"``.
    cost_ratio : float
        ``loss`` divided by the mean cost of all pairs across the two batches: in ``[0, 1]`` for
        the exact solvers, 1 meaning the matching is no better than random pairs; NaN where that
        mean is 0.
    """

    iteration: int
    max_iter: int
    loss: float
    stage: str = "fit"
    cost_ratio: float = math.nan


@dataclass(frozen=True, eq=False)
class StepHistory:
    """Per-step records of an optimisation, each of shape (n_steps,), float64.

    Attributes
    ----------
    loss : ndarray
        The transport cost of every step.
    cost_ratio : ndarray
        Every step's transport cost divided by the mean pairwise cost of its two batches
        (:class:`tdm.transport.TransportTerms`); NaN where that mean is 0.
    """

    loss: np.ndarray
    cost_ratio: np.ndarray


class StopMonitor(Protocol):
    """Looks at the fit every ``every`` steps and says when to stop (early stopping)."""

    every: int
    best_iteration: int

    def should_stop(self, iteration: int) -> bool:
        """Whether to stop after ``iteration`` steps."""
        ...


class RMSprop:
    """RMSprop (Tieleman and Hinton, 2012) without momentum, centring or weight decay, the
    update of ``torch.optim.RMSprop`` at those settings, operation for operation: per
    parameter, ``s = alpha * s + (1 - alpha) * g**2`` and ``p -= lr * g / (sqrt(s) + eps)``,
    a parameter without a gradient left as it is. Written here because the first use of any
    ``torch.optim`` optimiser imports TorchDynamo, a start-up cost of every process that fits
    (docs/decisions.md, "The suite"). ``groups``: dicts with ``params`` and optionally ``lr``
    (else ``lr``), or the parameters themselves."""

    def __init__(
        self, groups: Iterable[Any], lr: float, alpha: float = _RMSPROP_ALPHA, eps: float = 1e-8
    ) -> None:
        listed = list(groups)
        if listed and not isinstance(listed[0], dict):
            listed = [{"params": listed}]
        self.groups: list[tuple[list[Tensor], float]] = [
            (list(g["params"]), float(g.get("lr", lr))) for g in listed
        ]
        self.alpha, self.eps = alpha, eps
        self._squares: dict[int, Tensor] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient."""
        for params, _ in self.groups:
            for p in params:
                p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient."""
        for params, lr in self.groups:
            for p in params:
                if p.grad is None:
                    continue
                square = self._squares.get(id(p))
                if square is None:
                    square = self._squares[id(p)] = torch.zeros_like(p)
                square.mul_(self.alpha).addcmul_(p.grad, p.grad, value=1 - self.alpha)
                p.addcdiv_(p.grad, square.sqrt().add_(self.eps), value=-lr)


def paper_batch_size(batch_size: int, n_samples: int) -> int:
    """The paper's rule: ``batch_size`` rows, or the largest power of two ``<= n_samples / 2``."""
    if n_samples // 2 >= batch_size:
        return batch_size
    return 2 ** math.floor(math.log2(max(n_samples // 2, 1)))


#: How a step's two batches are drawn (the private ``Config.batch_draw``).
BATCH_DRAWS = ("disjoint", "independent")


@dataclass(frozen=True, eq=False)
class RowSampler:
    """Draws of distinct row indices as tensors on ``device``, one per step.

    On a CPU the draws come from the NumPy generator ``rng`` (``rng.choice``, which touches only
    the rows it draws where a draw is small; ``torch.randperm`` shuffles all ``n`` rows). On
    another device they come from ``generator``, a :class:`torch.Generator` on it (a slice of
    ``torch.randperm``), so that a step neither waits for the host nor copies indices to the
    device. Build with :meth:`on`.

    Attributes
    ----------
    rng : numpy.random.Generator
        The draws on a CPU.
    device : torch.device
        Where the indices are.
    generator : torch.Generator or None
        The draws elsewhere; ``None`` draws from ``rng``.
    """

    rng: np.random.Generator
    device: torch.device
    generator: torch.Generator | None = None

    @classmethod
    def on(cls, device: torch.device, rng: np.random.Generator) -> RowSampler:
        """The sampler of a fit on ``device``: off a CPU, its generator is seeded from ``rng``
        (one draw; on a CPU ``rng`` is left as it is)."""
        if device.type == "cpu":
            return cls(rng, device)
        seed = int(rng.integers(2**62))
        return cls(rng, device, torch.Generator(device=device).manual_seed(seed))

    def distinct(self, n: int, size: int) -> Tensor:
        """``size`` distinct indices of ``range(n)``, uniformly at random, shape ``(size,)``."""
        if self.generator is None:
            drawn = torch.from_numpy(self.rng.choice(n, size=size, replace=False))
            return drawn.to(self.device)
        return torch.randperm(n, generator=self.generator, device=self.device)[:size]


def draw_batch_rows(sampler: RowSampler, n_samples: int, batch_size: int, draw: str) -> Tensor:
    """Row indices of one step's two batches, the first ``batch_size`` then the second, on the
    sampler's device.

    ``"disjoint"``: ``2 * batch_size`` distinct rows. ``"independent"``: each batch drawn on its
    own, without replacement within it, so that the two may share rows (the published code).
    """
    if draw == "disjoint":
        return sampler.distinct(n_samples, 2 * batch_size)
    if draw == "independent":
        first = sampler.distinct(n_samples, batch_size)
        return torch.cat([first, sampler.distinct(n_samples, batch_size)])
    raise ValueError(f"draw must be one of {BATCH_DRAWS}; got {draw!r}")


def visit_step_factor(share: float, alpha: float = _RMSPROP_ALPHA) -> float:
    """How many times ``lr`` RMSprop's step on a missing cell is, each time its row is drawn,
    when each step draws a ``share`` of the rows.

    A cell whose row is not drawn has a zero gradient, so its running mean of squared gradients
    decays by ``alpha`` a step while its value stays put. Rows are drawn about every ``1 / share``
    steps, so that mean settles near ``(1 - alpha) / (1 - alpha ** (1 / share))`` times the
    squared gradient, and the step it normalises is the square root of the inverse times ``lr``:
    1 when every row is in every batch, and larger the rarer a row is drawn.
    """
    share = min(1.0, share)
    return math.sqrt((1.0 - alpha ** (1.0 / share)) / (1.0 - alpha))


def cell_rate(lr: float, rows_per_step: int, n_rows: int, *, correct: bool) -> float:
    """RMSprop rate of the missing cells when ``rows_per_step`` of ``n_rows`` rows are drawn.

    With ``correct``, ``lr`` is divided by the growth of :func:`visit_step_factor` beyond a share
    of 0.5, so that each visit's step stays what it is when half the rows are drawn; at a share
    of 0.5 or more the rate is ``lr``. Without, it is ``lr``.
    """
    if not correct:
        return lr
    factor = visit_step_factor(rows_per_step / n_rows) / visit_step_factor(_REFERENCE_SHARE)
    return lr / max(1.0, factor)


def default_transform_iter(n_new: int, per_batch: int, max_iter: int) -> int:
    """Enough steps for each new row to take part in about 200 of them, at most ``max_iter``."""
    wanted = math.ceil(200 * n_new / per_batch)
    return max(1, min(max(wanted, 200), max_iter))


def run_steps(
    step: Callable[[int], TransportTerms],
    optimizer: RMSprop | None,
    n_iter: int,
    *,
    device: torch.device,
    dtype: torch.dtype,
    stage: str,
    owner: str,
    lr: float,
    verbose: int = 0,
    callback: Callable[[FitProgress], bool | None] | None = None,
    monitor: StopMonitor | None = None,
    after_step: Callable[[], None] | None = None,
) -> StepHistory:
    """Run up to ``n_iter`` optimisation steps; returns the records of the steps run.

    ``step(it)`` returns the step's loss and the mean pairwise cost of its batches; with an
    ``optimizer`` the loss is minimised by one backward pass and one optimiser step (``None``:
    it is only recorded). The losses are checked to be finite every 100 steps and at the end
    (``FloatingPointError`` names the first bad step). With ``verbose``, progress goes to stderr
    ten times; ``callback`` gets a :class:`FitProgress` after every step and stops the loop by
    returning ``True``; ``monitor`` may stop it too. ``after_step`` is called after every
    optimiser step (a projection of the parameters, say).

    The records stay on the device: without ``callback`` the loop reads them on the host only
    for the finiteness check, the ``verbose`` lines and at the end (the ``monitor`` and ``step``
    may read more); a ``callback`` gets every step's values, read every step.
    """
    # Both records stay on the device: no step waits for a transfer to the host.
    history = torch.empty(n_iter, device=device, dtype=dtype)
    mean_costs = torch.empty(n_iter, device=device, dtype=dtype)
    report_every = max(1, n_iter // 10)
    started = time.perf_counter()
    done = 0
    for it in range(n_iter):
        try:
            terms = step(it)
        except FloatingPointError:  # non-finite transport costs, found before the loss
            raise _diverged(stage, owner, lr, it + 1) from None
        loss = terms.loss
        if optimizer is not None:
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if after_step is not None:
                after_step()
        history[it] = loss.detach()
        mean_costs[it] = terms.mean_cost
        done = it + 1
        if done % 100 == 0 or done == n_iter:
            _check_finite(history[:done], stage, owner, lr)
        if verbose and (done % report_every == 0 or done == n_iter):
            per_it = (time.perf_counter() - started) / done * 1e3
            print(
                f"{owner} {stage}: iteration {done}/{n_iter}, loss "
                f"{float(loss.detach()):.5f} ({per_it:.1f} ms/iteration)",
                file=sys.stderr,
            )
        if callback is not None:
            value, mean_cost = torch.stack([history[it], mean_costs[it]]).tolist()
            ratio = value / mean_cost if mean_cost > 0 else math.nan
            if callback(FitProgress(done, n_iter, value, stage, ratio)) is True:
                break
        if monitor is not None and done % monitor.every == 0 and monitor.should_stop(done):
            if verbose:
                print(
                    f"{owner} {stage}: early stop at iteration {done}; best held-out "
                    f"error at iteration {monitor.best_iteration}",
                    file=sys.stderr,
                )
            break
    if monitor is not None and done % monitor.every:  # the steps since the last look count too
        monitor.should_stop(done)
    losses = history[:done].double()
    means = mean_costs[:done].double()
    ratios = torch.where(means > 0, losses / means, torch.full_like(losses, math.nan))
    return StepHistory(loss=losses.cpu().numpy(), cost_ratio=ratios.cpu().numpy())


def _check_finite(history: Tensor, stage: str, owner: str, lr: float) -> None:
    if not bool(torch.isfinite(history).all()):
        first = int((~torch.isfinite(history)).nonzero()[0, 0]) + 1
        raise _diverged(stage, owner, lr, first)


def _diverged(stage: str, owner: str, lr: float, iteration: int) -> FloatingPointError:
    return FloatingPointError(
        f"{owner} {stage}: the loss became non-finite at iteration {iteration}; lower "
        f"lr (now {lr}) or use dtype='float64'."
    )
