"""What the flow baselines share: a seeded RealNVP flow, its log-density, the flow's settings."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from benchmarks.baselines._torch import (
    TRAINING_CONSTRAINTS,
    ColumnScaling,
    RefiningImputer,
    make_generator,
)
from tdm._validation import Interval
from tdm.coupling import InvertibleNetwork

__all__ = ["FlowImputer", "build_flow", "flow_log_density"]

_LOG_2PI = math.log(2.0 * math.pi)


def build_flow(
    n_features: int, n_blocks: int, width: int, seed: int, device: torch.device
) -> InvertibleNetwork:
    """A RealNVP flow of ``n_blocks`` couplings (two MLPs per update), seeded, on ``device``."""
    generator = make_generator(seed, torch.device("cpu"))
    flow = InvertibleNetwork(
        n_features,
        n_blocks=n_blocks,
        hidden_width=width,
        generator=generator,
        conditioner="separate",
    )
    return flow.to(device)


def flow_log_density(
    flow: InvertibleNetwork,
    x: Tensor,
    mean: Tensor | None = None,
    precision_chol: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Per-row ``log p(x)`` under the flow with base ``N(mean, (L Lᵀ)⁻¹)`` (default
    ``N(0, I)``; ``L = precision_chol``), and the latents ``z = f(x)``."""
    log_det = x.new_zeros(x.shape[0])
    z = x
    for block in flow.blocks:
        log_det = log_det + block.log_abs_det_jacobian(z)
        z = block(z)
    centred = z if mean is None else z - mean
    if precision_chol is None:
        white, log_norm = centred, x.new_zeros(())
    else:
        white = centred @ precision_chol
        log_norm = torch.log(torch.diagonal(precision_chol)).sum()
    d = x.shape[1]
    log_base = -0.5 * (white**2).sum(dim=1) - 0.5 * d * _LOG_2PI + log_norm
    return log_base + log_det, z


class FlowImputer(RefiningImputer):
    """A flow baseline: ``n_blocks`` couplings of width ``hidden_dim`` (``None``:
    ``max(2 * n_features, 16)``), fitted for ``max_iter`` rounds of ``steps_per_round``
    mini-batch steps; :meth:`transform` runs ``max_iter`` completion rounds."""

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **TRAINING_CONSTRAINTS,
        "n_blocks": [Interval(Integral, 1, None)],
        "steps_per_round": [Interval(Integral, 1, None)],
        "hidden_dim": [Interval(Integral, 1, None), None],
    }

    n_blocks: int
    hidden_dim: int | None
    max_iter: int
    steps_per_round: int

    def _build_flow(self, X: NDArray[np.float64], seed: int) -> int:
        """Set ``scaling_`` and a fresh ``flow_``; returns the hidden width used."""
        d = X.shape[1]
        width = self.hidden_dim if self.hidden_dim is not None else max(2 * d, 16)
        self.scaling_ = ColumnScaling(X)
        self.flow_ = build_flow(d, self.n_blocks, width, seed, self.device_)
        return width

    def _rounds(self) -> int:
        return self.max_iter
