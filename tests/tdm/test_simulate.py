"""Missing-value simulators hit their rates, are seeded, and are (not) at random as claimed."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ks_2samp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from tdm.simulate import (
    MECHANISMS,
    simulate,
    simulate_mar,
    simulate_mcar,
    simulate_mnar_logistic,
    simulate_mnar_quantile,
    simulate_mnar_quantile_published,
)

N, D, P = 3000, 10, 0.3


@pytest.fixture(scope="module", name="X")
def _gaussian_data() -> np.ndarray:
    """Correlated Gaussian data, standardised like the paper's datasets."""
    rng = np.random.default_rng(0)
    cov = 0.5 * np.eye(D) + 0.5  # unit variances, correlation 0.5
    data = rng.multivariate_normal(np.zeros(D), cov, size=N)
    return (data - data.mean(axis=0)) / data.std(axis=0)


def _auc_of_logistic_fit(inputs: np.ndarray, target: np.ndarray) -> float:
    model = LogisticRegression().fit(inputs, target)
    return float(roc_auc_score(target, model.predict_proba(inputs)[:, 1]))


# --------------------------------------------------------------------------------------------
# rates and seeding, for every mechanism
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["mcar", "mar", "mnarl", "mnarq"])
def test_overall_rate_is_p(X: np.ndarray, mechanism: str) -> None:
    """Every mechanism hits the requested share of missing cells over the whole table."""
    rates = [simulate(X, mechanism, P, random_state=seed).mean() for seed in range(5)]
    # 5 x 30,000 Bernoulli cells: the standard error of the mean rate is about 0.001.
    assert abs(np.mean(rates) - P) < 0.006
    assert max(abs(r - P) for r in rates) < 0.02


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_same_seed_same_mask(X: np.ndarray, mechanism: str) -> None:
    """A seed fixes the mask; another seed changes it; the result is a boolean array."""
    first = simulate(X, mechanism, P, random_state=7)
    assert first.dtype == np.bool_ and first.shape == X.shape
    np.testing.assert_array_equal(first, simulate(X, mechanism, P, random_state=7))
    assert not np.array_equal(first, simulate(X, mechanism, P, random_state=8))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_global_random_state_untouched(X: np.ndarray, mechanism: str) -> None:
    """Simulators use a local generator only."""
    _, keys, position, *_ = np.random.get_state()
    simulate(X, mechanism, P, random_state=None)
    _, keys_after, position_after, *_ = np.random.get_state()  # a draw moves the position
    np.testing.assert_array_equal(keys, keys_after)
    assert position_after == position


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_no_column_entirely_missing(mechanism: str) -> None:
    """Even at p=0.95 on 4 rows, one cell of every column stays observed."""
    rng = np.random.default_rng(1)
    tiny = rng.standard_normal((4, 6))
    params = {
        "mar": {"rate_scope": "affected"},
        "mnarq": {"q": 0.45, "p_params": 0.9, "rate_scope": "affected"},
    }
    for seed in range(50):
        mask = simulate(tiny, mechanism, 0.95, random_state=seed, **params.get(mechanism, {}))
        assert not mask.all(axis=0).any()


# --------------------------------------------------------------------------------------------
# MAR
# --------------------------------------------------------------------------------------------
def test_mar_drivers_fully_observed_and_decide_missingness(X: np.ndarray) -> None:
    """floor(0.3 D) columns have no missing value, and they predict the others' missingness."""
    mask = simulate_mar(X, P, random_state=3)
    drivers = np.flatnonzero(~mask.any(axis=0))
    targets = np.flatnonzero(mask.any(axis=0))
    assert drivers.size == 3 and targets.size == D - 3
    # Rate within the target columns is p * D / d_na so that the whole table has rate p.
    assert abs(mask[:, targets].mean() - P * D / targets.size) < 0.01
    aucs = [_auc_of_logistic_fit(X[:, drivers], mask[:, j]) for j in targets]
    # The unit-variance logistic index gives an AUC near 0.7; MCAR would give about 0.5.
    assert min(aucs) > 0.6


def test_mar_rate_scope_affected_is_the_published_convention(X: np.ndarray) -> None:
    """With rate_scope='affected', p is hit in the non-driver columns only."""
    mask = simulate_mar(X, P, rate_scope="affected", random_state=4)
    targets = mask.any(axis=0)
    assert abs(mask[:, targets].mean() - P) < 0.01
    assert abs(mask.mean() - P * targets.sum() / D) < 0.01


