"""Saving and loading fitted imputers: round trips (private settings included), refusals of
other classes and of files of another save format, and pickling."""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tdm import OTImputer, TDMImputer
from tdm._persistence import FORMAT_VERSION

# Steps in transform too, so that new rows go through the loaded network.
FAST = {"max_iter": 30, "batch_size": 32, "random_state": 0, "transform_max_iter": 10}

IMPUTERS = [
    pytest.param(lambda **kw: TDMImputer(**{**FAST, **kw}), id="TDM"),
    pytest.param(lambda **kw: OTImputer(**{**FAST, "solver": "assignment", **kw}), id="OT-NS"),
    # Sinkhorn's steps cost about 20 assignment steps each: fewer of them.
    pytest.param(
        lambda **kw: OTImputer(**{**FAST, "solver": "sinkhorn", "max_iter": 10, **kw}), id="OT-SH"
    ),
]


@pytest.mark.parametrize("make", IMPUTERS)
def test_save_load_round_trip(make, data, tmp_path: Path) -> None:
    _, X_nan, _ = data
    est = make().fit(X_nan)
    path = tmp_path / "imputer.pt"
    est.save(path)
    loaded = type(est).load(path)
    assert loaded.get_params() == {**est.get_params(), "callback": None}
    assert loaded.n_iter_ == est.n_iter_
    np.testing.assert_array_equal(loaded.loss_history_, est.loss_history_)
    np.testing.assert_array_equal(loaded.cost_ratio_history_, est.cost_ratio_history_)
    new = X_nan[:20].copy()
    new[:, 1] = np.nan
    assert loaded.transform(new).tobytes() == est.transform(new).tobytes()
    assert loaded.transform(X_nan).tobytes() == est.transform(X_nan).tobytes()
    assert [p.name for p in tmp_path.iterdir()] == ["imputer.pt"]  # no temporary file left


def test_load_refuses_another_class(data, tmp_path: Path) -> None:
    _, X_nan, _ = data
    TDMImputer(**FAST).fit(X_nan).save(tmp_path / "m.pt")
    with pytest.raises(ValueError, match="not a saved OTImputer"):
        OTImputer.load(tmp_path / "m.pt")


def test_pickle_round_trip(data) -> None:
    _, X_nan, _ = data
    est = TDMImputer(**FAST).fit(X_nan)
    clone = pickle.loads(pickle.dumps(est))
    row = X_nan[:5].copy()
    row[:, 0] = np.nan
    assert clone.transform(row).tobytes() == est.transform(row).tobytes()


@pytest.mark.parametrize("old", [2, 5])
def test_a_file_of_another_save_format_is_refused_naming_both_formats_and_saying_to_refit(
    old: int, data, tmp_path: Path
) -> None:
    _, X_nan, _ = data
    path = tmp_path / "imputer.pt"
    TDMImputer(**FAST).fit(X_nan).save(path)
    state = torch.load(path, weights_only=True)
    assert state["format_version"] == FORMAT_VERSION and state["tdm_version"]
    state["format_version"], state["tdm_version"] = old, "0.8.0"
    torch.save(state, path)
    expected = (
        rf"saved in format {old} \(by tdm 0\.8\.0\).* reads format {FORMAT_VERSION} only\. Refit"
    )
    with pytest.raises(ValueError, match=expected):
        TDMImputer.load(path)


