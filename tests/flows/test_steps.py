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
