"""Baseline imputers of the TDM paper behind one scikit-learn interface.

Every imputer is a scikit-learn transformer: keyword-only hyperparameters stored unchanged in
``__init__``, ``fit(X)`` / ``transform(X)`` / ``fit_transform(X)`` with NaN marking missing
values, fitted attributes ending in ``_``, a ``random_state``, and observed cells returned bit
for bit. None of them touches global random state. The numeric baselines take a float matrix;
the mixed-type ones (``ModeImputer``, ``MissForestMixedImputer``, ``MiceForestImputer``) take a
DataFrame of float, integer, boolean and categorical columns and return the same columns and
dtypes (a float array works too). Build them by name with
:func:`benchmarks.registry.make_imputer`; the registry describes every method in one line.
"""

from benchmarks.baselines._base import BaseImputer
from benchmarks.baselines.emflow import EMFlowImputer
from benchmarks.baselines.gain import GAINImputer
from benchmarks.baselines.iterative import ICEImputer, MissForestImputer
from benchmarks.baselines.mcflow import MCFlowImputer
from benchmarks.baselines.miceforest import MiceForestImputer
from benchmarks.baselines.miracle import MIRACLEImputer
from benchmarks.baselines.miwae import MIWAEImputer
from benchmarks.baselines.mixed import MissForestMixedImputer, ModeImputer
from benchmarks.baselines.simple import MeanImputer
from benchmarks.baselines.softimpute import SoftImputeImputer

__all__ = [
    "BaseImputer",
    "EMFlowImputer",
    "GAINImputer",
    "ICEImputer",
    "MCFlowImputer",
    "MIRACLEImputer",
    "MIWAEImputer",
    "MeanImputer",
    "MiceForestImputer",
    "MissForestImputer",
    "MissForestMixedImputer",
    "ModeImputer",
    "SoftImputeImputer",
]
