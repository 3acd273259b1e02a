"""Every registered imputer honours one contract (fit, transform, observed cells, seeds); the
baselines pass scikit-learn's estimator checks."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from benchmarks.baselines import BaseImputer
from benchmarks.registry import REGISTRY, get_method
from tdm.metrics import mae
from tdm.simulate import simulate_mcar

# Small settings: the whole file must run in well under a minute on 2 CPU cores.
FAST_PARAMS: dict[str, dict[str, Any]] = {
    "mean": {},
    "ice": {"max_iter": 5},
    "missforest": {"n_estimators": 10, "max_iter": 3},
    "softimpute": {},
    "gain": {"max_iter": 200, "batch_size": 64, "device": "cpu"},
    "miwae": {
        "max_iter": 300,
        "hidden_dim": 32,
        "n_importance": 5,
        "n_imputation_samples": 100,
        "device": "cpu",
    },
    "mcflow": {"batch_size": 64, "n_blocks": 2, "lr": 1e-3, "max_iter": 6, "device": "cpu"},
    "emflow": {"max_iter": 5, "steps_per_round": 30, "lr": 3e-4, "device": "cpu"},
    "miracle": {"max_iter": 400, "lr": 3e-3, "device": "cpu"},
    "mode": {},
    "missforest_mixed": {"n_estimators": 10, "max_iter": 3},
    "miceforest": {"iterations": 2},
    "tdm": {"max_iter": 10, "batch_size": 32, "transform_max_iter": 5, "device": "cpu"},
    "tdm_start": {"batch_size": 32, "transform_max_iter": 5, "device": "cpu"},
    "tdm_fixed_cell_lr": {
        "max_iter": 10,
        "batch_size": 32,
        "transform_max_iter": 5,
        "device": "cpu",
    },
    "tdm_ice_init": {"max_iter": 10, "batch_size": 32, "transform_max_iter": 5, "device": "cpu"},
    "tdm_mean_init": {"max_iter": 10, "batch_size": 32, "transform_max_iter": 5, "device": "cpu"},
    "tdm_paper": {"max_iter": 10, "batch_size": 32, "transform_max_iter": 5, "device": "cpu"},
    "ot_sh": {"max_iter": 10, "batch_size": 32, "transform_max_iter": 5},
    "ot_ns": {"max_iter": 10, "batch_size": 32, "transform_max_iter": 5},
}
# Even smaller settings for scikit-learn's estimator checks, which fit dozens of times.
CHECK_PARAMS: dict[str, dict[str, Any]] = {
    "missforest": {"n_estimators": 5, "max_iter": 2},
    "gain": {"max_iter": 20},
    "miwae": {"max_iter": 20, "hidden_dim": 8, "n_imputation_samples": 10},
    "mcflow": {"max_iter": 2, "steps_per_round": 5, "hidden_dim": 8},
    "emflow": {"max_iter": 2, "steps_per_round": 5, "hidden_dim": 8},
    "miracle": {"max_iter": 20, "hidden_dim": 8},
}
# Methods that must clearly beat column means on low-rank data with 20% MCAR.
SHOULD_BEAT_MEAN = (
    "ice",
    "missforest",
    "softimpute",
    "miwae",
    "mcflow",
    "emflow",
    "miracle",
    "missforest_mixed",
    "miceforest",
)


# The baselines: registered methods whose factory is a BaseImputer class.
BASELINES = tuple(
    name
    for name, method in REGISTRY.items()
    if isinstance(method.factory, type) and issubclass(method.factory, BaseImputer)
)
ALL = [pytest.param(name, id=name) for name in REGISTRY]  # fixtures included


def _fitted(names: Any) -> list[Any]:
    """`names` as parameters of tests that share a method's `_fit`: one xdist group per
    method, so that its fit is made once, by the worker that runs them all."""
    return [pytest.param(n, id=n, marks=pytest.mark.xdist_group(f"fit-{n}")) for n in names]


def make_imputer(name: str, **params: Any) -> BaseEstimator:
    return get_method(name).build(**params)


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    # The networks here are tiny; on a busy 2-core machine intra-op threads only contend.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rank-2 Gaussian data plus noise (240 x 8) with 20% of the cells missing at random."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((240, 2)) @ rng.standard_normal((2, 8))
    X += 0.3 * rng.standard_normal(X.shape)
    mask = simulate_mcar(X, 0.2, random_state=1)
    return X, np.where(mask, np.nan, X), mask


_CACHE: dict[tuple[str, int], tuple[BaseEstimator, np.ndarray]] = {}


def _fit(name: str, X_missing: np.ndarray, seed: int = 0) -> tuple[BaseEstimator, np.ndarray]:
    """Fit (once per name and seed) and return the imputer and its output."""
    if (name, seed) not in _CACHE:
        imputer = make_imputer(name, random_state=seed, **FAST_PARAMS[name])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning with so few iterations
            _CACHE[name, seed] = imputer, imputer.fit_transform(X_missing)  # type: ignore[attr-defined]
    return _CACHE[name, seed]


def _light(name: str) -> Any:
    """A seeded imputer with the estimator checks' settings where it has them: the tests of
    seeding need the code paths, not a good fit."""
    return make_imputer(name, random_state=0, **{**FAST_PARAMS[name], **CHECK_PARAMS.get(name, {})})


# --------------------------------------------------------------------------------------------
# the contract
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", _fitted(REGISTRY))
def test_output_is_complete_and_keeps_observed_cells(name: str, data: tuple) -> None:
    """Same shape, no NaN left, observed cells bit-for-bit identical."""
    _, X_missing, mask = data
    _, out = _fit(name, X_missing)
    assert isinstance(out, np.ndarray) and out.shape == X_missing.shape
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out[~mask], X_missing[~mask])


@pytest.mark.parametrize("name", ALL)
def test_same_random_state_same_output(name: str, data: tuple) -> None:
    """Two fits with the same seed agree exactly."""
    _, X_missing, _ = data
    first, again = (_light(name).fit_transform(X_missing) for _ in range(2))  # type: ignore[attr-defined]
    np.testing.assert_array_equal(again, first)


@pytest.mark.parametrize("name", ALL)
def test_global_random_states_are_untouched(name: str, data: tuple) -> None:
    """fit and transform draw from local generators only: NumPy's and torch's global states
    are the same before and after."""
    _, X_missing, _ = data
    _, np_keys, np_position, *_ = np.random.get_state()
    torch_state = torch.get_rng_state().clone()
    _light(name).fit(X_missing).transform(X_missing[:10])  # type: ignore[attr-defined]
    _, keys, position, *_ = np.random.get_state()  # a draw moves the position
    np.testing.assert_array_equal(np_keys, keys)
    assert position == np_position
    assert torch.equal(torch_state, torch.get_rng_state()), "torch's global RNG was used"


@pytest.mark.parametrize("name", _fitted(REGISTRY))
def test_transform_imputes_new_rows(name: str, data: tuple) -> None:
    """A fitted imputer completes rows it has not seen, keeping their observed cells."""
    X, X_missing, _ = data
    imputer, _ = _fit(name, X_missing)
    rng = np.random.default_rng(2)
    new = X[:5] + 0.1 * rng.standard_normal((5, X.shape[1]))
    new_mask = np.zeros(new.shape, dtype=bool)
    new_mask[np.arange(5), np.arange(5)] = True
    new_mask[4, :] = True  # a row with nothing observed
    new_mask[4, 0] = False
    new_missing = np.where(new_mask, np.nan, new)
    out = imputer.transform(new_missing)  # type: ignore[attr-defined]
    assert out.shape == new.shape and np.isfinite(out).all()
    np.testing.assert_array_equal(out[~new_mask], new[~new_mask])


@pytest.mark.parametrize("name", [n for n in BASELINES])
def test_hyperparameters_are_stored_unchanged(name: str) -> None:
    """get_params returns what was given, and clone rebuilds an equal unfitted estimator."""
    imputer = make_imputer(name, random_state=3, **FAST_PARAMS[name])
    params = imputer.get_params()
    assert params["random_state"] == 3
    for key, value in FAST_PARAMS[name].items():
        assert params[key] == value
    assert clone(imputer).get_params() == params


@pytest.mark.parametrize("name", _fitted(SHOULD_BEAT_MEAN))
def test_beats_column_means_on_low_rank_data(name: str, data: tuple) -> None:
    """On rank-2 data the column mean is far off; these methods recover much of the signal."""
    X, X_missing, mask = data
    baseline = mae(X, _fit("mean", X_missing)[1], mask)
    error = mae(X, _fit(name, X_missing)[1], mask)
    # Measured: mean 0.91; ice 0.30, softimpute 0.35, miwae 0.35, missforest 0.42.
    assert error < 0.75 * baseline


def test_gain_is_finite_and_not_absurd(data: tuple) -> None:
    """GAIN is a weak baseline; with 200 steps it only has to stay in the data's range."""
    X, X_missing, mask = data
    baseline = mae(X, _fit("mean", X_missing)[1], mask)
    out = _fit("gain", X_missing)[1]
    assert mae(X, out, mask) < 1.5 * baseline
    assert (out >= np.nanmin(X_missing, axis=0) - 1e-6).all()
    assert (out <= np.nanmax(X_missing, axis=0) + 1e-6).all()  # sigmoid output, min-max scaled


