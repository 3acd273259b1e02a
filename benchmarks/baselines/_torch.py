"""What the neural baselines share: seeded networks, column scaling, the training skeleton.

Networks are built without their global-RNG initialisation and initialised from local
generators; :class:`RefiningImputer` is the skeleton of MCFlow, EMFlow and MIRACLE.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import Tensor, nn

from benchmarks.baselines._base import BaseImputer, RandomState, resolve_seed
from tdm._seeds import spawn_seeds
from tdm._validation import Interval, resolve_device

__all__ = [
    "TRAINING_CONSTRAINTS",
    "ColumnScaling",
    "RefiningImputer",
    "TorchImputer",
    "adam_step",
    "make_generator",
    "mlp",
]

#: Accepted values of the training hyperparameters every neural baseline has.
TRAINING_CONSTRAINTS: Mapping[str, Sequence[Any]] = {
    "max_iter": [Interval(Integral, 1, None)],
    "batch_size": [Interval(Integral, 1, None)],
    "lr": [Interval(Real, 0, None, closed="neither")],
}


def make_generator(seed: int, device: torch.device) -> torch.Generator:
    """A local generator on ``device`` seeded with ``seed`` (never the global one)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def _linear(n_in: int, n_out: int, generator: torch.Generator) -> nn.Linear:
    # skip_init builds the layer without drawing from the global RNG; the weights then follow
    # torch's default scheme (uniform in +-1/sqrt(fan_in) for both) from the local generator.
    layer = nn.utils.skip_init(nn.Linear, n_in, n_out)
    bound = 1.0 / math.sqrt(n_in)
    with torch.no_grad():
        nn.init.uniform_(layer.weight, -bound, bound, generator=generator)
        nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return layer


def mlp(
    sizes: list[int],
    activation: type[nn.Module],
    generator: torch.Generator,
    *,
    xavier: bool = False,
) -> nn.Sequential:
    """Fully connected layers ``sizes[0] -> ... -> sizes[-1]`` on the CPU, ``activation``
    between them, weights drawn from ``generator`` (Xavier-normal with zero biases if
    ``xavier``)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        layer = _linear(n_in, n_out, generator)
        if xavier:
            with torch.no_grad():
                nn.init.xavier_normal_(layer.weight, generator=generator)
                layer.bias.zero_()
        layers.append(layer)
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


def adam_step(optimizer: torch.optim.Optimizer, loss: Tensor) -> Tensor:
    """One optimiser step on ``loss``; returns the loss, detached (left on its device)."""
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


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

    def start(
        self, X: NDArray[np.float64], mask: NDArray[np.bool_], device: torch.device
    ) -> tuple[Tensor, Tensor, Tensor]:
        """``(x, missing, start)``: ``X`` standardised (NaN kept), the mask as a tensor, and
        ``x`` with every missing cell at 0, its column's mean."""
        x = self.to_tensor(X, device)
        missing = torch.as_tensor(mask, device=device)
        return x, missing, torch.where(missing, torch.zeros_like(x), x)


class TorchImputer(BaseImputer):
    """The training skeleton of the neural baselines: the fit's device and seeds, mini-batches of
    rows and optimiser steps.

    Every subclass takes ``device`` (``"auto"``: CUDA when available, else CPU) and
    ``random_state``; weights and every draw of ``fit`` and ``transform`` come from local
    generators seeded from ``seed_``, so a fitted imputer gives the same output for the same
    input. Where a subclass takes them, ``batch_size`` is the rows per mini-batch and ``lr`` the
    Adam learning rate.
    """

    device: str | torch.device
    random_state: RandomState
    batch_size: int

    def _start(self, n_seeds: int) -> list[int]:
        """Resolve ``device_`` and ``seed_``; return ``n_seeds`` seeds derived from ``seed_``."""
        self.device_ = resolve_device(self.device, type(self).__name__)
        self.seed_ = resolve_seed(self.random_state)
        return spawn_seeds(self.seed_, n_seeds)

    def _batches(self, n: int, steps: int, generator: torch.Generator) -> Iterator[Tensor]:
        """Row indices of ``steps`` mini-batches of ``min(batch_size, n)`` rows, each drawn
        without replacement when the loop asks for it."""
        batch = min(self.batch_size, n)
        for _ in range(steps):
            yield torch.randperm(n, generator=generator, device=self.device_)[:batch]


class RefiningImputer(TorchImputer):
    """Standardised rows started at the column means, whose missing cells fitted networks
    replace round after round: :meth:`_complete` gives the networks' values for every cell,
    :meth:`_impute` runs :meth:`_rounds` replacements from the column means on new rows, as the
    fit did on the training rows."""

    scaling_: ColumnScaling

    def _complete(self, completion: Tensor, missing: Tensor) -> Tensor:
        """The fitted networks' values of every cell of the rows ``completion``."""
        raise NotImplementedError

    def _rounds(self) -> int:
        """How many replacements :meth:`_impute` runs."""
        raise NotImplementedError

    def _refine(self, x: Tensor, missing: Tensor, completion: Tensor) -> Tensor:
        """One round: the missing cells take :meth:`_complete`'s values, the others ``x``'s."""
        return torch.where(missing, self._complete(completion, missing), x)

    def _impute(self, X: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        x, missing, completion = self.scaling_.start(X, mask, self.device_)
        for _ in range(self._rounds()):
            completion = self._refine(x, missing, completion)
        return self.scaling_.to_array(completion)
