"""Torch helpers for the neural baselines: devices, local generators, seeded initialisation.

Nothing here touches global state: modules are built without their default (global-RNG)
initialisation and initialised from a local :class:`torch.Generator`.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import nn

from tdm._seeds import spawn_seeds

__all__ = ["make_generator", "mlp", "spawn_seeds"]


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
    """Fully connected layers ``sizes[0] -> ... -> sizes[-1]`` with ``activation`` between them.

    Parameters
    ----------
    sizes : list of int
        Layer widths, input first; at least two entries.
    activation : type of torch.nn.Module
        Activation class placed after every layer but the last.
    generator : torch.Generator
        CPU generator for the initial weights.
    xavier : bool, default=False
        Xavier-normal weights and zero biases instead of torch's default uniform scheme.

    Returns
    -------
    torch.nn.Sequential
        The network, on CPU.
    """
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
