"""Pandera schemas and the GX suite: what each accepts and refuses."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pandas as pd
import pandera.errors
import pytest

from schemas.expectations import expectation_suite
from schemas.input import CHECK_FINITE, CHECK_MIN_ROWS, CHECK_OBSERVED, input_schema
from schemas.lineage import ImputedCellsSchema, LineageSchema
from schemas.output import output_schema


def _failed_checks(schema: pandera.DataFrameSchema, frame: pd.DataFrame) -> set[str]:
    with pytest.raises(pandera.errors.SchemaErrors) as caught:
        schema.validate(frame, lazy=True)
    return set(caught.value.failure_cases["check"].astype(str))


def test_input_schema_accepts_missing_values() -> None:
    """NaN cells are what the pipeline imputes: they are allowed."""
    frame = pd.DataFrame({"a": [1.0, np.nan, 3.0, 4.0], "k": [1, 2, 3, 4]})
    input_schema(["a"], "k").validate(frame)


def test_input_schema_names_each_problem() -> None:
    """inf, a column without an observed value and too few rows are separate failures."""
    frame = pd.DataFrame({"a": [np.inf, 1.0], "b": [np.nan, np.nan]})
    assert _failed_checks(input_schema(["a", "b"]), frame) == {
        CHECK_FINITE, CHECK_OBSERVED, CHECK_MIN_ROWS,
    }  # fmt: skip


def test_input_schema_wants_a_unique_non_null_key() -> None:
    """The key column must be unique and never null."""
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "k": [1, 1, None, 4]})
    assert _failed_checks(input_schema(["a"], "k"), frame) >= {
        "not_nullable", "field_uniqueness",
    }  # fmt: skip


def test_output_schema_refuses_nulls_and_wrong_row_counts() -> None:
    """Imputed columns hold finite numbers only, and the row count must match the source."""
    schema = output_schema(["a"], None, n_rows=3)
    schema.validate(pd.DataFrame({"a": [1.0, 2.0, 3.0]}))
    with pytest.raises(pandera.errors.SchemaErrors):
        schema.validate(pd.DataFrame({"a": [1.0, np.nan]}), lazy=True)


def _lineage_row(**changes: object) -> pd.DataFrame:
    now = pd.Timestamp(datetime.now(UTC))
    row = {
        "run_id": "r", "flow_name": "impute-table", "deployment_name": None,
        "started_at": now, "finished_at": now, "source_table": "t", "source_rows": 10,
        "source_hash": "abc", "target_table": "t_imputed", "replaced_source": False,
        "key_column": None, "rows": 10, "columns_imputed": "[]", "cells_imputed": "{}",
        "imputer": "TDMImputer", "hyperparameters": "{}", "seed": 0, "device": "cpu",
        "n_iter": 5, "final_loss": 0.1, "fit_seconds": 1.0, "quality_passed": True,
        "quality_report": "{}", "package_versions": "{}", "status": "imputed",
    }  # fmt: skip
    row.update(changes)
    return pd.DataFrame([row])


def test_lineage_schema_accepts_a_complete_row() -> None:
    """A row with every field validates; nullable fields may be None."""
    LineageSchema.validate(_lineage_row())


@pytest.mark.parametrize(
    "changes",
    [{"status": "failed"}, {"source_rows": -1}, {"run_id": None}],
    ids=["unknown-status", "negative-rows", "missing-run-id"],
)
def test_lineage_schema_refuses_bad_rows(changes: dict) -> None:
    """Unknown statuses, negative counts and missing required fields are refused."""
    with pytest.raises((pandera.errors.SchemaError, pandera.errors.SchemaErrors)):
        LineageSchema.validate(_lineage_row(**changes))


def test_imputed_cells_schema_has_fixed_columns() -> None:
    """The imputed-cells record has exactly its five columns, in order."""
    frame = pd.DataFrame(
        {"run_id": ["r"], "target_table": ["t"], "row_number": [0], "row_key": [None],
         "column_name": ["a"]}
    )  # fmt: skip
    ImputedCellsSchema.validate(frame)
    with pytest.raises((pandera.errors.SchemaError, pandera.errors.SchemaErrors)):
        ImputedCellsSchema.validate(frame.assign(extra=1))


def test_expectation_suite_covers_nulls_range_row_count_and_key() -> None:
    """The suite expects no nulls and a sane range per column, the row count, and the key."""
    suite = expectation_suite(["a", 'b"c'], "k", 10, {"a": (0.0, 1.0), 'b"c': (-1.0, 1.0)})
    kinds = [(e.expectation_type, getattr(e, "column", None)) for e in suite.expectations]
    assert ("expect_table_row_count_to_equal", None) in kinds
    assert ("expect_column_values_to_not_be_null", 'b"c') in kinds
    assert ("expect_column_values_to_be_between", "a") in kinds
    assert ("expect_column_values_to_be_unique", "k") in kinds
    assert ("expect_column_values_to_not_be_null", "k") in kinds
