"""TDMImputer and OTImputer: accuracy against the mean, exactness on observed cells, determinism,
clear errors, persistence and imputation of unseen rows."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone

from tdm import FitProgress, OTImputer, TDMImputer
from tdm._estimator import BatchOTImputer
from tdm._optimise import paper_batch_size, visit_step_factor
from tests.tdm.conftest import low_rank, mcar

FAST = {"max_iter": 30, "batch_size": 32, "random_state": 0}

IMPUTERS = [
    pytest.param(lambda **kw: TDMImputer(**{**FAST, **kw}), id="TDM"),
    pytest.param(lambda **kw: OTImputer(**{**FAST, "solver": "assignment", **kw}), id="OT-NS"),
    # Sinkhorn's steps cost about 20 assignment steps each: fewer of them.
    pytest.param(
        lambda **kw: OTImputer(**{**FAST, "solver": "sinkhorn", "max_iter": 10, **kw}), id="OT-SH"
    ),
]


def mae(X: np.ndarray, X_imp: np.ndarray, mask: np.ndarray) -> float:
    return float(np.abs(X_imp - X)[mask].mean())


def mean_imputation_mae(X: np.ndarray, X_nan: np.ndarray, mask: np.ndarray) -> float:
    return mae(X, np.where(mask, np.nanmean(X_nan, axis=0), X), mask)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: TDMImputer(max_iter=300, batch_size=64, random_state=0),
            id="TDM",
        ),
        pytest.param(
            lambda: OTImputer(solver="assignment", max_iter=150, random_state=0), id="OT-NS"
        ),
    ],
)
def test_imputation_beats_the_column_mean(make, data) -> None:
    X, X_nan, mask = data
    X_imp = make().fit_transform(X_nan)
    assert mae(X, X_imp, mask) < 0.9 * mean_imputation_mae(X, X_nan, mask)


@pytest.mark.parametrize("make", IMPUTERS)
def test_observed_cells_come_back_bit_for_bit(make) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 4)) * np.array([1e-300, 1.0, 1e300, 3.0])  # awkward magnitudes
    X[0, 3] = -0.0
    X[1, 3] = np.nextafter(1.0, 2.0)
    X_nan, mask = mcar(X, 0.25)
    X_imp = make().fit_transform(X_nan)
    assert not np.isnan(X_imp).any()
    assert X_imp[~mask].tobytes() == X_nan[~mask].tobytes()
    assert np.signbit(X_imp[0, 3])


@pytest.mark.parametrize("make", IMPUTERS)
def test_float32_input_keeps_its_dtype_and_observed_bits(make, data) -> None:
    _, X_nan, mask = data
    X32 = X_nan.astype(np.float32)
    X_imp = make().fit_transform(X32)
    assert X_imp.dtype == np.float32
    assert X_imp[~mask].tobytes() == X32[~mask].tobytes()


@pytest.mark.parametrize("make", IMPUTERS)
def test_same_seed_same_output_different_seed_different_output(make, data) -> None:
    _, X_nan, _ = data
    a = make(random_state=5).fit_transform(X_nan)
    b = make(random_state=5).fit_transform(X_nan)
    c = make(random_state=6).fit_transform(X_nan)
    assert a.tobytes() == b.tobytes()
    assert not np.array_equal(a, c)


def test_dataframe_in_dataframe_out(data) -> None:
    _, X_nan, _mask = data
    frame = pd.DataFrame(X_nan, columns=[f"c{j}" for j in range(6)], index=np.arange(256) * 10)
    frame["c0"] = frame["c0"].astype(np.float32)
    frame["c5"] = frame["c5"].astype("Float64")  # pandas nullable: pd.NA is missing too
    out = TDMImputer(**FAST).fit_transform(frame)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == list(frame.columns)
    assert out.index.equals(frame.index)
    assert out["c0"].dtype == np.float32
    assert not out.isna().any().any()
    observed = ~frame.isna().to_numpy()
    np.testing.assert_array_equal(
        out.to_numpy(dtype=np.float64)[observed],
        frame.to_numpy(dtype=np.float64, na_value=np.nan)[observed],
    )


def test_tdm_with_identity_network_is_otimputer(data) -> None:
    """With f the identity (T = 0), the same start and every cell at lr, TDM is OTImputer, step
    for step."""
    _, X_nan, _ = data
    start = {"init": "mean", "init_noise": 0.1}  # OTImputer's start: the column mean plus noise
    same = {"n_blocks": 0, "cost": "sqeuclidean", "cell_lr_correction": False, **start}
    tdm = TDMImputer._configured(**same, **FAST).fit_transform(X_nan)
    ot_ns = OTImputer(solver="assignment", **FAST).fit_transform(X_nan)
    assert OTImputer()._config.init_noise == start["init_noise"]
    assert tdm.tobytes() == ot_ns.tobytes()


def test_paper_batch_size_rule() -> None:
    assert paper_batch_size(512, 20_000) == 512
    assert paper_batch_size(512, 1024) == 512
    assert paper_batch_size(512, 1023) == 256  # largest power of two not above 511
    assert paper_batch_size(512, 210) == 64
    assert paper_batch_size(512, 4) == 2
    est = TDMImputer(max_iter=2, random_state=0).fit(mcar(low_rank(n=100), 0.2)[0])
    assert est.batch_size_ == 32


def test_loss_falls_and_history_is_recorded(data) -> None:
    """Every step's loss, and its ratio to the mean pair cost: in (0, 1] for the exact solver."""
    _, X_nan, _ = data
    est = OTImputer(solver="assignment", max_iter=100, random_state=0).fit(X_nan)
    assert est.n_iter_ == 100
    assert est.loss_history_.shape == est.cost_ratio_history_.shape == (100,)
    assert est.loss_history_[-20:].mean() < est.loss_history_[:20].mean()
    assert ((est.cost_ratio_history_ > 0) & (est.cost_ratio_history_ <= 1)).all()


