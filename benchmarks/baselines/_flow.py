"""What the flow baselines share: column scaling, a seeded RealNVP flow, its log-density.

MCFlow and EMFlow both model the (standardised) rows with a normalizing flow ``z = f(x)``, here
:class:`tdm.coupling.InvertibleNetwork` (affine couplings with bounded log-scales), and fit it
by maximum likelihood, ``log p(x) = log p_Z(f(x)) + log |det ∂f/∂x|``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor

from benchmarks.baselines._torch import make_generator
from tdm.coupling import InvertibleNetwork

__all__ = ["ColumnScaling", "build_flow", "flow_log_density", "start_from_means"]

_LOG_2PI = math.log(2.0 * math.pi)


class ColumnScaling:
    """Each column's observed mean, standard deviation (1 for a constant column) and range."""

    def __init__(self, X: NDArray[np.float64]) -> None:
        self.mean = np.nanmean(X, axis=0)
        std = np.nanstd(X, axis=0)
        self.scale = np.where(std > 0.0, std, 1.0)
        self.low = (np.nanmin(X, axis=0) - self.mean) / self.scale
        self.high = (np.nanmax(X, axis=0) - self.mean) / self.scale

    def clip(self, x: Tensor) -> Tensor:
        """Standardised rows clipped to each column's observed range (NaN becomes the mean)."""
        low = torch.as_tensor(self.low, dtype=x.dtype, device=x.device)
        high = torch.as_tensor(self.high, dtype=x.dtype, device=x.device)
        return torch.nan_to_num(x, nan=0.0).clamp(min=low, max=high)

    def to_tensor(self, X: NDArray[np.float64], device: torch.device) -> Tensor:
        """``X`` standardised, NaN kept, as float32 on ``device``."""
        return torch.as_tensor((X - self.mean) / self.scale, dtype=torch.float32, device=device)

    def to_array(self, x: Tensor) -> NDArray[np.float64]:
        """Undo :meth:`to_tensor` (float64 on the CPU)."""
        out: NDArray[np.float64] = x.double().cpu().numpy() * self.scale + self.mean
        return out


def start_from_means(x: Tensor, missing: Tensor) -> Tensor:
    """``x`` (standardised, NaN at ``missing``) with every missing cell at 0, its column mean."""
    return torch.where(missing, torch.zeros_like(x), x)


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
    """Per-row ``log p(x)`` under the flow and the rows' latents ``z = f(x)``.

    Parameters
    ----------
    flow : InvertibleNetwork
        The flow ``f``.
    x : Tensor of shape (n, D)
        Complete rows.
    mean : Tensor of shape (D,), optional
        Mean of the Gaussian base density (default 0).
    precision_chol : Tensor of shape (D, D), optional
        Lower Cholesky factor ``L`` of the base density's precision, ``Σ⁻¹ = L Lᵀ`` (default
        the identity).

    Returns
    -------
    log_density : Tensor of shape (n,)
    z : Tensor of shape (n, D)
    """
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