def test_mar_refuses_an_unreachable_rate() -> None:
    """0.6 over 3 columns with 1 driver needs 0.9 in each target; 0.7 would need 1.05."""
    X3 = np.random.default_rng(0).standard_normal((100, 3))
    assert abs(simulate_mar(X3, 0.6, random_state=0).mean() - 0.6) < 0.05
    with pytest.raises(ValueError, match="non-driver columns"):
        simulate_mar(X3, 0.7, random_state=0)


# --------------------------------------------------------------------------------------------
# MNAR logistic
# --------------------------------------------------------------------------------------------
def test_mnarl_missingness_depends_on_values_that_are_missing(X: np.ndarray) -> None:
    """Inputs are masked MCAR, and the others' missingness follows the inputs' hidden values."""
    mask = simulate_mnar_logistic(X, P, random_state=5)
    # Every column has rate p, the inputs included.
    np.testing.assert_allclose(mask.mean(axis=0), P, atol=0.035)
    # floor(0.3 D) = 3 input columns are masked MCAR: nothing in X predicts their mask, while
    # the masks of the other 7 follow the inputs.
    aucs_all = np.array([_auc_of_logistic_fit(X, mask[:, j]) for j in range(D)])
    inputs, targets = np.sort(np.argsort(aucs_all)[:3]), np.sort(np.argsort(aucs_all)[3:])
    assert aucs_all[inputs].max() < 0.56
    assert aucs_all[targets].min() > 0.6
    # Rows where some input is missing: the missingness of a target column is still predicted
    # by the true (now hidden) input values.
    hidden = mask[:, inputs].any(axis=1)
    assert hidden.mean() > 0.5
    aucs = [_auc_of_logistic_fit(X[hidden][:, inputs], mask[hidden, j]) for j in targets]
    assert min(aucs) > 0.6


def test_mnarl_without_excluded_inputs_masks_every_column(X: np.ndarray) -> None:
    """exclude_inputs=False: every column is masked by a logistic model of all columns."""
    mask = simulate_mnar_logistic(X, P, exclude_inputs=False, random_state=6)
    np.testing.assert_allclose(mask.mean(axis=0), P, atol=0.035)
    assert min(_auc_of_logistic_fit(X, mask[:, j]) for j in range(D)) > 0.6


