"""Saving and loading fitted imputers: round trips, refusals of other classes and of files from
an older save layout, and pickling."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tdm import OTImputer, TDMImputer
from tdm._persistence import FORMAT_VERSION

FAST = {"max_iter": 30, "batch_size": 32, "random_state": 0}

IMPUTERS = [
    pytest.param(lambda **kw: TDMImputer(**{**FAST, **kw}), id="TDM"),
    pytest.param(lambda **kw: OTImputer(**{**FAST, "solver": "assignment", **kw}), id="OT-NS"),
    pytest.param(lambda **kw: OTImputer(**{**FAST, "solver": "sinkhorn", **kw}), id="OT-SH"),
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


def test_files_from_an_older_save_layout_are_refused_with_a_message_to_refit(
    data, tmp_path: Path
) -> None:
    """A file written by tdm < 0.5 (save format 1, no library version) is refused: its settings
    cannot be trusted to mean what they mean now, so the user is told to refit."""
    _, X_nan, _ = data
    path = tmp_path / "imputer.pt"
    TDMImputer(**FAST).fit(X_nan).save(path)
    state = torch.load(path, weights_only=True)
    assert state["format_version"] == FORMAT_VERSION and state["tdm_version"]
    state["format_version"] = 1
    del state["tdm_version"]
    torch.save(state, path)
    with pytest.raises(ValueError, match=r"saved by tdm a version before 0\.5.*Refit"):
        TDMImputer.load(path)


def test_a_file_without_the_cost_ratio_history_loads_with_nan_in_its_place(
    data, tmp_path: Path
) -> None:
    """Files saved before the ratio was recorded load, with a history of NaN (not recorded) as
    long as the loss history, and impute as before."""
    _, X_nan, _ = data
    path = tmp_path / "imputer.pt"
    est = TDMImputer(**FAST).fit(X_nan)
    est.save(path)
    state = torch.load(path, weights_only=True)
    del state["cost_ratio_history_"]
    torch.save(state, path)
    loaded = TDMImputer.load(path)
    assert loaded.cost_ratio_history_.shape == est.loss_history_.shape
    assert np.isnan(loaded.cost_ratio_history_).all()
    assert loaded.transform(X_nan).tobytes() == est.transform(X_nan).tobytes()


def test_a_numeric_file_of_tdm_0_6_loads_and_a_mixed_one_is_refused_with_a_refit(
    data, tmp_path: Path
) -> None:
    """Save format 3 (tdm 0.6) sized the network by coordinates: a numeric table's file reads
    the same now; a file with a categorical column (a wider network) is refused, saying to
    refit, rather than failing deep inside torch."""
    _, X_nan, _ = data
    path = tmp_path / "imputer.pt"
    est = TDMImputer(**FAST).fit(X_nan)
    est.save(path)
    state = torch.load(path, weights_only=True)
    state["format_version"], state["tdm_version"] = 3, "0.6.0"
    torch.save(state, path)
    assert TDMImputer.load(path).transform(X_nan).tobytes() == est.transform(X_nan).tobytes()

    frame = pd.DataFrame(X_nan[:, :2], columns=["a", "b"])
    frame["label"] = np.array(["x", "y", "z"], dtype=object)[np.arange(len(frame)) % 3]
    frame.loc[::5, "label"] = None
    TDMImputer(**FAST).fit(frame).save(path)
    state = torch.load(path, weights_only=True)
    state["format_version"], state["tdm_version"] = 3, "0.6.0"
    torch.save(state, path)
    with pytest.raises(ValueError, match=r"saved by tdm 0\.6\.0.*categorical.*Refit"):
        TDMImputer.load(path)