def test_callback_sees_every_step_and_can_stop_early(data) -> None:
    _, X_nan, _ = data
    seen: list[FitProgress] = []

    def stop_at_seven(progress: FitProgress) -> bool:
        seen.append(progress)
        return progress.stage == "fit" and progress.iteration == 7

    est = TDMImputer(**{**FAST, "callback": stop_at_seven}).fit(X_nan)
    assert seen[0].stage == "start"  # the start's models come first; their answer is ignored
    seen = [p for p in seen if p.stage != "start"]
    assert [p.iteration for p in seen] == list(range(1, 8))
    assert all(p.max_iter == 30 and np.isfinite(p.loss) and p.stage == "fit" for p in seen)
    assert est.n_iter_ == 7
    np.testing.assert_array_equal([p.cost_ratio for p in seen], est.cost_ratio_history_)


def test_verbose_reports_progress(data, capsys) -> None:
    _, X_nan, _ = data
    TDMImputer(**{**FAST, "verbose": 1}).fit(X_nan)
    err = capsys.readouterr().err
    assert "iteration 30/30" in err and "ms/iteration" in err


def test_no_missing_value_returns_input_unchanged() -> None:
    X = low_rank(n=40)
    out = TDMImputer(**FAST).fit_transform(X)
    assert out.tobytes() == X.tobytes()


def test_one_column_and_constant_column_are_imputed(data) -> None:
    _X, X_nan, mask = data
    one = TDMImputer(**FAST).fit_transform(X_nan[:, :1])
    assert not np.isnan(one).any()
    const = X_nan.copy()
    const[:, 2] = np.where(mask[:, 2], np.nan, 4.0)
    out = TDMImputer(**FAST).fit_transform(const)
    assert not np.isnan(out).any()
    assert np.all(np.abs(out[:, 2] - 4.0) < 1.0)  # stays near the constant, scale 1 kept


