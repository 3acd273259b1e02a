"""The imputer hyperparameters a run takes (pydantic only: cheap to import)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.errors import PipelineInputError, validation_problems

__all__ = ["DEFAULT_TARGET_SUFFIX", "ImputerParams", "override_params"]

DEFAULT_TARGET_SUFFIX = "_imputed"
"""Default target table name: the source name plus this suffix."""


class ImputerParams(BaseModel):
    """Hyperparameters the pipeline passes to `tdm.TDMImputer`; unset (None) = library default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_iter: int | None = Field(
        default=None,
        ge=1,
        description="Training iterations (unset: the library's 2,000; paper: 10,000).",
    )
    batch_size: int = Field(
        default=512, ge=2, description="Rows per batch (paper: 512; smaller for small tables)."
    )
    n_blocks: int = Field(default=3, ge=0, description="Coupling blocks (paper: 3; 0 = OTImputer).")
    width_factor: int = Field(
        default=2, ge=1, description="Hidden width = factor x columns (paper: 2)."
    )
    lr: float = Field(default=1e-2, gt=0, description="RMSprop learning rate (paper: 1e-2).")
    network_lr: float | None = Field(
        default=None, gt=0, description="Learning rate of the network weights (unset: 3e-3)."
    )
    cell_lr_correction: bool | None = Field(
        default=None,
        description="Lower the missing cells' rate on tables of more than 2,048 rows, where "
        "RMSprop's step per visit of a rarely drawn row grows (unset: the library's default, "
        "on; paper: off).",
    )
    init: Literal["auto", "ice", "forest", "mean"] | None = Field(
        default=None,
        description="Start of the missing cells: 'auto' (ICE's imputation, or a light "
        "MissForest's where it imputes probe cells at least 10% better), 'ice', 'forest', or "
        "the column 'mean' (unset: the library's default; paper: 'mean').",
    )
    cost: Literal["sqeuclidean", "euclidean"] | None = Field(
        default=None, description="OT ground cost (unset: the library's default)."
    )
    solver: Literal["assignment", "emd", "sinkhorn"] | None = Field(
        default=None, description="OT solver (unset: the library's default, exact assignment)."
    )
    epsilon: float | None = Field(
        default=None, gt=0, description="Sinkhorn regularisation, as a fraction of the median cost."
    )
    clamp: float | None = Field(default=None, gt=0, description="Bound on the coupling log-scales.")
    init_noise: float | None = Field(
        default=None, ge=0, description="Std of the noise added to the starting values (unset: 0)."
    )
    device: str = Field(
        default="auto", description="'auto' (CUDA when present), 'cpu', 'cuda', 'cuda:1'."
    )
    dtype: Literal["float32", "float64"] = Field(
        default="float32", description="Training precision."
    )
    early_stopping: bool | None = Field(
        default=None,
        description="Stop when held-out observed cells stop improving (unset: library default).",
    )
    validation_fraction: float | None = Field(
        default=None, gt=0, lt=1, description="Share of observed cells held out by early stopping."
    )
    n_iter_no_change: int | None = Field(
        default=None, ge=1, description="Early-stopping patience, in iterations."
    )
    bounds_method: Literal["transform", "project", "clip"] | None = Field(
        default=None,
        description="How imputed numbers are held within their bounds: a transform of the "
        "cell's parameter, projection after each step, or clipping of the result (unset: the "
        "library's default).",
    )
    transform_max_iter: int | None = Field(
        default=None,
        ge=1,
        description="Steps that impute each partition of a table too large for one fit "
        "(unset: about 200 updates per row, at most max_iter).",
    )


def override_params(
    base: ImputerParams, overrides: Mapping[str, Any] | None, *, subject: str
) -> ImputerParams:
    """`base` with the settings `overrides` gives replaced, the whole validated again.

    Invalid overrides raise `PipelineInputError("<subject> are invalid: <field: problem; ...>.")`.
    """
    try:
        return ImputerParams.model_validate({**base.model_dump(), **(overrides or {})})
    except ValidationError as error:
        raise PipelineInputError(f"{subject} are invalid: {validation_problems(error)}.") from None
