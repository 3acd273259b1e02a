"""The imputers: :class:`TDMImputer` (Zhao et al., 2023) and :class:`OTImputer` (Muzellec et al.,
2020), which is TDM with the identity in place of the learned invertible network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from numbers import Integral, Real
from typing import Any, ClassVar, Self

import numpy as np
import torch
from torch import nn

from tdm._config import OT_CONFIG, PAPER, PAPER_PARAMS, Config
from tdm._estimator import BatchOTImputer, _defaults
from tdm._optimise import FitProgress
from tdm._validation import Interval, Options, store_params
from tdm.coupling import InvertibleNetwork

__all__ = ["OTImputer", "TDMImputer"]


#: Starting points of the missing cells (``TDMImputer(init=...)``).
INITS = ("auto", "ice", "trees", "mean")


class TDMImputer(BatchOTImputer):
    """Missing-value imputation by Transformed Distribution Matching.

    Two disjoint batches of rows are pushed through a learned invertible network ``f`` (``T``
    affine-coupling blocks, :class:`tdm.coupling.InvertibleNetwork`), and the exact optimal
    transport cost between the two mapped batches is minimised jointly over the network weights
    and the missing cells with RMSprop. Because ``f`` is invertible, matching in its latent
    space cannot collapse the data, while it lets the matching use a geometry learned from the
    data.

    ``X`` may be a DataFrame of float, integer, boolean and categorical (object, string,
    ``category``) columns; each comes back in its own dtype. A categorical column is a block of
    fixed label points in the space the network maps, each missing cell a softmax mix of them
    optimised with the rest, decoded to its most weighted label; integer columns come back
    rounded within their type's range (computed in double precision: an imputed value beyond
    2**53 is a multiple of a power of two), every numeric column within ``bounds``. Every
    column comes back in its place (one with no observed value is refused), so
    ``get_feature_names_out`` gives the input features and ``set_output(transform="pandas")``
    works, in a ``Pipeline`` too. Columns may have names of any one type; scikit-learn keeps
    string names only (``feature_names_in_``), so with other names ``set_output`` names the
    columns ``x0, x1, …``, while plain ``transform`` returns the frame with its own names.

    :meth:`paper` gives the paper's configuration (the published code's network, batches,
    precision and start).

    Parameters
    ----------
    n_blocks : int, default=3
        ``T``, the number of affine-coupling blocks. ``0``: the identity, as OTImputer.
    width_factor : int, default=2
        ``K``: each conditioner MLP has three linear layers of width ``K`` times the table's
        columns (a categorical column counts once).
    batch_size : int, default=512
        Rows per batch, at least 2. With fewer than ``2 * batch_size`` rows, the largest power
        of two not above ``n_samples / 2`` (the paper's rule); the size used is
        ``batch_size_``.
    max_iter : int, default=2_000
        Optimisation steps in ``fit``.
    lr : float, default=1e-2
        RMSprop learning rate of the missing cells (lowered on tables where a row is in fewer
        than half of the batches, whose rarely drawn cells would take larger steps).
    network_lr : float or None, default=3e-3
        RMSprop learning rate of the network weights; ``None`` uses ``lr``.
    init : {"auto", "ice", "trees", "mean"}, default="auto"
        Where the missing cells start; TDM then refines that imputation. ``"ice"``: chained
        equations with a Bayesian linear regression per column. ``"trees"``: chained equations, two
        rounds: a numeric column gets LightGBM's regressor (label columns as categorical features),
        gradient-boosted trees, as many as early stopping on 10% of the rows keeps, or on fewer than
        1,000 rows a 50-tree random forest; a label column gets scikit-learn's random forest
        classifier (100 trees, leaves of at least 5 rows), or its commonest label where the forest's
        out-of-bag accuracy does not beat that label's share or its labels outnumber half its
        observed rows. ``"auto"``: the trees on a large table
        (at least 100,000 observed cells, a categorical cell counting once); on a smaller one, hide
        5% of the observed cells (at most 2,000), impute them with both, and take the trees' start
        only if their error on them is at least 10% lower than ICE's (``init_``, ``start_scores_``).
        ``"mean"``: the column's observed mean. New rows start the same way, with up to 10,000
        fitted rows as context. ``callback`` and ``verbose`` report the trees' models as they are
        fitted.
    bounds : "observed", None or dict, default="observed"
        Bounds of the imputed values of numeric columns: ``"observed"``, each column's observed
        range; ``None``, none; a dict ``{column: (low, high)}`` (a DataFrame's column name, or
        a position for an array; ``None`` for an open end) for the columns it names, the others
        by their observed range. In the units of ``X``.
    standardize : bool, default=True
        Work on per-column standardised data (observed mean and standard deviation; a constant
        column keeps scale 1) and map back. Set False for data already standardised.
    early_stopping : bool, default=False
        Hold out 5% of the observed cells (treated as missing during the fit), score their
        imputations every 25 steps, stop when the score has not improved for 1,000 steps, and
        restore the best iterate. The held-out cells keep their observed values in the output.
    transform_max_iter : int or None, default=None
        Steps of :meth:`transform` on new rows (0: their start alone). ``None``: none after a
        model start (``init_`` ``"ice"`` or ``"trees"``); after the mean start, about 200
        updates for each new row (at least 200 steps), never more than ``max_iter`` steps (but
        at least one).
    dtype : {"float32", "float64"}, default="float32"
        Precision of the optimisation. Observed cells are never touched, whatever the dtype.
    device : str or torch.device, default="auto"
        ``"auto"`` uses CUDA when available, else the CPU; the device used is ``device_``.
    random_state : int, RandomState instance or None, default=None
        Seeds the weights, the start, the batches and the noise. The same int gives the same
        output on the same CPU build; a RandomState advances at every ``fit``, ``transform`` of
        new rows and ``sample``; None draws fresh entropy each time (never NumPy's global
        random state).
    callback : callable or None, default=None
        Called after every step with a :class:`tdm.FitProgress`; returning ``True`` stops early.
        During the trees start, called after each of its models with ``stage="start"`` (the
        models done and planned as ``iteration`` and ``max_iter``, the loss NaN; the return
        value is ignored).
    verbose : int, default=0
        Print progress to stderr ten times per fit when positive.

    Attributes
    ----------
    n_iter_ : int
        Steps run in ``fit``.
    loss_history_ : ndarray of shape (n_iter_,)
        The transport cost of every step.
    cost_ratio_history_ : ndarray of shape (n_iter_,)
        Every step's transport cost divided by the mean cost of all pairs across its two
        batches: scale-free, in [0, 1] (1: no better than random pairs).
    network_ : InvertibleNetwork
        The fitted network ``f``.
    X_fit_ : ndarray of shape (n_samples, n_coordinates)
        The fitted data, imputed, in the standardised space (a categorical column takes a block
        of coordinates there, after the numeric columns).
    mean_, scale_ : ndarray of shape (n_coordinates,)
        The standardisation (zeros and ones when ``standardize=False``).
    batch_size_ : int
        Batch size used.
    device_ : torch.device
        Device used by ``fit``.
    validation_scores_ : ndarray or None
        With ``early_stopping``: the held-out error (standardised MAE) at step 0, 25, 50, …,
        and at the last step.
    best_iteration_ : int or None
        With ``early_stopping``: the step whose iterate was kept (0: the initial values).
    init_ : str
        The start used: ``init``, or the one ``"auto"`` chose (``"ice"`` or ``"trees"``).
    start_scores_ : dict or None
        Where ``init="auto"`` compared them: each candidate's mean absolute error
        (standardised units) on the hidden cells.
    column_kinds_ : dict
        Each column's kind: ``"float"``, ``"integer"``, ``"boolean"`` or ``"categorical"``
        (keys: a DataFrame's column names, else positions).
    categories_ : dict
        The labels observed in each categorical or boolean column, in the order of a
        ``category`` column's categories, else sorted; each takes the label point of its place,
        so the same data with its categories in another order imputes a little differently.
    bounds_ : dict
        Each numeric column's ``(low, high)`` bounds, in the units of ``X`` (``-inf``/``inf``:
        open).

    References
    ----------
    He Zhao, Ke Sun, Amir Dezfouli, Edwin V. Bonilla. "Transformed Distribution Matching for
    Missing Value Imputation." ICML 2023.

    Examples
    --------
    >>> import numpy as np
    >>> from tdm import TDMImputer
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> X[::7, 1] = np.nan
    >>> X_imputed = TDMImputer(max_iter=50, random_state=0).fit_transform(X)
    >>> bool(np.isnan(X_imputed).any())
    False
    """

    n_blocks: int
    width_factor: int
    network_lr: float | None
    init: str

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **BatchOTImputer._PARAMETER_CONSTRAINTS,
        "n_blocks": [Interval(Integral, 0, None)],
        "width_factor": [Interval(Integral, 1, None)],
        "network_lr": [Interval(Real, 0, None, closed="neither"), None],
        "init": [Options(INITS)],
    }

    def __init__(
        self,
        *,
        n_blocks: int = 3,
        width_factor: int = 2,
        batch_size: int = 512,
        max_iter: int = 2_000,
        lr: float = 1e-2,
        network_lr: float | None = 3e-3,
        init: str = "auto",
        bounds: Any = "observed",
        standardize: bool = True,
        early_stopping: bool = False,
        transform_max_iter: int | None = None,
        dtype: str = "float32",
        device: str | torch.device = "auto",
        random_state: int | np.random.RandomState | None = None,
        callback: Callable[[FitProgress], bool | None] | None = None,
        verbose: int = 0,
    ) -> None:
        store_params(self, locals())

    @classmethod
    def paper(cls, **overrides: Any) -> Self:
        """The paper's configuration (Zhao et al., 2023, §5, and the published code), with the
        public parameters ``overrides`` on top.

        10,000 steps from the column means plus N(0, 0.1²) noise, one RMSprop rate (1e-2) for
        the network and the cells, unbounded cells, float64, and the published code's network
        (two MLPs per coupling update, its steeper log-scale clamp), batches (drawn each on its
        own, so that they may share rows) and Euclidean cost. Its ``repr`` reads
        ``TDMImputer.paper(...)``. The published code's choices are not public parameters:
        ``clone``, pickling and ``save`` keep them, but an imputer built from ``get_params()``
        (``TDMImputer(**params)``, ``from_settings``) is a default one; build it again with
        ``TDMImputer.paper(**params)``.

        Examples
        --------
        >>> TDMImputer.paper(random_state=0).get_params()["max_iter"]
        10000
        """
        imputer = cls(**{**PAPER_PARAMS, **overrides})
        imputer._config = PAPER
        return imputer

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        if self._config == PAPER:
            return self._call_repr("paper", {**asdict(PAPER), **_defaults(self), **PAPER_PARAMS})
        return super().__repr__(N_CHAR_MAX)

    def _start_kind(self) -> str:
        return self.init

    def _network_lr(self) -> float:
        return self.lr if self.network_lr is None else self.network_lr

    def _make_network(self, n_features: int, generator: torch.Generator | None) -> nn.Module:
        # K times the table's columns: a categorical column's block of label coordinates counts
        # as one column.
        config = self._config
        return InvertibleNetwork(
            n_features,
            n_blocks=self.n_blocks,
            clamp=config.clamp,
            squash=config.squash,
            conditioner=config.conditioner,
            generator=generator,
            hidden_width=self.width_factor * len(self.encoding_.columns),
        )


class OTImputer(BatchOTImputer):
    """Batch optimal-transport imputation (Muzellec et al., 2020): TDM with ``f`` the identity.

    Two flavours, as compared in the TDM paper: ``solver="sinkhorn"`` ("SH", the debiased Sinkhorn
    divergence with a regularisation of 5% of the median pairwise cost) and
    ``solver="assignment"`` ("NS", exact OT); the cost is the squared Euclidean distance, the
    start the column mean plus N(0, 0.1²) noise. Parameters not listed here mean what they mean
    for :class:`TDMImputer`; it takes the same tables and returns each column in its own dtype.

    Parameters
    ----------
    solver : {"sinkhorn", "assignment", "emd"}, default="sinkhorn"
        Entropic OT, exact OT as a linear assignment, or POT's network simplex
        (:mod:`tdm.transport`).
    batch_size : int, default=128
    max_iter : int, default=2000
    lr : float, default=1e-2

    References
    ----------
    Boris Muzellec, Julie Josse, Claire Boyer, Marco Cuturi. "Missing Data Imputation using
    Optimal Transport." ICML 2020.
    """

    solver: str

    _config: Config = OT_CONFIG

    def __init__(
        self,
        *,
        solver: str = "sinkhorn",
        batch_size: int = 128,
        max_iter: int = 2000,
        lr: float = 1e-2,
        bounds: Any = "observed",
        standardize: bool = True,
        early_stopping: bool = False,
        transform_max_iter: int | None = None,
        dtype: str = "float32",
        device: str | torch.device = "auto",
        random_state: int | np.random.RandomState | None = None,
        callback: Callable[[FitProgress], bool | None] | None = None,
        verbose: int = 0,
    ) -> None:
        store_params(self, locals())

    def _solver(self) -> str:
        return self.solver

    def _make_network(self, n_features: int, generator: torch.Generator | None) -> nn.Module:
        return nn.Identity()
