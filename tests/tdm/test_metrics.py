"""Metrics match hand-computed values on tiny cases and refuse undefined inputs: the matrix
metrics, then the table metrics (numeric errors in column SDs, the categorical error rate)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import linear_sum_assignment

from tdm.metrics import (
    categorical_error_rate,
    mae,
    numeric_mae_sd,
    numeric_rmse_sd,
    rmse,
    svm_accuracy,
    wasserstein2,
)

# X_true, X_imputed and mask of the MAE/RMSE cases. Missing cells: (0, 1) and (1, 0).
# Errors there: 2.5 - 2 = 0.5 and 1 - 3 = -2. The observed cell (0, 0) differs by 99 and must
# be ignored.
TRUE = np.array([[1.0, 2.0], [3.0, 4.0]])
IMPUTED = np.array([[100.0, 2.5], [1.0, 4.0]])
MASK = np.array([[False, True], [True, False]])


def test_mae_by_hand() -> None:
    # (|0.5| + |-2|) / 2 = 1.25
    assert mae(TRUE, IMPUTED, MASK) == pytest.approx(1.25)


def test_rmse_by_hand() -> None:
    # sqrt((0.25 + 4) / 2) = sqrt(2.125)
    assert rmse(TRUE, IMPUTED, MASK) == pytest.approx(math.sqrt(2.125))


def test_mae_is_one_mean_over_all_cells_not_a_mean_of_column_means() -> None:
    # Column 0 has 3 missing cells with error 1, column 1 one with error 5.
    # Over all cells: (1 + 1 + 1 + 5) / 4 = 2; a mean of column means would give (1 + 5) / 2 = 3.
    true = np.zeros((3, 2))
    imputed = np.array([[1.0, 5.0], [1.0, 0.0], [1.0, 0.0]])
    mask = np.array([[True, True], [True, False], [True, False]])
    assert mae(true, imputed, mask) == pytest.approx(2.0)
    # RMSE: sqrt((1 + 1 + 1 + 25) / 4) = sqrt(7)
    assert rmse(true, imputed, mask) == pytest.approx(math.sqrt(7.0))


def test_integer_mask_is_accepted() -> None:
    assert mae(TRUE, IMPUTED, MASK.astype(int)) == pytest.approx(1.25)


def test_a_nullable_boolean_mask_is_accepted_and_one_with_na_refused_saying_so() -> None:
    """Bug: pandas' nullable booleans (a frame of dtype "boolean") were refused as "dtype
    object with other values", though every value was True or False."""
    nullable = pd.DataFrame(MASK).astype("boolean")
    assert mae(TRUE, IMPUTED, nullable) == pytest.approx(1.25)
    true = _true()
    mask = np.zeros(true.shape, dtype=bool)
    mask[[1, 2], 0] = True
    imputed = true.assign(x=true["x"] + 1.0)
    expected = numeric_mae_sd(true, imputed, mask)
    assert expected > 0
    assert numeric_mae_sd(true, imputed, pd.DataFrame(mask).astype("boolean")) == expected
    assert numeric_mae_sd(true, imputed, mask.astype(int)) == expected
    nullable.iloc[0, 0] = pd.NA
    with pytest.raises(ValueError, match=r"mask has missing \(NA\) entries"):
        mae(TRUE, IMPUTED, nullable)


# Rows 0 and 1 have missing cells; row 2 is complete and must be left out of W2.
W_TRUE = np.array([[0.0, 0.0], [2.0, 0.0], [5.0, 5.0]])
W_MASK = np.array([[True, True], [True, False], [False, False]])


def test_wasserstein2_picks_the_cheaper_matching() -> None:
    # True rows a1 = (0, 0), a2 = (2, 0); imputed rows b1 = (2, 0), b2 = (0, 1); row 2 differs
    # by a lot but is complete, so it is ignored.
    # Squared costs: a1-b1 = 4, a2-b2 = 4 + 1 = 5  -> identity matching (4 + 5) / 2 = 4.5
    #                a1-b2 = 1, a2-b1 = 0          -> swapped matching  (1 + 0) / 2 = 0.5
    # W2^2 = 0.5, W2 = sqrt(0.5), published W2^2 / 2 = 0.25.
    imputed = np.array([[2.0, 0.0], [0.0, 1.0], [50.0, 50.0]])
    assert wasserstein2(W_TRUE, imputed, W_MASK) == pytest.approx(0.5)
    assert wasserstein2(W_TRUE, imputed, W_MASK, squared=False) == pytest.approx(math.sqrt(0.5))
    assert wasserstein2(W_TRUE, imputed, W_MASK, half=True) == pytest.approx(0.25)


def test_wasserstein2_identity_matching_case() -> None:
    # b1 = (0, 1), b2 = (2, 3): identity 1 and 9 -> 5; swapped 4 + 9 = 13 and 4 + 1 = 5 -> 9.
    # W2^2 = 5.
    imputed = np.array([[0.0, 1.0], [2.0, 3.0], [5.0, 5.0]])
    assert wasserstein2(W_TRUE, imputed, W_MASK) == pytest.approx(5.0)


def test_wasserstein2_is_zero_for_a_permutation_of_the_true_rows() -> None:
    # MAE is 2 here (each missing cell is off by 2), but the two sets of rows are the same.
    imputed = np.array([[2.0, 0.0], [0.0, 0.0], [5.0, 5.0]])
    assert wasserstein2(W_TRUE, imputed, W_MASK) == pytest.approx(0.0, abs=1e-12)


