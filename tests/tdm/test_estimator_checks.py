"""scikit-learn's own estimator checks, on small settings, the default and paper mode."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from tdm import OTImputer, TDMImputer


@parametrize_with_checks(
    [
        TDMImputer(max_iter=3, batch_size=8, random_state=0),
        TDMImputer.paper(max_iter=3, batch_size=8, random_state=0),
        OTImputer(solver="assignment", max_iter=3, batch_size=8, random_state=0),
        OTImputer(solver="sinkhorn", max_iter=3, batch_size=8, random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check) -> None:
    check(estimator)
