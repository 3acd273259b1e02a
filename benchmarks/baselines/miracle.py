"""MIRACLE: imputation regularised by a causal graph that includes the missingness indicators.

References
----------
T. Kyono, Y. Zhang, A. Bellot and M. van der Schaar. MIRACLE: Causally-aware imputation via
learning missing data mechanisms. NeurIPS 2021.

X. Zheng, B. Aragam, P. Ravikumar and E. P. Xing. DAGs with NO TEARS: Continuous optimization
for structure learning. NeurIPS 2018.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn
from torch.nn.functional import binary_cross_entropy_with_logits, elu

from benchmarks.baselines._base import RandomState
from benchmarks.baselines._torch import (
    TRAINING_CONSTRAINTS,
    ColumnScaling,
    RefiningImputer,
    adam_step,
    make_generator,
)
from tdm._validation import Interval, store_params

__all__ = ["MIRACLEImputer"]

_CHUNK = 4096


class _Reconstruction(nn.Module):
    """One sub-network per target node (every feature, then every indicator), each fed with
    the features through its own masked input layer; the second layer is shared."""

    def __init__(self, allowed: Tensor, hidden: int, generator: torch.Generator) -> None:
        super().__init__()
        n_targets, n_features = allowed.shape
        self.allowed: Tensor
        self.register_buffer("allowed", allowed.unsqueeze(2))
        bound_in, bound_h = 1.0 / math.sqrt(n_features), 1.0 / math.sqrt(hidden)

        def uniform(shape: tuple[int, ...], bound: float) -> nn.Parameter:
            values = torch.rand(shape, generator=generator) * 2.0 - 1.0
            return nn.Parameter(values * bound)

        self.w_in = uniform((n_targets, n_features, hidden), bound_in)
        self.b_in = uniform((n_targets, hidden), bound_in)
        self.w_mid = uniform((hidden, hidden), bound_h)
        self.b_mid = uniform((hidden,), bound_h)
        self.w_out = uniform((n_targets, hidden), bound_h)
        self.b_out = uniform((n_targets,), bound_h)

    def input_weights(self) -> Tensor:
        """The input layers with the forbidden edges zeroed, shape ``(targets, features, h)``."""
        weights: Tensor = self.w_in * self.allowed
        return weights

    def forward(self, x: Tensor) -> Tensor:
        h = elu(torch.einsum("bi,kih->bkh", x, self.input_weights()) + self.b_in)
        h = elu(h @ self.w_mid + self.b_mid)
        out: Tensor = (h * self.w_out).sum(dim=2) + self.b_out
        return out

    def adjacency(self) -> Tensor:
        """``A[i, k]``: the root mean square of feature ``i``'s input weights into target ``k``."""
        return self.input_weights().pow(2).mean(dim=2).add(1e-12).sqrt().T


