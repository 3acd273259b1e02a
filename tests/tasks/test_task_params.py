"""The imputer hyperparameters of a run, and overrides of them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tasks.errors import PipelineInputError
from tasks.params import ImputerParams, override_params

BASE = ImputerParams(max_iter=300, lr=0.05, init="ice")


def test_unset_hyperparameters_are_left_to_the_library() -> None:
    """A fresh set leaves the library's defaults (None) where the paper's are not pinned."""
    params = ImputerParams()
    assert (params.max_iter, params.init, params.solver, params.early_stopping) == (
        None,
        None,
        None,
        None,
    )
    assert (params.batch_size, params.n_blocks, params.device) == (512, 3, "auto")


def test_hyperparameters_are_frozen_and_unknown_names_refused() -> None:
    """A set cannot be changed in place, and a misspelt name is an error, not ignored."""
    with pytest.raises(ValidationError):
        BASE.max_iter = 5  # type: ignore[misc]
    with pytest.raises(ValidationError, match="max_iters"):
        ImputerParams(max_iters=5)  # type: ignore[call-arg]


def test_an_override_replaces_only_the_settings_it_names() -> None:
    """`{"max_iter": 9}` changes max_iter and keeps lr and init; no override keeps everything."""
    changed = override_params(BASE, {"max_iter": 9}, subject="Table t's settings")
    assert (changed.max_iter, changed.lr, changed.init) == (9, 0.05, "ice")
    assert override_params(BASE, None, subject="x") == BASE
    assert override_params(BASE, {}, subject="x") == BASE


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"max_iter": 0}, "max_iter: Input should be greater than or equal to 1"),
        ({"init": "zeros"}, "init: Input should be 'auto', 'ice', 'forest' or 'mean'"),
        ({"max_iters": 5}, "max_iters: Extra inputs are not permitted"),
    ],
    ids=["out-of-range", "not-a-choice", "unknown-name"],
)
def test_a_bad_override_names_the_subject_the_setting_and_the_problem(
    overrides: dict[str, object], problem: str
) -> None:
    """The error is one sentence: the subject given, then each setting and what is wrong."""
    with pytest.raises(PipelineInputError) as raised:
        override_params(BASE, overrides, subject='The imputer settings for table "t"')
    assert str(raised.value) == f'The imputer settings for table "t" are invalid: {problem}.'
