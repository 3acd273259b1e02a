"""The settings kept out of the imputers' public constructors: those that reproduce the published
code (paper mode) or serve research. Each imputer holds them as one frozen :class:`Config`;
:meth:`tdm.TDMImputer.paper` sets the published code's, and tests and the benchmark set any of
them through ``TDMImputer._configured`` (``OTImputer._configured``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from types import MappingProxyType
from typing import Any

from tdm._bounds import BOUNDS_METHODS
from tdm._optimise import BATCH_DRAWS
from tdm._validation import Boolean, Interval, Options
from tdm.coupling import CONDITIONERS, SQUASHES
from tdm.transport import COSTS, SOLVERS

__all__ = ["CONFIG_CONSTRAINTS", "OT_CONFIG", "PAPER", "PAPER_PARAMS", "Config"]


@dataclass(frozen=True)
class Config:
    """The private settings of a batch optimal-transport imputer (TDMImputer's defaults).

    Attributes
    ----------
    clamp : float, default=2.0
        Bound on the couplings' log-scales: ``|log-scale| < clamp``.
    squash : {"scaled", "unscaled"}, default="scaled"
        The clamp as ``clamp * (2 / π) * atan(raw / clamp)``, or with ``atan(raw)`` (the published
        code's): :func:`tdm.coupling.bounded_log_scale`.
    conditioner : {"joint", "separate"}, default="joint"
        Each coupling update's log-scale and shift from one MLP, or from two of the same shape
        (the published code's).
    batch_draw : {"disjoint", "independent"}, default="disjoint"
        A step's two batches as ``2 * batch_size`` distinct rows, or each drawn on its own so
        that they may share rows (the published code's): :func:`tdm._optimise.draw_batch_rows`.
    cell_lr_correction : bool, default=True
        Lower the missing cells' rate where a row is in fewer than half of the steps' batches:
        :func:`tdm._optimise.cell_rate`. ``False``: every cell at ``lr``.
    cost : {"euclidean", "sqeuclidean"}, default="euclidean"
        Ground cost between latent points.
    solver : {"assignment", "emd", "sinkhorn"}, default="assignment"
        TDMImputer's optimal-transport solver (:mod:`tdm.transport`); OTImputer's is public.
    epsilon : float, default=0.05
        With the Sinkhorn solver: the entropic regularisation as a share of the median pairwise
        cost of the mean-filled data.
    init_noise : float, default=0.0
        N(0, init_noise²) noise added to every starting value.
    n_jobs : int or None, default=None
        Threads of each model of the trees start, and of the label classifiers of ``sample``
        (``None``: 1; -1: every core).
    bounds_margin : float, default=0.0
        Share of a column's observed range added below and above it by the observed bounds.
    bounds_method : {"project", "transform", "clip"}, default="project"
        How the bounds hold during the optimisation (:mod:`tdm._bounds`).
    validation_fraction : float, default=0.05
        Share of the observed cells held out by ``early_stopping``.
    n_iter_no_change : int, default=1000
        Patience of ``early_stopping``, in steps.
    """

    clamp: float = 2.0
    squash: str = "scaled"
    conditioner: str = "joint"
    batch_draw: str = "disjoint"
    cell_lr_correction: bool = True
    cost: str = "euclidean"
    solver: str = "assignment"
    epsilon: float = 0.05
    init_noise: float = 0.0
    n_jobs: int | None = None
    bounds_margin: float = 0.0
    bounds_method: str = "project"
    validation_fraction: float = 0.05
    n_iter_no_change: int = 1000


#: Accepted values of every field of :class:`Config`, checked with the public parameters in ``fit``.
CONFIG_CONSTRAINTS: Mapping[str, Sequence[Any]] = MappingProxyType(
    {
        "clamp": [Interval(Real, 0, None, closed="neither")],
        "squash": [Options(SQUASHES)],
        "conditioner": [Options(CONDITIONERS)],
        "batch_draw": [Options(BATCH_DRAWS)],
        "cell_lr_correction": [Boolean()],
        "cost": [Options(COSTS)],
        "solver": [Options(SOLVERS)],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "init_noise": [Interval(Real, 0, None)],
        "n_jobs": [Integral, None],
        "bounds_margin": [Interval(Real, 0, None)],
        "bounds_method": [Options(BOUNDS_METHODS)],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None)],
    }
)

#: OTImputer's (Muzellec et al., 2020): squared Euclidean cost, the mean start plus N(0, 0.1²)
#: noise, every cell at ``lr``.
OT_CONFIG = Config(cost="sqeuclidean", init_noise=0.1, cell_lr_correction=False)

#: Paper mode's private settings (Zhao et al., 2023, §5, and the published code), every one that
#: a fit can use pinned, so that a change of the library's defaults never changes paper mode.
PAPER = Config(
    clamp=2.0,
    squash="unscaled",  # FrEIA's RealNVP block, the published network: c * (2 / pi) * atan(raw)
    conditioner="separate",  # RealNVP's two MLPs per update, as the published network
    batch_draw="independent",  # the two batches may share rows, as the published code's
    cell_lr_correction=False,
    cost="euclidean",  # the published code's cost, which produced the paper's tables
    solver="assignment",  # exact OT, as the published network simplex
    init_noise=0.1,
)

#: Paper mode's public parameters.
PAPER_PARAMS: Mapping[str, Any] = MappingProxyType(
    {
        "n_blocks": 3,
        "width_factor": 2,
        "batch_size": 512,
        "max_iter": 10_000,
        "lr": 1e-2,
        "network_lr": None,  # the same RMSprop rate for the network and the missing cells
        "init": "mean",
        "standardize": True,
        "bounds": None,  # the published code leaves the imputed cells unbounded
        "early_stopping": False,
        "dtype": "float64",  # the published code's precision
    }
)