# ---------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("make", IMPUTERS)
def test_infinity_is_refused_naming_the_column(make, data) -> None:
    _, X_nan, _ = data
    X_bad = X_nan.copy()
    X_bad[5, 3] = np.inf
    with pytest.raises(
        ValueError, match=r"column 3 holds 1 infinite value\(s\) \(first at row 5\)"
    ):
        make().fit(X_bad)
    frame = pd.DataFrame(X_bad, columns=list("abcdef"))
    with pytest.raises(ValueError, match=r"'d' holds 1 infinite value\(s\) \(first at row 5\)"):
        make().fit(frame)
    labelled = frame.set_axis([f"id{i}" for i in range(len(frame))], axis=0)
    with pytest.raises(ValueError, match=r"\(first at row 5, index 'id5'\)"):
        make().fit(labelled)


def test_all_missing_column_is_refused_naming_it(data) -> None:
    _, X_nan, _ = data
    frame = pd.DataFrame(X_nan, columns=list("abcdef"))
    frame["e"] = np.nan
    with pytest.raises(ValueError, match="'e' has no observed value"):
        TDMImputer(**FAST).fit(frame)
    numbered = frame.set_axis(range(frame.shape[1]), axis=1)  # bug: "'4' has no ..." (a string)
    with pytest.raises(ValueError, match="TDMImputer: column 4 has no observed value"):
        TDMImputer(**FAST).fit(numbered)


def test_too_few_rows_are_refused() -> None:
    with pytest.raises(ValueError, match=r"at least 4 rows .* n_samples=3"):
        TDMImputer(**FAST).fit(np.array([[1.0, np.nan], [2.0, 3.0], [4.0, 5.0]]))


def test_a_column_of_a_type_that_cannot_be_imputed_is_refused_naming_it(data) -> None:
    _, X_nan, _ = data
    frame = pd.DataFrame(X_nan[:, :2], columns=["x", "y"])
    frame["when"] = pd.Timestamp("2026-01-01")
    with pytest.raises(ValueError, match="column 'when' has dtype datetime64"):
        TDMImputer(**FAST).fit(frame)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"cost": "cosine"}, "cost must be one of"),
        ({"solver": "hungarian"}, "solver must be one of"),
        ({"max_iter": -1}, "max_iter must be a non-negative integer"),
        ({"batch_size": 0}, r"batch_size must be an integer in \[2, inf\]"),
        ({"batch_size": 1}, r"batch_size must be an integer in \[2, inf\]"),
        ({"lr": 0.0}, "lr must be a positive number"),
        ({"dtype": "float16"}, "dtype must be one of"),
        ({"n_blocks": 1.5}, "n_blocks must be a non-negative integer"),
        ({"device": "tpu"}, "device must be"),
        ({"init": "median"}, "init must be one of"),
        ({"batch_draw": "overlapping"}, "batch_draw must be one of"),
    ],
)
def test_bad_hyperparameters_are_named(params, match, data) -> None:
    _, X_nan, _ = data
    with pytest.raises(ValueError, match=match):
        TDMImputer._configured(**{**FAST, **params}).fit(X_nan)


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_cuda_without_a_gpu_is_a_clear_error(data) -> None:
    _, X_nan, _ = data
    with pytest.raises(ValueError, match="CUDA is not available"):
        TDMImputer(**{**FAST, "device": "cuda"}).fit(X_nan)


def test_fit_transform_refuses_arguments_fit_refuses(data) -> None:
    """Bug: ``fit_transform(X, sample_weight=w)`` ignored ``w`` silently where ``fit`` refused
    it."""
    _, X_nan, _ = data
    for method in ("fit", "fit_transform"):
        with pytest.raises(TypeError, match="sample_weight"):
            getattr(TDMImputer(**FAST), method)(X_nan, sample_weight=np.ones(len(X_nan)))


