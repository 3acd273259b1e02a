"""Affine-coupling invertible network, the transformation ``f`` of TDM.

The network is ``f = f_T ∘ … ∘ f_1``; each block splits its input into two complementary halves
``x = (x1, x2)`` with ``d = floor(D / 2)`` columns in ``x1`` and updates them in turn::

    y1 = x1 * exp(s1(x2)) + t1(x2)
    y2 = x2 * exp(s2(y1)) + t2(y1)

``(s, t)`` come from one conditioner, a multilayer perceptron with three linear layers of width
``K * D`` and SELU activations (Zhao et al., 2023, §4). Each log-scale ``s`` is bounded by an
arctangent clamp, ``s = c * (2 / π) * atan(raw / c)``, so that ``|s| < c``: the map is invertible
by construction and its Jacobian is never singular. (``squash="unscaled"`` drops the ``/ c``
inside, as FrEIA's RealNVP block, the published code's network, does.) The stateless bijection maths
(:func:`affine_forward`, :func:`affine_inverse`, :func:`bounded_log_scale`) is kept apart from the
modules that hold weights.

References
----------
He Zhao, Ke Sun, Amir Dezfouli, Edwin V. Bonilla. "Transformed Distribution Matching for Missing
Value Imputation." ICML 2023.
Laurent Dinh, Jascha Sohl-Dickstein, Samy Bengio. "Density estimation using Real NVP." ICLR 2017.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

__all__ = [
    "CONDITIONERS",
    "SQUASHES",
    "AffineCoupling",
    "Conditioner",
    "InvertibleNetwork",
    "affine_forward",
    "affine_inverse",
    "bounded_log_scale",
]


#: How each coupling update gets its log-scale and shift: one MLP with both as outputs
#: (``"joint"``), or two MLPs of the same shape (``"separate"``, RealNVP's).
CONDITIONERS = ("joint", "separate")
#: How the arctangent clamp squashes a raw log-scale, see :func:`bounded_log_scale`.
SQUASHES = ("scaled", "unscaled")


def bounded_log_scale(raw: Tensor, clamp: float, squash: str = "scaled") -> Tensor:
    """Squash raw log-scales into ``(-clamp, clamp)`` with an arctangent.

    Parameters
    ----------
    raw : Tensor
        Unbounded conditioner output.
    clamp : float
        The bound ``c > 0``: ``|s| < c``; ``s`` is odd and increasing in ``raw``.
    squash : {"scaled", "unscaled"}, default="scaled"
        ``"scaled"``: ``s = c * (2 / π) * atan(raw / c)``, slope ``2 / π`` at zero whatever the
        bound. ``"unscaled"``: ``s = c * (2 / π) * atan(raw)``, slope ``2c / π`` at zero and
        saturating sooner (FrEIA's RealNVP block, the published code's network).
    """
    return clamp * (2.0 / math.pi) * torch.atan(raw / clamp if squash == "scaled" else raw)


def affine_forward(x: Tensor, log_scale: Tensor, shift: Tensor) -> Tensor:
    """Apply ``y = x * exp(log_scale) + shift`` elementwise."""
    return x * torch.exp(log_scale) + shift


def affine_inverse(y: Tensor, log_scale: Tensor, shift: Tensor) -> Tensor:
    """Invert :func:`affine_forward`: ``x = (y - shift) * exp(-log_scale)``."""
    return (y - shift) * torch.exp(-log_scale)


class Conditioner(nn.Module):
    """MLP ``R^{n_in} -> R^{2 n_out}`` returning a bounded log-scale and a shift.

    Three linear layers (``n_in -> width -> width -> 2 n_out``) with SELU between them; with
    ``separate``, two such MLPs ending in ``n_out`` outputs, one for the log-scale and one for the
    shift (RealNVP's). When the conditioning half is empty (``n_in == 0``, a one-column table),
    the outputs are learned constants, so the block is still an invertible elementwise affine map.

    Parameters
    ----------
    n_in, n_out : int
        Widths of the conditioning input and of the half being transformed.
    width : int
        Hidden width (``K * D`` in the paper).
    clamp : float
        Bound on the log-scales, see :func:`bounded_log_scale`.
    generator : torch.Generator, optional
        Source of the initial weights, see :meth:`reset_parameters`.
    separate : bool, default=False
        Two MLPs (log-scale, shift) instead of one with both outputs.
    squash : {"scaled", "unscaled"}, default="scaled"
        How the clamp squashes the raw log-scale (:func:`bounded_log_scale`).
    """

    def __init__(
        self,
        n_in: int,
        n_out: int,
        width: int,
        clamp: float,
        generator: torch.Generator | None = None,
        separate: bool = False,
        squash: str = "scaled",
    ) -> None:
        super().__init__()
        self.n_in = n_in
        self.n_out = n_out
        self.clamp = clamp
        self.squash = squash
        self.net: nn.Module
        self.shift_net: nn.Module | None = None
        if n_in == 0:
            self.net = _Constant(2 * n_out)
        elif separate:
            self.net, self.shift_net = _mlp(n_in, width, n_out), _mlp(n_in, width, n_out)
        else:
            self.net = _mlp(n_in, width, 2 * n_out)
        self.reset_parameters(generator)

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw weights as ``nn.Linear`` does (uniform in ``±1/sqrt(fan_in)``) from ``generator``.

        Learned constants (nothing to condition on) are drawn uniform in ``±1``.
        """
        for module in self.modules():
            if isinstance(module, nn.Linear):
                bound = 1.0 / math.sqrt(module.in_features)
                module.weight.uniform_(-bound, bound, generator=generator)
                if module.bias is not None:
                    module.bias.uniform_(-bound, bound, generator=generator)
            elif isinstance(module, _Constant):
                module.value.uniform_(-1.0, 1.0, generator=generator)

    def forward(self, h: Tensor) -> tuple[Tensor, Tensor]:
        """Return ``(log_scale, shift)``, each of shape ``(n, n_out)``."""
        if self.shift_net is not None:
            raw_scale, shift = self.net(h), self.shift_net(h)
        else:
            raw_scale, shift = self.net(h).chunk(2, dim=-1)
        return bounded_log_scale(raw_scale, self.clamp, self.squash), shift


def _mlp(n_in: int, width: int, n_out: int) -> nn.Sequential:
    """Three linear layers with SELU between them, weights left for ``reset_parameters``."""
    return nn.Sequential(
        _Linear(n_in, width),
        nn.SELU(),
        _Linear(width, width),
        nn.SELU(),
        _Linear(width, n_out),
    )


class _Linear(nn.Linear):
    """``nn.Linear`` whose construction draws nothing: its own initialisation would draw from
    the global random number generator; :meth:`Conditioner.reset_parameters` draws its
    weights from the given generator instead. (``torch.nn.utils.skip_init`` would do the same
    through the meta device, whose first use imports SymPy, which adds a process-wide warning
    filter.)"""

    def reset_parameters(self) -> None:
        """Leave the weights as allocated (uninitialised) until drawn."""


class _Constant(nn.Module):
    """Learned constant output, for a conditioner with nothing to condition on."""

    def __init__(self, n_out: int) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.zeros(n_out))  # drawn in reset_parameters

    def forward(self, h: Tensor) -> Tensor:
        return self.value.expand(h.shape[0], -1)


