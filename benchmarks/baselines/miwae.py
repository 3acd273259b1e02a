"""MIWAE: importance-weighted autoencoder trained on incomplete data.

References
----------
P.-A. Mattei and J. Frellsen. MIWAE: Deep generative modelling and imputation of incomplete data
sets. ICML 2019.

Y. Burda, R. Grosse and R. Salakhutdinov. Importance weighted autoencoders. ICLR 2016.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn
from torch.nn.functional import softplus

from benchmarks.baselines._base import RandomState
from benchmarks.baselines._torch import (
    TRAINING_CONSTRAINTS,
    ColumnScaling,
    TorchImputer,
    adam_step,
    make_generator,
    mlp,
)
from tdm._seeds import spawn_seeds
from tdm._validation import Interval, Options, store_params

__all__ = ["MIWAEImputer"]

_LOG_2PI = math.log(2.0 * math.pi)
# Elements of the largest (samples x rows x width) tensor built at once when imputing.
_IMPUTE_BUDGET = 2**24


class MIWAEImputer(TorchImputer):
    """MIWAE (Mattei & Frellsen, 2019): a deep latent variable model fitted to observed cells.

    A Gaussian encoder ``q(z | x_obs)`` (missing cells at 0) and a Student's t or Gaussian
    decoder ``p(x | z)`` are trained on the importance-weighted bound over the observed cells
    with ``n_importance`` samples. The missing cells are imputed by self-normalised importance
    sampling of ``E[x_miss | x_obs]`` with ``n_imputation_samples`` draws. Columns are
    standardised with their observed mean and standard deviation.

    Parameters
    ----------
    latent_dim : int or None, default=None
        Latent dimension; ``None``: ``max(n_features - 1, 1)``.
    hidden_dim : int, default=128
        Width of the two hidden tanh layers of both networks.
    n_importance : int, default=20
        Importance samples per row in the training bound.
    n_imputation_samples : int, default=1000
        Importance samples per row when imputing.
    decoder : {"student_t", "gaussian"}, default="student_t"
        Observation model (Student's t with ``3 + softplus`` degrees of freedom).
    max_iter : int, default=5000
        Training steps.
    batch_size, lr, device, random_state
        As in :class:`~benchmarks.baselines._torch.TorchImputer` (defaults 64 and 1e-3).

    Attributes
    ----------
    encoder_, decoder_ : torch.nn.Sequential
        The trained networks.
    loss_history_ : ndarray of shape (max_iter,)
        Negative bound of each mini-batch.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **TRAINING_CONSTRAINTS,
        **{
            name: [Interval(Integral, 1, None)]
            for name in ("hidden_dim", "n_importance", "n_imputation_samples")
        },
        "latent_dim": [Interval(Integral, 1, None), None],
        "decoder": [Options(("student_t", "gaussian"))],
    }

    def __init__(
        self,
        *,
        latent_dim: int | None = None,
        hidden_dim: int = 128,
        n_importance: int = 20,
        n_imputation_samples: int = 1000,
        decoder: Literal["student_t", "gaussian"] = "student_t",
        max_iter: int = 5000,
        batch_size: int = 64,
        lr: float = 1e-3,
        device: str | torch.device = "auto",
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    def _log_weights(
        self, x: torch.Tensor, m: torch.Tensor, n_samples: int, generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log importance weights ``(S, B)`` and decoder locations ``(S, B, D)`` for rows ``x``."""
        d, k = x.shape[1], self.latent_dim_
        out = self.encoder_(x)
        mu, sigma = out[:, :k], softplus(out[:, k:]) + 1e-4
        eps = torch.randn((n_samples, *mu.shape), generator=generator, device=x.device)
        z = mu + sigma * eps
        params = self.decoder_(z)
        loc = params[..., :d]
        scale = softplus(params[..., d : 2 * d]) + 1e-3
        if self.decoder == "student_t":
            df = softplus(params[..., 2 * d :]) + 3.0
            log_px = torch.distributions.StudentT(df, loc, scale, validate_args=False).log_prob(x)
        else:
            log_px = -0.5 * ((x - loc) / scale) ** 2 - torch.log(scale) - 0.5 * _LOG_2PI
        log_px_obs = (log_px * m).sum(-1)
        log_pz = (-0.5 * z**2 - 0.5 * _LOG_2PI).sum(-1)
        log_qz = (-0.5 * eps**2 - torch.log(sigma) - 0.5 * _LOG_2PI).sum(-1)
        return log_px_obs + log_pz - log_qz, loc

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        init_seed, train_seed, _ = self._start(3)
        n, d = X.shape
        self.latent_dim_ = self.latent_dim if self.latent_dim is not None else max(d - 1, 1)
        self.scaling_ = ColumnScaling(X)

        init = make_generator(init_seed, torch.device("cpu"))
        h, n_out = self.hidden_dim, (3 if self.decoder == "student_t" else 2) * d
        self.encoder_ = mlp([d, h, h, 2 * self.latent_dim_], nn.Tanh, init).to(self.device_)
        self.decoder_ = mlp([self.latent_dim_, h, h, n_out], nn.Tanh, init).to(self.device_)
        params = [*self.encoder_.parameters(), *self.decoder_.parameters()]
        optimizer = torch.optim.Adam(params, lr=self.lr)

        _, missing, x_all = self.scaling_.start(X, mask, self.device_)
        m_all = (~missing).float()
        rng = make_generator(train_seed, self.device_)
        log_k = math.log(self.n_importance)
        losses = torch.empty(self.max_iter, device=self.device_)
        for it, idx in enumerate(self._batches(n, self.max_iter, rng)):
            log_w, _ = self._log_weights(x_all[idx], m_all[idx], self.n_importance, rng)
            losses[it] = adam_step(optimizer, -(torch.logsumexp(log_w, dim=0) - log_k).mean())
        self.encoder_.eval()
        self.decoder_.eval()
        self.loss_history_ = losses.double().cpu().numpy()
        self.n_iter_ = self.max_iter

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        rng = make_generator(spawn_seeds(self.seed_, 3)[2], self.device_)
        _, missing, x = self.scaling_.start(X, mask, self.device_)
        m = (~missing).float()
        completed = np.where(mask, 0.0, X)
        rows = np.flatnonzero(mask.any(axis=1))
        n_samples = self.n_imputation_samples
        width = max(self.hidden_dim, 3 * X.shape[1], 1)
        chunk = max(1, _IMPUTE_BUDGET // (n_samples * width))
        with torch.no_grad():
            for start in range(0, rows.size, chunk):
                idx = torch.as_tensor(rows[start : start + chunk], device=self.device_)
                log_w, loc = self._log_weights(x[idx], m[idx], n_samples, rng)
                weights = torch.softmax(log_w, dim=0).unsqueeze(-1)
                mean = self.scaling_.to_array((weights * loc).sum(0))
                completed[rows[start : start + chunk]] = mean
        return completed