# ---------------------------------------------------------------------------- no global state
def test_fit_leaves_global_state_alone(data) -> None:
    _, X_nan, _ = data
    torch_rng, np_rng = torch.get_rng_state(), np.random.get_state()
    dtype = torch.get_default_dtype()
    TDMImputer(**FAST).fit(X_nan)  # first use: torch's lazy imports may add their own filters
    filters = list(warnings.filters)
    TDMImputer(**{**FAST, "dtype": "float64"}).fit_transform(X_nan)  # ICE start: no filter left set
    assert warnings.filters == filters
    assert torch.equal(torch.get_rng_state(), torch_rng)
    _, keys, position, *_ = np.random.get_state()  # a draw moves the position
    assert keys.tobytes() == np_rng[1].tobytes() and position == np_rng[2]
    assert torch.get_default_dtype() == dtype
    assert not torch.is_anomaly_enabled()


@pytest.mark.filterwarnings("ignore:.*could be hidden to measure:UserWarning")
def test_an_unseeded_imputer_leaves_numpys_global_state_alone_and_sample_keeps_its_seed(
    data,
) -> None:
    """Bug: with ``random_state=None`` fit, transform of new rows and sample drew their seed
    from NumPy's global random state, and `sample(new_rows, random_state=0)` of an unseeded
    imputer differed from call to call (its new rows' point imputation was unseeded)."""
    _, X_nan, _ = data
    unseeded = {**FAST, "random_state": None}
    np.random.seed(0)
    state = np.random.get_state()
    est = TDMImputer(**unseeded).fit(X_nan[:80])
    new = X_nan[80:100]
    est.transform(new)
    first = est.sample(new, n_draws=2, random_state=0)
    _, keys, position, *_ = np.random.get_state()
    assert keys.tobytes() == state[1].tobytes() and position == state[2]
    assert est.sample(new, n_draws=2, random_state=0).tobytes() == first.tobytes()
    np.random.seed(0)  # the same global seed no longer gives the same unseeded fit
    a = TDMImputer(**unseeded).fit_transform(X_nan)
    np.random.seed(0)
    assert not np.array_equal(a, TDMImputer(**unseeded).fit_transform(X_nan))


