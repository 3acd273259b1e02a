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
from numbers import Real
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from benchmarks.baselines._base import RandomState
from benchmarks.baselines._flow import FlowImputer, flow_log_density
from benchmarks.baselines._torch import adam_step, make_generator
from tdm._validation import Interval, store_params

__all__ = ["EMFlowImputer"]

# Rows per chunk in the E-step (each row gets its own D x D system).
_CHUNK = 4096
# Added to the latent covariance's diagonal so that it stays positive definite.
_JITTER = 1e-4


class EMFlowImputer(FlowImputer):
    """EMFlow (Ma & Ghosh, 2021): a flow maps rows to a latent space where a Gaussian
    ``N(μ, Σ)`` is fitted by online EM and the missing coordinates are conditional expectations.

    On standardised rows started at the column means with ``(μ, Σ) = (0, I)``, each of
    ``max_iter`` rounds fits the flow (negative log-likelihood plus ``reconstruction_weight``
    times the observed cells' error after conditioning), then runs an E-step (the missing latent
    coordinates take their conditional mean, the decoded row, clipped, gives the missing cells)
    and an online M-step of step ``r^-0.6``. :meth:`transform` runs ``max_iter`` E-steps from
    the column means.

    Parameters
    ----------
    n_blocks : int, default=3
        Coupling blocks of the flow.
    hidden_dim : int or None, default=None
        Hidden width of the flow; ``None``: ``max(2 * n_features, 16)``.
    max_iter : int, default=10
        Rounds.
    steps_per_round : int, default=50
        Flow mini-batch steps per round.
    batch_size : int, default=256
        Rows per mini-batch.
    lr : float, default=1e-4
        Adam learning rate.
    reconstruction_weight : float, default=10.0
        Weight of the observed cells' reconstruction error in the flow's loss.
    device, random_state
        As in :class:`~benchmarks.baselines._torch.TorchImputer`.

    Attributes
    ----------
    flow_, latent_mean_, latent_cov_
        The fitted flow, ``μ`` and ``Σ``.
    loss_history_ : ndarray of shape (max_iter,)
        The flow's mean loss per round.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **FlowImputer._PARAMETER_CONSTRAINTS,
        "reconstruction_weight": [Interval(Real, 0, None)],
    }

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

    def _complete(self, completion: Tensor, missing: Tensor) -> Tensor:
        return self._e_step(completion, missing, self.latent_mean_, self.latent_cov_)[0]

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        flow_seed, train_seed = self._start(2)
        n, d = X.shape
        self._build_flow(X, flow_seed)
        optimizer = torch.optim.Adam(self.flow_.parameters(), lr=self.lr)
        x, missing, completion = self.scaling_.start(X, mask, self.device_)
        observed = (~missing).float()
        mean = torch.zeros(d, device=self.device_)
        cov = torch.eye(d, device=self.device_)
        rng = make_generator(train_seed, self.device_)
        history = np.zeros(self.max_iter)
        for r in range(1, self.max_iter + 1):
            precision_chol = torch.linalg.cholesky(torch.linalg.inv(cov))
            for idx in self._batches(n, self.steps_per_round, rng):
                log_p, z = flow_log_density(self.flow_, completion[idx], mean, precision_chol)
                z_hat, _ = self._condition(z, missing[idx], mean, cov)
                error = (self.flow_.inverse(z_hat) - completion[idx]) ** 2 * observed[idx]
                fit = error.sum() / observed[idx].sum().clamp(min=1.0)
                loss = -log_p.mean() / d + self.reconstruction_weight * fit
                history[r - 1] += float(adam_step(optimizer, loss)) / self.steps_per_round
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
