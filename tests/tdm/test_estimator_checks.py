"""scikit-learn's own estimator checks, on small settings, the default and paper mode."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import (
    check_dataframe_column_names_consistency,
    check_get_feature_names_out_error,
    check_set_output_transform,
    check_transformer_get_feature_names_out,
    check_transformer_get_feature_names_out_pandas,
    parametrize_with_checks,
)

from tdm import OTImputer, TDMImputer


@parametrize_with_checks(
    [
        TDMImputer(max_iter=3, batch_size=8, random_state=0),
        TDMImputer.paper(max_iter=3, batch_size=8, random_state=0),
        OTImputer(solver="assignment", max_iter=3, batch_size=8, random_state=0),
        OTImputer(solver="sinkhorn", max_iter=3, batch_size=8, random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check) -> None:
    check(estimator)


@pytest.mark.parametrize(
    "check",
    [
        check_get_feature_names_out_error,
        check_transformer_get_feature_names_out,
        check_transformer_get_feature_names_out_pandas,
        check_set_output_transform,
    ],
    ids=lambda check: check.__name__,
)
def test_feature_names_and_set_output_follow_scikit_learn(check: Callable) -> None:
    """Bug: `set_output(transform="pandas")` raised "set_output is not available" and there was
    no `get_feature_names_out`. scikit-learn's own checks of both, which its default suite
    leaves out, pass: the output features are the input features. (Its pandas set_output checks
    also transform an array with a model fitted on a DataFrame, which the imputer refuses.)"""
    check("TDMImputer", TDMImputer(max_iter=3, batch_size=8, random_state=0))


def test_column_names_are_checked_as_scikit_learn_says() -> None:
    """scikit-learn's check of column names, which its default suite leaves out: new rows
    with the fitted columns reversed, renamed or fewer are refused with its messages (a
    transformer does not match columns by name)."""
    estimator = TDMImputer(max_iter=3, batch_size=8, random_state=0)
    check_dataframe_column_names_consistency("TDMImputer", estimator)


def test_a_pipeline_with_pandas_output_keeps_the_columns_and_their_dtypes() -> None:
    """In a Pipeline set to pandas output, the imputer gives a DataFrame with the input's
    column names, index and dtypes (a text and a boolean column too), and no NaN."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=40),
            "n": pd.array(rng.integers(0, 9, 40), dtype="Int64"),
            "s": rng.choice(["a", "b"], 40).astype(object),
            "ok": pd.array(rng.random(40) < 0.5, dtype="boolean"),
        },
        index=np.arange(100, 140),
    )
    holed = frame.mask(rng.random(frame.shape) < 0.2)
    pipeline = Pipeline([("impute", TDMImputer(max_iter=5, batch_size=8, random_state=0))])
    out = pipeline.set_output(transform="pandas").fit_transform(holed)
    assert isinstance(out, pd.DataFrame) and out.index.equals(holed.index)
    assert list(out.columns) == list(pipeline.get_feature_names_out()) == list(frame.columns)
    assert out.dtypes.equals(holed.dtypes) and not out.isna().any().any()
    numbers = holed[["x", "n"]].to_numpy(dtype=float, na_value=np.nan)
    out = pipeline.fit_transform(numbers)  # an array: scikit-learn's generated names
    assert list(out.columns) == ["x0", "x1"] and not out.isna().any().any()
