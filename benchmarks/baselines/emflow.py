"""EMFlow: imputation in a flow's latent space by online EM on a Gaussian.

References
----------
Q. Ma and S. K. Ghosh. EMFlow: Data imputation in latent space via EM and deep flow models.
arXiv:2106.04804, 2021.

O. Cappé and E. Moulines. On-line expectation-maximization algorithm for latent data models.
JRSS B, 2009.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from benchmarks.baselines._base import BaseImputer, RandomState, resolve_seed
from benchmarks.baselines._flow import ColumnScaling, build_flow, flow_log_density, start_from_means
from benchmarks.baselines._torch import make_generator, spawn_seeds
from tdm._validation import Interval, resolve_device, store_params

__all__ = ["EMFlowImputer"]

# Rows per chunk in the E-step (each row gets its own D x D system).
_CHUNK = 4096
# Added to the latent covariance's diagonal so that it stays positive definite.
_JITTER = 1e-4


class EMFlowImputer(BaseImputer):
    """EMFlow (Ma & Ghosh, 2021): a flow maps rows to a latent space where a Gaussian is fitted
    by online EM and the missing coordinates are conditional expectations.

    The rows are standardised with each column's observed mean and standard deviation. A RealNVP
    flow ``z = f(x)`` (:class:`tdm.coupling.InvertibleNetwork`) maps a completed row to a
    latent with density ``N(μ, Σ)``. The fit alternates, for ``max_iter`` rounds, the flow's
    update and one online EM step of ``(μ, Σ)`` (the paper's alternation):

    1. the flow: ``steps_per_round`` Adam steps on mini-batches of the current completion,
       minimising the negative log-likelihood ``-log N(f(x); μ, Σ) - log |det ∂f/∂x|`` (per
       coordinate) plus ``reconstruction_weight`` times the mean squared error, on the observed
       cells, of the row decoded from its latent conditioned as in the E-step below (the flow
       learns a latent space in which that conditioning keeps the observed cells);
    2. E-step, on every row: with ``z = f(x)`` and ``o`` the row's observed columns, the latent
       coordinates at the row's missing columns ``m`` take their conditional expectation
       ``μ_m + Σ_mo Σ_oo⁻¹ (z_o - μ_o)`` (conditional covariance
       ``Σ_mm - Σ_mo Σ_oo⁻¹ Σ_om``); the decoded row ``f⁻¹(ẑ)``, clipped to each column's
       observed range, gives the missing cells their new values;
    3. M-step, online (Cappé & Moulines): ``μ`` and ``Σ`` move a step ``r^-0.6`` (round
       ``r`` from 1, so the first step replaces them) toward the E-step's mean and covariance,
       conditional covariances included.

    The completion starts from the column means, ``(μ, Σ) = (0, I)``. :meth:`transform` runs
    ``max_iter`` E-steps with the fitted flow and Gaussian from the column means, so it imputes
    new rows as it does the training rows.

    Parameters
    ----------
    n_blocks : int, default=3
        Affine-coupling blocks of the flow.
    hidden_dim : int or None, default=None
        Hidden width of the flow's conditioners; ``None`` means ``max(2 * n_features, 16)``.
    max_iter : int, default=10
        Rounds of the alternation.
    steps_per_round : int, default=50
        Flow mini-batch steps per round.
    batch_size : int, default=256
        Rows per mini-batch (capped at ``n_samples``).
    lr : float, default=1e-4
        Adam learning rate of the flow.
    reconstruction_weight : float, default=10.0
        Weight of the observed cells' reconstruction error in the flow's loss.
    device : str or torch.device, default="auto"
        ``"auto"`` (CUDA when available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
    random_state : int, numpy.random.RandomState or None, default=None
        Seed (keyword-only); weights and batches come from local generators.

    Attributes
    ----------
    flow_ : tdm.coupling.InvertibleNetwork
        The fitted flow.
    latent_mean_ : Tensor of shape (n_features,)
        ``μ``.
    latent_cov_ : Tensor of shape (n_features, n_features)
        ``Σ``.
    scaling_ : ColumnScaling
        Observed mean and scale of each column.
    loss_history_ : ndarray of shape (max_iter,)
        The flow's mean loss per round: negative log-likelihood per coordinate plus the
        weighted reconstruction error.
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
        lr: float = 1e-4,
        reconstruction_weight: float = 10.0,
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
        "reconstruction_weight": [Interval(Real, 0, None)],
    }

    def _condition(
        self, z: Tensor, missing: Tensor, mean: Tensor, cov: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Latents with the missing coordinates at their conditional mean, and the summed
        conditional covariance."""
        o = (~missing).to(cov.dtype)
        both = o.unsqueeze(2) * o.unsqueeze(1)
        # Σ_oo padded with the identity on the missing block: its inverse, zeroed on that block,
        # is Q, with Σ Q (z - μ) the conditional shift and Σ Q Σ the covariance's reduction.
        q = torch.linalg.inv(both * cov + torch.diag_embed(1.0 - o)) * both
        z_hat = mean + torch.einsum("ij,bjk,bk->bi", cov, q, z - mean)
        return z_hat, (cov - cov @ q @ cov).sum(dim=0)

    def _e_step(
        self, completion: Tensor, missing: Tensor, mean: Tensor, cov: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Decoded rows (clipped), their conditional latents and summed conditional covariance."""
        decoded, latents = [], []
        cond_cov = cov.new_zeros(cov.shape)
        with torch.no_grad():
            for start in range(0, completion.shape[0], _CHUNK):
                rows = slice(start, start + _CHUNK)
                z = self.flow_(completion[rows])
                z_hat, part = self._condition(z, missing[rows], mean, cov)
                cond_cov += part
                latents.append(z_hat)
                decoded.append(self.scaling_.clip(self.flow_.inverse(z_hat)))
        return torch.cat(decoded), torch.cat(latents), cond_cov

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        self.device_ = resolve_device(self.device, type(self).__name__)
        self.seed_ = resolve_seed(self.random_state)
        flow_seed, train_seed = spawn_seeds(self.seed_, 2)
        n, d = X.shape
        width = self.hidden_dim if self.hidden_dim is not None else max(2 * d, 16)
        self.scaling_ = ColumnScaling(X)
        self.flow_ = build_flow(d, self.n_blocks, width, flow_seed, self.device_)
        optimizer = torch.optim.Adam(self.flow_.parameters(), lr=self.lr)
        x = self.scaling_.to_tensor(X, self.device_)
        missing = torch.as_tensor(mask, device=self.device_)
        observed = (~missing).float()
        completion = start_from_means(x, missing)
        mean = torch.zeros(d, device=self.device_)
        cov = torch.eye(d, device=self.device_)
        rng = make_generator(train_seed, self.device_)
        batch = min(self.batch_size, n)
        history = np.zeros(self.max_iter)
        for r in range(1, self.max_iter + 1):
            precision_chol = torch.linalg.cholesky(torch.linalg.inv(cov))
            for _ in range(self.steps_per_round):
                idx = torch.randperm(n, generator=rng, device=self.device_)[:batch]
                log_p, z = flow_log_density(self.flow_, completion[idx], mean, precision_chol)
                z_hat, _ = self._condition(z, missing[idx], mean, cov)
                error = (self.flow_.inverse(z_hat) - completion[idx]) ** 2 * observed[idx]
                fit = error.sum() / observed[idx].sum().clamp(min=1.0)
                loss = -log_p.mean() / d + self.reconstruction_weight * fit
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                history[r - 1] += float(loss.detach()) / self.steps_per_round
            decoded, z_hat, cond_cov = self._e_step(completion, missing, mean, cov)
            completion = torch.where(missing, decoded, x)
            step = r**-0.6
            new_mean = z_hat.mean(dim=0)
            centred = z_hat - new_mean
            new_cov = (centred.T @ centred + cond_cov) / n
            mean = (1.0 - step) * mean + step * new_mean
            cov = (1.0 - step) * cov + step * new_cov
            cov = 0.5 * (cov + cov.T) + _JITTER * torch.eye(d, device=self.device_)
        self.flow_.zero_grad(set_to_none=True)
        self.latent_mean_, self.latent_cov_ = mean, cov
        self.loss_history_ = history
        self.n_iter_ = self.max_iter

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        x = self.scaling_.to_tensor(X, self.device_)
        missing = torch.as_tensor(mask, device=self.device_)
        completion = start_from_means(x, missing)
        for _ in range(self.max_iter):
            decoded, _, _ = self._e_step(completion, missing, self.latent_mean_, self.latent_cov_)
            completion = torch.where(missing, decoded, x)
        return self.scaling_.to_array(completion)
