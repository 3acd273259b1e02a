"""The one method registry: every method once, in display order, public methods apart from the
benchmark fixtures, and each factory building the configuration its record describes."""

from __future__ import annotations

import pytest

from benchmarks.registry import FIXTURES, METHODS, REGISTRY, get_method, make_imputer
from tdm import TDMImputer


def test_registry_lists_every_method_once_in_display_order_with_a_description() -> None:
    assert tuple(REGISTRY) == (
        "mean",
        "ice",
        "missforest",
        "softimpute",
        "gain",
        "miwae",
        "mcflow",
        "emflow",
        "miracle",
        "mode",
        "missforest_mixed",
        "miceforest",
        "ot_sh",
        "ot_ns",
        "tdm",
        "tdm_start",
        "tdm_fixed_cell_lr",
        "tdm_ice_init",
        "tdm_mean_init",
        "tdm_paper",
    )
    assert all(method.description and method.name == name for name, method in REGISTRY.items())
    assert tuple(n for n in REGISTRY if n not in FIXTURES) == METHODS
    assert FIXTURES == ("tdm_start", "tdm_fixed_cell_lr", "tdm_ice_init", "tdm_mean_init")
    assert {n for n, m in REGISTRY.items() if m.batch_ot} == {
        "ot_sh",
        "ot_ns",
        "tdm",
        "tdm_paper",
        "tdm_fixed_cell_lr",
        "tdm_ice_init",
        "tdm_mean_init",
    }
    assert {n for n, m in REGISTRY.items() if m.has_max_iter and not m.batch_ot} == {
        "gain",
        "miwae",
        "miracle",
    }


def test_fixtures_are_not_public_but_the_benchmark_finds_them() -> None:
    """make_imputer builds public methods only; get_method finds fixtures too."""
    with pytest.raises(ValueError, match="name must be one of"):
        make_imputer("tdm_ice_init")
    assert get_method("tdm_ice_init").build(random_state=1).get_params()["init"] == "ice"
    with pytest.raises(ValueError, match="method must be one of"):
        get_method("mice")
    with pytest.raises(ValueError, match="name must be one of"):
        make_imputer("mice")


def test_tdm_entries_use_the_right_settings() -> None:
    paper = make_imputer("tdm_paper", random_state=4)
    assert paper._settings() == TDMImputer.paper(random_state=4)._settings()
    assert make_imputer("tdm_paper", max_iter=7).get_params()["max_iter"] == 7
    paper_settings = TDMImputer.paper()._settings()
    mean_init = get_method("tdm_mean_init").build()._settings()
    changed = {
        "network_lr": (None, 3e-3),
        "conditioner": ("separate", "joint"),
        "batch_draw": ("independent", "disjoint"),
        "squash": ("unscaled", "scaled"),
        "bounds": (None, "observed"),
        "dtype": ("float64", "float32"),
    }
    assert {k: v for k, v in mean_init.items() if k not in changed} == {
        k: v for k, v in paper_settings.items() if k not in changed
    }
    assert {k: (paper_settings[k], mean_init[k]) for k in changed} == changed
    assert (mean_init["init"], mean_init["max_iter"]) == ("mean", 10_000)
    default = make_imputer("tdm")._settings()
    assert (default["init"], default["init_noise"], default["max_iter"]) == ("auto", 0.0, 2000)
    assert default["cell_lr_correction"] is True
    fixed_cell_lr = get_method("tdm_fixed_cell_lr").build()._settings()
    later = ("cell_lr_correction",)
    assert {k: v for k, v in fixed_cell_lr.items() if k not in later} == {
        k: v for k, v in default.items() if k not in later
    }
    assert [fixed_cell_lr[k] for k in later] == [False]
    assert [default[k] for k in later] == [True]
    start = get_method("tdm_start").build()._settings()
    assert start == {**default, "max_iter": 0}
    ice_init = get_method("tdm_ice_init").build()._settings()
    assert {k: v for k, v in ice_init.items() if k != "init"} == {
        k: v for k, v in fixed_cell_lr.items() if k != "init"
    }
    assert ice_init["init"] == "ice"
    assert make_imputer("ot_sh").get_params()["solver"] == "sinkhorn"
    assert make_imputer("ot_ns").get_params()["solver"] == "assignment"
    with pytest.raises(ValueError, match="fixes the OT solver"):
        make_imputer("ot_sh", solver="assignment")
