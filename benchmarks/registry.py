"""Every imputation method by name: how to build it and how the benchmark treats it.

The order of :data:`REGISTRY` is the display order of tables and figures. Benchmark fixtures
(pinned earlier configurations of TDM) are registered but not public: :data:`METHODS` and
:func:`make_imputer` leave them out, :func:`get_method` finds them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from sklearn.base import BaseEstimator

from benchmarks.baselines import (
    EMFlowImputer,
    GAINImputer,
    ICEImputer,
    MCFlowImputer,
    MeanImputer,
    MiceForestImputer,
    MIRACLEImputer,
    MissForestImputer,
    MissForestMixedImputer,
    MIWAEImputer,
    ModeImputer,
    SoftImputeImputer,
)
from tdm.imputer import OTImputer, TDMImputer

__all__ = [
    "FIXTURES",
    "METHODS",
    "REGISTRY",
    "Method",
    "get_method",
    "make_imputer",
]


@dataclass(frozen=True)
class Method:
    """One imputation method: ``factory(random_state=..., **params)`` builds it unfitted;
    ``batch_ot`` methods take ``max_iter`` and a per-step ``callback`` (their loss trace is
    recorded), ``has_max_iter`` ones take the benchmark's step-count override, and a
    ``fixture`` is a pinned earlier configuration, not public."""

    name: str
    description: str
    factory: Callable[..., BaseEstimator]
    batch_ot: bool = False
    has_max_iter: bool = False
    fixture: bool = False

    def build(self, *, random_state: int | None = None, **params: Any) -> BaseEstimator:
        """An unfitted imputer with ``params`` on top of the method's own settings."""
        return self.factory(random_state=random_state, **params)


def _tdm_with(settings: Mapping[str, Any]) -> Callable[..., BaseEstimator]:
    """A factory of TDMImputer with ``settings`` (public or private) pinned, overridable by the
    call's params."""
    pinned = dict(settings)

    def build(**params: Any) -> BaseEstimator:
        return TDMImputer._configured(**{**pinned, **params})

    return build


def _ot_with(solver: str, name: str) -> Callable[..., BaseEstimator]:
    def build(**params: Any) -> BaseEstimator:
        if "solver" in params:
            raise ValueError(
                f"{name!r} fixes the OT solver; do not pass solver={params['solver']!r}"
            )
        return OTImputer(solver=solver, **params)

    return build


# The fixtures' settings: each is the default of an earlier library version, pinned (the
# network, the batches, the bounds and the precision of every version before paper mode took
# the published code's).
_MEAN_INIT = {
    **TDMImputer.paper()._settings(),
    "network_lr": 3e-3,
    "conditioner": "joint",
    "batch_draw": "disjoint",
    "squash": "scaled",
    "bounds": "observed",
    "dtype": "float32",
}
_ICE_INIT = {**_MEAN_INIT, "init": "ice", "init_noise": 0.0, "max_iter": 2_000}
_FIXED_CELL_LR = {**_ICE_INIT, "init": "auto"}

