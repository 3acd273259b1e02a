"""Rubin's rules (tdm.pooling): a hand-worked example, draws that agree give the complete-data
interval, the between-draw variance widens it, the pooled mean's interval covers the true mean
at its level with proper imputations, and the module's example runs."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import tdm.pooling
from tdm.pooling import pool, pooled_mean


def test_a_hand_worked_example() -> None:
    """Estimates 1, 2, 3 with variances 0.5: W = 0.5, B = 1, T = 0.5 + 4/3 = 11/6; the missing
    information (4/3)/(11/6) = 8/11; Rubin's df = 2 / (8/11)^2 = 3.78125."""
    pooled = pool([1.0, 2.0, 3.0], [0.5, 0.5, 0.5])
    assert pooled.estimate == pytest.approx(2.0)
    assert (pooled.within, pooled.between) == (pytest.approx(0.5), pytest.approx(1.0))
    assert pooled.variance == pytest.approx(11 / 6)
    assert pooled.between_share == pytest.approx(8 / 11)
    assert pooled.df == pytest.approx(3.78125)
    low, high = pooled.interval(0.95)
    half = stats.t.ppf(0.975, 3.78125) * math.sqrt(11 / 6)
    assert (low, high) == (pytest.approx(2 - half), pytest.approx(2 + half))


def test_draws_that_agree_give_the_complete_data_interval() -> None:
    """No between-draw variance: the complete-data variance, and Barnard and Rubin's degrees
    of freedom (49 + 1) / (49 + 3) * 49 = 47.12 for a mean of 50 rows; none given, the normal."""
    pooled = pool([5.0] * 4, [0.04] * 4, df_complete=49)
    assert pooled.between == 0 and pooled.variance == pytest.approx(0.04)
    assert pooled.df == pytest.approx(50 / 52 * 49)
    half = stats.t.ppf(0.95, 50 / 52 * 49) * 0.2
    assert pooled.interval(0.9) == (pytest.approx(5 - half), pytest.approx(5 + half))
    assert pool([5.0] * 4, [0.04] * 4).interval(0.9)[1] == pytest.approx(5 + 1.6449 * 0.2, 1e-4)


def test_disagreeing_draws_widen_the_interval_and_few_rows_lower_the_df() -> None:
    agree = pool([1.0, 1.0, 1.0], [0.1] * 3)
    disagree = pool([0.8, 1.0, 1.2], [0.1] * 3)
    assert np.diff(disagree.interval()) > np.diff(agree.interval())
    assert pool([0.8, 1.0, 1.2], [0.1] * 3, df_complete=19).df < disagree.df


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 estimates"):
        pool([1.0], [0.1])
    with pytest.raises(ValueError, match="non-negative"):
        pool([1.0, 2.0], [0.1, -0.1])
    with pytest.raises(ValueError, match="level"):
        pool([1.0, 2.0], [0.1, 0.1]).interval(1.5)
    with pytest.raises(ValueError, match="df_complete"):
        pool([1.0, 2.0], [0.1, 0.1], df_complete=0)


def test_the_pooled_mean_covers_the_true_mean_at_its_level() -> None:
    """Proper imputations (each draw from a bootstrap of the observed values' normal fit) of a
    N(0, 1) column, 40% MCAR, 100 rows: the 90% interval of the pooled mean covers 0 in about
    90% of 400 repetitions (binomial noise: +-0.03), where treating one draw as complete data
    covers much less."""
    rng = np.random.default_rng(0)
    covered, naive = 0, 0
    repeats, n, m = 400, 100, 10
    for _ in range(repeats):
        x = rng.normal(size=n)
        observed = x[rng.random(n) >= 0.4]
        draws = np.empty((m, n, 1))
        for d in range(m):
            boot = rng.choice(observed, observed.size)
            filled = rng.normal(boot.mean(), boot.std(ddof=1), n)
            filled[: observed.size] = observed
            draws[d, :, 0] = filled
        low, high = pooled_mean(draws, 0).interval(0.9)
        covered += low <= 0 <= high
        single = draws[0, :, 0]
        half = 1.645 * single.std(ddof=1) / math.sqrt(n)
        naive += abs(single.mean()) <= half
    assert 0.86 <= covered / repeats <= 0.95
    assert naive / repeats < 0.84


def test_array_list_and_dataframe_draws_pool_alike() -> None:
    rng = np.random.default_rng(1)
    draws = rng.normal(size=(5, 30, 2))
    frames = [pd.DataFrame(d, columns=["a", "b"]) for d in draws]
    expected = pool(draws[:, :, 1].mean(axis=1), draws[:, :, 1].var(axis=1, ddof=1) / 30, 29)
    assert pooled_mean(draws, 1) == expected
    assert pooled_mean(list(draws), 1) == expected
    assert pooled_mean(frames, "b") == expected


def test_the_module_example_runs() -> None:
    result = doctest.testmod(tdm.pooling, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_a_column_the_draws_lack_or_bad_degrees_of_freedom_are_refused_naming_them() -> None:
    """Bug: KeyError, IndexError or TypeError from pandas, NumPy or a comparison."""
    draws = np.random.default_rng(0).normal(size=(3, 10, 2))
    frames = [pd.DataFrame(d, columns=["a", "b"]) for d in draws]
    labelled = [f.assign(c=np.where(f["a"] > 0, "x", "y")) for f in frames]  # bug: NumPy's error
    numbered = [f.assign(c=np.where(f["a"] > 0, "1", "2")) for f in frames]
    categories = [f.assign(c=pd.Categorical(np.where(f["a"] > 0, 1, 2))) for f in frames]
    cases = [
        (lambda: pooled_mean(frames, 1), r"column 1 is not a column of the draws.*\['a', 'b'\]"),
        (lambda: pooled_mean(draws, "b"), "column 'b' is not a column position.*0 to 1"),
        (lambda: pooled_mean(draws, 7), "column 7 is not a column position"),
        (lambda: pooled_mean([], 0), "needs draws"),
        (lambda: pooled_mean(labelled, "c"), "column 'c' holds labels, not numbers.*is_x"),
        (lambda: pooled_mean([f.to_numpy() for f in labelled], 2), "column 2 holds labels"),
        (lambda: pooled_mean(numbered, "c"), "column 'c' holds labels"),  # bug: averaged
        (lambda: pooled_mean(categories, "c"), "column 'c' holds labels"),
        (lambda: pool([1.0, 2.0], [1.0, 1.0], df_complete="3"), "df_complete must be positive"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    assert pooled_mean(list(draws), -1).estimate == pooled_mean(frames, "b").estimate
    marked = [f.assign(is_x=f["c"] == "x") for f in labelled]  # the share the message suggests
    assert pooled_mean(marked, "is_x").estimate == np.mean([(f["a"] > 0).mean() for f in frames])
