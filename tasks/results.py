"""What the steps of a table's run return: the fit, the fitted model, the write, the whole run.

Plain frozen dataclasses, shared by the tasks and the flows; this module imports no other task
module, so that any of them can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CellDraws",
    "FittedModel",
    "ImputationOutcome",
    "ImputeTableResult",
    "Imputed",
    "WriteResult",
]


@dataclass(frozen=True, eq=False)
class CellDraws:
    """What `n_draws` draws of each imputed cell show, on the rows they were drawn for (same
    index): per numeric column the 5% and 95% quantiles of its draws (`low`, `high`), per
    labelled column the share of draws that gave a cell the label written for it
    (`probability`); NaN where a cell was observed."""

    low: pd.DataFrame
    high: pd.DataFrame
    probability: pd.DataFrame
    n_draws: int

    def at(self, rows: pd.Index) -> CellDraws:
        """The draws of `rows` only."""
        return CellDraws(
            self.low.loc[rows], self.high.loc[rows], self.probability.loc[rows], self.n_draws
        )

    @classmethod
    def concat(cls, parts: list[CellDraws]) -> CellDraws:
        """The draws of consecutive row blocks, as one."""
        low, high, probability = (
            pd.concat([getattr(p, name) for p in parts]) for name in ("low", "high", "probability")
        )
        return cls(low, high, probability, n_draws=parts[0].n_draws)


@dataclass(frozen=True, eq=False)
class Imputed:
    """Rows with their missing cells filled, and what their draws show (None: none made);
    `unmeasured`: the numeric columns whose error these rows could not measure (too few
    observed cells here), whose draws are their point imputation and cells have no interval."""

    frame: pd.DataFrame
    draws: CellDraws | None = None
    unmeasured: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class ImputationOutcome:
    """The standardised columns with missing cells filled, and how the fit went.

    `loss_history` holds the training loss of every iteration, `cost_ratio_history` each
    iteration's loss divided by the mean pairwise cost of its two batches (the scale-free
    measure the loss plot shows); either is empty when not recorded. With draws asked for,
    `frame` holds what the run writes (the point imputation, or one draw), `draws` what the
    draws show and `draw_seconds` what they took.
    """

    frame: pd.DataFrame
    imputer: str
    hyperparameters: dict[str, Any]
    device: str
    n_iter: int
    final_loss: float
    fit_seconds: float
    loss_history: np.ndarray = field(default_factory=lambda: np.empty(0))
    cost_ratio_history: np.ndarray = field(default_factory=lambda: np.empty(0))
    draws: CellDraws | None = None
    draw_seconds: float = 0.0


@dataclass(frozen=True, eq=False)
class FittedModel:
    """A TDM imputer fitted on a sample of a table, and how the fit went (`outcome.frame` is
    the sample's imputation)."""

    imputer: Any
    outcome: ImputationOutcome


@dataclass(frozen=True)
class WriteResult:
    """What was written, and where; `could_be_not_null`: the imputed columns the source declares
    nullable that hold no NULL now (the target keeps them nullable, as the source has them)."""

    db_path: str
    target_table: str
    replaced_existing: bool
    rows: int
    cells_imputed: int
    run_id: str
    could_be_not_null: tuple[str, ...] = ()


@dataclass(frozen=True)
class ImputeTableResult:
    """What one table's run did; an incremental run also says which model version imputed it,
    the rows it imputed and kept, why it fitted a model (None: the stored one was used), each
    column's drift (`tasks.drift.DriftReport.to_dict`; None: nothing to compare with) and
    whether it appended to the target (False: the target was written anew). `could_be_not_null`:
    the imputed columns the source declares nullable that hold no NULL now (`WriteResult`);
    `not_imputed`: sentences naming the columns left as they are, NULLs included, and why
    (`tasks.validate.not_imputed_notes`); `unchanged_since`: with status "unchanged", the run
    that wrote the target this run left as it was (`tasks.unchanged`)."""

    run_id: str
    db_path: str
    source_table: str
    target_table: str
    replaced_existing: bool
    status: str
    rows: int
    cells_imputed: dict[str, int]
    device: str | None
    n_iter: int | None
    final_loss: float | None
    fit_seconds: float
    seconds: dict[str, float] = field(default_factory=dict)
    model_version: int | None = None
    rows_new: int | None = None
    rows_reused: int | None = None
    refit_reason: str | None = None
    drift: dict[str, Any] | None = None
    appended: bool | None = None
    could_be_not_null: tuple[str, ...] = ()
    not_imputed: tuple[str, ...] = ()
    unchanged_since: str | None = None