def test_wasserstein2_equals_an_optimal_assignment_on_random_rows() -> None:
    # Uniform weights and equal sizes: exact OT is an assignment problem (Birkhoff).
    rng = np.random.default_rng(0)
    true = rng.standard_normal((60, 4))
    imputed = true + rng.standard_normal((60, 4))
    mask = np.zeros_like(true, dtype=bool)
    mask[::2, 0] = True  # rows 0, 2, ..., 58
    a, b = true[::2], imputed[::2]
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    assert wasserstein2(true, imputed, mask) == pytest.approx(cost[rows, cols].mean(), rel=1e-9)


def test_wasserstein2_above_max_rows_warns_and_returns_nan() -> None:
    imputed = W_TRUE.copy()
    with pytest.warns(RuntimeWarning, match="max_rows=1"):
        assert math.isnan(wasserstein2(W_TRUE, imputed, W_MASK, max_rows=1))
    assert wasserstein2(W_TRUE, imputed, W_MASK, max_rows=None) == pytest.approx(0.0, abs=1e-12)


def test_svm_accuracy_is_one_on_separated_clusters() -> None:
    # Two tight clusters 20 apart, 10 rows each: every fold is classified perfectly -> 1.0.
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0.0, 0.1, (10, 2)), rng.normal(20.0, 0.1, (10, 2))])
    y = np.repeat([0, 1], 10)
    assert svm_accuracy(X, y, n_repeats=3, random_state=0) == pytest.approx(1.0)


@pytest.mark.parametrize("random_state", [None, 0])
def test_svm_accuracy_leaves_numpy_s_global_random_state_alone(random_state) -> None:
    """Bug: the SVC, given no seed, drew one from NumPy's global random state."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    _, keys, position, *_ = np.random.get_state()
    svm_accuracy(X, y, n_repeats=1, random_state=random_state)
    _, keys_after, position_after, *_ = np.random.get_state()
    np.testing.assert_array_equal(keys_after, keys)
    assert position_after == position


def test_svm_accuracy_is_one_half_on_identical_rows_with_balanced_labels() -> None:
    # All rows equal: the SVM predicts one class for every test row. Stratified 5-fold on 10 + 10
    # labels puts 2 of each class in every test fold, so each fold scores exactly 2/4 -> 0.5.
    X = np.ones((20, 3))
    y = np.array(["a", "b"] * 10)
    assert svm_accuracy(X, y, n_repeats=2, random_state=0) == pytest.approx(0.5)


def test_svm_accuracy_is_seeded() -> None:
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 3))
    y = (X[:, 0] + 0.5 * rng.standard_normal(60) > 0).astype(int)
    first = svm_accuracy(X, y, n_repeats=3, random_state=5)
    assert first == svm_accuracy(X, y, n_repeats=3, random_state=5)
    assert 0.5 < first <= 1.0


@pytest.mark.parametrize("metric", [mae, rmse, wasserstein2], ids=["mae", "rmse", "w2"])
def test_no_missing_cell_is_an_error(metric: object) -> None:
    with pytest.raises(ValueError, match="no missing cell"):
        metric(TRUE, TRUE, np.zeros_like(MASK))  # type: ignore[operator]


@pytest.mark.parametrize("metric", [mae, rmse, wasserstein2], ids=["mae", "rmse", "w2"])
def test_nan_left_at_a_masked_cell_is_an_error(metric: object) -> None:
    imputed = IMPUTED.copy()
    imputed[0, 1] = np.nan
    with pytest.raises(ValueError, match="X_imputed has NaN or inf"):
        metric(TRUE, imputed, MASK)  # type: ignore[operator]


def test_bad_shapes_and_options_are_refused() -> None:
    with pytest.raises(ValueError, match="X_imputed must have the shape of X_true"):
        mae(TRUE, IMPUTED[:1], MASK)
    with pytest.raises(ValueError, match="mask must have the shape"):
        mae(TRUE, IMPUTED, MASK[:1])
    with pytest.raises(ValueError, match="mask must be boolean"):
        mae(TRUE, IMPUTED, np.full(MASK.shape, 0.5))
    with pytest.raises(ValueError, match="needs squared=True"):
        wasserstein2(TRUE, IMPUTED, MASK, squared=False, half=True)
    with pytest.raises(ValueError, match="n_splits"):
        svm_accuracy(TRUE, [0, 1], n_splits=1)
    with pytest.raises(ValueError, match="at least n_splits=5 members"):
        svm_accuracy(np.zeros((6, 2)), [0, 0, 0, 0, 0, 1])
    with pytest.raises(ValueError, match="y must be 1-D"):
        svm_accuracy(TRUE, [0, 1, 0])


# ---------------------------------------------------------------------------- tables
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
        numeric_mae_sd(true, true, mask.astype(float) * 2)
    left = true.copy()
    left.loc[0, "x"] = np.nan
    mask[0, 0] = True
    with pytest.raises(ValueError, match="column 'x': an imputed value is missing"):
        numeric_mae_sd(true, left, mask)
    with pytest.raises(ValueError, match="column 'x': a true value at a masked cell is missing"):
        numeric_mae_sd(left, true, mask)  # bug: NaN, silently
