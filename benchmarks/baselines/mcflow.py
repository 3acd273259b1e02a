"""MCFlow: a normalizing flow and a latent-space network, alternately fitted to a completion.

References
----------
T. W. Richardson, W. Wu, L. Lin, B. Xu and E. A. Bernal. MCFlow: Monte Carlo flow models for
data imputation. CVPR 2020.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from benchmarks.baselines._base import BaseImputer, RandomState, resolve_seed
from benchmarks.baselines._flow import ColumnScaling, build_flow, flow_log_density, start_from_means
from benchmarks.baselines._torch import make_generator, mlp, spawn_seeds
from tdm._validation import Interval, resolve_device, store_params

__all__ = ["MCFlowImputer"]

# Rows per chunk when a whole table goes through the networks at once.
_CHUNK = 4096


class MCFlowImputer(BaseImputer):
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
    a few hundred rows that start was worse than the column means (BENCHMARKS.md, "The paper's
    other baselines"). :meth:`transform` repeats the ``max_iter`` completion updates from the
    column means with the fitted networks, so it imputes new rows as it does the training rows.

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
    device : str or torch.device, default="auto"
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
    random_state : int, numpy.random.RandomState or None, default=None
        Seed (keyword-only); weights, batches and draws come from local generators.

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
    device_ : torch.device
        Device used.
    seed_ : int
        The integer seed used.
    n_features_in_ : int
        Number of columns seen in :meth:`fit`.
    """

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

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **{
            name: [Interval(Integral, 1, None)]
            for name in ("n_blocks", "max_iter", "steps_per_round", "batch_size")
        },
        "hidden_dim": [Interval(Integral, 1, None), None],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "likelihood_weight": [Interval(Real, 0, None)],
        "noise": [Interval(Real, 0, None)],
    }

    def _decode(self, x: Tensor) -> Tensor:
        """``f⁻¹(z + g(z))`` with ``z = f(x)``, row by row in chunks, without gradients."""
        with torch.no_grad():
            parts = []
            for start in range(0, x.shape[0], _CHUNK):
                z = self.flow_(x[start : start + _CHUNK])
                parts.append(self.scaling_.clip(self.flow_.inverse(z + self.latent_net_(z))))
            return torch.cat(parts)

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        self.device_ = resolve_device(self.device, type(self).__name__)
        self.seed_ = resolve_seed(self.random_state)
        flow_seed, net_seed, train_seed = spawn_seeds(self.seed_, 3)
        n, d = X.shape
        width = self.hidden_dim if self.hidden_dim is not None else max(2 * d, 16)
        self.scaling_ = ColumnScaling(X)
        self.flow_ = build_flow(d, self.n_blocks, width, flow_seed, self.device_)
        init = make_generator(net_seed, torch.device("cpu"))
        self.latent_net_ = mlp([d, width, width, d], nn.ReLU, init).to(self.device_)
        flow_opt = torch.optim.Adam(self.flow_.parameters(), lr=self.lr)
        net_opt = torch.optim.Adam(self.latent_net_.parameters(), lr=self.lr)

        x = self.scaling_.to_tensor(X, self.device_)
        missing = torch.as_tensor(mask, device=self.device_)
        observed = (~missing).float()
        completion = start_from_means(x, missing)
        rng = make_generator(train_seed, self.device_)
        batch = min(self.batch_size, n)
        history = np.zeros((self.max_iter, 2))
        for r in range(self.max_iter + 1):
            flow_loss = 0.0
            for _ in range(self.steps_per_round):
                idx = torch.randperm(n, generator=rng, device=self.device_)[:batch]
                rows = completion[idx]
                if self.noise > 0.0:
                    jitter = torch.randn(rows.shape, generator=rng, device=rows.device)
                    rows = rows + self.noise * jitter * missing[idx]
                loss = -flow_log_density(self.flow_, rows)[0].mean() / d
                flow_opt.zero_grad()
                loss.backward()
                flow_opt.step()
                flow_loss += float(loss.detach()) / self.steps_per_round
            if r == 0:  # one round of flow fitting on the column-mean start first
                continue
            net_loss = 0.0
            self.flow_.requires_grad_(False)  # held fixed: gradients reach g through it only
            for _ in range(self.steps_per_round):
                idx = torch.randperm(n, generator=rng, device=self.device_)[:batch]
                with torch.no_grad():
                    z = self.flow_(completion[idx])
                decoded = self.flow_.inverse(z + self.latent_net_(z))
                error = (decoded - completion[idx]) ** 2
                fit = (error * observed[idx]).sum() / observed[idx].sum().clamp(min=1.0)
                log_p, _ = flow_log_density(self.flow_, decoded)
                loss = fit - self.likelihood_weight * log_p.mean() / d
                net_opt.zero_grad()
                loss.backward()
                net_opt.step()
                net_loss += float(loss.detach()) / self.steps_per_round
            self.flow_.requires_grad_(True)
            completion = torch.where(missing, self._decode(completion), x)
            history[r - 1] = flow_loss, net_loss
        self.flow_.zero_grad(set_to_none=True)
        self.latent_net_.zero_grad(set_to_none=True)
        self.loss_history_ = history
        self.n_iter_ = self.max_iter

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        x = self.scaling_.to_tensor(X, self.device_)
        missing = torch.as_tensor(mask, device=self.device_)
        completion = start_from_means(x, missing)
        for _ in range(self.max_iter):
            completion = torch.where(missing, self._decode(completion), x)
        return self.scaling_.to_array(completion)