def test_mean_imputer_by_hand() -> None:
    """Column 0 observed values 1 and 3 -> 2; column 1 observed 4 -> 4."""
    X = np.array([[1.0, np.nan], [np.nan, 4.0], [3.0, np.nan]])
    out = make_imputer("mean").fit_transform(X)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(out, [[1.0, 4.0], [2.0, 4.0], [3.0, 4.0]])


def test_softimpute_transform_is_the_fixed_point_of_its_iterations(data: tuple) -> None:
    """The closed-form transform satisfies Z_miss = S_lambda(Y)_miss on the training rows."""
    _, X_missing, mask = data
    # Soft-Impute converges linearly: the residual of the last iterate scales as sqrt(tol)
    # (measured 2e-7 at tol=1e-14, in about 110 iterations).
    imputer = make_imputer("softimpute", tol=1e-14, max_iter=5000)
    out = imputer.fit_transform(X_missing)  # type: ignore[attr-defined]
    centred = out - imputer.mean_  # type: ignore[attr-defined]
    U, s, Vt = np.linalg.svd(centred, full_matrices=False)
    shrunk = (U * np.maximum(s - imputer.shrinkage_, 0.0)) @ Vt  # type: ignore[attr-defined]
    np.testing.assert_allclose(shrunk[mask], centred[mask], atol=1e-6)


