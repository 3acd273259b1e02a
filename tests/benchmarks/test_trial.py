"""`benchmarks.trial`: one trial (mask, impute, score) on a numeric or a mixed-type table, and
the MAE-over-iterations trace; imputations of a mixed table that break the contract (dtypes,
missing cells, observed cells, unseen labels) are refused naming the column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.datasets import Dataset, MixedDataset, apply_mask, simulate_mixed
from benchmarks.registry import make_imputer
from benchmarks.trial import (
    LossRecorder,
    check_imputed_frame,
    params_hash,
    run_trial,
    trace_mae,
)
from tdm.columns import column_kinds
from tdm.metrics import categorical_error_rate, mae, numeric_mae_sd
from tdm.simulate import simulate

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _dataset(task: str = "classification", n: int = 60, d: int = 4, seed: int = 0) -> Dataset:
    """Correlated standardised features; three labels from the first latent factor."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, 2))
    X = latent @ rng.normal(size=(2, d)) + 0.2 * rng.normal(size=(n, d))
    X = (X - X.mean(0)) / X.std(0)
    y = np.digitize(latent[:, 0], [-0.5, 0.5]) if task == "classification" else None
    names = tuple(f"x{j}" for j in range(d))
    return Dataset("toy", X, y, task, names, tuple(range(d)))  # type: ignore[arg-type]


def test_mean_trial_matches_a_direct_computation() -> None:
    """The trial's MAE is the MAE of mean imputation on the same seeded mask."""
    data = _dataset()
    result = run_trial(data, "mcar", 3, "mean", svm_repeats=1)
    mask = simulate(data.X, "mcar", 0.3, random_state=3)
    X_nan = np.where(mask, np.nan, data.X)
    expected = mae(data.X, make_imputer("mean").fit_transform(X_nan), mask)
    assert result.mae == pytest.approx(expected, rel=1e-12)
    assert result.rmse >= result.mae
    assert result.w2sq_half > 0
    assert result.accuracy is not None and 0.0 <= result.accuracy <= 1.0
    assert result.missing_rate == pytest.approx(mask.mean())
    assert result.n_iter is None and result.loss_trace == ()


def test_w2_is_left_out_above_its_row_limit_without_a_warning(
    monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder
) -> None:
    """Above `W2_MAX_ROWS` rows with a missing cell the trial records NaN, as designed, and says
    nothing about it (large tables would repeat the metric's warning in every trial)."""
    import benchmarks.trial

    data = _dataset(n=40)
    monkeypatch.setattr(benchmarks.trial, "W2_MAX_ROWS", 5)
    result = run_trial(data, "mcar", 0, "mean", svm_repeats=0)
    assert np.isnan(result.w2sq_half) and result.mae > 0
    assert [str(w.message) for w in recwarn if "wasserstein2" in str(w.message)] == []


def test_regression_datasets_have_no_accuracy() -> None:
    result = run_trial(_dataset("regression"), "mar", 0, "softimpute", svm_repeats=2)
    assert result.accuracy is None


def test_a_binary_label_is_not_scored_as_in_the_paper() -> None:
    """The paper scores the SVM on labelled datasets that are not binary (helper review:
    blood_transfusion's accuracies sat at its majority share, 0.76, telling nothing)."""
    data = _dataset()
    binary = Dataset("toy", data.X, (data.y > 0).astype(int), "classification", data.feature_names)
    assert data.svm_scored and not binary.svm_scored
    assert run_trial(binary, "mcar", 0, "mean", svm_repeats=1).accuracy is None
    assert run_trial(data, "mcar", 0, "mean", svm_repeats=1).accuracy is not None


def test_trials_are_reproducible_and_seeded() -> None:
    """Same seed, same numbers; another seed, another mask."""
    data = _dataset()
    first = run_trial(data, "mcar", 0, "ot_ns", params={"max_iter": 15}, svm_repeats=0)
    again = run_trial(data, "mcar", 0, "ot_ns", params={"max_iter": 15}, svm_repeats=0)
    other = run_trial(data, "mcar", 1, "ot_ns", params={"max_iter": 15}, svm_repeats=0)
    assert first.mae == again.mae
    assert first.mae != other.mae
    assert first.accuracy is None  # svm_repeats=0 skips it


