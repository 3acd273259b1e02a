"""Baseline imputers of the TDM paper, scikit-learn transformers built by name with
:func:`benchmarks.registry.make_imputer`; the mixed-type ones take and return DataFrames."""

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