def test_files_not_written_by_save_or_damaged_are_refused_with_a_value_error(
    data, tmp_path: Path
) -> None:
    """Bug: a text file, another object or a file missing a field gave KeyError, AttributeError
    or torch's UnpicklingError. Each is a ValueError naming the file, without torch's advice to
    load it with `weights_only=False` (which runs whatever the file holds)."""
    _, X_nan, _ = data
    saved = tmp_path / "m.pt"
    TDMImputer(**FAST).fit(X_nan).save(saved)
    state = torch.load(saved, weights_only=True)
    del state["X_fit_"]
    cases = {"text": b"hello", "list": [1, 2, 3], "pickled": TDMImputer(**FAST), "missing": state}
    for name, content in cases.items():
        path = tmp_path / f"{name}.pt"
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif name == "pickled":
            path.write_bytes(pickle.dumps(content))
        else:
            torch.save(content, path)
        with (
            pytest.raises(ValueError, match=rf"{name}\.pt: (not a|a damaged)") as refused,
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("error")  # bug: torch warned of a pickle's protocol first
            TDMImputer.load(path)
        assert "weights_only" not in str(refused.value)  # torch's advice to load it unsafely


def test_labels_a_file_cannot_hold_are_refused_when_saving(tmp_path: Path) -> None:
    """Bug: labels of Timestamps were saved, and the file then failed to load. `save` refuses
    them, naming the column and the label (not with torch's advice to load unsafely), and
    leaves no file."""
    import pandas as pd

    rng = np.random.default_rng(0)
    labels = [pd.Timestamp("2020-01-01"), pd.Timestamp("2021-01-01"), None] * 20
    frame = pd.DataFrame({"a": rng.normal(size=60), "t": pd.Series(labels, dtype=object)})
    est = TDMImputer(**{**FAST, "init": "mean", "max_iter": 5}).fit(frame)
    with pytest.raises(ValueError, match="labels must be numbers, text or booleans") as refused:
        est.save(tmp_path / "m.pt")
    assert list(tmp_path.iterdir()) == []
    assert "column 't', label Timestamp('2020-01-01 00:00:00'), a Timestamp" in str(refused.value)
    assert "weights_only" not in str(refused.value)  # torch's advice to load it unsafely


def test_private_settings_and_paper_mode_survive_save_and_load(data, tmp_path: Path) -> None:
    """Regression: a float64 imputer's network was loaded in float32 (its weights rounded)."""
    _, X_nan, _ = data
    for est in (
        TDMImputer.paper(**FAST),
        TDMImputer._configured(**FAST, bounds_method="transform", init_noise=0.2),
        OTImputer._configured(**FAST, solver="assignment", cost="euclidean"),
    ):
        path = tmp_path / "imputer.pt"
        est.fit(X_nan).save(path)
        loaded = type(est).load(path)
        assert loaded._config == est._config and repr(loaded) == repr(est)
        assert loaded.transform(X_nan[:9]).tobytes() == est.transform(X_nan[:9]).tobytes()


def test_a_numpy_integer_seed_is_saved_as_an_int(data, tmp_path: Path) -> None:
    """Bug: `random_state=np.int64(3)` (what NumPy code passes) made `save` refuse."""
    _, X_nan, _ = data
    TDMImputer(**{**FAST, "random_state": np.int64(3)}).fit(X_nan).save(tmp_path / "m.pt")
    assert TDMImputer.load(tmp_path / "m.pt").random_state == 3


def test_saving_into_a_missing_folder_names_the_folder(data, tmp_path: Path) -> None:
    """Bug: the error named the temporary file `save` writes first, not the user's path."""
    est = TDMImputer(**{**FAST, "init": "mean", "max_iter": 5}).fit(data[1])
    with pytest.raises(FileNotFoundError, match=r"its folder '.*nowhere' does not exist"):
        est.save(tmp_path / "nowhere" / "m.pt")
    assert list(tmp_path.iterdir()) == []


def test_a_device_given_to_load_is_checked_when_loading(data, tmp_path: Path) -> None:
    """Bug: `load(path, device="gpu")` (or "cuda" without CUDA) was accepted, and the error
    came at the first transform."""
    _, X_nan, _ = data
    saved = tmp_path / "m.pt"
    TDMImputer(**FAST).fit(X_nan).save(saved)
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda' or 'cuda:N'"):
        TDMImputer.load(saved, device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            TDMImputer.load(saved, device="cuda")
    assert TDMImputer.load(saved, device="cpu").device == "cpu"


def test_a_loaded_imputer_draws_for_nullable_and_narrow_columns_as_the_fitted_one(
    tmp_path: Path,
) -> None:
    """Bug: a loaded imputer's `sample` of the data it was fitted on raised "data type 'Int64'
    not understood" (a column's dtype came back as its name). Loading leaves torch's global
    random generator as it was."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=60),
            "n": pd.array(rng.integers(0, 10, 60), dtype="Int64"),
            "u": pd.array(rng.integers(0, 5, 60), dtype="UInt8"),
            "f": pd.array(rng.normal(size=60), dtype="Float32"),
        }
    )
    for j, name in enumerate(frame.columns):
        frame.loc[j::5, name] = pd.NA
    est = TDMImputer(max_iter=5, init="mean", random_state=0).fit(frame)
    est.save(tmp_path / "imputer.pt")
    torch.manual_seed(0)
    untouched = torch.rand(1)
    torch.manual_seed(0)
    loaded = TDMImputer.load(tmp_path / "imputer.pt")
    assert torch.rand(1) == untouched
    drawn = loaded.sample(frame, n_draws=2, random_state=0)
    expected = est.sample(frame, n_draws=2, random_state=0)
    for got, want in zip(drawn, expected, strict=True):
        pd.testing.assert_frame_equal(got, want)
