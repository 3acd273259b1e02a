"""The scikit-learn estimator shared by the batch optimal-transport imputers (TDM and OTImputer):
validation, ``fit`` / ``transform``, and the wiring of the start, the optimisation and early
stopping. Subclasses declare their own hyperparameters and build the network."""

from __future__ import annotations

import copy
import inspect
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, fields, replace
from numbers import Integral, Real
from typing import Any, ClassVar, Self

import numpy as np
import torch
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted
from torch import Tensor, nn

from tdm._bounds import BoundedCells, bound_pair
from tdm._cells import MissingCells
from tdm._config import CONFIG_CONSTRAINTS, Config
from tdm._draws import draw_cells, label_probabilities, probe_errors
from tdm._early_stopping import HoldoutMonitor, holdout_cells
from tdm._inductive import impute_new_rows
from tdm._mixed import TableEncoding
from tdm._optimise import (
    FitProgress,
    RMSprop,
    RowSampler,
    StepHistory,
    cell_rate,
    draw_batch_rows,
    paper_batch_size,
    run_steps,
)
from tdm._persistence import load_imputer, save_imputer
from tdm._seeds import seed_of
from tdm._starts import fit_start, settle_many_labels
from tdm._tables import (
    BoundsParam,
    bounds_arrays,
    complete_table,
    fingerprint,
    fitted_bounds,
    read_table,
    standardised,
    warn_far_values,
)
from tdm._validation import (
    MIN_SAMPLES,
    Boolean,
    Interval,
    InvalidParameterError,
    Options,
    column_labels,
    parse_device,
    resolve_device,
    resolve_dtype,
    validate_params,
)
from tdm.scaling import fit_column_scaling
from tdm.transport import TransportTerms, absolute_epsilon, transport_terms

__all__ = ["BatchOTImputer"]

_UNSET = object()


