"""The mixed-type baselines (mode, missforest_mixed, miceforest) on random mixed frames: same
columns, index and dtypes back, no missing cell, observed cells unchanged, integers integral,
labels observed; seeded; new rows imputed; bad input refused in one sentence."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from benchmarks.baselines import MiceForestImputer, MissForestMixedImputer, ModeImputer
from benchmarks.datasets import apply_mask
from benchmarks.registry import get_method
from tdm.columns import column_kinds
from tdm.metrics import categorical_error_rate, numeric_mae_sd

FAST: dict[str, dict[str, Any]] = {
    "mode": {},
    "missforest_mixed": {"n_estimators": 10, "max_iter": 3},
    "miceforest": {"iterations": 2},
}
NAMES = [pytest.param(name, id=name) for name in FAST]


def random_frame(seed: int, n: int = 120) -> pd.DataFrame:
    """A complete frame of every supported dtype; labels and integers depend on a latent z."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n)
    colour = np.where(z > 0.4, "red", np.where(z < -0.4, "blue", "green"))
    return pd.DataFrame(
        {
            "f64": z + 0.1 * rng.standard_normal(n),
            "f32": (2 * z + rng.standard_normal(n)).astype(np.float32),
            "i64": pd.array(np.rint(10 * z + 50).astype(int), dtype="Int64"),
            "u8": pd.array(rng.integers(0, 5, n), dtype="UInt8"),
            "flag": pd.array(z > 0, dtype="boolean"),
            "obj": np.asarray(colour, dtype=object),
            "text": pd.array(np.where(z > 0, "up", "down"), dtype="string"),
            "cat": pd.Categorical(np.where(z > 1, "high", "low"), categories=["low", "high", "x"]),
            "complete_int": rng.integers(0, 3, n),  # NumPy ints cannot hold a missing cell
            "complete_bool": rng.random(n) < 0.5,
        },
        index=pd.RangeIndex(100, 100 + n),
    )


def masked(seed: int, p: float = 0.25) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """(truth, masked copy, mask); the last two columns stay complete, row 100 too."""
    truth = random_frame(seed)
    mask = np.random.default_rng(seed + 1).random(truth.shape) < p
    mask[:, -2:] = False
    mask[0] = False
    return truth, apply_mask(truth, mask), mask


def build(name: str, seed: int = 0) -> BaseEstimator:
    return get_method(name).build(random_state=seed, **FAST[name])


def fit_transform(imputer: BaseEstimator, X: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # miceforest warns about rare labels in tiny frames
        return imputer.fit_transform(X)  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", NAMES)
def test_random_frames_come_back_complete_in_their_dtypes(name: str, seed: int) -> None:
    _, given, mask = masked(seed)
    out = fit_transform(build(name, seed), given)
    assert list(out.columns) == list(given.columns)
    assert out.index.equals(given.index)
    assert out.dtypes.equals(given.dtypes)
    assert not out.isna().any().any()
    for j, column in enumerate(given.columns):
        observed = ~mask[:, j]
        assert out[column][observed].equals(given[column][observed]), column
        imputed = out[column][mask[:, j]]
        if column_kinds(given)[column] == "categorical" or column == "flag":
            assert set(imputed.astype(object)) <= set(given[column].dropna().astype(object))
        if column in ("i64", "u8"):
            values = imputed.to_numpy(dtype=np.float64)
            np.testing.assert_array_equal(values, np.rint(values))


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_output(name: str) -> None:
    _, given, _ = masked(0)
    first = fit_transform(build(name, 3), given)
    pd.testing.assert_frame_equal(first, fit_transform(build(name, 3), given))


@pytest.mark.parametrize("name", ["missforest_mixed", "miceforest"])
def test_models_beat_the_mode(name: str) -> None:
    """Columns driven by one latent variable: the chained models predict better than the mode."""
    truth, given, mask = masked(0, p=0.2)
    baseline = fit_transform(build("mode"), given)
    out = fit_transform(build(name), given)
    assert numeric_mae_sd(truth, out, mask) < numeric_mae_sd(truth, baseline, mask)
    assert categorical_error_rate(truth, out, mask) < categorical_error_rate(truth, baseline, mask)


@pytest.mark.parametrize("name", NAMES)
def test_transform_imputes_new_rows(name: str) -> None:
    _, given, _ = masked(0)
    imputer = build(name)
    fit_transform(imputer, given.iloc[:90])
    out = imputer.transform(given.iloc[90:])  # type: ignore[attr-defined]
    assert out.dtypes.equals(given.dtypes)
    assert not out.isna().any().any()


@pytest.mark.parametrize("name", NAMES)
def test_arrays_stay_float_arrays(name: str) -> None:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 2)) @ rng.standard_normal((2, 4))
    X_nan = X.copy()
    X_nan[rng.random(X.shape) < 0.2] = np.nan
    X_nan[0] = X[0]
    out = fit_transform(build(name), X_nan)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out[~np.isnan(X_nan)], X_nan[~np.isnan(X_nan)])


