"""The imputers: :class:`TDMImputer` (Zhao et al., 2023) and :class:`OTImputer` (Muzellec et al.,
2020), which is TDM with the identity in place of the learned invertible network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, ClassVar, Self

import numpy as np
import torch
from torch import nn

from tdm._estimator import BatchOTImputer
from tdm._optimise import BATCH_DRAWS, FitProgress
from tdm._paper import PAPER_PARAMS
from tdm._validation import Boolean, Interval, Options, store_params
from tdm.coupling import CONDITIONERS, SQUASHES, InvertibleNetwork

__all__ = ["PAPER_PARAMS", "OTImputer", "TDMImputer"]


#: Starting points of the missing cells (``TDMImputer(init=...)``).
INITS = ("auto", "ice", "forest", "mean")


class TDMImputer(BatchOTImputer):
    """Missing-value imputation by Transformed Distribution Matching.

    Two batches of rows (disjoint unless ``batch_draw="independent"``) are pushed through a
    learned invertible network ``f`` (``T`` affine-coupling blocks, see
    :class:`tdm.coupling.InvertibleNetwork`), and the exact optimal transport cost between the
    two mapped batches is minimised jointly over the network weights and the missing cells with
    RMSprop. Because ``f`` is invertible, matching in its latent space cannot collapse the data,
    while it lets the matching use a geometry learned from the data.

    ``X`` may be a DataFrame of float, integer, boolean and categorical (object, string,
    ``category``) columns; each comes back in its own dtype. A categorical column is a block of
    fixed label points in the space the network maps, each missing cell a softmax mix of them
    optimised with the rest, decoded to its most weighted label (a label observed in that
    column); integer columns come back rounded, every numeric column within ``bounds``.

    Parameters
    ----------
    n_blocks : int, default=3
        ``T``, the number of affine-coupling blocks. ``0`` gives OTImputer (with its start,
        ``init="mean"`` and ``init_noise=0.1``).
    width_factor : int, default=2
        ``K``: each conditioner MLP has three linear layers of width ``K * n_features`` (a
        categorical column counts as one feature).
    clamp : float, default=2.0
        Bound on the log-scales of the couplings (arctangent clamp): ``|log-scale| < clamp``.
    squash : {"scaled", "unscaled"}, default="scaled"
        The clamp as ``clamp * (2 / π) * atan(raw / clamp)``, or with ``atan(raw)`` (steeper,
        FrEIA's RealNVP block's, set by paper mode): :func:`tdm.coupling.bounded_log_scale`.
    conditioner : {"joint", "separate"}, default="joint"
        Each coupling update's log-scale and shift from one MLP with both as outputs, or from
        two MLPs of the same shape (``"separate"``: RealNVP's, and the published code's).
    batch_size : int, default=512
        Rows per batch. With fewer than ``2 * batch_size`` rows, the largest power of two not above
        ``n_samples / 2`` is used (the paper's rule); the size used is ``batch_size_``.
    batch_draw : {"disjoint", "independent"}, default="disjoint"
        Each ``fit`` step's two batches as ``2 * batch_size`` distinct rows, or each drawn on its
        own so that they may share rows (``"independent"``: the published code's draw;
        ``cell_lr_correction`` still counts ``2 * batch_size`` rows a step). ``transform``
        draws its batches as before.
    max_iter : int, default=2_000
        Optimisation steps in ``fit`` (the paper: 10,000, from the mean start).
    lr : float, default=1e-2
        RMSprop learning rate of the missing cells (and of the network unless ``network_lr``).
    network_lr : float or None, default=3e-3
        RMSprop learning rate of the network weights; ``None`` uses ``lr`` (the paper). A lower
        rate than the cells' keeps the network from blowing the latent space up.
    cell_lr_correction : bool, default=True
        Lower the missing cells' rate on tables where a row is in fewer than half of the
        batches (more than 2,048 rows at ``batch_size=512``). A cell whose row is not drawn has a
        zero gradient, so RMSprop's running mean of its squared gradients decays while it waits,
        and the step it takes when its row is drawn again grows: about
        ``sqrt((1 - 0.99 ** (1 / q)) / 0.01)`` times ``lr`` when a share ``q`` of the rows is
        drawn per step (:func:`tdm._optimise.visit_step_factor`). With the correction, the
        cells' rate is divided by that factor over its value at ``q = 0.5``, so tables up to
        ``4 * batch_size`` rows are fitted exactly as without it. ``False``: every cell at
        ``lr`` (the paper).
    cost : {"euclidean", "sqeuclidean"}, default="euclidean"
        Ground cost between latent points: the plain Euclidean distance of the published code, or
        the squared distance of the paper's text.
    solver : {"assignment", "emd", "sinkhorn"}, default="assignment"
        Exact OT between two equal batches as a linear assignment (fast LAPJV); POT's network
        simplex; or entropic OT (debiased Sinkhorn divergence), see :mod:`tdm.transport`.
    epsilon : float, default=0.05
        With ``solver="sinkhorn"``: entropic regularisation as a fraction of the median pairwise
        cost of the mean-filled data.
    init : {"auto", "ice", "forest", "mean"}, default="auto"
        Where the missing cells start; TDM then refines that imputation. ``"ice"``: ICE's
        imputation, chained equations with a Bayesian linear regression per column (the ICE
        baseline). ``"forest"``: MissForest's with fewer trees and rounds (``forest_trees``,
        ``forest_rounds``; the MissForest baseline uses 100 trees and up to 10 rounds).
        ``"auto"``: hide 5% of the observed cells (at most 2,000), impute them with both, and
        take the forest's start only if its error on them is at least 10% lower than ICE's
        (``init_`` and ``start_scores_`` record the choice); no ground truth of the missing
        cells is used. On a large table (at least 100,000 observed cells, a categorical cell
        counting once: the probe hides at most 2% of them), the refinement starts from that run
        and the probe cells guard it (``safeguard``); elsewhere the start is run again.
        ``"mean"``: the column's observed mean (the paper). New rows in :meth:`transform` start
        the same way, with up to 10,000 fitted rows as context.
    forest_trees : int or None, default=None
        Trees per column of the forest start. ``None``: 20, and 100 on a large table.
    forest_rounds : int or None, default=None
        Rounds over the columns of the forest start. ``None``: 3, and 2 on a large table.
    forest_warm_rounds : int or None, default=None
        Rounds of a 20-tree forest before those rounds (cheap rounds that bring the cells near
        where they settle). ``None``: 0, and 5 on a large table.
    safeguard : bool, default=True
        With ``init="auto"`` on a large table: the refinement starts from the probe run, blind
        to the probe cells, and the probe cells score 0, 1/4, 1/2, 3/4 or all of the way from
        that start to the refined cells (``safeguard_scores_``); the missing cells end that
        share (``refined_share_``) of the way from the start computed with every observed cell
        to the refined cells (numeric columns; a label is the refined one unless the share is
        0). :meth:`transform` gives new rows the same share. The probe cells come back with
        their observed values. ``False``: the probe run's start, refined, no probe cells kept.
    n_jobs : int or None, default=None
        Threads of each forest of the forest start (``None``: 1; -1: every core). More than one
        may change the start's last bits between runs (the trees' sums follow thread order).
    init_noise : float, default=0.0
        N(0, init_noise²) noise added to every starting value (the paper: 0.1 around the mean).
    standardize : bool, default=True
        Work on per-column standardised data (observed mean and standard deviation; a constant
        column keeps scale 1) and map back. Set False for data that is already standardised.
    bounds : "observed", None or dict, default="observed"
        Bounds of the imputed values of numeric (float and integer) columns. ``"observed"``:
        the column's observed range, widened by ``bounds_margin``. ``None``: no bounds. A dict
        ``{column: (low, high)}`` (a DataFrame's column name, or a position for an array; an end
        may be ``None``, open) bounds the columns it names, the others by their observed range.
        In the units of ``X`` (standardised units if ``standardize=False`` and ``X`` is).
        Paper mode sets ``None``, as the published code.
    bounds_margin : float, default=0.0
        Share of a column's observed range added below and above it by the observed bounds.
    bounds_method : {"project", "transform", "clip"}, default="project"
        How the bounds hold while the cells are optimised: bounded cells are clamped into their
        bounds after every step (projected gradient); ``"transform"``: each bounded cell is a
        smooth clamp of a free parameter (softplus ramps at its bounds, slope 1 between them),
        so that every iterate is strictly inside; ``"clip"``: only the result is clamped.
        Imputed values are clamped to the bounds in every case.
    transform_max_iter : int or None, default=None
        Steps of :meth:`transform` on new rows; ``None`` gives each new row about 200 updates
        (at least 200 steps), but never more than ``max_iter`` steps.
    dtype : {"float32", "float64"}, default="float32"
        Precision of the optimisation. Observed cells are never touched, whatever the dtype.
        Paper mode sets ``"float64"``, the published code's precision.
    device : str or torch.device, default="auto"
        ``"auto"`` uses CUDA when available, else the CPU; the device used is ``device_``.
    random_state : int, RandomState instance or None, default=None
        Seeds the weights, the initial noise, the batches and ICE. The same int gives the same
        output on the same CPU build.
    callback : callable or None, default=None
        Called after every step with a :class:`tdm.FitProgress`; returning ``True`` stops early.
    verbose : int, default=0
        Print progress to stderr ten times per fit when positive.
    early_stopping : bool, default=False
        Self-supervised stopping rule: hold out ``validation_fraction`` of the observed cells
        (treated as missing during the fit), check the error of their imputations every 25
        steps, stop when it has not improved for ``n_iter_no_change`` steps, and restore the best
        iterate. Needs no ground truth; the held-out cells keep their observed values in the
        output.
    validation_fraction : float, default=0.05
        Share of the observed cells held out by ``early_stopping``.
    n_iter_no_change : int, default=1000
        Patience of ``early_stopping``, in steps.

    Attributes
    ----------
    n_iter_ : int
        Steps run in ``fit``.
    loss_history_ : ndarray of shape (n_iter_,)
        The transport cost of every step.
    cost_ratio_history_ : ndarray of shape (n_iter_,)
        Every step's transport cost divided by the mean cost of all pairs across its two
        batches: scale-free, in [0, 1] for the exact solvers (1: no better than random pairs).
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
        With ``early_stopping``: the held-out error (standardised MAE) at step 0, 25, 50, ….
    best_iteration_ : int or None
        With ``early_stopping``: the step whose iterate was kept (0: the initial values).
    init_ : str
        The start used: ``init``, or with ``init="auto"`` the one it chose (``"ice"`` or
        ``"forest"``).
    start_scores_ : dict or None
        With ``init="auto"``: each candidate's mean absolute error (standardised units) on the
        probe cells.
    forest_size_ : tuple of int or None
        With a forest start: its (trees, rounds, warm-up rounds).
    safeguard_scores_ : dict or None
        With the safeguard at work: the mean absolute error (standardised units) on the probe
        cells of each share of the way from the probe run's start to the refined cells.
    refined_share_ : float
        The share ``fit`` returned: 1.0 (the refinement) unless the safeguard chose less.
    column_kinds_ : dict
        Each column's kind: ``"float"``, ``"integer"``, ``"boolean"`` or ``"categorical"``
        (keys: a DataFrame's column names, else positions).
    categories_ : dict
        The labels observed in each categorical or boolean column.
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
    clamp: float
    squash: str
    conditioner: str
    batch_draw: str
    network_lr: float | None
    cell_lr_correction: bool
    init: str
    forest_trees: int | None
    forest_rounds: int | None
    forest_warm_rounds: int | None
    safeguard: bool
    n_jobs: int | None

    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **BatchOTImputer._PARAMETER_CONSTRAINTS,
        "n_blocks": [Interval(Integral, 0, None)],
        "width_factor": [Interval(Integral, 1, None)],
        "clamp": [Interval(Real, 0, None, closed="neither")],
        "squash": [Options(SQUASHES)],
        "conditioner": [Options(CONDITIONERS)],
        "batch_draw": [Options(BATCH_DRAWS)],
        "network_lr": [Interval(Real, 0, None, closed="neither"), None],
        "init": [Options(INITS)],
        "forest_trees": [Interval(Integral, 1, None), None],
        "forest_rounds": [Interval(Integral, 1, None), None],
        "forest_warm_rounds": [Interval(Integral, 0, None), None],
        "safeguard": [Boolean()],
        "n_jobs": [Integral, None],
        "cell_lr_correction": [Boolean()],
    }

    def __init__(
        self,
        *,
        n_blocks: int = 3,
        width_factor: int = 2,
        clamp: float = 2.0,
        squash: str = "scaled",
        conditioner: str = "joint",
        batch_size: int = 512,
        batch_draw: str = "disjoint",
        max_iter: int = 2_000,
        lr: float = 1e-2,
        network_lr: float | None = 3e-3,
        cell_lr_correction: bool = True,
        cost: str = "euclidean",
        solver: str = "assignment",
        epsilon: float = 0.05,
        init: str = "auto",
        forest_trees: int | None = None,
        forest_rounds: int | None = None,
        forest_warm_rounds: int | None = None,
        safeguard: bool = True,
        n_jobs: int | None = None,
        init_noise: float = 0.0,
        standardize: bool = True,
        bounds: Any = "observed",
        bounds_margin: float = 0.0,
        bounds_method: str = "project",
        transform_max_iter: int | None = None,
        dtype: str = "float32",
        device: str | torch.device = "auto",
        random_state: int | np.random.RandomState | None = None,
        callback: Callable[[FitProgress], bool | None] | None = None,
        verbose: int = 0,
        early_stopping: bool = False,
        validation_fraction: float = 0.05,
        n_iter_no_change: int = 1000,
    ) -> None:
        store_params(self, locals())

    @classmethod
    def paper(cls, **overrides: Any) -> Self:
        """The paper-faithful configuration (:data:`PAPER_PARAMS`), with ``overrides`` on top.

        Examples
        --------
        >>> TDMImputer.paper(random_state=0).get_params()["max_iter"]
        10000
        """
        return cls(**{**PAPER_PARAMS, **overrides})

    def _start_kind(self) -> str:
        return self.init

    def _start_options(self) -> tuple[int | None, int | None, int | None, bool, int | None]:
        trees, rounds, warm = self.forest_trees, self.forest_rounds, self.forest_warm_rounds
        return trees, rounds, warm, self.safeguard, self.n_jobs

    def _network_lr(self) -> float:
        return self.lr if self.network_lr is None else self.network_lr

    def _corrects_cell_rate(self) -> bool:
        return self.cell_lr_correction

    def _batch_draw(self) -> str:
        return self.batch_draw

    def _make_network(self, n_features: int, generator: torch.Generator | None) -> nn.Module:
        # K times the table's columns: a categorical column's block of label coordinates counts
        # as one column (as accurate as K times the coordinates, and faster: BENCHMARKS.md).
        return InvertibleNetwork(
            n_features,
            n_blocks=self.n_blocks,
            clamp=self.clamp,
            squash=self.squash,
            conditioner=self.conditioner,
            generator=generator,
            hidden_width=self.width_factor * len(self.encoding_.columns),
        )


