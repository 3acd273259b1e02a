"""The run's settings from `TDM_*` variables: every variable names a setting, or is refused."""

from __future__ import annotations

import pytest

from deployments.nightly import ServeSettings
from flows.settings import OTHER_VARIABLES, PipelineSettings, check_known_variables
from tasks.errors import PipelineInputError


def test_a_variable_that_names_no_setting_is_refused_with_the_closest_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug (upgrade): `TDM_EPSILON` (read by 0.12) and a typo `TDM_MAX_ITERS` were ignored
    without a word, the nightly run going on without what they set."""
    monkeypatch.setenv("TDM_MAX_ITERS", "5")
    monkeypatch.setenv("TDM_EPSILON", "0.1")
    with pytest.raises(PipelineInputError) as raised:
        PipelineSettings.from_env()
    message = str(raised.value)
    assert message.startswith(
        "Unknown environment variables TDM_EPSILON, TDM_MAX_ITERS (did you mean TDM_MAX_ITER?): "
    )
    assert "so the run would go on without them" in message


def test_every_setting_and_every_variable_read_elsewhere_is_known() -> None:
    """The run's settings, the imputer's, `tdm serve`'s and the others pass; so does a
    variable of another prefix."""
    serve = {f"TDM_{name.upper()}" for name in ServeSettings.model_fields}
    assert serve <= set(OTHER_VARIABLES)
    known = {f"TDM_{name.upper()}": "1" for name in PipelineSettings.model_fields}
    known.update(dict.fromkeys(OTHER_VARIABLES, "1"))
    known.update({"TDM_MAX_ITER": "5", "TDM_NETWORK_LR": "0.01", "TDMX": "1", "HOME": "/"})
    known["TDM_Seed"] = "7"  # read in any letter case, as pydantic-settings reads it
    check_known_variables(known)


def test_a_seed_the_imputer_cannot_take_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bug: `TDM_SEED=4294967296` passed, and the run failed at the fit over the imputer's
    `random_state`, a name the user never set."""
    monkeypatch.setenv("TDM_SEED", str(2**32 - 1))
    assert PipelineSettings.from_env().seed == 2**32 - 1
    monkeypatch.setenv("TDM_SEED", str(2**32))
    with pytest.raises(PipelineInputError, match=r"TDM_SEED='4294967296': .* less than"):
        PipelineSettings.from_env()