class BatchOTImputer(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Base class: subclasses set their public hyperparameters in ``__init__``, extend
    :attr:`_PARAMETER_CONSTRAINTS` and build the network in :meth:`_make_network`; the private
    settings are the :class:`tdm._config.Config` in ``_config``.

    Every column of ``X`` comes back imputed, in its place (``fit`` refuses a column with no
    observed value rather than drop it), so ``get_feature_names_out`` gives the input features,
    and ``set_output`` (e.g. ``transform="pandas"`` in a ``Pipeline``) is available."""

    #: Accepted values of every setting, public or private, checked at the start of ``fit``.
    _PARAMETER_CONSTRAINTS: ClassVar[Mapping[str, Sequence[Any]]] = {
        **CONFIG_CONSTRAINTS,
        "batch_size": [Interval(Integral, 2, None)],
        "max_iter": [Interval(Integral, 0, None)],
        "lr": [Interval(Real, 0, None, closed="neither")],
        "transform_max_iter": [Interval(Integral, 0, None), None],
        "dtype": [Options(("float32", "float64"))],
        "callback": ["callable", None],
        "early_stopping": [Boolean()],
        "standardize": [Boolean()],
        "verbose": [Interval(Integral, 0, None), Boolean()],
        "random_state": [Interval(Integral, 0, 2**32 - 1), np.random.RandomState, None],
        "bounds": [BoundsParam()],
    }

    #: The private settings (a class's default, or set by ``paper`` and ``_configured``).
    _config: Config = Config()

    # Hyperparameters every subclass has (set by its ``__init__``).
    batch_size: int
    max_iter: int
    lr: float
    standardize: bool
    transform_max_iter: int | None
    dtype: str
    device: str | torch.device
    random_state: int | np.random.RandomState | None
    callback: Callable[[FitProgress], bool | None] | None
    verbose: int
    early_stopping: bool
    bounds: Any

    # Fitted state, set by ``fit`` (declared for type checkers).
    mean_: np.ndarray
    scale_: np.ndarray
    X_fit_: np.ndarray
    network_: nn.Module
    batch_size_: int
    n_iter_: int
    n_features_in_: int
    loss_history_: np.ndarray
    cost_ratio_history_: np.ndarray
    device_: torch.device
    epsilon_: float | None
    fit_fingerprint_: str
    validation_scores_: np.ndarray | None
    best_iteration_: int | None
    init_: str
    start_scores_: dict[str, float] | None
    encoding_: TableEncoding
    column_kinds_: dict[Any, str]
    categories_: dict[Any, np.ndarray]
    bounds_: dict[Any, tuple[float, float]]

    def _make_network(self, n_features: int, generator: torch.Generator | None) -> nn.Module:
        raise NotImplementedError

    def _start_kind(self) -> str:
        """The start asked for: ``"mean"`` here; TDMImputer's ``init``."""
        return "mean"

    def _network_lr(self) -> float:
        """RMSprop rate of the network weights: ``lr`` here; TDMImputer's ``network_lr``."""
        return self.lr

    def _solver(self) -> str:
        """The optimal-transport solver: the configuration's here; OTImputer's ``solver``."""
        return self._config.solver

    @classmethod
    def _configured(cls, **settings: Any) -> Self:
        """The imputer with ``settings`` by name, public parameters and fields of
        :class:`tdm._config.Config` alike (the others at the class's defaults): the one way
        tests and the benchmark set the private settings."""
        public = cls._get_param_names()
        private = {f.name for f in fields(Config)}
        unknown = sorted(set(settings) - set(public) - private)
        if unknown:
            raise InvalidParameterError(
                f"{cls.__name__}: unknown setting {unknown[0]!r}; the settings are "
                f"{', '.join(sorted({*public, *private}))}"
            )
        imputer = cls(**{k: v for k, v in settings.items() if k in public})
        imputer._config = replace(
            cls._config, **{k: v for k, v in settings.items() if k not in public}
        )
        return imputer

    def _settings(self) -> dict[str, Any]:
        """Every setting by name: the private configuration's, then the public parameters (a
        public parameter wins where both have the name, as OTImputer's ``solver``)."""
        return {**asdict(self._config), **self.get_params(deep=False)}

    def __sklearn_clone__(self) -> Self:
        clone: Self = super().__sklearn_clone__()
        clone._config = self._config
        return clone

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        if self._config == type(self)._config:
            return super().__repr__(N_CHAR_MAX)
        return self._call_repr("_configured", {**asdict(type(self)._config), **_defaults(self)})

    def _call_repr(self, constructor: str, reference: Mapping[str, Any]) -> str:
        """``Class.constructor(...)`` with the settings that differ from ``reference``."""
        changed = [
            f"{name}={value!r}"
            for name, value in self._settings().items()
            if repr(value) != repr(reference.get(name, _UNSET))
        ]
        return f"{type(self).__name__}.{constructor}({', '.join(changed)})"

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def fit(self, X: Any, y: Any = None) -> Self:
        """Impute ``X`` (array-like or DataFrame of shape (n_samples, n_features), NaN marking a
        missing cell; ``y`` ignored) by optimal-transport matching, keep what ``transform``
        needs, and return ``self``."""
        self._fit(X)
        return self

    def fit_transform(self, X: Any, y: Any = None) -> Any:
        """Fit on ``X`` and return it imputed (same type as ``X``; observed cells unchanged)."""
        values = self._fit(X)
        return self._complete(X, values, self.X_fit_)

    def transform(self, X: Any) -> Any:
        """Impute ``X``, which may hold rows not seen in ``fit`` (inductive).

        The missing cells of ``X`` start as ``fit``'s did (``init_``; ICE's or the trees'
        models fitted on the rows of ``X`` beside up to 10,000 fitted rows). After such a model
        start that is the imputation, unless ``transform_max_iter`` asks for steps; after the
        mean start the cells are optimised with the fitted network kept fixed, so that the
        mapped rows of ``X``, mixed with fitted rows, match other fitted rows in transport cost
        (but the cells of a label column of more than 9 labels, which keep their start's label,
        the commonest after the mean start, as in ``fit``). Called on the very data passed to
        ``fit``, it returns ``fit``'s imputation.

        The rows of ``X`` are imputed together (the start's models are fitted on them, and the
        steps draw them in random batches), so a row's imputed cells depend on the other rows
        passed with it and on their order (the same ``X`` and ``random_state`` give the same
        result). For a value per record that no other record changes, pass each row alone
        (slower: one start per row).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            With the columns (and, for a DataFrame, the column names in their order, of any
            type, and the column kinds) seen in ``fit``.

        Returns
        -------
        ndarray or DataFrame of shape (n_samples, n_features)
            Same type as ``X``, every DataFrame column in its own dtype (an unordered category
            gains a label seen in fit that it lacks where a cell takes it); observed cells are
            returned bit-for-bit unchanged.
        """
        check_is_fitted(self, "X_fit_")
        values = self._validate(X, reset=False)
        if fingerprint(values) == self.fit_fingerprint_:
            return self._complete(X, values, self.X_fit_)
        return self._complete(X, values, impute_new_rows(self, values))

    def sample(self, X: Any, n_draws: int = 20, random_state: Any = None) -> Any:
        """``n_draws`` completions of ``X``, each a draw of its missing cells.

        :meth:`transform` (and ``fit_transform``) give the point imputation, each cell's best
        guess: use it where a cell's value matters on its own. Its imputed numbers are less
        spread than the data, and its labels lean to the most common one; the relations
        between columns it gives can be stronger than the data's. Draws come near the spread
        and the label shares: use them for what depends on a column's distribution (shares,
        variances, quantiles), for an imputed cell's uncertainty (the quantiles of its draws:
        Weibull's plotting positions), and for a mean, share or group mean computed on every
        draw and pooled (:mod:`tdm.pooling`). Relations between columns are weakened in the
        draws (a cell's error does not depend on its row's observed cells): correlations and
        regression slopes pooled over them lean towards zero, less where cells are missing
        together.

        A numeric cell's draw is its point imputation plus the imputer's own error. Observed
        cells of ``X`` are hidden and imputed again as the point was (by fits with this
        imputer's settings when ``X`` is the data passed to ``fit``, by ``transform`` for
        other rows), and compared with their values: a numeric cell's point is taken through
        the straight line of its column's hidden cells' true values on their imputed ones
        (towards the column's mean where the point leans too far from it, further where too
        little; its slope drawn towards one as far as it is uncertain), and gets a residual
        about that line, drawn at random; the residuals of cells missing in one row go
        together as their columns do given the row's observed cells. A label cell's draw comes
        from its own probabilities: a classifier of its column on the row's other cells
        (point-imputed where missing), fitted on the rows of ``X`` where the column is
        observed; a column with too few of them (a handful of new rows) draws from the shares
        of the true labels among the hidden cells given the same imputed label. The draws are
        calibrated where cells are missing completely at random. They carry each cell's
        uncertainty given the fitted model, not the model's own estimation error, and a label
        is drawn apart from its row's other missing cells.

        Observed cells are identical in every draw; numeric draws stay within ``bounds_`` and
        integer columns are rounded, as in ``transform``. A numeric column of ``X`` with too few
        observed cells to measure its error well (fewer than ten residuals: a handful of new
        rows) gets a ``UserWarning``; with none or one its draws are its point imputation. A label
        column there draws from the observed shares. ``set_output`` does not apply.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            The data passed to ``fit``, or new rows with the fitted columns.
        n_draws : int, default=20
            The number of completions.
        random_state : int, RandomState instance or None, default=None
            Seeds the hidden cells, their imputations and the draws (the point imputation of
            new rows is seeded by the imputer's ``random_state``, as in ``transform``, or by
            this one where the imputer's is None). None: fresh entropy.

        Returns
        -------
        ndarray of shape (n_draws, n_samples, n_features), or list of DataFrames
            For a DataFrame, a list of ``n_draws`` DataFrames, each column in its own dtype.
        """
        check_is_fitted(self, "X_fit_")
        validate_params(
            f"{self._owner()}.sample",
            {"n_draws": n_draws, "random_state": random_state},
            {
                "n_draws": [Interval(Integral, 1, None)],
                "random_state": self._PARAMETER_CONSTRAINTS["random_state"],
            },
        )
        values = self._validate(X, reset=False)
        mask = np.isnan(values)
        rng = np.random.default_rng(seed_of(random_state))
        refits = fingerprint(values) == self.fit_fingerprint_
        seeded = self
        if self.random_state is None and not refits:  # new rows imputed as this call's seed says
            seeded = copy.copy(self)
            seeded.random_state = int(rng.integers(2**31 - 1))
        quiet = copy.copy(seeded)  # the imputations of hidden cells report nothing
        quiet.callback, quiet.verbose = None, 0
        point = self.X_fit_ if refits else impute_new_rows(seeded, values)

        def impute(hidden: np.ndarray, seed: int) -> np.ndarray:
            return self._refit(hidden, seed) if refits else impute_new_rows(quiet, hidden)

        draws = [point] * n_draws
        if mask.any():
            errors = probe_errors(self, values, rng, impute, refits=refits)
            chances = label_probabilities(point, mask, self.encoding_, rng, self._config.n_jobs)
            draws = draw_cells(point, mask, errors, chances, self.encoding_, n_draws, rng)
        completed = [self._complete(X, values, draw) for draw in draws]
        return completed if self.encoding_.frame else np.stack(completed)

    def _refit(self, values: np.ndarray, seed: int) -> np.ndarray:
        """The standardised completion of ``values`` (this fit's table, more cells hidden) by
        a fit with this imputer's settings, seeded by ``seed``, reporting nothing."""
        refit = clone(self).set_params(random_state=seed, callback=None, verbose=0)
        for name in ("encoding_", "n_features_in_", "feature_names_in_"):
            if hasattr(self, name):
                setattr(refit, name, getattr(self, name))
        refit._fit_values(values, lambda: [str(c.name) for c in self.encoding_.columns])
        return (refit.X_fit_ * refit.scale_ + refit.mean_ - self.mean_) / self.scale_

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None = None) -> Self:
        """The imputer with ``settings`` (its constructor's parameters by name) validated.

        How a caller that holds settings as data (a config file, environment variables) builds
        an imputer: every name and value is checked as ``fit`` checks them, before any data is
        read, but for what needs the data or the machine (that ``bounds`` names numeric
        columns, that a CUDA device is there).

        Raises
        ------
        InvalidParameterError
            (a ``ValueError`` and ``TypeError``) naming an unknown setting, with the known ones,
            or the first setting outside its constraints.
        """
        settings = dict(settings or {})
        known = cls._get_param_names()
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise InvalidParameterError(
                f"{cls.__name__}: unknown setting{'s' * (len(unknown) > 1)} "
                f"{', '.join(map(repr, unknown))}; the settings are {', '.join(known)}"
            )
        imputer = cls(**settings)
        validate_params(cls.__name__, settings, cls._PARAMETER_CONSTRAINTS)
        if "device" in settings:
            parse_device(settings["device"], cls.__name__)
        if isinstance(settings.get("bounds"), Mapping):
            for name, pair in settings["bounds"].items():
                bound_pair(pair, name, cls.__name__)
        return imputer

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the fitted imputer to ``path`` (atomically; ``callback`` is not saved).

        The file holds the fitted data, imputed and standardised (``X_fit_``; ``mean_`` and
        ``scale_`` give its values back), which ``transform`` matches new rows against: it is
        about as large, and as confidential, as that data.

        Refused with a ``ValueError``: a ``random_state`` that is a ``RandomState`` (an integer
        seed or None is saved), and labels that are not numbers, text or booleans.
        """
        check_is_fitted(self, "X_fit_")
        save_imputer(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, device: str | None = None) -> Self:
        """Read an imputer written by :meth:`save`; ``device`` overrides the saved setting
        (checked now: a name of no device, or CUDA this machine lacks, is a ``ValueError``).

        A file of another class, of another save format (with a message to refit), not written
        by ``save`` or damaged is refused with a ``ValueError``.
        """
        return load_imputer(cls, path, device=device)

    def _owner(self) -> str:
        return type(self).__name__

    def _validate(self, X: Any, *, reset: bool) -> np.ndarray:
        values = read_table(self, X, reset=reset, owner=self._owner())
        if not reset:  # new rows must standardise with the fitted scaling too
            labels = column_labels(X, len(self.encoding_.columns))
            standardised(
                values, self.mean_, self.scale_, self.encoding_, labels, self._owner(),
                new_rows=self.standardize,  # else the caller scaled them, as it saw fit
            )  # fmt: skip
        return values

    def _complete(self, X: Any, values: np.ndarray, filled: np.ndarray) -> Any:
        return complete_table(
            X, values, filled, self.encoding_, self.mean_, self.scale_, self.bounds_
        )

    def _bounded_cells(self, device: torch.device, dtype: torch.dtype) -> BoundedCells:
        """The bounds of the numeric columns in the standardised units."""
        p = len(self.encoding_.numeric)
        low, high = bounds_arrays(self.bounds_, self.encoding_)
        with np.errstate(all="ignore"):
            low = (low - self.mean_[:p]) / self.scale_[:p]
            high = (high - self.mean_[:p]) / self.scale_[:p]
        return BoundedCells.build(self._config.bounds_method, low, high, device, dtype)

    def _fit(self, X: Any) -> np.ndarray:
        validate_params(self._owner(), self._settings(), self._PARAMETER_CONSTRAINTS)
        values = self._validate(X, reset=True)
        if self.standardize:  # else the caller scaled the columns, and checks them
            labels = column_labels(X, self.n_features_in_)
            warn_far_values(values, self.encoding_, labels, self._owner())
        self._fit_values(values, lambda: column_labels(X, self.n_features_in_))
        return values

    def _fit_values(self, values: np.ndarray, labels: Callable[[], list[str]]) -> None:
        """Fit on ``values`` (the optimised space, NaN where missing; ``encoding_`` set), with
        ``labels()`` naming the columns in errors."""
        owner = self._owner()
        n_samples, width = values.shape
        if n_samples < MIN_SAMPLES:
            raise ValueError(
                f"{owner} needs at least {MIN_SAMPLES} rows to fit (two disjoint batches of two); "
                f"got n_samples={n_samples}."
            )
        mask = np.isnan(values)
        encoding = self.encoding_
        empty = np.flatnonzero(encoding.column_mask(mask).all(axis=0))
        if empty.size:
            raise ValueError(
                f"{owner}: {labels()[int(empty[0])]} has no observed value; a column with nothing "
                "observed cannot be imputed. Drop it or provide some of its values."
            )
        device = resolve_device(self.device, owner)
        dtype = resolve_dtype(self.dtype, owner)
        rng = np.random.default_rng(seed_of(self.random_state))

        self.mean_, self.scale_ = self._scaling(values, mask)
        Z = standardised(values, self.mean_, self.scale_, encoding, labels(), owner, new_rows=False)
        config = self._config
        self.bounds_ = fitted_bounds(self.bounds, config.bounds_margin, encoding, values, owner)
        self.column_kinds_ = {c.name: c.kind for c in encoding.columns}
        self.categories_ = {c.name: c.labels for c in encoding.columns if c.labels is not None}
        generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        network = self._make_network(width, generator).to(device=device, dtype=dtype)
        self.batch_size_ = paper_batch_size(self.batch_size, n_samples)
        self.device_ = device
        self.epsilon_ = None
        if self._solver() == "sinkhorn":
            self.epsilon_ = absolute_epsilon(Z, mask, rng, config.epsilon, config.cost)  # type: ignore[arg-type]
        filled, history = self._optimise(Z, mask, network, rng, device, dtype)
        network.eval()
        self.network_ = network
        self.X_fit_ = filled
        self.loss_history_ = history.loss
        self.cost_ratio_history_ = history.cost_ratio
        self.n_iter_ = int(history.loss.size)
        self.fit_fingerprint_ = fingerprint(values)

    def _scaling(self, values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Observed mean and std of the numeric columns; label points are not rescaled."""
        width = values.shape[1]
        if not self.standardize:
            return np.zeros(width), np.ones(width)
        scaling = fit_column_scaling(np.where(mask, np.nan, values))
        p = len(self.encoding_.numeric)
        mean, scale = scaling.mean, scaling.scale
        mean[p:], scale[p:] = 0.0, 1.0
        return mean, scale

    def _optimise(
        self,
        Z: np.ndarray,
        mask: np.ndarray,
        network: nn.Module,
        rng: np.random.Generator,
        device: torch.device,
        dtype: torch.dtype,
    ) -> tuple[np.ndarray, StepHistory]:
        """Fit-time loop: returns the imputed standardised data and the per-step records."""
        config = self._config
        n_samples = Z.shape[0]
        cell_groups = self.encoding_.groups if self.encoding_.mixed else None
        holdout = (
            holdout_cells(mask, config.validation_fraction, rng, cell_groups)
            if self.early_stopping
            else None
        )
        train_mask = mask if holdout is None else mask | holdout
        train_Z = Z if holdout is None else np.where(holdout, np.nan, Z)
        start = fit_start(
            self._start_kind(), train_Z, train_mask, rng, self.encoding_, config, self._start_report
        )
        self.init_, self.start_scores_ = start.init, start.scores
        bounded = self._bounded_cells(device, dtype)
        many = self.encoding_.many_label_cells(train_mask)
        started = start.values
        if many.any():  # their cells keep the start's labels
            started = settle_many_labels(
                start.init,
                train_Z if started is None else started,
                train_mask,
                self.encoding_,
                rng,
                config.n_jobs,
            )
            train_Z = np.where(many, started, train_Z)
        cells = MissingCells.build(
            train_Z,
            train_mask & ~many,
            self.encoding_,
            bounded,
            rng,
            config.init_noise,
            start=None if start.values is None else started,
        )
        # Complete data still trains the network (``transform`` then has a learned geometry).
        groups: list[dict[str, Any]] = []
        weights = [p for p in network.parameters() if p.requires_grad]
        if weights:
            groups.append({"params": weights, "lr": self._network_lr()})
        B = self.batch_size_
        if cells.parameters():
            groups.append({"params": cells.parameters(), "lr": self._cell_lr(2 * B, n_samples)})
        optimizer = RMSprop(groups, lr=self.lr) if groups else None

        draw = config.batch_draw
        sampler = RowSampler.on(device, rng)

        def step(_: int) -> TransportTerms:
            rows = draw_batch_rows(sampler, n_samples, B, draw)
            latent = network(cells.values(rows))
            return self._loss(latent[:B], latent[B:])

        monitor = None
        if holdout is not None:
            monitor = HoldoutMonitor(
                cells, network, holdout, Z, config.n_iter_no_change, device, dtype
            )
        history = self._run(
            step,
            optimizer,
            self.max_iter,
            device=device,
            dtype=dtype,
            stage="fit",
            monitor=monitor,
            after_step=cells.project_,
        )
        self.validation_scores_ = None if monitor is None else np.asarray(monitor.scores)
        self.best_iteration_ = None if monitor is None else monitor.restore_best()
        filled = cells.result()
        if holdout is not None:
            filled[holdout] = Z[holdout]  # held-out cells are observed: give back their values
        return filled, history

    def _start_report(self, done: int, planned: int) -> None:
        """Progress of the start: ``callback`` gets ``FitProgress(done, planned, stage="start")``
        after each of its models; with ``verbose``, stderr a line at every tenth of them."""
        if self.callback is not None:
            self.callback(FitProgress(done, planned, math.nan, "start"))
        if self.verbose and (done % max(1, planned // 10) == 0 or done == planned):
            print(f"{self._owner()} start: model {done}/{planned}", file=sys.stderr)

    def _cell_lr(self, rows_per_step: int, n_rows: int) -> float:
        """RMSprop rate of the missing cells when ``rows_per_step`` of ``n_rows`` rows are drawn."""
        return cell_rate(self.lr, rows_per_step, n_rows, correct=self._config.cell_lr_correction)

    def _loss(self, z1: Tensor, z2: Tensor) -> TransportTerms:
        return transport_terms(
            z1,
            z2,
            cost=self._config.cost,  # type: ignore[arg-type]
            solver=self._solver(),  # type: ignore[arg-type]
            epsilon=self.epsilon_,
        )

    def _run(self, step: Callable[[int], TransportTerms], *args: Any, **kwargs: Any) -> StepHistory:
        """:func:`run_steps` with this imputer's reporting settings."""
        return run_steps(
            step,
            *args,
            owner=self._owner(),
            lr=self.lr,
            verbose=self.verbose,
            callback=self.callback,
            **kwargs,
        )


def _defaults(estimator: BaseEstimator) -> dict[str, Any]:
    """The defaults of the public parameters of ``estimator``'s class."""
    signature = inspect.signature(type(estimator).__init__)
    return {name: p.default for name, p in signature.parameters.items() if name != "self"}
