"""MCFlow: a normalizing flow and a latent-space network, alternately fitted to a completion.

References
----------
T. W. Richardson, W. Wu, L. Lin, B. Xu and E. A. Bernal. MCFlow: Monte Carlo flow models for
data imputation. CVPR 2020.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from benchmarks.baselines._base import RandomState
from benchmarks.baselines._flow import FlowImputer, flow_log_density
from benchmarks.baselines._torch import adam_step, make_generator, mlp
from tdm._validation import Interval, store_params

__all__ = ["MCFlowImputer"]

# Rows per chunk when a whole table goes through the networks at once.
_CHUNK = 4096


class MCFlowImputer(FlowImputer):
    """MCFlow (Richardson et al., 2020): alternate density estimation and imputation.

    On standardised rows started at the column means, each of ``max_iter`` rounds fits a RealNVP
    flow ``z = f(x)`` to the completion (missing cells jittered by ``noise``), then a latent
    network ``g`` so that ``f⁻¹(z + g(z))`` reproduces the observed cells and is likely under
    the flow (weight ``likelihood_weight``), then replaces the missing cells by that decoding,
    clipped to each column's observed range. :meth:`transform` repeats the ``max_iter``
    replacements from the column means.

    Parameters
    ----------
    n_blocks : int, default=3
        Coupling blocks of the flow.
    hidden_dim : int or None, default=None
        Hidden width of the flow and of ``g``; ``None``: ``max(2 * n_features, 16)``.
    max_iter : int, default=10
        Rounds.
    steps_per_round : int, default=50
        Mini-batch steps of each network per round.
    batch_size : int, default=256
        Rows per mini-batch.
    lr : float, default=3e-4
        Adam learning rate.
    likelihood_weight : float, default=0.1
        Weight of the decoding's negative log-likelihood in the loss of ``g``.
    noise : float, default=0.3
        Standard deviation of the noise on the missing cells the flow is fitted on.
    device, random_state
        As in :class:`~benchmarks.baselines._torch.TorchImputer`.

    Attributes
    ----------
    flow_, latent_net_
        The fitted flow and ``g``.
    loss_history_ : ndarray of shape (max_iter, 2)
        Per round, the flow's mean negative log-likelihood and the mean loss of ``g``.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **FlowImputer._PARAMETER_CONSTRAINTS,
        "likelihood_weight": [Interval(Real, 0, None)],
        "noise": [Interval(Real, 0, None)],
    }

    def __init__(
        self,
        *,
        n_blocks: int = 3,
        hidden_dim: int | None = None,
        max_iter: int = 10,
        steps_per_round: int = 50,
        batch_size: int = 256,
        lr: float = 3e-4,
        likelihood_weight: float = 0.1,
        noise: float = 0.3,
        device: str | torch.device = "auto",
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    def _complete(self, completion: Tensor, missing: Tensor) -> Tensor:
        """``f⁻¹(z + g(z))`` with ``z = f(x)``, clipped, row by row in chunks, without
        gradients."""
        with torch.no_grad():
            parts = []
            for start in range(0, completion.shape[0], _CHUNK):
                z = self.flow_(completion[start : start + _CHUNK])
                parts.append(self.scaling_.clip(self.flow_.inverse(z + self.latent_net_(z))))
            return torch.cat(parts)

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        flow_seed, net_seed, train_seed = self._start(3)
        n, d = X.shape
        width = self._build_flow(X, flow_seed)
        init = make_generator(net_seed, torch.device("cpu"))
        self.latent_net_ = mlp([d, width, width, d], nn.ReLU, init).to(self.device_)
        flow_opt = torch.optim.Adam(self.flow_.parameters(), lr=self.lr)
        net_opt = torch.optim.Adam(self.latent_net_.parameters(), lr=self.lr)

        x, missing, completion = self.scaling_.start(X, mask, self.device_)
        observed = (~missing).float()
        rng = make_generator(train_seed, self.device_)
        history = np.zeros((self.max_iter, 2))
        for r in range(self.max_iter + 1):
            flow_loss = 0.0
            for idx in self._batches(n, self.steps_per_round, rng):
                rows = completion[idx]
                if self.noise > 0.0:
                    jitter = torch.randn(rows.shape, generator=rng, device=rows.device)
                    rows = rows + self.noise * jitter * missing[idx]
                loss = -flow_log_density(self.flow_, rows)[0].mean() / d
                flow_loss += float(adam_step(flow_opt, loss)) / self.steps_per_round
            if r == 0:  # one round of flow fitting on the column-mean start first
                continue
            net_loss = 0.0
            self.flow_.requires_grad_(False)  # held fixed: gradients reach g through it only
            for idx in self._batches(n, self.steps_per_round, rng):
                with torch.no_grad():
                    z = self.flow_(completion[idx])
                decoded = self.flow_.inverse(z + self.latent_net_(z))
                error = (decoded - completion[idx]) ** 2
                fit = (error * observed[idx]).sum() / observed[idx].sum().clamp(min=1.0)
                log_p, _ = flow_log_density(self.flow_, decoded)
                loss = fit - self.likelihood_weight * log_p.mean() / d
                net_loss += float(adam_step(net_opt, loss)) / self.steps_per_round
            self.flow_.requires_grad_(True)
            completion = self._refine(x, missing, completion)
            history[r - 1] = flow_loss, net_loss
        self.flow_.zero_grad(set_to_none=True)
        self.latent_net_.zero_grad(set_to_none=True)
        self.loss_history_ = history
        self.n_iter_ = self.max_iter