class OTImputer(BatchOTImputer):
    """Batch optimal-transport imputation (Muzellec et al., 2020): TDM with ``f`` the identity.

    Two flavours, as compared in the TDM paper: ``solver="sinkhorn"`` ("SH", the debiased Sinkhorn
    divergence with ``epsilon`` = 5% of the median pairwise cost) and ``solver="assignment"``
    ("NS", exact OT). Parameters not listed here mean what they mean for :class:`TDMImputer`;
    the defaults follow Muzellec et al.

    Like TDMImputer, it takes a DataFrame of float, integer, boolean and categorical columns and
    returns each in its own dtype.

    Parameters
    ----------
    solver : {"sinkhorn", "assignment", "emd"}, default="sinkhorn"
    batch_size : int, default=128
    max_iter : int, default=2000
    lr : float, default=1e-2
    cost : {"sqeuclidean", "euclidean"}, default="sqeuclidean"
    epsilon : float, default=0.05

    References
    ----------
    Boris Muzellec, Julie Josse, Claire Boyer, Marco Cuturi. "Missing Data Imputation using
    Optimal Transport." ICML 2020.
    """

    def __init__(
        self,
        *,
        solver: str = "sinkhorn",
        batch_size: int = 128,
        max_iter: int = 2000,
        lr: float = 1e-2,
        cost: str = "sqeuclidean",
        epsilon: float = 0.05,
        init_noise: float = 0.1,
        standardize: bool = True,
        bounds: Any = "observed",
        bounds_margin: float = 0.0,
        bounds_method: str = "project",
        transform_max_iter: int | None = None,
        dtype: str = "float32",
        device: str | torch.device = "auto",
        random_state: int | np.random.RandomState | None = None,
        callback: Callable[[FitProgress], bool | None] | None = None,
        verbose: int = 0,
        early_stopping: bool = False,
        validation_fraction: float = 0.05,
        n_iter_no_change: int = 1000,
    ) -> None:
        store_params(self, locals())

    def _make_network(self, n_features: int, generator: torch.Generator | None) -> nn.Module:
        return nn.Identity()
