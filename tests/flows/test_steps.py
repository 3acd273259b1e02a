"""The steps' one-line summaries of a run."""

from __future__ import annotations

from flows.steps import NAMED_COLUMNS, cells_per_column


def test_a_wide_tables_summary_names_a_few_columns_and_counts_the_rest() -> None:
    """Columns with imputed cells are named with their counts in order, columns without are
    left out; past NAMED_COLUMNS, the others are counted with their cells, so the line of a
    150-column run stays one short line and its total still adds up."""
    assert cells_per_column({"a": 3, "b": 0, "c": 1}) == "a 3, c 1"
    wide = {f"c{i}": i + 1 for i in range(150)}
    line = cells_per_column(wide)
    named = [f"c{i} {i + 1}" for i in range(NAMED_COLUMNS)]
    rest = sum(range(NAMED_COLUMNS + 1, 151))
    assert line == f"{', '.join(named)} and {rest} in {150 - NAMED_COLUMNS} more columns"
    assert len(line) < 200
    one_more = {f"c{i}": 1 for i in range(NAMED_COLUMNS + 1)}
    assert cells_per_column(one_more).endswith(" and 1 in 1 more column")


def test_the_recipe_changes_with_where_the_fit_runs_but_not_with_replace_target() -> None:
    """helper-65: a fit on Dask workers (a GPU's, another machine's) imputes other values than
    one in the flow's process, so the task runner and the scheduler are in the recipe; whether
    an existing target may be replaced is not (it changes nothing written)."""
    from datetime import UTC, datetime

    from flows.settings import PipelineSettings
    from flows.steps import ImputeOptions, run_recipe
    from tasks.validate import TableRequest

    options = ImputeOptions(imputer={}, seed=0, range_factor=3.0, started=datetime.now(UTC))
    request = TableRequest("sales")
    here = run_recipe(request, options, PipelineSettings())
    assert (
        run_recipe(TableRequest("sales", replace_target=True), options, PipelineSettings()) == here
    )
    others = [
        PipelineSettings(task_runner="dask"),
        PipelineSettings(task_runner="dask", dask_address="tcp://gpu-box:8786"),
        PipelineSettings(torch_threads=3),
        PipelineSettings(max_fit_rows=1000),
    ]
    assert len({here, *(run_recipe(request, options, s) for s in others)}) == 5
    assert (
        run_recipe(request, ImputeOptions({}, 1, 3.0, options.started), PipelineSettings()) != here
    )