# --------------------------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", BASELINES)
def test_bad_input_is_refused(name: str, data: tuple) -> None:
    _, X_missing, _ = data
    imputer = make_imputer(name, random_state=0, **FAST_PARAMS[name])
    with pytest.raises(NotFittedError):
        imputer.transform(X_missing)  # type: ignore[attr-defined]
    empty = X_missing.copy()
    empty[:, 3] = np.nan
    with pytest.raises(ValueError, match=r"column\(s\) \[3\] of X have no observed value"):
        imputer.fit(empty)  # type: ignore[attr-defined]
    infinite = X_missing.copy()
    infinite[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        imputer.fit(infinite)  # type: ignore[attr-defined]


def test_transform_checks_the_number_of_columns(data: tuple) -> None:
    _, X_missing, _ = data
    imputer, _ = _fit("mean", X_missing)
    with pytest.raises(ValueError, match="features"):
        imputer.transform(X_missing[:, :3])  # type: ignore[attr-defined]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["gain", "miwae", "mcflow", "emflow", "miracle"])
def test_neural_baselines_run_on_cuda(name: str, data: tuple) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    _, X_missing, mask = data
    params = {**FAST_PARAMS[name], "device": "cuda"}
    imputer = make_imputer(name, random_state=0, **params)
    out = imputer.fit_transform(X_missing)  # type: ignore[attr-defined]
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out[~mask], X_missing[~mask])
    assert imputer.device_.type == "cuda"  # type: ignore[attr-defined]
    again = make_imputer(name, random_state=0, **params).fit_transform(X_missing)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(out, again)


# --------------------------------------------------------------------------------------------
# scikit-learn's own API checks
# --------------------------------------------------------------------------------------------
@parametrize_with_checks(
    [
        make_imputer(name, random_state=0, **{**FAST_PARAMS[name], **CHECK_PARAMS.get(name, {})})
        for name in BASELINES
    ],
    expected_failed_checks=None,
)
def test_scikit_learn_api(estimator: BaseEstimator, check: Any) -> None:
    """Every baseline passes scikit-learn's estimator checks (with tiny settings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)
