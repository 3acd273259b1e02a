"""Missing-value imputation by Transformed Distribution Matching (Zhao et al., ICML 2023).

Everyday imports live here::

    from tdm import TDMImputer, OTImputer, simulate_mcar, mae
"""

from tdm._optimise import FitProgress
from tdm._version import __version__
from tdm.coupling import InvertibleNetwork
from tdm.imputer import OTImputer, TDMImputer
from tdm.metrics import mae, rmse, svm_accuracy, wasserstein2
from tdm.simulate import MECHANISMS, simulate, simulate_mar, simulate_mcar
from tdm.transport import transport_terms

__all__ = [
    "MECHANISMS",
    "FitProgress",
    "InvertibleNetwork",
    "OTImputer",
    "TDMImputer",
    "__version__",
    "mae",
    "rmse",
    "simulate",
    "simulate_mar",
    "simulate_mcar",
    "svm_accuracy",
    "transport_terms",
    "wasserstein2",
]