def test_a_first_fit_adds_no_warning_filter() -> None:
    """Bug: the first fit of a process built its network through ``torch.nn.utils.skip_init``,
    whose meta device imports SymPy, which adds a process-wide warning filter. In a fresh
    process, once the library is imported, a fit leaves ``warnings.filters`` as it found
    them."""
    import subprocess
    import sys

    script = (
        "import warnings, numpy as np\n"
        "from tdm import TDMImputer\n"
        "before = list(warnings.filters)\n"
        "X = np.random.default_rng(0).normal(size=(40, 3)); X[::4, 0] = np.nan\n"
        "TDMImputer(max_iter=3, random_state=0).fit(X)\n"
        "assert warnings.filters == before, [f for f in warnings.filters if f not in before]\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


# ---------------------------------------------------------------------------- unseen rows
def test_transform_imputes_unseen_rows_better_than_the_mean() -> None:
    X = low_rank(n=400, seed=2)
    train, test = X[:300], X[300:]
    train_nan, _ = mcar(train, 0.2, seed=3)
    test_nan, test_mask = mcar(test, 0.2, seed=4)
    est = OTImputer(solver="assignment", max_iter=150, random_state=0).fit(train_nan)
    out = est.transform(test_nan)
    assert out[~test_mask].tobytes() == test_nan[~test_mask].tobytes()
    fitted_mean = np.where(test_mask, np.nanmean(train_nan, axis=0), test)
    assert mae(test, out, test_mask) < 0.8 * mae(test, fitted_mean, test_mask)

    tdm = TDMImputer(max_iter=100, batch_size=64, random_state=0).fit(train_nan)
    out = tdm.transform(test_nan)
    assert not np.isnan(out).any()
    assert out[~test_mask].tobytes() == test_nan[~test_mask].tobytes()


def test_transform_of_a_single_row_and_of_the_fitted_data(data) -> None:
    _, X_nan, _ = data
    est = TDMImputer(**FAST).fit(X_nan)
    row = np.array([[np.nan, 1.0, 2.0, np.nan, 0.5, -1.0]])
    out = est.transform(row)
    assert out.shape == (1, 6) and not np.isnan(out).any()
    assert est.transform(X_nan).tobytes() == est.fit_transform(X_nan).tobytes()


def test_transform_leaves_the_fitted_imputer_as_it_was_and_is_the_same_from_threads() -> None:
    """The pipeline imputes partitions of new rows from several threads with one stored imputer:
    transform must not change its network (flags, device, weights), and each thread must get
    the rows that one call alone gets."""
    from concurrent.futures import ThreadPoolExecutor

    X = low_rank(n=300, seed=2)
    train_nan, _ = mcar(X[:200], 0.2, seed=3)
    test_nan, _ = mcar(X[200:], 0.2, seed=4)
    est = TDMImputer(init="mean", max_iter=20, batch_size=32, random_state=0).fit(train_nan)
    weights = {k: v.clone() for k, v in est.network_.state_dict().items()}
    flags = [(p.requires_grad, p.device, p.dtype) for p in est.network_.parameters()]
    alone = est.transform(test_nan)
    assert [(p.requires_grad, p.device, p.dtype) for p in est.network_.parameters()] == flags
    assert all(torch.equal(v, weights[k]) for k, v in est.network_.state_dict().items())
    with ThreadPoolExecutor(max_workers=3) as pool:
        outs = list(pool.map(est.transform, [test_nan] * 3))
    assert all(out.tobytes() == alone.tobytes() for out in outs)


def test_transform_checks_it_is_fitted_and_the_width() -> None:
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        TDMImputer().transform(np.zeros((3, 2)))
    est = TDMImputer(**FAST).fit(mcar(low_rank(n=40), 0.2)[0])
    with pytest.raises(ValueError, match="features"):
        est.transform(np.zeros((3, 2)))


def test_subclasses_share_one_base() -> None:
    assert issubclass(TDMImputer, BatchOTImputer) and issubclass(OTImputer, BatchOTImputer)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_fit_and_transform(data) -> None:
    X, X_nan, mask = data
    est = TDMImputer(max_iter=300, batch_size=64, device="cuda", random_state=0)
    out = est.fit_transform(X_nan)
    assert est.device_.type == "cuda"
    assert out[~mask].tobytes() == X_nan[~mask].tobytes()
    assert mae(X, out, mask) < 0.9 * mean_imputation_mae(X, X_nan, mask)
    assert not np.isnan(est.transform(X_nan[:10] * np.where(mask[:10], np.nan, 1.0))).any()


# ---------------------------------------------------------------------------- stopping rule
def test_early_stopping_stops_when_held_out_error_stalls(data) -> None:
    """With a learning rate too small to move anything, the held-out error cannot improve: the
    rule must stop after its patience, long before max_iter, and keep the initial iterate."""
    _, X_nan, _ = data
    est = TDMImputer._configured(
        max_iter=5000,
        batch_size=32,
        lr=1e-12,
        early_stopping=True,
        n_iter_no_change=100,
        random_state=0,
    ).fit(X_nan)
    assert est.n_iter_ == 100
    assert est.best_iteration_ == 0
    assert est.validation_scores_ is not None and est.validation_scores_.size == 5  # 0, 25 … 100


def test_early_stopping_keeps_the_best_iterate_and_all_observed_cells(data) -> None:
    X, X_nan, mask = data
    est = OTImputer._configured(
        solver="assignment",
        max_iter=600,
        early_stopping=True,
        n_iter_no_change=200,
        validation_fraction=0.1,
        random_state=0,
    )
    out = est.fit_transform(X_nan)
    assert out[~mask].tobytes() == X_nan[~mask].tobytes()  # held-out cells come back observed
    # ... in the fitted rows too (transform's context, a saved model): X_fit_, float32
    standardised = (X_nan - est.mean_) / est.scale_
    np.testing.assert_allclose(est.X_fit_[~mask], standardised[~mask], rtol=1e-6, atol=1e-6)
    assert est.best_iteration_ is not None and est.best_iteration_ > 0
    scores = est.validation_scores_
    assert scores is not None
    assert scores[est.best_iteration_ // 25] == scores.min()
    assert mae(X, out, mask) < 0.9 * mean_imputation_mae(X, X_nan, mask)
    assert est.fit_transform(X_nan).tobytes() == out.tobytes()  # deterministic


def test_early_stopping_scores_the_last_steps_too(data) -> None:
    """Bug: the held-out cells were scored every 25 steps only, so the steps after the last
    multiple were thrown away, and a fit of fewer than 25 steps returned its start. They are
    scored after the last step as well, and kept where they are best."""
    _, X_nan, _ = data
    settings = {"solver": "assignment", "early_stopping": True, "validation_fraction": 0.1}
    short = OTImputer._configured(**settings, max_iter=20, random_state=0)
    out = short.fit_transform(X_nan)
    scores = short.validation_scores_
    assert scores is not None and scores.size == 2  # steps 0 and 20
    assert short.best_iteration_ == 20 and scores[1] < scores[0]
    start = OTImputer._configured(**settings, max_iter=0, random_state=0).fit_transform(X_nan)
    assert not np.array_equal(out, start)
    longer = OTImputer._configured(**settings, max_iter=60, random_state=0).fit(X_nan)
    assert longer.validation_scores_ is not None and longer.validation_scores_.size == 4


def test_early_stopping_parameters_are_checked(data) -> None:
    _, X_nan, _ = data
    with pytest.raises(
        ValueError, match=r"validation_fraction must be a number in the open interval \(0, 1\)"
    ):
        TDMImputer._configured(**FAST, early_stopping=True, validation_fraction=1.5).fit(X_nan)


# The paper's configuration spelt out: Zhao et al. (2023), §5, and the published code.
PAPER_SETTINGS = {
    "n_blocks": 3,
    "width_factor": 2,
    "clamp": 2.0,
    "squash": "unscaled",
    "conditioner": "separate",
    "batch_size": 512,
    "batch_draw": "independent",
    "max_iter": 10_000,
    "lr": 1e-2,
    "network_lr": None,
    "cell_lr_correction": False,
    "cost": "euclidean",
    "solver": "assignment",
    "init": "mean",
    "init_noise": 0.1,
    "standardize": True,
    "bounds": None,
    "dtype": "float64",
    "early_stopping": False,
}


def test_paper_mode_is_the_published_configuration_spelt_out(data) -> None:
    """TDMImputer.paper() is the paper's settings set one by one, fit for fit; public
    overrides win, and its repr says it is paper mode."""
    _, X_nan, _ = data
    paper = TDMImputer.paper(random_state=3, max_iter=7)
    explicit = TDMImputer._configured(**{**PAPER_SETTINGS, "random_state": 3, "max_iter": 7})
    assert paper._settings() == explicit._settings()
    assert paper.fit_transform(X_nan).tobytes() == explicit.fit_transform(X_nan).tobytes()
    assert paper.loss_history_.tobytes() == explicit.loss_history_.tobytes()
    assert repr(paper) == repr(explicit) == "TDMImputer.paper(max_iter=7, random_state=3)"
    assert repr(TDMImputer(max_iter=7)) == "TDMImputer(max_iter=7)"
    with pytest.raises(TypeError, match="squash"):
        TDMImputer.paper(squash="scaled")  # paper mode takes public overrides only


def test_paper_mode_survives_clone_pickle_and_set_params() -> None:
    paper = TDMImputer.paper(random_state=0)
    copies = [clone(paper), pickle.loads(pickle.dumps(paper)), clone(paper).set_params(lr=0.1)]
    assert all(c._config == paper._config for c in copies)
    assert repr(copies[2]) == "TDMImputer.paper(lr=0.1, random_state=0)"
    assert clone(TDMImputer())._config == TDMImputer()._config != paper._config


def test_private_settings_are_set_by_name_and_unknown_names_refused() -> None:
    est = TDMImputer._configured(squash="unscaled", max_iter=3)
    assert (est._config.squash, est.max_iter) == ("unscaled", 3)
    assert repr(est) == "TDMImputer._configured(squash='unscaled', max_iter=3)"
    assert "squash" not in est.get_params()
    assert len(TDMImputer().get_params()) <= 16
    with pytest.raises(ValueError, match="unknown setting 'squish'"):
        TDMImputer._configured(squish="unscaled")
    with pytest.raises(ValueError, match="unknown setting 'squash'"):
        TDMImputer.from_settings({"squash": "unscaled"})  # public settings only


def test_paper_mode_runs_in_float64_with_unbounded_cells_as_the_published_code(data) -> None:
    """Paper mode pins the published code's precision, clamp and unbounded cells: a start far
    outside the observed range stays there (the default projects it onto the range)."""
    _, X_nan, mask = data
    far = {**PAPER_SETTINGS, "max_iter": 0, "init_noise": 50.0, "random_state": 0}
    paper = TDMImputer._configured(**far)
    filled = paper.fit_transform(X_nan)
    assert {p.dtype for p in paper.network_.parameters()} == {torch.float64}
    assert TDMImputer.paper()._config.squash == "unscaled"
    low, high = np.nanmin(X_nan, axis=0), np.nanmax(X_nan, axis=0)
    outside = (filled < low) | (filled > high)
    assert outside[mask].mean() > 0.5 and not outside[~mask].any()
    bounded = TDMImputer._configured(**{**far, "bounds": "observed"}).fit_transform(X_nan)
    assert not ((bounded < low) | (bounded > high)).any()


def test_network_lr_sets_the_network_rate_alone(data) -> None:
    """With network_lr tiny, the network stays at its initial weights while the cells still move."""
    _, X_nan, _ = data
    frozen = TDMImputer(**FAST, network_lr=1e-12).fit(X_nan)
    initial = TDMImputer(**{**FAST, "max_iter": 0}).fit(X_nan)
    for a, b in zip(frozen.network_.parameters(), initial.network_.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-9)
    assert not np.array_equal(frozen.X_fit_, initial.X_fit_)
    with pytest.raises(ValueError, match="network_lr must be a positive number"):
        TDMImputer(**FAST, network_lr=-1.0).fit(X_nan)


def test_cell_lr_correction_changes_only_rarely_drawn_rows(data) -> None:
    """At a share of rows per step of 0.5 or more the fit is bit-identical with and without the
    correction; below it, the cells' rate is lr over the factor's growth since 0.5."""
    _, X_nan, mask = data
    n = X_nan.shape[0]  # 256
    half = {**FAST, "batch_size": 64}  # 128 of 256 rows per step
    on = TDMImputer._configured(**half, cell_lr_correction=True).fit(X_nan)
    off = TDMImputer._configured(**half, cell_lr_correction=False).fit(X_nan)
    np.testing.assert_array_equal(on.X_fit_, off.X_fit_)
    assert on._cell_lr(128, n) == on.lr
    rare = {**FAST, "batch_size": 8}  # 16 of 256 rows per step
    on = TDMImputer._configured(**rare, cell_lr_correction=True).fit(X_nan)
    off = TDMImputer._configured(**rare, cell_lr_correction=False).fit(X_nan)
    assert not np.array_equal(on.X_fit_[mask], off.X_fit_[mask])
    expected = on.lr * visit_step_factor(0.5) / visit_step_factor(16 / n)
    assert on._cell_lr(16, n) == pytest.approx(expected, rel=1e-12)
    assert expected < on.lr / 2
    assert off._cell_lr(16, n) == off.lr
    assert TDMImputer.paper()._config.cell_lr_correction is False
    with pytest.raises(ValueError, match="cell_lr_correction must be True or False"):
        TDMImputer._configured(**FAST, cell_lr_correction="yes").fit(X_nan)
