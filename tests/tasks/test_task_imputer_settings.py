"""The imputer's settings of a run: the library's parameters, as one mapping it validates."""

from __future__ import annotations

import pytest

from tasks.errors import PipelineInputError
from tasks.imputer_settings import (
    PIPELINE_SET,
    imputer_device,
    imputer_settings,
    parse_setting,
    setting_defaults,
    settings_from_env,
)
from tdm import TDMImputer


@pytest.mark.parametrize(
    ("text", "value"),
    [("none", None), ("NULL", None), ("true", True), ("False", False), ("12", 12),
     ("3e-3", 0.003), ("0.5", 0.5), ("cuda:1", "cuda:1"), (" mean ", "mean")],
)  # fmt: skip
def test_a_value_written_as_text_is_parsed(text: str, value: object) -> None:
    """Flags and TDM_* variables give text; it becomes None, a bool, a number or the text."""
    parsed = parse_setting(text)
    assert parsed == value and type(parsed) is type(value)


def test_unset_settings_are_the_library_s_defaults() -> None:
    """The pipeline declares no defaults: an empty mapping is the library's constructor."""
    assert imputer_settings({}, None, subject="x") == {}
    defaults = setting_defaults()
    library = TDMImputer().get_params(deep=False)
    assert defaults == {name: library[name] for name in defaults}
    assert "random_state" not in defaults and "callback" not in defaults
    assert imputer_device({}) == str(library["device"])


def test_network_lr_none_has_the_library_s_meaning() -> None:
    """network_lr=None reaches the library as None, where it means "use lr"."""
    settings = imputer_settings({"network_lr": None}, subject="x")
    imputer = TDMImputer(**settings)
    assert imputer.network_lr is None and imputer._network_lr() == imputer.lr


def test_later_layers_win_and_the_environment_is_read_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TDM_<NAME> variables of the library's settings are read; a later mapping beats them."""
    monkeypatch.setenv("TDM_MAX_ITER", "300")
    monkeypatch.setenv("TDM_INIT", "ice")
    monkeypatch.setenv("TDM_SEED", "4")  # the run's own setting, not the imputer's
    env = settings_from_env()
    assert env == {"max_iter": 300, "init": "ice"}
    assert imputer_settings(env, {"max_iter": 9}, subject="x") == {"max_iter": 9, "init": "ice"}


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"max_iter": -1}, "max_iter"),
        ({"init": "zeros"}, "init"),
        ({"max_iters": 5}, "max_iters"),
        (
            {"random_state": 3},
            "sets random_state itself, not as an imputer setting (random_state"
            " from the seed setting)",
        ),
        ({"standardize": False}, "standardize off, as the standardise step has already scaled"),
    ],
    ids=["out-of-range", "not-a-choice", "unknown-name", "pipeline-set", "pipeline-standardises"],
)
def test_a_bad_setting_names_the_subject_and_the_setting(
    settings: dict[str, object], named: str
) -> None:
    """The library's own message, after the subject given, in one sentence."""
    with pytest.raises(PipelineInputError) as raised:
        imputer_settings(settings, subject='The imputer settings for table "t"')
    message = str(raised.value)
    assert message.startswith('The imputer settings for table "t" are invalid: ')
    assert named in message and message.endswith(".")


def test_every_unknown_setting_is_named_with_only_those_a_run_may_set() -> None:
    """Bug (upgrade): an old config's `{epsilon: 0.1, clamp: 5}` was refused naming `clamp`
    alone (the next run then refused `epsilon`), and the settings listed included those the
    pipeline sets itself and refuses."""
    with pytest.raises(PipelineInputError) as raised:
        imputer_settings({"epsilon": 0.1, "clamp": 5, "max_iter": 5}, subject="Settings")
    message = str(raised.value)
    assert message.startswith("Settings are invalid: unknown settings 'clamp', 'epsilon'; ")
    assert "max_iter" in message
    assert not any(name in message for name in PIPELINE_SET)
