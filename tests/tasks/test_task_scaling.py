"""Standardise and inverse-scale steps."""

from __future__ import annotations

import logging
import re

import numpy as np
import pandas as pd
import pytest

from tasks.errors import PipelineInputError
from tasks.scaling import apply_scaling, inverse_scale, standardise


def test_standardise_uses_observed_values_and_gives_constant_columns_scale_one() -> None:
    """Means and stds come from observed values; a constant column is centred, not divided."""
    frame = pd.DataFrame({"a": [1.0, np.nan, 3.0, 5.0], "b": [2.0, 2.0, np.nan, 2.0]})
    result = standardise.fn(frame, ["a", "b"], table="t")
    np.testing.assert_allclose(result.scaling.statistics.mean, [3.0, 2.0])
    np.testing.assert_allclose(result.scaling.statistics.scale, [np.std([1.0, 3.0, 5.0]), 1.0])
    assert result.frame["a"].isna().tolist() == [False, True, False, False]
    np.testing.assert_allclose(result.frame["b"].dropna(), 0.0)


def test_inverse_scale_keeps_observed_cells_bit_for_bit() -> None:
    """Observed cells come back exactly; imputed cells are mapped back to original units."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(10, 3, size=(20, 3)) / 7, columns=list("xyz"))
    frame.iloc[::4, 1] = np.nan
    scaled = standardise.fn(frame, list("xyz"), table="t")
    filled = scaled.frame.fillna(0.5)
    result = inverse_scale.fn(filled, scaled.scaling, frame)
    observed = frame.notna().to_numpy()
    assert np.array_equal(result.to_numpy()[observed], frame.to_numpy()[observed])
    expected = 0.5 * scaled.scaling.statistics.scale[1] + scaled.scaling.statistics.mean[1]
    np.testing.assert_allclose(result["y"][frame["y"].isna()], expected)


def test_labels_pass_through_scaling_and_integers_come_back_whole_within_bounds() -> None:
    """Text and boolean columns go to the imputer as labels and come back with the imputer's
    labels in their missing cells only; an integer column is rounded, and a value just past a
    bound (the imputer's single precision) is set on it, while one far past is left for the
    checks to refuse."""
    frame = pd.DataFrame(
        {
            "n": pd.array([1, None, 4, None, 7, None], dtype="Int32"),
            "s": pd.Series(["a", None, "b", "a", None, "b"], dtype="str"),
            "ok": pd.array([True, None, False, True, True, None], dtype="boolean"),
        }
    )
    scaled = standardise.fn(frame, ["n", "s", "ok"], bounds={"n": (1.0, 7.0)}, table="t")
    assert scaled.scaling.columns == ("n",)
    assert scaled.frame["s"].tolist() == ["a", None, "b", "a", None, "b"]
    assert str(scaled.frame["ok"].dtype) == "boolean"
    mean, scale = scaled.scaling.statistics.mean[0], scaled.scaling.statistics.scale[0]
    assert scaled.bounds == {"n": ((1.0 - mean) / scale, (7.0 - mean) / scale)}
    imputed = scaled.frame.copy()
    standard = [(4.4 - mean) / scale, (7.0 + 1e-7 - mean) / scale, (9.0 - mean) / scale]
    imputed.loc[frame["n"].isna(), "n"] = standard
    imputed["s"] = ["z", "b", "z", "z", "a", "z"]
    imputed["ok"] = pd.array([False, False, True, False, False, True], dtype="boolean")
    result = inverse_scale.fn(imputed, scaled.scaling, frame)
    assert result["n"].tolist() == [1.0, 4.0, 4.0, 7.0, 7.0, 9.0]
    assert result["s"].tolist() == ["a", "b", "b", "a", "a", "b"]
    assert result["ok"].tolist() == [True, False, False, True, True, True]


def test_standardise_warns_of_codes_far_beyond_a_column_s_values_naming_table_and_column(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """helper-58: an INTEGER age column holding 2147483647 twice ("unknown") got imputed ages
    in the millions in a run that passed. The standardise step logs a warning naming the
    table, the column and the codes, in the column's units, and advising NULL."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.normal(45, 12, 50).round(), "y": rng.normal(size=50)})
    frame.loc[:1, "age"] = 2147483647
    frame.loc[5:9, "age"] = np.nan
    with caplog.at_level(logging.WARNING):
        standardise.fn(frame, ["age", "y"], table="people")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1, warned
    assert warned[0].startswith(
        'Table "people": column "age" has 2 observed value(s) (2147483647) over 1,000 times'
    )
    assert "replace them with NULL" in warned[0]


def test_apply_scaling_refuses_values_it_cannot_scale_naming_the_row_by_rowid() -> None:
    """A partition (indexed by rowid) holding a value too far from the whole table's mean to
    standardise names it by rowid, not by its position in the partition (helper-62); new rows
    for a stored model (an incremental run) that lie beyond `MAX_STANDARDISED` standard
    deviations of the values it was fitted on are refused with the refit's hint, while the
    rows the scaling came from are only held to float64's range."""
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, np.nan]})
    scaling = standardise.fn(frame, ["a"], table="t").scaling
    part = pd.DataFrame({"a": [2.0, -1.79e308]}, index=pd.Index([500, 501], name="rowid"))
    with pytest.raises(PipelineInputError, match=r'column "a" holds -1\.79e\+308 \(rowid 501\)'):
        apply_scaling(part, scaling, table="t")
    new = pd.DataFrame({"a": [2.0, 1e20]})
    assert apply_scaling(new, scaling, table="t")["a"].iloc[1] > 1e19  # the same table's
    with pytest.raises(PipelineInputError) as refused:
        apply_scaling(new, scaling, table="t", new_rows=True)
    assert re.match(
        r'Table "t" cannot be imputed: column "a" holds 1e\+20 \(0-based row 1\), [\d.]+e\+20 '
        r"standard deviations from the mean of the values its model was fitted on .*refit it "
        r"\(the refit parameter or --refit flag\)",
        str(refused.value),
    ), refused.value
