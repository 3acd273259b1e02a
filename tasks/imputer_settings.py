"""The imputer's settings as a run takes them: one mapping of TDMImputer's public parameters
(name -> value), validated by the library itself (`TDMImputer.from_settings`).

The names are the library's, read from it when asked, so every public setting can be given
with the library's meaning and default. The pipeline sets `PIPELINE_SET` itself: the seed
(`random_state`), the progress hook (`callback`, `verbose`) and the bounds it works out from the
table (`bounds`). Unset settings keep the library's defaults: the pipeline has none of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tasks.errors import PipelineInputError

__all__ = [
    "ENV_PREFIX",
    "PIPELINE_SET",
    "environment_settings",
    "imputer_device",
    "imputer_settings",
    "parse_setting",
    "setting_defaults",
    "setting_names",
    "settings_from_env",
]

ENV_PREFIX = "TDM_"
"""A setting `name` is read from the environment variable `TDM_<NAME>`."""

_SET_BY_PIPELINE = {
    "bounds": "from the table (its observed range, CHECK constraints and the bounds setting)",
    "callback": "to log the run's progress",
    "random_state": "from the seed setting",
    "standardize": "off, as the standardise step has already scaled the columns",
    "verbose": "to log the run's progress",
}
PIPELINE_SET = tuple(_SET_BY_PIPELINE)
"""The library's parameters the pipeline sets itself, per run and table."""


def setting_names() -> tuple[str, ...]:
    """TDMImputer's public parameters a run may set, in the constructor's order."""
    from tdm import TDMImputer  # torch is imported on first use

    return tuple(name for name in TDMImputer._get_param_names() if name not in PIPELINE_SET)


def setting_defaults() -> dict[str, Any]:
    """The library's default of every setting a run may set."""
    from tdm import TDMImputer

    defaults = TDMImputer().get_params(deep=False)
    return {name: defaults[name] for name in setting_names()}


def parse_setting(text: str) -> Any:
    """A setting's value written as text (a flag, a `TDM_*` variable): `none`/`null` -> None,
    `true`/`false` -> bool, a whole number -> int, another number -> float, else the text."""
    word = text.strip()
    lowered = word.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(word)
        except ValueError:
            continue
    return word


def settings_from_env() -> dict[str, Any]:
    """The settings given as `TDM_<NAME>` variables (parsed, not yet validated)."""
    found = {}
    for name in setting_names():
        variable = f"{ENV_PREFIX}{name.upper()}"
        if variable in os.environ:
            found[name] = parse_setting(os.environ[variable])
    return found


def environment_settings() -> dict[str, Any]:
    """`settings_from_env`, validated on their own, so that a bad value is refused naming its
    variable rather than the settings it is merged with."""
    found = settings_from_env()
    for name, value in found.items():
        imputer_settings(
            {name: value}, subject=f"The imputer settings of {ENV_PREFIX}{name.upper()}"
        )
    return imputer_settings(found, subject="The imputer settings of the TDM_* variables")


def imputer_settings(*layers: Mapping[str, Any] | None, subject: str) -> dict[str, Any]:
    """The `layers` merged, later ones winning, and validated by the library before any data is
    read; a bad name or value is a `PipelineInputError`: "<subject> are invalid: <why>."."""
    from tdm import TDMImputer

    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer or {})
    ours = sorted(set(merged) & set(PIPELINE_SET))
    if ours:
        why = "; ".join(f"{name} {_SET_BY_PIPELINE[name]}" for name in ours)
        raise PipelineInputError(
            f"{subject} are invalid: the pipeline sets {', '.join(ours)} itself, not as an "
            f"imputer setting ({why})."
        )
    known = setting_names()
    unknown = sorted(set(merged) - set(known))
    if unknown:  # every one named, and only the settings a run may set offered
        raise PipelineInputError(
            f"{subject} are invalid: unknown setting{'s' * (len(unknown) > 1)} "
            f"{', '.join(map(repr, unknown))}; the settings are {', '.join(known)}."
        )
    try:
        TDMImputer.from_settings(merged)
    except (TypeError, ValueError) as error:
        raise PipelineInputError(f"{subject} are invalid: {str(error).rstrip('.')}.") from None
    return merged


def imputer_device(settings: Mapping[str, Any]) -> str:
    """The device the settings ask for (the library's default unless set)."""
    if "device" in settings:
        return str(settings["device"])
    return str(setting_defaults()["device"])
