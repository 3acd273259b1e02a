"""What the draws of each imputed cell show: quantiles for numbers, agreement for labels."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.draws import summarise_draws
from tasks.results import CellDraws


def test_numbers_get_their_draws_quantiles_and_labels_the_share_that_agrees() -> None:
    """Weibull's 5% and 95% quantiles of 19 draws are the first and the last draw; a label
    cell's probability is the share of draws that gave it the label written; observed cells
    get NaN."""
    given = pd.DataFrame({"x": [1.0, np.nan], "s": [None, "a"]})
    draws = [
        pd.DataFrame({"x": [1.0, float(k)], "s": ["a" if k < 5 else "b", "a"]}) for k in range(19)
    ]
    written = given.assign(x=[1.0, 9.0], s=["b", "a"])
    shown = summarise_draws(draws, written, given.isna())
    assert shown.n_draws == 19
    assert np.isnan(shown.low.loc[0, "x"]) and np.isnan(shown.high.loc[0, "x"])
    assert (shown.low.loc[1, "x"], shown.high.loc[1, "x"]) == (0.0, 18.0)
    assert shown.probability.loc[0, "s"] == 14 / 19 and np.isnan(shown.probability.loc[1, "s"])


def test_the_draws_of_row_blocks_join_in_order() -> None:
    part = CellDraws(*(pd.DataFrame({"x": [0.5]}, index=[7]) for _ in range(3)), n_draws=4)
    other = CellDraws(*(pd.DataFrame({"x": [1.5]}, index=[2]) for _ in range(3)), n_draws=4)
    joined = CellDraws.concat([part, other])
    assert list(joined.low.index) == [7, 2] and list(joined.probability["x"]) == [0.5, 1.5]
