"""Self-supervised scoring on hidden observed cells: which cells to hide, and the monitor that
stops a fit when their error stops improving and restores the best iterate."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from tdm._cells import MissingCells

__all__ = ["VALIDATE_EVERY", "HoldoutMonitor", "holdout_cells"]

VALIDATE_EVERY = 25
"""Steps between two looks at the held-out cells."""


def holdout_cells(
    mask: np.ndarray,
    fraction: float,
    rng: np.random.Generator,
    groups: np.ndarray | None = None,
) -> np.ndarray:
    """A random ``fraction`` of the observed cells (at least one), never a column's last one
    (a column without an observed cell gets none).

    With ``groups`` (the original column of every column of ``mask``, as
    :attr:`tdm._mixed.TableEncoding.groups`), whole cells of the original columns are drawn:
    the coordinates of a categorical cell are held out together.
    """
    if groups is not None:
        firsts = np.unique(groups, return_index=True)[1]
        drawn = holdout_cells(mask[:, firsts], fraction, rng)
        return drawn[:, np.searchsorted(groups[firsts], groups)]
    observed = np.flatnonzero(~mask.ravel())
    n_hold = max(1, round(fraction * observed.size))
    flat = np.zeros(mask.size, dtype=bool)
    flat[rng.choice(observed, size=min(n_hold, observed.size), replace=False)] = True
    holdout = flat.reshape(mask.shape)
    # keep one observed cell per column (a column with none, as a label column of one label
    # whose cells all lie at its centre, has nothing to keep)
    for j in np.flatnonzero((mask | holdout).all(axis=0) & holdout.any(axis=0)):
        holdout[np.flatnonzero(holdout[:, j])[0], j] = False
    return holdout


class HoldoutMonitor:
    """Self-supervised stopping: the error on held-out observed cells, and the best iterate.

    Every :data:`VALIDATE_EVERY` steps and after the last one, the mean absolute error between
    the current values of the held-out cells and their true (standardised) values is computed.
    The best iterate
    (missing cells and network weights) is kept; training stops once it has not improved for
    ``patience`` steps. No ground truth of the really missing cells is used.
    """

    every = VALIDATE_EVERY

    def __init__(
        self,
        cells: MissingCells,
        network: nn.Module,
        holdout: np.ndarray,
        Z: np.ndarray,
        patience: int,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.cells = cells
        self.network = network
        self.index = torch.as_tensor(holdout, device=device)
        self.truth = torch.as_tensor(Z[holdout], device=device, dtype=dtype)
        self.patience = patience
        self.best = self._score()
        # scores[k] is at step k * VALIDATE_EVERY, the last one at the last step
        self.scores: list[float] = [self.best]
        self.best_iteration = 0
        self.best_cells = cells.state()
        self.best_network = _state_copy(network)

    @torch.no_grad()
    def _score(self) -> float:
        return float((self.cells.values()[self.index] - self.truth).abs().mean())

    @torch.no_grad()
    def should_stop(self, iteration: int) -> bool:
        """Score the held-out cells; keep the iterate if best; whether patience ran out."""
        score = self._score()
        self.scores.append(score)
        if score < self.best * (1 - 1e-4):
            self.best, self.best_iteration = score, iteration
            self.best_cells = self.cells.state()
            self.best_network = _state_copy(self.network)
        return iteration - self.best_iteration >= self.patience

    @torch.no_grad()
    def restore_best(self) -> int:
        """Put the best iterate back in place; returns its iteration (0: the initial values)."""
        self.cells.load_state(self.best_cells)
        self.network.load_state_dict(self.best_network)
        return self.best_iteration


def _state_copy(network: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in network.state_dict().items()}
