"""Baseline imputers of the TDM paper, scikit-learn transformers built by name with
:func:`benchmarks.registry.make_imputer`; the mixed-type ones take and return DataFrames.

A new baseline: a :class:`BaseImputer` subclass in a module of its own here (its parameters
checked with ``tdm._validation``'s ``Interval`` and ``Options``, as the others do), exported
below; its name and settings in ``benchmarks/registry.py``; and, in the tests, its entry in
``tests/benchmarks/test_registry.py``'s list of methods and fast settings in
``tests/benchmarks/test_baselines.py``'s ``FAST_PARAMS``."""

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
