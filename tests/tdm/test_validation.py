"""The declarative parameter checks: what each constraint accepts, and errors that name the
owner, the parameter, what is allowed and what came."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import pandas as pd
import pytest

from tdm import TDMImputer
from tdm._validation import Boolean, Interval, InvalidParameterError, Options, validate_params

CONSTRAINTS = {
    "n": [Interval(Integral, 1, None)],
    "rate": [Interval(Real, 0, 1, closed="neither")],
    "noise": [Interval(Real, 0, None)],
    "kind": [Options(("a", "b"))],
    "flag": [Boolean()],
    "limit": [Interval(Integral, 1, None), None],
    "hook": ["callable", None],
}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n": 0}, "Owner: n must be a positive integer; got n=0"),
        ({"n": 2.0}, "Owner: n must be a positive integer; got n=2.0"),
        ({"n": True}, "Owner: n must be a positive integer; got n=True"),
        ({"rate": 1.0}, "rate must be a number in the open interval (0, 1); got rate=1.0"),
        ({"rate": float("nan")}, "rate must be a number in the open interval (0, 1)"),
        ({"noise": -1e-9}, "noise must be a non-negative number"),
        ({"kind": "c"}, "kind must be one of ('a', 'b'); got kind='c'"),
        ({"flag": "yes"}, "flag must be True or False; got flag='yes'"),
        ({"limit": 0}, "limit must be a positive integer or None; got limit=0"),
        ({"hook": 3}, "hook must be a callable or None; got hook=3"),
    ],
)
def test_a_value_outside_every_constraint_is_refused_by_name(params, message) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        validate_params("Owner", params, CONSTRAINTS)
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)


def test_values_inside_a_constraint_pass() -> None:
    validate_params(
        "Owner",
        {
            "n": np.int64(3),
            "rate": np.float32(0.5),
            "noise": 0,
            "kind": "b",
            "flag": np.bool_(False),
            "limit": None,
            "hook": print,
            "unchecked": object(),
        },
        CONSTRAINTS,
    )


def test_from_settings_validates_every_name_and_value_before_any_data() -> None:
    """Settings held as data build the imputer, checked as fit checks them; an unknown name is
    refused with the known ones, an out-of-range value with its constraint."""
    from tdm import TDMImputer

    assert TDMImputer.from_settings({"max_iter": 5, "network_lr": None}).max_iter == 5
    assert TDMImputer.from_settings(None).get_params() == TDMImputer().get_params()
    with pytest.raises(ValueError, match=r"unknown setting 'max_iters'.*max_iter"):
        TDMImputer.from_settings({"max_iters": 5})
    with pytest.raises(ValueError, match="max_iter must be a non-negative integer"):
        TDMImputer.from_settings({"max_iter": -1})


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"device": "gpu"}, "device must be 'auto', 'cpu', 'cuda' or 'cuda:N'; got device='gpu'"),
        ({"bounds": {"x": (1, 0)}}, r"bounds\['x'\] = \(1, 0\) is not an interval"),
        ({"bounds": {"x": "ab"}}, r"bounds\['x'\] must be a pair \(low, high\)"),
    ],
    ids=["device-name", "bounds-reversed", "bounds-text"],
)
def test_from_settings_refuses_a_device_or_bounds_fit_would_refuse(setting, message) -> None:
    """Bug: these passed `from_settings` (a config's check) and failed only at fit. What needs
    the data or the machine (the bounds' column names, CUDA) is still checked at fit."""
    from tdm import TDMImputer

    with pytest.raises(ValueError, match=message):
        TDMImputer.from_settings(setting)
    assert TDMImputer.from_settings({"device": "cuda:1", "bounds": {"x": (0, None)}})


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"standardize": "no"}, "standardize must be True or False"),
        ({"verbose": "loud"}, "verbose must be a non-negative integer or True or False"),
        ({"verbose": -1}, "verbose must be a non-negative integer"),
        ({"random_state": "abc"}, r"random_state must be an integer in \[0, 4294967295\]"),
    ],
    ids=["standardize-text", "verbose-text", "verbose-negative", "random-state-text"],
)
def test_settings_of_the_wrong_kind_are_refused_naming_them(setting: dict, message: str) -> None:
    """Bug: standardize="no" was accepted and, being truthy, standardised; verbose="loud" and -1
    were accepted; a text random_state got scikit-learn's message, naming no parameter."""
    X = np.random.default_rng(0).normal(size=(20, 3))
    X[::4, 0] = np.nan
    with pytest.raises(ValueError, match=message):
        TDMImputer(max_iter=1, init="mean", **setting).fit(X)


def test_an_array_of_text_is_refused_naming_the_column_and_value() -> None:
    """Bug: a NumPy array of text failed deep in scikit-learn ("could not convert string to
    float: np.str_('a')"), naming no column. The refusal names the column and the value and
    says a DataFrame takes text columns; an object array of numbers and None is imputed."""
    text = np.array([["1", "a"], ["2", "b"], ["3", "nan"], ["4", "c"], ["5", "d"]])
    with pytest.raises(ValueError, match=r"column 1 of the array holds 'a'.*Pass a DataFrame"):
        TDMImputer(max_iter=3).fit(text)
    numbers = np.array([[1.0, None], [2, 3], [3, 4], [4, 5], [5, 6.0]], dtype=object)
    out = TDMImputer(max_iter=3, init="mean", random_state=0).fit_transform(numbers)
    assert np.isfinite(out.astype(float)).all() and out[1:, 1].tolist() == [3, 4, 5, 6.0]


