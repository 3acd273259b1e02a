"""Baseline imputers of the TDM paper behind one scikit-learn interface.

Every imputer is a scikit-learn transformer: keyword-only hyperparameters stored unchanged in
``__init__``, ``fit(X)`` / ``transform(X)`` / ``fit_transform(X)`` with NaN marking missing
values, fitted attributes ending in ``_``, a ``random_state``, and observed cells returned bit
for bit. None of them touches global random state. Build them by name with
:func:`benchmarks.registry.make_imputer` (the registry lists every method).

=================== ========================================================================
class               method
=================== ========================================================================
MeanImputer         column means
ICEImputer          iterative chained equations, Bayesian linear regression per column
MissForestImputer   iterative chained equations, random forest per column
SoftImputeImputer   Soft-Impute, iterative soft-thresholded SVD (Mazumder et al., 2010)
GAINImputer         generative adversarial imputation with hints (Yoon et al., 2018), torch
MIWAEImputer        missing-data importance-weighted autoencoder (Mattei & Frellsen, 2019)
MCFlowImputer       normalizing flow and latent network fitted in turn (Richardson et al., 2020)
EMFlowImputer       online EM on a Gaussian in a normalizing flow's latent space (Ma & Ghosh, 2021)
MIRACLEImputer      reconstruction regularised by a causal graph with missingness indicators
                    (Kyono et al., 2021)
=================== ========================================================================

Mixed-type baselines (a DataFrame of float, integer, boolean and categorical columns in, the
same columns and dtypes out; a float array works too):

====================== =====================================================================
class                  method
====================== =====================================================================
ModeImputer            column means (rounded for integers) and modes (labels)
MissForestMixedImputer MissForest with a classifier per label column (Stekhoven & Buehlmann)
MiceForestImputer      chained equations with LightGBM (miceforest; optional dependency)
====================== =====================================================================
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
