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
        "model_version": None, "rows_new": None, "rows_reused": None, "refit_reason": None,
        "drift": None, "target_marker": "written by tdm-impute, run r", "recipe_hash": "c" * 32,
        "target_hash": "d" * 32,
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
    """The imputed-cells record has exactly its nine columns, in order; a probability is a
    share."""
    frame = pd.DataFrame(
        {"run_id": ["r"], "target_table": ["t"], "row_number": [0], "row_key": [None],
         "column_name": ["a"], "model_version": [None], "low": [None], "high": [None],
         "probability": [0.5]}
    )  # fmt: skip
    ImputedCellsSchema.validate(frame)
    for bad in (frame.assign(extra=1), frame.assign(probability=1.5), frame.drop(columns="low")):
        with pytest.raises((pandera.errors.SchemaError, pandera.errors.SchemaErrors)):
            ImputedCellsSchema.validate(bad)


def test_expectation_suite_covers_nulls_range_row_count_and_key() -> None:
    """The suite expects no nulls and a sane range per column, the row count, and the key."""
    suite = expectation_suite(["a", 'b"c'], "k", 10, {"a": (0.0, 1.0), 'b"c': (-1.0, 1.0)})
    kinds = [(e.expectation_type, getattr(e, "column", None)) for e in suite.expectations]
    assert ("expect_table_row_count_to_equal", None) in kinds
    assert ("expect_column_values_to_not_be_null", 'b"c') in kinds
    assert ("expect_column_values_to_be_between", "a") in kinds
    assert ("expect_column_values_to_be_unique", "k") in kinds
    assert ("expect_column_values_to_not_be_null", "k") in kinds


def test_labelled_columns_are_checked_for_labels_not_numbers() -> None:
    """A text or boolean column to impute takes any dtype, with NULLs, but at most MAX_LABELS
    distinct labels and one observed; the output schema wants no NULL left in it."""
    from schemas.input import CHECK_LABELS, MAX_LABELS

    frame = pd.DataFrame({"s": ["a", None, "b", "a"], "ok": pd.array([True, None, None, False])})
    input_schema(["s", "ok"], labelled=["s", "ok"]).validate(frame)
    many = pd.DataFrame({"s": [f"id {i}" for i in range(MAX_LABELS + 1)]})
    assert _failed_checks(input_schema(["s"], labelled=["s"]), many) == {CHECK_LABELS}
    nothing = pd.DataFrame({"s": pd.Series([None] * 4, dtype=object)})
    assert _failed_checks(input_schema(["s"], labelled=["s"]), nothing) == {CHECK_OBSERVED}
    schema = output_schema(["s"], None, n_rows=2, labelled=["s"])
    schema.validate(pd.DataFrame({"s": ["a", "b"]}))
    with pytest.raises(pandera.errors.SchemaErrors):
        schema.validate(pd.DataFrame({"s": ["a", None]}), lazy=True)


def test_expectation_suite_checks_bounds_and_labels_on_imputed_cells() -> None:
    """Bounds (an infinite end open) and observed labels run on the columns holding only the
    imputed cells, each naming its table column in `meta`."""
    from schemas.expectations import CHECK_COLUMN, CHECK_META, WITHIN_BOUNDS

    suite = expectation_suite(
        ["x", "s"], None, 5, {"x": (-9.0, 9.0)}, value_bounds={"x": (0.0, float("inf"))},
        labels={"s": ["a", "b"]}, imputed_cells={"x": "x*", "s": "s*"},
    )  # fmt: skip
    found = {(e.expectation_type, e.column): e for e in suite.expectations if hasattr(e, "column")}
    bounded = found[("expect_column_values_to_be_between", "x*")]
    assert (bounded.min_value, bounded.max_value) == (0.0, None)
    assert bounded.meta == {CHECK_META: WITHIN_BOUNDS, CHECK_COLUMN: "x"}
    labelled = found[("expect_column_values_to_be_in_set", "s*")]
    assert list(labelled.value_set) == ["a", "b"] and labelled.meta == {CHECK_COLUMN: "s"}
    assert ("expect_column_values_to_be_between", "s") not in found


def test_a_config_entry_takes_pass_through_and_ordered_bounds() -> None:
    """`pass_through` lists columns; `bounds` maps a column to [low, high] (null: open), low not
    above high, finite."""
    from pydantic import ValidationError

    from schemas.warehouse import TableEntry

    entry = TableEntry(table="t", pass_through=["note"], bounds={"x": [0, None]})
    assert entry.pass_through == ["note"] and entry.bounds == {"x": (0.0, None)}
    for bad in ({"x": [3, 1]}, {"x": [0]}, {"x": [0, float("inf")]}, {"x": ["a", 1]}):
        with pytest.raises(ValidationError, match="bounds"):
            TableEntry(table="t", bounds=bad)


def test_a_config_entry_takes_what_the_target_receives_and_the_draws() -> None:
    from pydantic import ValidationError

    from schemas.warehouse import TableEntry

    entry = TableEntry(table="t", fill="draw", draws=20)
    assert (entry.fill, entry.draws) == ("draw", 20)
    assert (TableEntry(table="t").fill, TableEntry(table="t").draws) == (None, None)
    for bad in ({"fill": "median"}, {"draws": -1}):
        with pytest.raises(ValidationError, match=next(iter(bad))):
            TableEntry(table="t", **bad)
    # Bug: one draw passed the config (and `tdm serve`'s start) and failed only at run time.
    with pytest.raises(ValidationError, match=r"draws is 0 \(none\) or at least 2"):
        TableEntry(table="t", draws=1)
    # Security review: 20,000 draws of a config entry held 349 MiB more for a 200 x 4 table.
    assert TableEntry(table="t", draws=1_000).draws == 1_000
    with pytest.raises(ValidationError, match="draws is at most 1,000: they are held in memory"):
        TableEntry(table="t", draws=1_001)
