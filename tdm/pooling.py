"""Combining a figure computed on every draw of a multiple imputation (Rubin's rules).

Compute the figure and its variance (its squared standard error, as if the completed table
were complete data) on each of the ``m`` draws of :meth:`tdm.TDMImputer.sample`, then pool
them: the estimate is their mean; its variance adds the mean of the variances (within the
draws) and ``1 + 1/m`` times the variance of the estimates across the draws (between them,
what the missing cells leave unknown); the interval takes Student's t with Rubin's degrees of
freedom, adjusted for the sample size (Barnard and Rubin, 1999).

Rubin's rules assume each draw also carries the uncertainty of the imputation model itself.
:meth:`~tdm.TDMImputer.sample`'s draws carry the cells' uncertainty given one fitted model, so
the pooled variance leaves out the model's own estimation error: where few rows are observed,
the intervals are somewhat narrow. Pool a mean, a share or a group mean: a figure that relates
columns (a correlation, a regression slope) leans towards zero in the draws, each cell's error
drawn apart from its row's observed cells, and its pooled interval can miss the truth often
(docs/decisions.md, "Draws")::

    >>> import numpy as np
    >>> from tdm import TDMImputer, simulate_mcar
    >>> from tdm.pooling import pooled_mean
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> X[simulate_mcar(X, 0.3, random_state=0)] = np.nan
    >>> imputer = TDMImputer(max_iter=50, random_state=0).fit(X)
    >>> draws = imputer.sample(X, n_draws=10, random_state=0)
    >>> mean = pooled_mean(draws, column=0)
    >>> low, high = mean.interval(0.95)  # the column's mean, with the missing cells' uncertainty
    >>> bool(mean.between > 0 and mean.df < 199)  # draws differ: the interval widens
    True

References: Donald B. Rubin, "Multiple Imputation for Nonresponse in Surveys", Wiley, 1987;
John Barnard and Donald B. Rubin, "Small-sample degrees of freedom with multiple imputation",
Biometrika 86(4), 1999.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats

from tdm.columns import holds_only_numbers

__all__ = ["Pooled", "pool", "pooled_mean"]


@dataclass(frozen=True)
class Pooled:
    """A figure pooled over ``m`` draws by Rubin's rules.

    Attributes
    ----------
    estimate : float
        The mean of the draws' estimates.
    within, between : float
        The mean of the draws' variances, and the variance of their estimates across draws.
    variance : float
        The total variance: ``within + (1 + 1/m) * between``.
    df : float
        Degrees of freedom of its Student's t (``inf`` where the draws agree and no
        complete-data degrees of freedom were given).
    m : int
        The number of draws.
    """

    estimate: float
    within: float
    between: float
    variance: float
    df: float
    m: int

    @property
    def std_error(self) -> float:
        """The square root of ``variance``."""
        return math.sqrt(self.variance)

    @property
    def between_share(self) -> float:
        """The share of ``variance`` due to the missing cells (Rubin's lambda):
        ``(1 + 1/m) * between / variance``, 0 where the variance is 0."""
        if self.variance == 0:
            return 0.0
        return (1 + 1 / self.m) * self.between / self.variance

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The central ``level`` interval: ``estimate`` plus or minus Student's t quantile
        (``df`` degrees of freedom) times ``std_error``."""
        if not 0 < level < 1:
            raise ValueError(f"level must be in (0, 1); got {level!r}")
        q = float(stats.t.ppf(0.5 + level / 2, self.df))
        return self.estimate - q * self.std_error, self.estimate + q * self.std_error


def pool(estimates: ArrayLike, variances: ArrayLike, df_complete: float | None = None) -> Pooled:
    """Pool ``m`` estimates of one figure, one per draw, with their variances (Rubin's rules).

    Parameters
    ----------
    estimates, variances : array-like of shape (m,)
        The figure and its variance (the squared standard error of complete-data analysis)
        on each draw; ``m >= 2``.
    df_complete : float or None, default=None
        The figure's degrees of freedom had no cell been missing (``n - 1`` for a mean of
        ``n`` rows, ``n - k`` for a regression coefficient with ``k`` parameters): the
        pooled degrees of freedom are then Barnard and Rubin's, never above these. ``None``:
        Rubin's large-sample degrees of freedom.
    """
    q = np.asarray(estimates, dtype=np.float64).ravel()
    u = np.asarray(variances, dtype=np.float64).ravel()
    m = q.size
    if m < 2 or u.size != m:
        raise ValueError(
            f"pool needs at least 2 estimates and one variance each; got {m} estimates and "
            f"{u.size} variances"
        )
    if not (np.isfinite(q).all() and np.isfinite(u).all()) or (u < 0).any():
        raise ValueError("estimates must be finite and variances finite and non-negative")
    if df_complete is not None and not (
        isinstance(df_complete, Real) and not isinstance(df_complete, bool) and df_complete > 0
    ):
        raise ValueError(f"df_complete must be positive; got {df_complete!r}")
    within = float(u.mean())
    between = float(q.var(ddof=1))
    total = within + (1 + 1 / m) * between
    share = (1 + 1 / m) * between / total if total > 0 else 0.0
    df = math.inf if share == 0 else (m - 1) / share**2
    if df_complete is not None:
        observed = (df_complete + 1) / (df_complete + 3) * df_complete * (1 - share)
        if share == 0:
            df = observed
        elif observed > 0:  # 0 only where every draw's own variance is 0
            df = 1 / (1 / df + 1 / observed)
    return Pooled(float(q.mean()), within, between, total, df, m)


def pooled_mean(draws: Any, column: Hashable) -> Pooled:
    """The mean of ``column`` over the rows, pooled over ``draws`` (what
    :meth:`tdm.TDMImputer.sample` returns: an array of shape (m, n_samples, n_features), or a
    list of arrays, with ``column`` a position; a list of DataFrames, with ``column`` a name).
    Each draw's variance of the mean is its sample variance over ``n_samples``; the
    complete-data degrees of freedom ``n_samples - 1``. A boolean column's mean is the share of
    True; a label column is refused: pool a 0/1 column that marks one label instead."""
    if len(draws) == 0:
        raise ValueError("pooled_mean needs draws (what sample returns); got none")
    raw = [pd.Series(_column(d, column)) for d in draws]
    if any(_holds_labels(c) for c in raw):
        raise ValueError(
            f"pooled_mean: column {column!r} holds labels, not numbers. To pool a label's "
            "share, pool the mean of a 0/1 column marking it: for DataFrame draws, "
            f"[d.assign(is_x=d[{column!r}] == 'x') for d in draws] with column 'is_x'"
        )
    columns: Sequence[np.ndarray] = [np.asarray(c, float) for c in raw]
    n = columns[0].size
    if n < 2:
        raise ValueError(f"the mean's variance needs at least 2 rows; got {n}")
    means = [c.mean() for c in columns]
    variances = [c.var(ddof=1) / n for c in columns]
    return pool(means, variances, df_complete=n - 1)


def _holds_labels(values: pd.Series) -> bool:
    """Whether a draw's column holds labels: a category (numeric ones too), text, or objects
    that are not all numbers or booleans."""
    if isinstance(values.dtype, pd.CategoricalDtype) or pd.api.types.is_string_dtype(values):
        return True
    return values.dtype == object and not holds_only_numbers(values, booleans=True)


def _column(draw: Any, column: Any) -> Any:
    """Column ``column`` of a draw: a DataFrame's by name, an array's by position; a column the
    draw lacks is refused with a ``ValueError`` naming it."""
    if isinstance(draw, pd.DataFrame):
        if column not in draw.columns:
            raise ValueError(
                f"pooled_mean: column {column!r} is not a column of the draws; their columns "
                f"are {list(draw.columns)}"
            )
        return draw[column]
    values = np.asarray(draw)
    width = values.shape[1] if values.ndim == 2 else 0
    position = (
        int(column) if isinstance(column, Integral) and not isinstance(column, bool) else None
    )
    if position is None or not -width <= position < width:
        raise ValueError(
            f"pooled_mean: column {column!r} is not a column position of the draws (arrays of "
            f"{width} columns: 0 to {width - 1})"
        )
    return values[:, position]