class MIRACLEImputer(RefiningImputer):
    """MIRACLE (Kyono et al., 2021): refine a mean imputation with reconstruction networks
    regularised to follow a causal graph that includes the missingness indicators.

    On standardised rows started at the column means, every feature and every missingness
    indicator is reconstructed from the other features by its own network; their input weights
    define a graph ``A``. Adam minimises, over ``max_iter`` mini-batch steps, the observed
    cells' squared error plus ``indicator_weight`` times the indicators' cross-entropy,
    ``dag_weight`` times NOTEARS' acyclicity of the feature graph, ``sparsity_weight`` times
    ``sum A`` and ``moment_weight`` times the gap of each feature's mean. Every
    ``reimpute_every`` steps the missing cells take the clipped reconstructions.
    :meth:`transform` applies the fitted networks ``n_rounds_`` times from the column means.

    Parameters
    ----------
    hidden_dim : int, default=32
        Width of the hidden layers.
    max_iter : int, default=500
        Mini-batch steps.
    reimpute_every : int or None, default=None
        Steps between two re-imputations during the fit; ``None``: none.
    batch_size : int, default=256
        Rows per mini-batch.
    lr : float, default=1e-3
        Adam learning rate.
    dag_weight, sparsity_weight, indicator_weight, moment_weight : float
        Weights of the regularisers (defaults 0.1, 1e-3, 1.0, 0.1).
    device, random_state
        As in :class:`~benchmarks.baselines._torch.TorchImputer`.

    Attributes
    ----------
    network_ : torch.nn.Module
        The fitted reconstruction networks.
    adjacency_ : ndarray of shape (n_features, n_features)
        The learned feature graph (zero diagonal).
    n_rounds_ : int
        Applications of the networks by :meth:`transform`.
    loss_history_ : ndarray of shape (max_iter,)
        Total loss per step.
    """

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **TRAINING_CONSTRAINTS,
        "hidden_dim": [Interval(Integral, 1, None)],
        "reimpute_every": [Interval(Integral, 1, None), None],
        **{
            name: [Interval(Real, 0, None)]
            for name in ("dag_weight", "sparsity_weight", "indicator_weight", "moment_weight")
        },
    }

    def __init__(
        self,
        *,
        hidden_dim: int = 32,
        max_iter: int = 500,
        reimpute_every: int | None = None,
        batch_size: int = 256,
        lr: float = 1e-3,
        dag_weight: float = 0.1,
        sparsity_weight: float = 1e-3,
        indicator_weight: float = 1.0,
        moment_weight: float = 0.1,
        device: str | torch.device = "auto",
        random_state: RandomState = None,
    ) -> None:
        store_params(self, locals())

    def _complete(self, completion: Tensor, missing: Tensor) -> Tensor:
        """The features' reconstructions of every row, clipped, without gradients."""
        d = completion.shape[1]
        with torch.no_grad():
            parts = [
                self.network_(completion[s : s + _CHUNK])[:, :d]
                for s in range(0, completion.shape[0], _CHUNK)
            ]
        return self.scaling_.clip(torch.cat(parts))

    def _rounds(self) -> int:
        return self.n_rounds_

    def _fit(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        init_seed, train_seed = self._start(2)
        n, d = X.shape
        with_missing = np.flatnonzero(mask.any(axis=0))
        allowed = torch.ones(d + with_missing.size, d)
        allowed[torch.arange(d), torch.arange(d)] = 0.0
        allowed[d + torch.arange(with_missing.size), torch.as_tensor(with_missing)] = 0.0
        init = make_generator(init_seed, torch.device("cpu"))
        self.network_ = _Reconstruction(allowed, self.hidden_dim, init).to(self.device_)
        optimizer = torch.optim.Adam(self.network_.parameters(), lr=self.lr)

        self.scaling_ = ColumnScaling(X)
        x, missing, completion = self.scaling_.start(X, mask, self.device_)
        observed = (~missing).float()
        indicators = missing[:, torch.as_tensor(with_missing, device=self.device_)].float()
        rng = make_generator(train_seed, self.device_)
        history = np.zeros(self.max_iter)
        self.n_rounds_ = 1
        for step, idx in enumerate(self._batches(n, self.max_iter, rng)):
            out = self.network_(completion[idx])
            fit = ((out[:, :d] - completion[idx]) ** 2 * observed[idx]).sum()
            loss = fit / observed[idx].sum().clamp(min=1.0)
            if with_missing.size:
                loss = loss + self.indicator_weight * binary_cross_entropy_with_logits(
                    out[:, d:], indicators[idx]
                )
            graph = self.network_.adjacency()
            loss = loss + self.dag_weight * (torch.trace(torch.matrix_exp(graph[:, :d] ** 2)) - d)
            loss = loss + self.sparsity_weight * graph.sum()
            loss = loss + self.moment_weight * (out[:, :d].mean(dim=0) ** 2).sum()
            history[step] = float(adam_step(optimizer, loss))
            done = step + 1
            if self.reimpute_every and done % self.reimpute_every == 0 and done < self.max_iter:
                completion = self._refine(x, missing, completion)
                self.n_rounds_ += 1
        learned = self.network_.adjacency()[:, :d].detach().double().cpu().numpy()
        self.adjacency_ = learned * (1.0 - np.eye(d))  # the norm's smoothing floor off the diagonal
        self.loss_history_ = history
        self.n_iter_ = self.max_iter
