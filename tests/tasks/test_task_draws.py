"""What the draws of each imputed cell show: quantiles for numbers, agreement for labels."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.draws import draw_imputation, summarise_draws
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


def test_a_written_draw_is_not_among_the_draws_that_measure_it() -> None:
    """Review (the pipeline's draws): with `fill="draw"` the written draw was one of the K
    summarised, so a label's `probability` counted the label against itself (never below 1/K)
    and the interval was of the draws around it. The K draws are drawn besides it."""

    class Imputer:  # draw k gives x = k and, but the first, the label "b"
        def __init__(self) -> None:
            self.asked: list[int] = []

        def sample(self, frame: pd.DataFrame, n_draws: int, random_state: int) -> list:
            self.asked.append(n_draws)
            return [
                frame.fillna({"x": float(k), "s": "a" if k == 0 else "b"}) for k in range(n_draws)
            ]

    frame = pd.DataFrame({"x": [np.nan, 1.0], "s": [None, "a"]})
    filled = frame.fillna({"x": 0.5, "s": "a"})
    imputer = Imputer()
    imputed = draw_imputation(imputer, frame, filled, n_draws=4, fill="draw", seed=0)
    assert imputer.asked == [5]
    assert imputed.frame.loc[0, "x"] == 0.0 and imputed.frame.loc[0, "s"] == "a"
    assert imputed.draws is not None and imputed.draws.n_draws == 4
    assert imputed.draws.probability.loc[0, "s"] == 0.0  # no other draw says "a"
    assert imputed.draws.low.loc[0, "x"] == 1.0 and imputed.draws.high.loc[0, "x"] == 4.0
    point = draw_imputation(imputer, frame, filled, n_draws=4, fill="point", seed=0)
    assert imputer.asked == [5, 4] and point.frame.equals(filled)