def test_mode_by_hand() -> None:
    frame = pd.DataFrame(
        {
            "x": [1.0, None, 2.0, 6.0],
            "n": pd.array([1, 2, None, 2], dtype="Int64"),
            "c": pd.Series(["b", "a", "b", None], dtype=object),
            "t": pd.Series(["u", "v", None, None], dtype="string"),  # a tie: the first label
        }
    )
    out = ModeImputer().fit_transform(frame)
    assert out.loc[1, "x"] == 3.0
    assert out.loc[2, "n"] == 2  # mean 5/3, rounded
    assert out.loc[3, "c"] == "b"
    assert list(out["t"]) == ["u", "v", "u", "u"]


def test_category_dtype_keeps_its_categories() -> None:
    _, given, _ = masked(0)
    out = fit_transform(build("missforest_mixed"), given)
    assert list(out["cat"].cat.categories) == ["low", "high", "x"]  # "x" declared, never seen
    assert "x" not in set(out["cat"])


@pytest.mark.parametrize(
    "imputer", [ModeImputer(), MissForestMixedImputer(n_estimators=5), MiceForestImputer()]
)
def test_bad_input_is_refused_in_one_sentence(imputer: BaseEstimator) -> None:
    _, given, _ = masked(0)
    with pytest.raises(NotFittedError):
        imputer.transform(given)  # type: ignore[attr-defined]
    empty = given.copy()
    empty["f64"] = np.nan
    with pytest.raises(ValueError, match=r"column\(s\) \['f64'\] have no observed value"):
        imputer.fit(empty)  # type: ignore[attr-defined]
    infinite = given.copy()
    infinite.loc[100, "f64"] = np.inf
    with pytest.raises(ValueError, match="column 'f64' holds infinity"):
        imputer.fit(infinite)  # type: ignore[attr-defined]
    dates = given.assign(when=pd.Timestamp("2024-01-01"))
    with pytest.raises(TypeError, match="column 'when' has dtype datetime64"):
        imputer.fit(dates)  # type: ignore[attr-defined]
    fit_transform(imputer, given)
    with pytest.raises(ValueError, match="fitted on"):
        imputer.transform(given.drop(columns="f64"))  # type: ignore[attr-defined]
    unseen = given.copy()
    unseen["obj"] = unseen["obj"].where(unseen.index != 101, "purple")
    with pytest.raises(ValueError, match="column 'obj' holds the label 'purple'"):
        imputer.transform(unseen)  # type: ignore[attr-defined]


def test_missforest_stops_when_the_change_grows() -> None:
    """Stekhoven & Buehlmann's rule: stop at the first round whose change grew for every kind
    of column, so fewer rounds than max_iter run on an easy table."""
    _, given, _ = masked(0)
    imputer = MissForestMixedImputer(n_estimators=10, max_iter=10, random_state=0)
    fit_transform(imputer, given)
    assert 2 <= imputer.n_iter_ < 10