# --------------------------------------------------------------------------------------------
# MNAR quantile: ours is not at random, the published one is
# --------------------------------------------------------------------------------------------
def _missing_vs_observed(X: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    affected = mask.any(axis=0)
    values, hidden = X[:, affected], mask[:, affected]
    return values[hidden], values[~hidden]


def test_mnarq_removes_only_tail_values(X: np.ndarray) -> None:
    """Missing values lie beyond the 25% / 75% quantiles, so they are far from the centre."""
    mask = simulate_mnar_quantile(X, P, random_state=9)
    for j in np.flatnonzero(mask.any(axis=0)):
        low, high = np.quantile(X[:, j], [0.25, 0.75])
        hidden = X[mask[:, j], j]
        assert ((hidden <= low) | (hidden >= high)).all()
    missing, observed = _missing_vs_observed(X, mask)
    # Gaussian tails beyond the quartiles have mean |z| of about 1.27; the middle half 0.33.
    assert np.abs(missing).mean() > 2.0 * np.abs(observed).mean()
    assert ks_2samp(np.abs(missing), np.abs(observed)).pvalue < 1e-10


def test_mnarq_rate_scope_and_cuts(X: np.ndarray) -> None:
    """'affected' hits p inside the affected columns; 'upper' removes large values only."""
    mask = simulate_mnar_quantile(X, P, rate_scope="affected", random_state=10)
    affected = mask.any(axis=0)
    assert affected.sum() == 7  # ceil(0.7 * 10)
    assert abs(mask[:, affected].mean() - P) < 0.01
    upper = simulate_mnar_quantile(X, 0.15, q=0.3, cut="upper", random_state=11)
    for j in np.flatnonzero(upper.any(axis=0)):
        assert X[upper[:, j], j].min() >= np.quantile(X[:, j], 0.7)


def test_mnarq_refuses_more_missing_cells_than_tail_cells(X: np.ndarray) -> None:
    """With 3 affected columns of which half is eligible, 30% of the table cannot be reached."""
    with pytest.raises(ValueError, match="raise p_params or q"):
        simulate_mnar_quantile(X, P, p_params=0.3, random_state=0)


def test_mnarq_published_is_mcar_on_70_percent_of_columns(X: np.ndarray) -> None:
    """Regression guard for the published trap: q=0.75, both tails -> every value eligible."""
    mask = simulate_mnar_quantile_published(X, P, random_state=12)
    affected = mask.any(axis=0)
    assert affected.sum() == 7  # floor(0.7 * 10)
    assert abs(mask[:, affected].mean() - P) < 0.01  # MCAR rate p on those columns
    assert abs(mask.mean() - 0.21) < 0.01  # so only 21% overall
    missing, observed = _missing_vs_observed(X, mask)
    ratio = np.abs(missing).mean() / np.abs(observed).mean()
    assert 0.95 < ratio < 1.05
    assert ks_2samp(missing, observed).pvalue > 0.01


def test_mnarq_published_with_small_q_is_tail_censoring(X: np.ndarray) -> None:
    """With q=0.25 the published variant censors tails too, at rate p times the tail share."""
    mask = simulate_mnar_quantile_published(X, P, q=0.25, random_state=13)
    affected = mask.any(axis=0)
    assert abs(mask[:, affected].mean() - P * 0.5) < 0.01
    missing, observed = _missing_vs_observed(X, mask)
    # Missing: tail values only (mean |z| about 1.27). Observed: the middle half plus the 70% of
    # the tails that were kept, (0.5 * 0.33 + 0.35 * 1.27) / 0.85, about 0.72.
    assert np.abs(missing).mean() > 1.5 * np.abs(observed).mean()


# --------------------------------------------------------------------------------------------
# validation and dispatch
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_p_outside_open_unit_interval_is_refused(X: np.ndarray, p: float) -> None:
    with pytest.raises(ValueError, match=r"p must be a number in the open interval \(0, 1\)"):
        simulate_mcar(X, p)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.zeros(5), "X must be 2-D"),
        (np.array([[1.0, np.nan], [2.0, 3.0]]), "complete and finite"),
        (np.array([[1.0, np.inf], [2.0, 3.0]]), "complete and finite"),
        (np.zeros((1, 3)), "at least 2 rows"),
    ],
    ids=["1-D", "nan", "inf", "one-row"],
)
def test_bad_data_is_refused(bad: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_mcar(bad, 0.3)


def test_bad_parameters_name_themselves(X: np.ndarray) -> None:
    with pytest.raises(ValueError, match="mechanism must be one of"):
        simulate(X, "mnar", 0.3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="p_obs"):
        simulate_mar(X, 0.3, p_obs=1.0)
    with pytest.raises(ValueError, match="at least 2 columns"):
        simulate_mar(X[:, :1], 0.3)
    with pytest.raises(ValueError, match=r"q must be below 0\.5 with cut='both'"):
        simulate_mnar_quantile(X, 0.3, q=0.75)
    with pytest.raises(ValueError, match="cut must be one of"):
        simulate_mnar_quantile(X, 0.3, cut="middle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rate_scope must be one of"):
        simulate_mar(X, 0.3, rate_scope="columns")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="random_state"):
        simulate_mcar(X, 0.3, random_state=np.random.RandomState(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="random_state must be a non-negative int; got -1"):
        simulate_mcar(X, 0.3, random_state=-1)  # bug: NumPy's words, naming no parameter


def test_dispatcher_matches_direct_calls(X: np.ndarray) -> None:
    """simulate(X, name, p, ...) is the named simulator with the same arguments."""
    direct = {
        "mcar": simulate_mcar(X, P, random_state=2),
        "mar": simulate_mar(X, P, p_obs=0.5, random_state=2),
        "mnarl": simulate_mnar_logistic(X, P, random_state=2),
        "mnarq": simulate_mnar_quantile(X, P, q=0.3, random_state=2),
        "mnarq_published": simulate_mnar_quantile_published(X, P, random_state=2),
    }
    params = {"mar": {"p_obs": 0.5}, "mnarq": {"q": 0.3}}
    for name, expected in direct.items():
        got = simulate(X, name, P, random_state=2, **params.get(name, {}))  # type: ignore[arg-type]
        np.testing.assert_array_equal(got, expected)