_ALL = (
    Method("mean", "column means of the observed values", MeanImputer),
    Method("ice", "iterative chained equations with Bayesian linear regression (ICE)", ICEImputer),
    Method(
        "missforest",
        "iterative chained equations with random forests (MissForest)",
        MissForestImputer,
    ),
    Method(
        "softimpute",
        "iterative soft-thresholded SVD (SoftImpute, Mazumder et al. 2010)",
        SoftImputeImputer,
    ),
    Method(
        "gain",
        "generative adversarial imputation nets with hints (GAIN, Yoon et al. 2018)",
        GAINImputer,
        has_max_iter=True,
    ),
    Method(
        "miwae",
        "importance-weighted autoencoder for missing data (MIWAE, Mattei & Frellsen 2019)",
        MIWAEImputer,
        has_max_iter=True,
    ),
    Method(
        "mcflow",
        "normalizing flow and latent network fitted in turn (MCFlow, Richardson et al. 2020)",
        MCFlowImputer,
    ),
    Method(
        "emflow",
        "online EM in a normalizing flow's latent space (EMFlow, Ma & Ghosh 2021)",
        EMFlowImputer,
    ),
    Method(
        "miracle",
        "causally-aware reconstruction with missingness indicators (MIRACLE, Kyono et al. 2021)",
        MIRACLEImputer,
        has_max_iter=True,
    ),
    Method("mode", "column means and modes (mixed types: labels get the mode)", ModeImputer),
    Method(
        "missforest_mixed",
        "MissForest with forest classifiers for label columns (mixed types)",
        MissForestMixedImputer,
    ),
    Method(
        "miceforest",
        "chained equations with LightGBM (miceforest; mixed types)",
        MiceForestImputer,
    ),
    Method(
        "ot_sh",
        "OT imputation with Sinkhorn (OTImputer 'SH', Muzellec et al. 2020)",
        _ot_with("sinkhorn", "ot_sh"),
        batch_ot=True,
        has_max_iter=True,
    ),
    Method(
        "ot_ns",
        "OT imputation with exact OT (OTImputer 'NS', Muzellec et al. 2020)",
        _ot_with("assignment", "ot_ns"),
        batch_ot=True,
        has_max_iter=True,
    ),
    Method(
        "tdm",
        "transformed distribution matching (TDM), library defaults",
        TDMImputer,
        batch_ot=True,
        has_max_iter=True,
    ),
    Method(
        "tdm_start",
        "TDM fixture: the default's own start alone, no step (max_iter=0)",
        _tdm_with({"max_iter": 0}),
        fixture=True,
    ),
    Method(
        "tdm_fixed_cell_lr",
        "TDM fixture: auto start, every missing cell at rate lr",
        _tdm_with(_FIXED_CELL_LR),
        batch_ot=True,
        has_max_iter=True,
        fixture=True,
    ),
    Method(
        "tdm_ice_init",
        "TDM fixture: ICE start, no noise, 2,000 steps, network rate 3e-3",
        _tdm_with(_ICE_INIT),
        batch_ot=True,
        has_max_iter=True,
        fixture=True,
    ),
    Method(
        "tdm_mean_init",
        "TDM fixture: the paper's settings with network rate 3e-3",
        _tdm_with(_MEAN_INIT),
        batch_ot=True,
        has_max_iter=True,
        fixture=True,
    ),
    Method(
        "tdm_paper",
        "transformed distribution matching (TDM), the paper's settings",
        TDMImputer.paper,
        batch_ot=True,
        has_max_iter=True,
    ),
)

#: Every registered method by name, in display order (fixtures included).
REGISTRY: Mapping[str, Method] = MappingProxyType({m.name: m for m in _ALL})

#: The public methods, in display order.
METHODS: tuple[str, ...] = tuple(m.name for m in _ALL if not m.fixture)

#: The benchmark fixtures, in display order.
FIXTURES: tuple[str, ...] = tuple(m.name for m in _ALL if m.fixture)


def get_method(name: str) -> Method:
    """The registered method ``name`` (public or fixture); ``ValueError`` lists the names."""
    if name not in REGISTRY:
        raise ValueError(f"method must be one of {tuple(REGISTRY)}; got {name!r}")
    return REGISTRY[name]


def make_imputer(name: str, *, random_state: int | None = None, **params: Any) -> BaseEstimator:
    """An unfitted public imputation method ``name`` (one of :data:`METHODS`) with
    ``random_state`` and ``params`` on top of its own settings.

    ``ValueError`` for an unknown name, or ``solver`` given to ``"ot_sh"``/``"ot_ns"``;
    ``TypeError`` for a hyperparameter the imputer does not take.
    """
    if name not in METHODS:
        raise ValueError(f"name must be one of {METHODS}; got {name!r}")
    return REGISTRY[name].build(random_state=random_state, **params)
