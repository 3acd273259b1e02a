"""One mixed-type trial: mask, impute the DataFrame, score; imputations that break the contract
(dtypes, missing cells, observed cells, unseen labels) are refused naming the column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.mixed_data import MixedDataset, apply_mask, column_kinds, simulate_mixed
from benchmarks.mixed_trial import check_imputed_frame, run_mixed_trial
from tdm.metrics import categorical_error_rate, numeric_mae_sd


def _table() -> MixedDataset:
    rng = np.random.default_rng(0)
    n = 150
    z = rng.standard_normal(n)
    frame = pd.DataFrame(
        {
            "x": z + 0.2 * rng.standard_normal(n),
            "k": pd.array(np.rint(3 * z + 10).astype(int), dtype="Int64"),
            "c": pd.Categorical(np.where(z > 0, "pos", "neg")),
            "d": pd.Categorical(rng.choice(["a", "b", "c"], n)),
        }
    )
    return MixedDataset("penguins", frame, column_kinds(frame), n)


def test_a_trial_scores_numeric_and_categorical_cells() -> None:
    table = _table()
    result = run_mixed_trial(table, "mar", 3, "mode")
    mask = simulate_mixed(table.frame, "mar", 0.3, random_state=3)
    imputed = apply_mask(table.frame, mask)
    for column in ("x", "k"):
        imputed[column] = imputed[column].fillna(imputed[column].mean())
    imputed["k"] = imputed["k"].round().astype("Int64")
    for column in ("c", "d"):
        imputed[column] = imputed[column].fillna(imputed[column].mode().iloc[0])
    assert result.mae == pytest.approx(numeric_mae_sd(table.frame, imputed, mask))
    assert result.cat_error == pytest.approx(categorical_error_rate(table.frame, imputed, mask))
    assert result.missing_rate == pytest.approx(mask.mean())
    assert np.isnan(result.w2sq_half) and result.accuracy is None
    assert result.rmse >= result.mae


def test_a_model_beats_the_mode_on_a_structured_table() -> None:
    table = _table()
    mode = run_mixed_trial(table, "mcar", 0, "mode")
    forest = run_mixed_trial(
        table, "mcar", 0, "missforest_mixed", params={"n_estimators": 20, "max_iter": 3}
    )
    assert forest.mae < mode.mae and forest.cat_error < mode.cat_error  # type: ignore[operator]
    assert forest.params == {"n_estimators": 20, "max_iter": 3}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_tdm_runs_a_mixed_trial() -> None:
    table = _table()
    params = {"max_iter": 20, "batch_size": 32, "device": "cpu"}
    result = run_mixed_trial(table, "mcar", 0, "tdm", params=params)
    assert result.n_iter is not None and result.loss_trace
    assert 0.0 <= result.cat_error <= 1.0  # type: ignore[operator]


def test_imputations_that_break_the_contract_are_refused() -> None:
    frame = _table().frame
    mask = simulate_mixed(frame, "mcar", 0.3, random_state=0)
    masked = apply_mask(frame, mask)
    good = frame.copy()
    assert check_imputed_frame("m", masked, good, mask) is good
    with pytest.raises(ValueError, match="m: returned ndarray, not a DataFrame"):
        check_imputed_frame("m", masked, good.to_numpy(), mask)
    with pytest.raises(ValueError, match="column 'k' came back as float64, not Int64"):
        check_imputed_frame("m", masked, good.astype({"k": float}), mask)
    with pytest.raises(ValueError, match="column 'x' still has missing cells"):
        check_imputed_frame("m", masked, good.assign(x=masked["x"]), mask)
    changed = good.copy()
    row = int(np.flatnonzero(~mask[:, 0])[0])
    changed.loc[row, "x"] += 1.0
    with pytest.raises(ValueError, match="column 'x' changed observed cells"):
        check_imputed_frame("m", masked, changed, mask)
    given = pd.DataFrame({"d": pd.Series(["a", None, "b"], dtype=object)})
    made_up = pd.DataFrame({"d": pd.Series(["a", "z", "b"], dtype=object)})
    one = np.array([[False], [True], [False]])
    with pytest.raises(ValueError, match=r"column 'd' got labels never observed: \['z'\]"):
        check_imputed_frame("m", given, made_up, one)
