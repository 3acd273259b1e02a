"""The shared standardisation: observed values only, constant columns kept, no overflow."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from tdm import TDMImputer
from tdm.scaling import far_values, fit_column_scaling


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


def test_far_values_are_a_few_codes_beyond_the_rest_not_a_heavy_tail() -> None:
    """helper-58: two 2147483647 codes for "unknown" in an age column set its scale, and the
    imputed ages came back in the millions with no word. `far_values` finds such codes (and
    the fit warns of them, naming the column); the largest values of heavy-tailed columns and
    codes near the data (-1, 9999 for ages) are not taken for them."""
    rng = np.random.default_rng(0)
    age = rng.normal(45, 12, 200)
    age[:2] = 2147483647
    assert far_values(age).tolist() == [2147483647.0] * 2
    for code in (-1.0, 9999.0):
        age[:2] = code
        assert far_values(age).size == 0
    for seed in range(20):
        draws = np.random.default_rng(seed)
        for column in (draws.standard_cauchy(2_000), draws.lognormal(0, 3, 2_000)):
            assert far_values(column).size == 0
    assert far_values(np.array([163.441, 227.381, 227.383])).size == 0  # too few to tell

    frame = pd.DataFrame({"age": rng.normal(45, 12, 60), "x": rng.normal(size=60)})
    frame.loc[:1, "age"] = 2147483647
    frame.loc[10:19, "x"] = np.nan
    with pytest.warns(UserWarning, match=r"'age' has 2 observed value\(s\) \(2147483647\) over"):
        TDMImputer(max_iter=2, init="mean", random_state=0).fit(frame)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the caller scaled the columns, and checks them
        TDMImputer(max_iter=2, init="mean", standardize=False, random_state=0).fit(frame)
