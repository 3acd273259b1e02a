"""The shared standardisation: observed values only, constant columns kept, no overflow."""

from __future__ import annotations

import numpy as np

from tdm.scaling import fit_column_scaling


def test_matches_nan_aware_mean_and_std_on_observed_values() -> None:
    X = np.array([[1.0, 2.0, 5.0], [3.0, np.nan, 5.0], [np.nan, 6.0, 5.0], [5.0, 10.0, np.nan]])
    scaling = fit_column_scaling(X)
    # column 0: 1, 3, 5 -> mean 3, std sqrt(8/3); column 1: 2, 6, 10 -> mean 6, std sqrt(32/3)
    np.testing.assert_allclose(scaling.mean, [3.0, 6.0, 5.0])
    np.testing.assert_allclose(scaling.scale, [np.sqrt(8 / 3), np.sqrt(32 / 3), 1.0])


def test_huge_values_do_not_overflow_and_empty_column_is_neutral() -> None:
    X = np.array([[1e300, np.nan], [-1e300, np.nan], [3e300, np.nan]])
    scaling = fit_column_scaling(X)
    assert np.all(np.isfinite(scaling.mean)) and np.all(np.isfinite(scaling.scale))
    np.testing.assert_allclose(scaling.mean[0], 1e300, rtol=1e-12)
    assert scaling.mean[1] == 0.0 and scaling.scale[1] == 1.0
