"""Numeric MAE/RMSE in column standard deviations and the categorical error rate, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tdm.metrics import mae
from tdm.mixed_metrics import categorical_error_rate, numeric_mae_sd, numeric_rmse_sd


def _true() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "x": [0.0, 2.0, 4.0, 6.0],  # std (ddof=0) sqrt(5)
            "n": pd.array([1, 1, 3, 3], dtype="Int64"),  # std 1
            "c": pd.Categorical(["a", "b", "a", "b"]),
            "f": pd.array([True, False, True, True], dtype="boolean"),
        }
    )


def test_numeric_errors_are_per_cell_over_the_column_std() -> None:
    true = _true()
    imputed = true.copy()
    imputed.loc[0, "x"] = np.sqrt(5.0)  # error 1 SD
    imputed.loc[1, "n"] = 4  # error 3 SD
    mask = np.zeros(true.shape, dtype=bool)
    mask[0, 0] = mask[1, 1] = mask[2, 1] = True  # the third cell is right: error 0
    assert numeric_mae_sd(true, imputed, mask) == pytest.approx((1 + 3 + 0) / 3)
    assert numeric_rmse_sd(true, imputed, mask) == pytest.approx(np.sqrt((1 + 9 + 0) / 3))


def test_on_z_scored_data_it_is_the_papers_mae() -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    guess = X + rng.standard_normal(X.shape)
    mask = rng.random(X.shape) < 0.3
    got = numeric_mae_sd(pd.DataFrame(X), pd.DataFrame(guess), mask)
    assert got == pytest.approx(mae(X, guess, mask))


def test_categorical_error_rate_counts_labels_and_booleans() -> None:
    true = _true()
    imputed = true.copy()
    imputed.loc[1, "c"] = "a"  # wrong
    imputed.loc[3, "f"] = False  # wrong
    mask = np.zeros(true.shape, dtype=bool)
    mask[[0, 1], 2] = True  # one right, one wrong
    mask[[2, 3], 3] = True  # one right, one wrong
    mask[0, 0] = True  # numeric cells are not counted
    assert categorical_error_rate(true, imputed, mask) == pytest.approx(2 / 4)


def test_a_kind_with_no_masked_cell_gives_nan_and_bad_input_is_refused() -> None:
    true = _true()
    mask = np.zeros(true.shape, dtype=bool)
    mask[0, 0] = True
    assert np.isnan(categorical_error_rate(true, true, mask))
    mask = np.zeros(true.shape, dtype=bool)
    mask[0, 2] = True
    assert np.isnan(numeric_mae_sd(true, true, mask))
    with pytest.raises(ValueError, match="columns and shape"):
        numeric_mae_sd(true, true.drop(columns="x"), mask)
    with pytest.raises(ValueError, match="mask must be boolean"):
        numeric_mae_sd(true, true, mask.astype(int))
    left = true.copy()
    left.loc[0, "x"] = np.nan
    mask[0, 0] = True
    with pytest.raises(ValueError, match="column 'x': an imputed value is missing"):
        numeric_mae_sd(true, left, mask)