class AffineCoupling(nn.Module):
    """One affine-coupling block with two complementary halves (``x1``: first ``d`` columns).

    Parameters
    ----------
    n_features : int
        ``D``, the number of columns.
    conditioner : callable
        ``conditioner(n_in, n_out)`` builds the :class:`Conditioner` of an update of ``n_out``
        columns given ``n_in`` (called for the first update, then for the second).
    """

    def __init__(self, n_features: int, conditioner: Callable[[int, int], Conditioner]) -> None:
        super().__init__()
        d = n_features // 2
        self.split = d
        # With one column the first half is empty: only the second update remains.
        self.first = conditioner(n_features - d, d) if d > 0 else None
        self.second = conditioner(d, n_features - d)

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` of shape ``(n, D)`` to ``y`` of the same shape."""
        x1, x2 = x[:, : self.split], x[:, self.split :]
        y1 = affine_forward(x1, *self.first(x2)) if self.first is not None else x1
        y2 = affine_forward(x2, *self.second(y1))
        return torch.cat([y1, y2], dim=1)

    def inverse(self, y: Tensor) -> Tensor:
        """Invert :meth:`forward`."""
        y1, y2 = y[:, : self.split], y[:, self.split :]
        x2 = affine_inverse(y2, *self.second(y1))
        x1 = affine_inverse(y1, *self.first(x2)) if self.first is not None else y1
        return torch.cat([x1, x2], dim=1)

    def log_abs_det_jacobian(self, x: Tensor) -> Tensor:
        """``log |det ∂f/∂x|`` per row, shape ``(n,)``."""
        x1, x2 = x[:, : self.split], x[:, self.split :]
        total = x.new_zeros(x.shape[0])
        if self.first is not None:
            s1, t1 = self.first(x2)
            total = total + s1.sum(dim=1)
            x1 = affine_forward(x1, s1, t1)
        s2, _ = self.second(x1)
        return total + s2.sum(dim=1)


class InvertibleNetwork(nn.Module):
    """``T`` affine-coupling blocks composed, ``f = f_T ∘ … ∘ f_1``.

    Parameters
    ----------
    n_features : int
        ``D``, the number of columns.
    n_blocks : int, default=3
        ``T`` in the paper; ``0`` gives the identity (TDM then reduces to OTImputer).
    width_factor : int, default=2
        ``K`` in the paper: hidden width ``K * D``.
    clamp : float, default=2.0
        Bound on every log-scale.
    generator : torch.Generator, optional
        Source of the initial weights (the usual ``nn.Linear`` initialisation, drawn from this
        generator instead of the global one).
    hidden_width : int, optional
        The conditioners' hidden width, in place of ``width_factor * n_features`` (TDMImputer
        gives ``width_factor`` times the number of table columns, which a categorical column
        counts once however many coordinates it takes).
    conditioner : {"joint", "separate"}, default="joint"
        Each update's log-scale and shift from one MLP, or from two (:data:`CONDITIONERS`).
    squash : {"scaled", "unscaled"}, default="scaled"
        How the clamp squashes the raw log-scales (:func:`bounded_log_scale`).
    """

    def __init__(
        self,
        n_features: int,
        *,
        n_blocks: int = 3,
        width_factor: int = 2,
        clamp: float = 2.0,
        generator: torch.Generator | None = None,
        hidden_width: int | None = None,
        conditioner: str = "joint",
        squash: str = "scaled",
    ) -> None:
        super().__init__()
        if conditioner not in CONDITIONERS:
            raise ValueError(f"conditioner must be one of {CONDITIONERS}; got {conditioner!r}.")
        if squash not in SQUASHES:
            raise ValueError(f"squash must be one of {SQUASHES}; got {squash!r}.")
        self.n_features = n_features
        width = max(width_factor * n_features if hidden_width is None else hidden_width, 1)
        make = partial(
            Conditioner,
            width=width,
            clamp=clamp,
            generator=generator,
            separate=conditioner == "separate",
            squash=squash,
        )
        self.blocks: list[AffineCoupling] = nn.ModuleList(  # type: ignore[assignment]
            AffineCoupling(n_features, make) for _ in range(n_blocks)
        )

    def forward(self, x: Tensor) -> Tensor:
        """Map ``x`` of shape ``(n, D)`` to the latent space."""
        for block in self.blocks:
            x = block(x)
        return x

    def inverse(self, z: Tensor) -> Tensor:
        """Invert :meth:`forward`."""
        for block in reversed(self.blocks):
            z = block.inverse(z)
        return z

    def log_abs_det_jacobian(self, x: Tensor) -> Tensor:
        """``log |det ∂f/∂x|`` per row, shape ``(n,)``."""
        total = x.new_zeros(x.shape[0])
        for block in self.blocks:
            total = total + block.log_abs_det_jacobian(x)
            x = block(x)
        return total