def test_an_array_integer_that_float64_cannot_hold_is_refused_naming_column_and_row() -> None:
    """Bug: an int64 (or object) array holding integers beyond 2**53 came back as float64
    with its observed cells changed (4611686018427387905 became ...904), silently. Such an
    integer is refused, naming the column and the row; one float64 holds exactly (2**60, the
    int64 minimum) passes, and a DataFrame's integer column keeps it exact."""
    ids = 2**62 + 1 + 3 * np.arange(6, dtype=np.int64)
    X = np.column_stack([ids, np.arange(6)])
    with pytest.raises(
        ValueError, match=r"column 0 of the array holds 4611686018427387905 \(row 0\)"
    ):
        TDMImputer(max_iter=3).fit(X)
    objects = np.array([[1.0, 2**62 + 1], [2.0, None], [3.0, 5], [4.0, 6], [5.0, 7]], dtype=object)
    with pytest.raises(ValueError, match=r"column 1 of the array holds 4611686018427387905"):
        TDMImputer(max_iter=3).fit(objects)
    rows = [[2**62 + 1 + 3 * i, float(i)] for i in range(6)]  # a list of rows is read as one
    with pytest.raises(ValueError, match=r"column 0 of the array holds 4611686018427387905"):
        TDMImputer(max_iter=3).fit(rows)
    huge = np.array([[10**400, 1.0], [2, None], [1, 2], [3, 4], [5, 6]], dtype=object)
    with pytest.raises(ValueError, match=r"holds 100000000000\.\.\. \(401 digits\) \(row 0\)"):
        TDMImputer(max_iter=3).fit(huge)  # was OverflowError's traceback
    exact = np.array([[2**60, 1.0], [-(2**63), np.nan], [3, 4.0], [5, 6.0], [7, 8.0]])
    out = TDMImputer(max_iter=3, init="mean", random_state=0).fit_transform(exact)
    assert out[0, 0] == 2**60 and out[1, 0] == -(2**63)
    frame = pd.DataFrame({"id": pd.array(ids, dtype="Int64"), "x": [1.0, np.nan, 3, 4, 5, 6]})
    kept = TDMImputer(max_iter=3, init="mean", random_state=0).fit_transform(frame)
    assert kept["id"].tolist() == ids.tolist()


def test_values_too_far_apart_to_standardise_are_refused_naming_the_column() -> None:
    """Bug: finite values near float64's largest (codes for "unknown") were refused as
    "infinite" or failed in scikit-learn ("Input X contains infinity"), and a new row
    1e160 standard deviations out failed in BayesianRidge ("contains NaN"), one 1e20 out in
    the float32 transport ("lower lr"). All are refused, naming the column and the row, before
    any model sees them; 1e12 is imputed."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    X[0, 0], X[1, 0], X[2, 0] = 1.79e308, -1.79e308, 1.79e308
    X[5, 0] = X[6, 1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow warning either
        for init in ("auto", "mean"):
            with (
                pytest.warns(
                    UserWarning, match=r"column 0 has 3 observed value\(s\) \(-1\.79e\+308"
                ),
                pytest.raises(ValueError, match=r"column 0 holds -1\.79e\+308 \(row 1\), too far"),
            ):
                TDMImputer(max_iter=3, init=init).fit(X)
    frame = pd.DataFrame(rng.normal(size=(30, 2)), columns=["a", "b"]).mask(
        rng.random((30, 2)) < 0.2
    )
    imputer = TDMImputer(max_iter=3, init="mean", random_state=0).fit(frame)
    far = pd.DataFrame({"a": [1.0, np.nan], "b": [np.nan, -1e20]})
    with pytest.raises(
        ValueError, match=r"'b' holds -1e\+20 \(row 1\), [\d.]+e\+\d+ standard deviations from the"
    ):
        imputer.transform(far)
    near = imputer.transform(far.replace(-1e20, -1e12))
    assert near["b"].iloc[1] == -1e12 and np.isfinite(near.to_numpy()).all()


def test_values_far_out_that_float32_holds_are_imputed() -> None:
    """helper-62: the first version refused new rows 1e15 standard deviations out, which a
    column constant but for float noise (scale 3e-17) meets with an ordinary value, and values
    of 1.7e18 fitted with standardize=False; both were imputed before and are again."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"rate": [0.3] * 90 + [0.1 + 0.2] * 10, "x": rng.normal(size=100)}).mask(
        rng.random((100, 2)) < 0.1
    )
    imputer = TDMImputer(max_iter=3, init="mean", random_state=0).fit(frame)
    assert imputer.scale_[0] < 1e-15
    new = imputer.transform(pd.DataFrame({"rate": [0.35, np.nan], "x": [np.nan, 0.5]}))
    assert new["rate"].iloc[0] == 0.35 and np.isfinite(new.to_numpy()).all()
    X = np.c_[1.7e18 + rng.uniform(0, 3e16, 200), rng.normal(size=200)]
    X[::7, 1] = np.nan
    raw = {"max_iter": 3, "init": "mean", "standardize": False, "random_state": 0}
    out = TDMImputer(**raw, dtype="float64").fit_transform(X)
    assert np.isfinite(out).all()
    # In float32 the fit overflows with MKL's AVX-512 kernels (not with its AVX2 ones): then it
    # says what to do instead of imputing infinities.
    try:
        assert np.isfinite(TDMImputer(**raw).fit_transform(X)).all()
    except FloatingPointError as error:
        assert "use dtype='float64'" in str(error)


def test_a_table_too_sparse_to_probe_its_start_fits_without_numpy_warnings() -> None:
    """Bug: with one observed cell per column, the start's probe hid nothing and its score
    was the mean of an empty slice: NumPy's RuntimeWarnings reached the user."""
    X = np.full((6, 2), np.nan)
    X[0, 0], X[1, 1] = 1.0, 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = TDMImputer(max_iter=5, random_state=0).fit_transform(X)
    assert (out[:, 0] == 1.0).all() and (out[:, 1] == 2.0).all()
