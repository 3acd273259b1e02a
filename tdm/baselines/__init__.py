"""Baseline imputers of the TDM paper behind one scikit-learn interface, and a registry.

Every imputer is a scikit-learn transformer: keyword-only hyperparameters stored unchanged in
``__init__``, ``fit(X)`` / ``transform(X)`` / ``fit_transform(X)`` with NaN marking missing
values, fitted attributes ending in ``_``, a ``random_state``, and observed cells returned bit
for bit. None of them touches global random state.

================== ===========================================================================
name               method
================== ===========================================================================
mean               column means
ice                iterative chained equations, Bayesian linear regression per column
missforest         iterative chained equations, random forest per column
softimpute         Soft-Impute, iterative soft-thresholded SVD (Mazumder et al., 2010)
gain               generative adversarial imputation with hints (Yoon et al., 2018), torch
miwae              missing-data importance-weighted autoencoder (Mattei & Frellsen, 2019), torch
tdm                TDMImputer with the library's defaults (:mod:`tdm.imputer`)
tdm_fixed_cell_lr  TDMImputer as defaulted in tdm 0.3: auto start, every cell at rate lr
tdm_ice_init       TDMImputer as defaulted in tdm 0.2: ICE start, no noise, 2,000 steps
tdm_mean_init      TDMImputer as defaulted in tdm 0.1: mean start, network rate 3e-3, 10k steps
tdm_paper          TDMImputer with the paper's settings (3 blocks, width 2D, batch 512, 10k steps)
ot_sh              OTImputer, Sinkhorn solver (Muzellec et al., 2020, "SH")
ot_ns              OTImputer, exact assignment solver (Muzellec et al., 2020, "NS")
================== ===========================================================================

Not yet done: MCFlow (Richardson et al., 2020), EMFlow (Ma & Ghosh, 2021) and MIRACLE (Kyono et
al., 2021), the paper's three other baselines.

Examples
--------
>>> from tdm.baselines import make_imputer
>>> imputer = make_imputer("softimpute", random_state=0)
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from sklearn.base import BaseEstimator

from tdm.baselines._base import BaseImputer
from tdm.baselines.gain import GAINImputer
from tdm.baselines.iterative import ICEImputer, MissForestImputer
from tdm.baselines.miwae import MIWAEImputer
from tdm.baselines.simple import MeanImputer
from tdm.baselines.softimpute import SoftImputeImputer
from tdm.imputer import PAPER_PARAMS

__all__ = [
    "BASELINES",
    "METHODS",
    "METHOD_DESCRIPTIONS",
    "TDM_FIXED_CELL_LR_PARAMS",
    "TDM_ICE_INIT_PARAMS",
    "TDM_MEAN_INIT_PARAMS",
    "TDM_PAPER_PARAMS",
    "BaseImputer",
    "GAINImputer",
    "ICEImputer",
    "MIWAEImputer",
    "MeanImputer",
    "MissForestImputer",
    "SoftImputeImputer",
    "make_imputer",
]

_BASELINE_CLASSES: Mapping[str, type[BaseImputer]] = MappingProxyType(
    {
        "mean": MeanImputer,
        "ice": ICEImputer,
        "missforest": MissForestImputer,
        "softimpute": SoftImputeImputer,
        "gain": GAINImputer,
        "miwae": MIWAEImputer,
    }
)

#: One-line description of every method :func:`make_imputer` knows.
METHOD_DESCRIPTIONS: Mapping[str, str] = MappingProxyType(
    {
        "mean": "column means of the observed values",
        "ice": "iterative chained equations with Bayesian linear regression (ICE)",
        "missforest": "iterative chained equations with random forests (MissForest)",
        "softimpute": "iterative soft-thresholded SVD (SoftImpute, Mazumder et al. 2010)",
        "gain": "generative adversarial imputation nets with hints (GAIN, Yoon et al. 2018)",
        "miwae": "importance-weighted autoencoder for missing data (MIWAE, Mattei & Frellsen 2019)",
        "tdm": "transformed distribution matching (TDM), library defaults",
        "tdm_fixed_cell_lr": "TDM as defaulted in tdm 0.3: auto start, every cell at rate lr",
        "tdm_ice_init": "TDM as defaulted in tdm 0.2: ICE start, no noise, 2,000 steps",
        "tdm_mean_init": "TDM as defaulted in tdm 0.1: mean start, network rate 3e-3, 10k steps",
        "tdm_paper": "transformed distribution matching (TDM), the paper's settings",
        "ot_sh": "OT imputation with Sinkhorn (OTImputer 'SH', Muzellec et al. 2020)",
        "ot_ns": "OT imputation with exact OT (OTImputer 'NS', Muzellec et al. 2020)",
    }
)

#: Names accepted by :func:`make_imputer`, baselines first.
METHODS: tuple[str, ...] = tuple(METHOD_DESCRIPTIONS)

#: The baselines implemented in this package (the other methods live in :mod:`tdm.imputer`).
BASELINES: tuple[str, ...] = tuple(_BASELINE_CLASSES)

#: TDM's settings in the paper (Zhao et al., 2023, Section 5): T = 3 coupling blocks, MLP width
#: K * D with K = 2, batch 512, 10,000 iterations, RMSprop learning rate 1e-2.
TDM_PAPER_PARAMS: Mapping[str, Any] = PAPER_PARAMS

#: TDM's defaults in tdm 0.1 (before ``init="ice"``): the paper's settings with the network's
#: RMSprop rate lowered to 3e-3. Pinned, as the "before" of the issue-6 ablation.
TDM_MEAN_INIT_PARAMS: Mapping[str, Any] = MappingProxyType({**PAPER_PARAMS, "network_lr": 3e-3})

#: TDM's defaults in tdm 0.2 (before ``init="auto"``): ICE start without noise, 2,000 steps.
TDM_ICE_INIT_PARAMS: Mapping[str, Any] = MappingProxyType(
    {**TDM_MEAN_INIT_PARAMS, "init": "ice", "init_noise": 0.0, "max_iter": 2_000}
)

#: TDM's defaults in tdm 0.3 (before ``cell_lr_correction``): ``init="auto"``, and every missing
#: cell at the rate ``lr`` whatever the share of rows a step draws.
TDM_FIXED_CELL_LR_PARAMS: Mapping[str, Any] = MappingProxyType(
    {**TDM_ICE_INIT_PARAMS, "init": "auto"}
)


def make_imputer(name: str, *, random_state: int | None = None, **params: Any) -> BaseEstimator:
    """Build an imputer by name.

    Parameters
    ----------
    name : str
        One of :data:`METHODS`: ``"mean"``, ``"ice"``, ``"missforest"``, ``"softimpute"``,
        ``"gain"``, ``"miwae"``, ``"tdm"``, ``"tdm_fixed_cell_lr"``, ``"tdm_ice_init"``,
        ``"tdm_mean_init"``,
        ``"tdm_paper"``, ``"ot_sh"``, ``"ot_ns"``.
    random_state : int or None, default=None
        Passed to the imputer (keyword-only).
    **params
        Further hyperparameters of the imputer. For ``"tdm_paper"`` they override the paper's
        settings (:data:`TDM_PAPER_PARAMS`); ``"ot_sh"`` and ``"ot_ns"`` fix ``solver``.

    Returns
    -------
    sklearn.base.BaseEstimator
        An unfitted imputer with ``fit``, ``transform`` and ``fit_transform``.

    Raises
    ------
    ValueError
        If ``name`` is unknown, or ``solver`` is given for ``"ot_sh"``/``"ot_ns"``.
    TypeError
        If a hyperparameter is not accepted by the imputer.
    """
    if name in _BASELINE_CLASSES:
        return _BASELINE_CLASSES[name](random_state=random_state, **params)
    if name not in METHOD_DESCRIPTIONS:
        raise ValueError(f"name must be one of {METHODS}; got {name!r}")
    # Imported here: tdm.imputer is the heavier, separately owned module.
    from tdm.imputer import OTImputer, TDMImputer

    if name == "tdm":
        return TDMImputer(random_state=random_state, **params)
    if name == "tdm_paper":
        return TDMImputer(random_state=random_state, **{**TDM_PAPER_PARAMS, **params})
    if name == "tdm_mean_init":
        return TDMImputer(random_state=random_state, **{**TDM_MEAN_INIT_PARAMS, **params})
    if name == "tdm_ice_init":
        return TDMImputer(random_state=random_state, **{**TDM_ICE_INIT_PARAMS, **params})
    if name == "tdm_fixed_cell_lr":
        return TDMImputer(random_state=random_state, **{**TDM_FIXED_CELL_LR_PARAMS, **params})
    if "solver" in params:
        raise ValueError(f"{name!r} fixes the OT solver; do not pass solver={params['solver']!r}")
    solver = "sinkhorn" if name == "ot_sh" else "assignment"
    return OTImputer(solver=solver, random_state=random_state, **params)
