"""GAIN: generative adversarial imputation nets with the hint mechanism.

References
----------
J. Yoon, J. Jordon and M. van der Schaar. GAIN: Missing data imputation using generative
adversarial nets. ICML 2018.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from benchmarks.baselines._base import RandomState
from benchmarks.baselines._torch import (
    TRAINING_CONSTRAINTS,
    TorchImputer,
    adam_step,
    make_generator,
    mlp,
)
from tdm._seeds import spawn_seeds
from tdm._validation import Interval, store_params

__all__ = ["GAINImputer"]

_EPS = 1e-8


class GAINImputer(TorchImputer):
    """GAIN (Yoon et al., 2018): a generator imputes, a discriminator guesses which cells were.

    Data are min-max scaled per column with the observed values. The generator fills the
    missing cells from the row, its mask and ``U(0, 0.01)`` noise; the discriminator sees the
    imputed row and a hint that reveals each cell's indicator with probability ``hint_rate``,
    and is scored on the hidden ones. The generator's loss is the adversarial term plus
    ``alpha`` times the squared error on observed cells. Both networks are 3 layers of width
    ``n_features``, trained alternately with Adam for ``max_iter`` mini-batch steps.

    Parameters
    ----------
    max_iter : int, default=10000
        Training iterations (one step of each network).
    alpha : float, default=100.0
        Weight of the reconstruction loss.
    hint_rate : float, default=0.9
        Probability that a cell's indicator is revealed to the discriminator.
    batch_size, lr, device, random_state
        As in :class:`~benchmarks.baselines._torch.TorchImputer` (defaults 128 and 1e-3).

    Attributes
    ----------
    generator_ : torch.nn.Sequential
        The trained generator.
    loss_history_ : ndarray of shape (max_iter, 2)
        Discriminator and generator losses per iteration.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **TRAINING_CONSTRAINTS,
        "hint_rate": [Interval(Real, 0, 1)],
        "alpha": [Interval(Real, 0, None)],
    }

    def __init__(
        self,
        *,
        max_iter: int = 10_000,
        batch_size: int = 128,
        alpha: float = 100.0,
        hint_rate: float = 0.9,
        lr: float = 1e-3,
        device: str | torch.device = "auto",
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    def _scaled(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> torch.Tensor:
        scaled = np.where(mask, 0.0, (X - self.data_min_) / self.data_range_)
        return torch.as_tensor(scaled, dtype=torch.float32, device=self.device_)

    def _generate(
        self, x: torch.Tensor, m: torch.Tensor, generator: torch.Generator
    ) -> torch.Tensor:
        noise = 0.01 * torch.rand(x.shape, generator=generator, device=x.device)
        x_tilde = m * x + (1.0 - m) * noise
        out: torch.Tensor = self.generator_(torch.cat([x_tilde, m], dim=1))
        return out

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        init_seed, train_seed, _ = self._start(3)
        self.data_min_ = np.nanmin(X, axis=0)
        data_range = np.nanmax(X, axis=0) - self.data_min_
        self.data_range_ = np.where(data_range > 0.0, data_range, 1.0)
        n, d = X.shape
        init = make_generator(init_seed, torch.device("cpu"))
        self.generator_ = mlp([2 * d, d, d, d], nn.ReLU, init, xavier=True)
        self.generator_.append(nn.Sigmoid())
        discriminator = mlp([2 * d, d, d, d], nn.ReLU, init, xavier=True)
        discriminator.append(nn.Sigmoid())
        self.generator_.to(self.device_)
        discriminator.to(self.device_)
        opt_g = torch.optim.Adam(self.generator_.parameters(), lr=self.lr)
        opt_d = torch.optim.Adam(discriminator.parameters(), lr=self.lr)

        data = self._scaled(X, mask)
        observed = torch.as_tensor(~mask, dtype=torch.float32, device=self.device_)
        rng = make_generator(train_seed, self.device_)
        losses = torch.empty((self.max_iter, 2), device=self.device_)
        for it, idx in enumerate(self._batches(n, self.max_iter, rng)):
            x, m = data[idx], observed[idx]
            revealed = torch.rand(m.shape, generator=rng, device=self.device_) < self.hint_rate
            b = revealed.float()
            hint = b * m + 0.5 * (1.0 - b)
            hidden = 1.0 - b  # cells whose indicator the discriminator must guess
            n_hidden = hidden.sum().clamp_min(1.0)

            with torch.no_grad():
                x_hat = m * x + (1.0 - m) * self._generate(x, m, rng)
            prob = discriminator(torch.cat([x_hat, hint], dim=1))
            loss_d = (
                -(
                    hidden * (m * torch.log(prob + _EPS) + (1.0 - m) * torch.log(1.0 - prob + _EPS))
                ).sum()
                / n_hidden
            )
            losses[it, 0] = adam_step(opt_d, loss_d)

            g_out = self._generate(x, m, rng)
            x_hat = m * x + (1.0 - m) * g_out
            prob = discriminator(torch.cat([x_hat, hint], dim=1))
            loss_adv = -(hidden * (1.0 - m) * torch.log(prob + _EPS)).sum() / n_hidden
            loss_rec = ((m * (g_out - x)) ** 2).sum() / m.sum().clamp_min(1.0)
            losses[it, 1] = adam_step(opt_g, loss_adv + self.alpha * loss_rec)
        self.generator_.eval()
        self.loss_history_ = losses.double().cpu().numpy()
        self.n_iter_ = self.max_iter

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        rng = make_generator(spawn_seeds(self.seed_, 3)[2], self.device_)
        x = self._scaled(X, mask)
        m = torch.as_tensor(~mask, dtype=torch.float32, device=self.device_)
        with torch.no_grad():
            g_out = self._generate(x, m, rng).double().cpu().numpy()
        completed: NDArray[np.float64] = g_out * self.data_range_ + self.data_min_
        return completed
