"""How much one column tells of another: the shares that choose a wide table's model features."""

from __future__ import annotations

import numpy as np

from tdm._association import ASSOCIATION_ROWS, explained_shares, strongest


def _table(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns: x; x**2 (no linear relation to x); noise; a label set by x's sign; an
    identifier (a distinct code per row); a label that ignores everything."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    table = np.column_stack(
        [
            x,
            x**2 + 0.1 * rng.normal(size=n),
            rng.normal(size=n),
            (x > 0).astype(np.float64),
            np.arange(n, dtype=np.float64),
            rng.integers(0, 3, n).astype(np.float64),
        ]
    )
    return table, np.array([False, False, False, True, True, True])


def test_shares_see_relations_of_any_shape_and_kind_and_nothing_by_chance() -> None:
    """A column explains most of one it sets, even where the relation is not linear (x and
    x**2 are uncorrelated) or crosses kinds (a label set by a number's sign, and back); an
    unrelated column and an identifier, whose many groups would fit anything by chance,
    explain about nothing."""
    table, categorical = _table(2_000, seed=0)
    shares = explained_shares(table, categorical, np.random.default_rng(0))
    assert abs(np.corrcoef(table[:, 0], table[:, 1])[0, 1]) < 0.1
    assert shares[1, 0] > 0.7  # x**2 by the bins of x
    assert shares[3, 0] > 0.8 and shares[0, 3] > 0.5  # label by number, number by label
    assert shares[0, 2] < 0.02 and shares[3, 5] < 0.02 and shares[5, 0] < 0.02
    assert shares[0, 4] < 0.02 and shares[3, 4] < 0.02  # the identifier explains nothing
    assert np.all(np.diag(shares) == 0.0) and shares.min() >= 0.0 and shares.max() <= 1.0


def test_shares_use_observed_rows_and_group_missing_ones() -> None:
    """A target's missing rows are left out; a feature's missing cells are a group of their
    own, so a column missing where another is large explains it; a constant column or one
    observed in fewer than two rows has no shares; only the asked targets are measured."""
    table, categorical = _table(2_000, seed=1)
    table[table[:, 0] > 1.0, 2] = np.nan  # noise, missing where x is large
    table[::3, 0] = np.nan
    table[1:, 5] = np.nan
    table[:, 2] = np.where(np.isnan(table[:, 2]), np.nan, 0.1)  # constant where observed
    shares = explained_shares(table, categorical, np.random.default_rng(0), np.array([0, 1, 2, 5]))
    assert np.isfinite(shares).all()
    assert np.all(shares[2] == 0.0)  # a constant has nothing to explain
    assert shares[0, 2] > 0.2  # the noise's missing cells tell x is large
    assert shares[1, 0] > 0.4  # a third of x is one group, its missing cells
    assert np.all(shares[5] == 0.0) and np.all(shares[[3, 4]] == 0.0)


def test_a_long_table_is_measured_on_a_sample_drawn_only_then() -> None:
    """Up to ASSOCIATION_ROWS rows, every row is measured and the generator is untouched;
    beyond, a uniform sample of that many, which finds the same relations."""
    table, categorical = _table(ASSOCIATION_ROWS, seed=2)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    explained_shares(table, categorical, rng)
    assert rng.bit_generator.state == state
    longer, _ = _table(ASSOCIATION_ROWS + 500, seed=2)
    shares = explained_shares(longer, categorical, rng)
    assert rng.bit_generator.state != state
    assert shares[1, 0] > 0.8 and shares[0, 2] < 0.02


def test_strongest_takes_the_largest_shares_of_other_columns_in_order() -> None:
    """The columns that explain most of column k, never k itself, sorted by position; ties go
    to the first column."""
    shares = np.array(
        [
            [0.0, 0.1, 0.9, 0.1, 0.5],
            [0.0, 0.0, 0.0, 0.0, 0.0],
            [0.2, 0.2, 0.0, 0.9, 0.2],
        ]
    )
    assert strongest(shares, 0, 2).tolist() == [2, 4]
    assert strongest(shares, 0, 3).tolist() == [1, 2, 4]
    assert strongest(shares, 1, 2).tolist() == [0, 2]
    assert strongest(shares, 2, 2).tolist() == [0, 3]


def test_shares_are_the_adjusted_eta_squared_and_goodman_kruskal_tau() -> None:
    """Worked by hand on six rows in two groups: y = 1..6 (group means 2 and 5) keeps
    eta**2 = 13.5 / 17.5 = 27/35 and labels (0, 0, 1 | 1, 1, 2) keep tau = 1 / (22/6) = 3/11;
    less the 1/5 that two groups of six rows explain by chance, over 4/5: 5/7 and 1/11."""
    table = np.array(
        [[1, 0, 0], [2, 0, 0], [3, 0, 1], [4, 1, 1], [5, 1, 1], [6, 1, 2]], dtype=np.float64
    )
    shares = explained_shares(table, np.array([False, True, True]), np.random.default_rng(0))
    np.testing.assert_allclose(shares[0, 1], 5 / 7)
    np.testing.assert_allclose(shares[2, 1], 1 / 11)
