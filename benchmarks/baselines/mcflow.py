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

    The rows are standardised with each column's observed mean and standard deviation. A RealNVP
    flow ``z = f(x)`` (affine couplings, :class:`tdm.coupling.InvertibleNetwork`) with a
    standard normal base density models the completed rows, and a network ``g`` maps a row's
    latent ``z`` to ``z + g(z)``, a latent whose decoding ``f⁻¹(z + g(z))`` should reproduce the
    row's observed cells while being likely under the base density. The fit alternates, for
    ``max_iter`` rounds (the paper's iterative scheme, which breaks the circularity of learning
    a density from data that it must complete):

    1. the flow: ``steps_per_round`` Adam steps on mini-batches of the current completion, its
       missing cells jittered by Gaussian noise (``noise``), maximising
       ``log p(x) = log N(f(x); 0, I) + log |det ∂f/∂x|``;
    2. the latent network, the flow held fixed: ``steps_per_round`` Adam steps minimising the
       mean squared error of the decoding ``x̂ = f⁻¹(z + g(z))`` on the observed cells plus
       ``likelihood_weight`` times its negative log-likelihood under the flow, per coordinate;
    3. the completion: every missing cell takes the value of ``f⁻¹(z + g(z))``, clipped to its
       column's observed range.

    The completion starts from the column means, and the flow gets one round of fitting on
    them before the first update. The paper starts instead from a Monte Carlo search (the
    decoded base-density draw nearest to each row on its observed cells); with a flow fitted on
    a few hundred rows that start was worse than the column means. :meth:`transform` repeats
    the ``max_iter`` completion updates from the column means with the fitted networks, so it
    imputes new rows as it does the training rows.

    Parameters
    ----------
    n_blocks : int, default=3
        Affine-coupling blocks of the flow.
    hidden_dim : int or None, default=None
        Hidden width of the flow's conditioners and of ``g`` (two hidden ReLU layers);
        ``None`` means ``max(2 * n_features, 16)``.
    max_iter : int, default=10
        Rounds of the alternation.
    steps_per_round : int, default=50
        Mini-batch steps of each network per round.
    batch_size : int, default=256
        Rows per mini-batch (capped at ``n_samples``).
    lr : float, default=3e-4
        Adam learning rate of both networks.
    likelihood_weight : float, default=0.1
        Weight of the decoding's negative log-likelihood in the loss of ``g``.
    noise : float, default=0.3
        Standard deviation (in column standard deviations) of the Gaussian noise added to the
        missing cells of each mini-batch the flow is fitted on, so that the flow cannot fold
        its density onto the imputations, which are functions of the observed cells.
    device, random_state
        The device (``"auto"``: CUDA when available) and the seed (keyword-only), as for every
        neural baseline (:class:`~benchmarks.baselines._torch.TorchImputer`).

    Attributes
    ----------
    flow_ : tdm.coupling.InvertibleNetwork
        The fitted flow.
    latent_net_ : torch.nn.Sequential
        The fitted ``g``.
    scaling_ : ColumnScaling
        Observed mean and scale of each column.
    loss_history_ : ndarray of shape (max_iter, 2)
        Per round, the flow's mean negative log-likelihood and the mean loss of ``g``.
    n_iter_ : int
        Rounds run (``max_iter``).
    device_, seed_, n_features_in_
        See :class:`~benchmarks.baselines._torch.TorchImputer`.
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