def test_batch_ot_trials_record_a_windowed_loss_trace() -> None:
    """tdm records (iteration, window-mean loss) every record_every steps and at the last."""
    result = run_trial(
        _dataset(), "mcar", 0, "tdm", params={"max_iter": 25}, svm_repeats=0, record_every=10
    )
    assert result.n_iter == 25
    assert [i for i, _ in result.loss_trace] == [10, 20, 25]
    assert all(np.isfinite(v) for _, v in result.loss_trace)
    assert result.params == {"max_iter": 25}  # the callback is not part of the recorded params


def test_unknown_method_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="method must be one of"):
        run_trial(_dataset(), "mcar", 0, "nope")


def test_fit_stopped_at_k_steps_is_the_long_fit_after_k_steps() -> None:
    """The premise of trace_mae: a seeded fit's first k steps do not depend on max_iter."""
    data = _dataset()
    X_nan = np.where(simulate(data.X, "mcar", 0.3, random_state=0), np.nan, data.X)
    short = make_imputer("tdm", random_state=0, max_iter=8).fit(X_nan)
    long = make_imputer("tdm", random_state=0, max_iter=20).fit(X_nan)
    np.testing.assert_allclose(short.loss_history_, long.loss_history_[:8], rtol=1e-6)


def test_trace_mae_scores_each_checkpoint() -> None:
    """Checkpoints are sorted and deduplicated; the last equals a trial with that max_iter."""
    data = _dataset()
    trace = trace_mae(data, "mcar", 0, "ot_ns", [10, 0, 10, 4])
    assert trace.iterations == (0, 4, 10)
    trial = run_trial(data, "mcar", 0, "ot_ns", params={"max_iter": 10}, svm_repeats=0)
    assert trace.mae[-1] == pytest.approx(trial.mae, rel=1e-9)
    with pytest.raises(ValueError, match="batch-OT"):
        trace_mae(data, "mcar", 0, "mean", [1])


def test_params_hash_is_order_free() -> None:
    assert params_hash({"a": 1, "b": 2}) == params_hash({"b": 2, "a": 1})
    assert params_hash(None) == params_hash({}) != params_hash({"max_iter": 20})
    assert len(params_hash({})) == 16


def test_loss_recorder_rejects_a_bad_window() -> None:
    with pytest.raises(ValueError, match="record_every"):
        LossRecorder(0)


def test_benchmark_fixtures_run_as_trials() -> None:
    """A pinned earlier default (not a public method) runs through the trial like any method."""
    result = run_trial(_dataset(), "mcar", 0, "tdm_ice_init", params={"max_iter": 5}, svm_repeats=0)
    assert result.method == "tdm_ice_init" and result.n_iter == 5
    assert result.mae > 0


# --------------------------------------------------------------------------------------------
# mixed-type tables
# --------------------------------------------------------------------------------------------
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
    result = run_trial(table, "mar", 3, "mode")
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
    mode = run_trial(table, "mcar", 0, "mode")
    forest = run_trial(
        table, "mcar", 0, "missforest_mixed", params={"n_estimators": 20, "max_iter": 3}
    )
    assert forest.mae < mode.mae and forest.cat_error < mode.cat_error  # type: ignore[operator]
    assert forest.params == {"n_estimators": 20, "max_iter": 3}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_tdm_runs_a_mixed_trial() -> None:
    table = _table()
    params = {"max_iter": 20, "batch_size": 32, "device": "cpu"}
    result = run_trial(table, "mcar", 0, "tdm", params=params)
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


def test_a_numeric_method_that_changes_observed_cells_is_refused() -> None:
    """Bug: a method returning a reconstruction (observed cells shrunk) was scored: its MAE
    beat the mean's while W2 and the SVM accuracy measured altered data."""
    from benchmarks.trial import check_imputed_array

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    mask = rng.random(X.shape) < 0.3
    given = np.where(mask, np.nan, X)
    filled = np.where(mask, 0.0, X)
    assert np.array_equal(check_imputed_array("mine", given, filled, mask), filled)
    with pytest.raises(ValueError, match="mine: column 0 changed observed cells"):
        check_imputed_array("mine", given, 0.1 * filled, mask)
    with pytest.raises(ValueError, match="mine: column 1 still has missing or infinite cells"):
        check_imputed_array("mine", given, np.where(mask & (np.arange(3) == 1), np.nan, X), mask)
    with pytest.raises(ValueError, match=r"mine: returned shape \(30, 2\), not \(30, 3\)"):
        check_imputed_array("mine", given, filled[:, :2], mask)
