"""Shared machinery of the batch optimal-transport imputers (TDM and OTImputer).

The missing cells are free parameters. Each iteration draws two disjoint batches of rows, maps both
through a network ``f`` (the identity for OTImputer), and takes one RMSprop step on the network
weights and the missing cells to lower the optimal-transport cost between the two mapped batches
(Zhao et al., 2023, Algorithm 1; Muzellec et al., 2020, Algorithm 1).
"""

from __future__ import annotations

import hashlib
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import Tensor, nn

from tdm._iterative import start_fill
from tdm._validation import (
    MIN_SAMPLES,
    check_choice,
    check_finite_or_nan,
    check_frame_numeric,
    check_positive,
    column_labels,
    resolve_device,
    resolve_dtype,
)
from tdm.scaling import fit_column_scaling
from tdm.transport import COSTS, SOLVERS, pairwise_cost, transport_loss

__all__ = ["BatchOTImputer", "FitProgress"]

_FORMAT_VERSION = 1
_VALIDATE_EVERY = 25  # steps between two looks at the held-out cells
_START_CONTEXT_ROWS = 10_000  # fitted rows given as context when ICE or a forest starts new rows
_PROBE_FRACTION = 0.05  # observed cells hidden by init="auto" to score the candidate starts
_FOREST_MARGIN = 0.9  # init="auto" takes the forest's start only if its probe error is 10% lower
_RMSPROP_ALPHA = 0.99  # torch's default smoothing of RMSprop's running mean of squared gradients
# cell_lr_correction keeps each visit's step at most what it is when this share of rows is drawn
_REFERENCE_SHARE = 0.5


@dataclass(frozen=True)
class FitProgress:
    """What a ``callback`` receives after each optimisation step.

    Attributes
    ----------
    iteration : int
        Steps done so far (1-based).
    max_iter : int
        Steps planned.
    loss : float
        Transport cost of this step's batches.
    stage : str
        ``"fit"`` or ``"transform"``.
    """

    iteration: int
    max_iter: int
    loss: float
    stage: str = "fit"


def paper_batch_size(batch_size: int, n_samples: int) -> int:
    """The paper's rule: ``batch_size`` rows, or the largest power of two ``<= n_samples / 2``."""
    if n_samples // 2 >= batch_size:
        return batch_size
    return 2 ** math.floor(math.log2(max(n_samples // 2, 1)))


class BatchOTImputer(TransformerMixin, BaseEstimator):
    """Base class: subclasses set their hyperparameters in ``__init__`` and build the network."""

    # Hyperparameters every subclass has (set by its ``__init__``).
    batch_size: int
    max_iter: int
    lr: float
    cost: str
    solver: str
    epsilon: float
    init_noise: float
    standardize: bool
    transform_max_iter: int | None
    dtype: str
    device: str | torch.device
    random_state: int | np.random.RandomState | None
    callback: Callable[[FitProgress], bool | None] | None
    #: Settings added after the save format was fixed, with the behaviour of files saved before.
    _LEGACY_PARAMS: ClassVar[dict[str, Any]] = {}
    verbose: int
    early_stopping: bool
    validation_fraction: float
    n_iter_no_change: int

    # Fitted state, set by ``fit`` (declared for type checkers).
    mean_: np.ndarray
    scale_: np.ndarray
    X_fit_: np.ndarray
    network_: nn.Module
    batch_size_: int
    n_iter_: int
    loss_history_: np.ndarray
    device_: torch.device
    epsilon_: float | None
    fit_fingerprint_: str
    validation_scores_: np.ndarray | None
    best_iteration_: int | None

    # ------------------------------------------------------------------ subclass hooks
    def _make_network(self, n_features: int, generator: torch.Generator | None) -> nn.Module:
        raise NotImplementedError

    def _check_network_params(self) -> None:
        """Validate the subclass's own hyperparameters."""

    # ------------------------------------------------------------------ scikit-learn API
    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def fit(self, X: Any, y: Any = None) -> Self:
        """Impute ``X`` by optimal-transport matching and keep what ``transform`` needs.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric data; NaN marks a missing cell.
        y : ignored

        Returns
        -------
        self
        """
        self._fit(X)
        return self

    def fit_transform(self, X: Any, y: Any = None, **fit_params: Any) -> Any:
        """Fit on ``X`` and return it imputed (same type as ``X``; observed cells unchanged)."""
        values = self._fit(X)
        return self._wrap(X, self._fill_from_fit(values))

    def transform(self, X: Any) -> Any:
        """Impute ``X``, which may hold rows not seen in ``fit`` (inductive).

        The fitted network is kept fixed; only the missing cells of ``X`` are optimised, so that
        the mapped rows of ``X``, mixed with fitted rows, match other fitted rows in transport
        cost. Called on the very data passed to ``fit``, it returns ``fit``'s imputation.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray or DataFrame of shape (n_samples, n_features)
            Same type as ``X``; observed cells are returned bit-for-bit unchanged.
        """
        check_is_fitted(self, "X_fit_")
        values = self._validate(X, reset=False)
        if _fingerprint(values) == self.fit_fingerprint_:
            return self._wrap(X, self._fill_from_fit(values))
        return self._wrap(X, self._transform_new(values))

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the fitted imputer to ``path`` (atomically; ``callback`` is not saved)."""
        check_is_fitted(self, "X_fit_")
        params = {k: v for k, v in self.get_params().items() if k != "callback"}
        if not isinstance(params.get("random_state"), int | None):
            raise ValueError(
                f"{self._owner()}.save: random_state must be an int or None to be saved; got "
                f"{type(params['random_state']).__name__}"
            )
        params["device"] = str(params["device"])
        state = {
            "format_version": _FORMAT_VERSION,
            "class": type(self).__name__,
            "params": params,
            "network": {k: v.detach().cpu() for k, v in self.network_.state_dict().items()},
            "mean_": torch.from_numpy(self.mean_),
            "scale_": torch.from_numpy(self.scale_),
            "X_fit_": torch.from_numpy(self.X_fit_),
            "loss_history_": torch.from_numpy(self.loss_history_),
            "n_iter_": self.n_iter_,
            "batch_size_": self.batch_size_,
            "n_features_in_": self.n_features_in_,
            "feature_names_in_": list(getattr(self, "feature_names_in_", [])) or None,
            "epsilon_": self.epsilon_,
            "fit_fingerprint_": self.fit_fingerprint_,
            "validation_scores_": None
            if self.validation_scores_ is None
            else torch.from_numpy(self.validation_scores_),
            "best_iteration_": self.best_iteration_,
            "init_": self.init_,
            "start_scores_": self.start_scores_,
            "device_": str(self.device_),
        }
        target = Path(path)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        os.close(fd)
        try:
            torch.save(state, tmp)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, device: str | None = None) -> Self:
        """Read an imputer written by :meth:`save`; ``device`` overrides the saved setting."""
        state = torch.load(path, map_location="cpu", weights_only=True)
        if state.get("class") != cls.__name__ or state.get("format_version") != _FORMAT_VERSION:
            raise ValueError(
                f"{path}: not a saved {cls.__name__} (class {state.get('class')!r}, format "
                f"{state.get('format_version')!r})"
            )
        # A setting added after a file was saved takes the value that file was fitted with.
        est = cls(**{**cls._LEGACY_PARAMS, **state["params"]})
        if device is not None:
            est.set_params(device=device)
        n_features = int(state["n_features_in_"])
        est.network_ = est._make_network(n_features, None)
        est.network_.load_state_dict(state["network"])
        est.mean_ = state["mean_"].numpy()
        est.scale_ = state["scale_"].numpy()
        est.X_fit_ = state["X_fit_"].numpy()
        est.loss_history_ = state["loss_history_"].numpy()
        est.n_iter_ = int(state["n_iter_"])
        est.batch_size_ = int(state["batch_size_"])
        est.n_features_in_ = n_features
        if state["feature_names_in_"] is not None:
            est.feature_names_in_ = np.asarray(state["feature_names_in_"], dtype=object)
        est.epsilon_ = state["epsilon_"]
        est.fit_fingerprint_ = state["fit_fingerprint_"]
        scores = state["validation_scores_"]
        est.validation_scores_ = None if scores is None else scores.numpy()
        est.best_iteration_ = state["best_iteration_"]
        # Files from before ``init="auto"`` used the start their ``init`` names.
        est.init_ = state.get("init_", getattr(est, "init", "mean"))
        est.start_scores_ = state.get("start_scores_")
        est.device_ = torch.device(state["device_"])
        return est

    # ------------------------------------------------------------------ internals
    def _owner(self) -> str:
        return type(self).__name__

    def _check_params(self) -> None:
        owner = self._owner()
        check_positive("batch_size", self.batch_size, integer=True, owner=owner)
        check_positive("max_iter", self.max_iter, integer=True, owner=owner, allow_zero=True)
        check_positive("lr", self.lr, integer=False, owner=owner)
        check_positive("epsilon", self.epsilon, integer=False, owner=owner)
        check_positive("init_noise", self.init_noise, integer=False, owner=owner, allow_zero=True)
        if self.transform_max_iter is not None:
            check_positive("transform_max_iter", self.transform_max_iter, integer=True, owner=owner)
        check_positive("n_iter_no_change", self.n_iter_no_change, integer=True, owner=owner)
        if not (isinstance(self.validation_fraction, float) and 0 < self.validation_fraction < 1):
            raise ValueError(
                f"{owner}: validation_fraction must be a float in (0, 1); got "
                f"validation_fraction={self.validation_fraction!r}"
            )
        check_choice("cost", self.cost, COSTS, owner=owner)
        check_choice("solver", self.solver, SOLVERS, owner=owner)
        resolve_dtype(self.dtype, owner)
        if self.callback is not None and not callable(self.callback):
            raise ValueError(f"{owner}: callback must be callable or None; got {self.callback!r}")
        self._check_network_params()

    def _validate(self, X: Any, *, reset: bool) -> np.ndarray:
        owner = self._owner()
        if isinstance(X, pd.DataFrame):
            check_frame_numeric(X, owner)
        check_finite_or_nan(X, owner)
        values: np.ndarray = validate_data(
            self,
            X,
            reset=reset,
            dtype=[np.float64, np.float32],
            ensure_all_finite="allow-nan",
            ensure_min_samples=1,
        )
        return values

    def _fit(self, X: Any) -> np.ndarray:
        owner = self._owner()
        self._check_params()
        values = self._validate(X, reset=True)
        n_samples, n_features = values.shape
        if n_samples < MIN_SAMPLES:
            raise ValueError(
                f"{owner} needs at least {MIN_SAMPLES} rows to fit (two disjoint batches of two); "
                f"got n_samples={n_samples}."
            )
        mask = np.isnan(values)
        empty = np.flatnonzero(mask.all(axis=0))
        if empty.size:
            labels = column_labels(X, n_features)
            raise ValueError(
                f"{owner}: {labels[int(empty[0])]} has no observed value; a column with nothing "
                "observed cannot be imputed. Drop it or provide some of its values."
            )
        device = resolve_device(self.device, owner)
        dtype = resolve_dtype(self.dtype, owner)
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))

        self.mean_, self.scale_ = self._scaling(values, mask)
        Z = (values.astype(np.float64) - self.mean_) / self.scale_
        generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
        network = self._make_network(n_features, generator).to(device=device, dtype=dtype)
        self.batch_size_ = paper_batch_size(self.batch_size, n_samples)
        self.device_ = device
        self.epsilon_ = self._absolute_epsilon(Z, mask, rng) if self.solver == "sinkhorn" else None
        filled, history = self._optimise(Z, mask, network, rng, device, dtype)
        network.eval()
        self.network_ = network
        self.X_fit_ = filled
        self.loss_history_ = history
        self.n_iter_ = int(history.size)
        self.fit_fingerprint_ = _fingerprint(values)
        return values

    def _scaling(self, values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n_features = values.shape[1]
        if not self.standardize:
            return np.zeros(n_features), np.ones(n_features)
        scaling = fit_column_scaling(np.where(mask, np.nan, values))
        return scaling.mean, scaling.scale

    def _absolute_epsilon(self, Z: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> float:
        """``epsilon`` times the median pairwise cost of the mean-filled data (Muzellec et al.)."""
        filled = np.where(mask, np.nanmean(np.where(mask, np.nan, Z), axis=0), Z)
        rows = rng.choice(Z.shape[0], size=min(Z.shape[0], 1000), replace=False)
        sample = torch.as_tensor(filled[rows])
        costs = pairwise_cost(sample, sample, self.cost)  # type: ignore[arg-type]
        off_diagonal = costs[~torch.eye(len(rows), dtype=torch.bool)]
        median = float(off_diagonal.median()) if off_diagonal.numel() else 1.0
        return self.epsilon * (median if median > 0 else 1.0)

    def _optimise(
        self,
        Z: np.ndarray,
        mask: np.ndarray,
        network: nn.Module,
        rng: np.random.Generator,
        device: torch.device,
        dtype: torch.dtype,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Fit-time loop: returns the imputed standardised data and the per-step losses."""
        n_samples = Z.shape[0]
        holdout = (
            _holdout_cells(mask, self.validation_fraction, rng) if self.early_stopping else None
        )
        train_mask = mask if holdout is None else mask | holdout
        train_Z = Z if holdout is None else np.where(holdout, np.nan, Z)
        start = None
        init = getattr(self, "init", "mean")
        self.init_, self.start_scores_ = init, None
        if init != "mean":  # only then is rng drawn from: "mean" draws as in tdm 0.1
            seed = int(rng.integers(2**31 - 1))
            if init == "auto":
                self.init_, self.start_scores_ = _choose_start(train_Z, train_mask, rng, seed)
            start = start_fill(self.init_, train_Z, train_mask, seed)
        theta, X0, mask_t, slot = _missing_parameters(
            train_Z, train_mask, rng, self.init_noise, device, dtype, start=start
        )
        # Complete data still trains the network (``transform`` then has a learned geometry).
        groups: list[dict[str, Any]] = []
        weights = [p for p in network.parameters() if p.requires_grad]
        if weights:
            network_lr = getattr(self, "network_lr", None)
            groups.append({"params": weights, "lr": self.lr if network_lr is None else network_lr})
        B = self.batch_size_
        if theta.numel():
            groups.append({"params": [theta], "lr": self._cell_lr(2 * B, n_samples)})
        optimizer = torch.optim.RMSprop(groups, lr=self.lr) if groups else None
        n_iter = self.max_iter

        def step(_: int) -> Tensor:
            rows = torch.from_numpy(rng.choice(n_samples, size=2 * B, replace=False)).to(device)
            latent = network(_assemble(X0[rows], mask_t[rows], slot[rows], theta))
            return self._loss(latent[:B], latent[B:])

        monitor = None
        if holdout is not None:
            monitor = _HoldoutMonitor(
                theta, network, slot, holdout, Z, self.n_iter_no_change, device, dtype
            )
        history = self._run(step, optimizer, n_iter, device, dtype, "fit", monitor)
        self.validation_scores_ = None if monitor is None else np.asarray(monitor.scores)
        self.best_iteration_ = None if monitor is None else monitor.restore_best()
        filled = _assemble(X0, mask_t, slot, theta).detach().cpu().numpy()
        if holdout is not None:
            filled[holdout] = Z[holdout]  # held-out cells are observed: give back their values
        return filled, history

    def _transform_new(self, values: np.ndarray) -> np.ndarray:
        """Impute rows unseen in ``fit`` with the fitted network held fixed."""
        out = values.copy()
        mask = np.isnan(values)
        rows_missing = np.flatnonzero(mask.any(axis=1))
        if rows_missing.size == 0:
            return out
        owner = self._owner()
        device = resolve_device(self.device, owner)
        dtype = resolve_dtype(self.dtype, owner)
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**31 - 1))
        network = self.network_.to(device=device, dtype=dtype)
        for p in network.parameters():
            p.requires_grad_(False)
        Z = (values[rows_missing].astype(np.float64) - self.mean_) / self.scale_
        sub_mask = mask[rows_missing]
        start = None
        if self._start_used() != "mean":
            start = self._context_start(Z, sub_mask, rng)
        theta, X0, mask_t, slot = _missing_parameters(
            Z,
            sub_mask,
            rng,
            self.init_noise,
            device,
            dtype,
            fill=self._fit_column_means(),
            start=start,
        )
        with torch.no_grad():
            latent_fit = network(torch.as_tensor(self.X_fit_, device=device, dtype=dtype))
        n_new, n_fit = len(rows_missing), latent_fit.shape[0]
        B = min(self.batch_size_, n_fit // 2)
        k = min(n_new, max(1, B // 2))  # new rows per batch; the rest of the batch is fitted rows
        n_iter = self.transform_max_iter or _default_transform_iter(n_new, k, self.max_iter)
        optimizer = torch.optim.RMSprop([theta], lr=self._cell_lr(k, n_new))

        def step(_: int) -> Tensor:
            new = torch.from_numpy(rng.choice(n_new, size=k, replace=False)).to(device)
            fit = torch.from_numpy(rng.choice(n_fit, size=2 * B - k, replace=False)).to(device)
            z_new = network(_assemble(X0[new], mask_t[new], slot[new], theta))
            z1 = torch.cat([z_new, latent_fit[fit[: B - k]]])
            return self._loss(z1, latent_fit[fit[B - k :]])

        if theta.numel():
            self._run(step, optimizer, n_iter, device, dtype, "transform")
        imputed = _assemble(X0, mask_t, slot, theta).detach().cpu().numpy()
        filled = imputed * self.scale_ + self.mean_
        out[rows_missing] = np.where(sub_mask, filled.astype(out.dtype), values[rows_missing])
        return out

    def _context_start(
        self, Z: np.ndarray, mask: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray:
        """The fit's start (``init_``) for new rows, with up to 10,000 fitted rows as context."""
        n_fit = self.X_fit_.shape[0]
        context = self.X_fit_
        if n_fit > _START_CONTEXT_ROWS:
            context = self.X_fit_[np.sort(rng.choice(n_fit, _START_CONTEXT_ROWS, replace=False))]
        stacked = np.vstack([np.asarray(context, dtype=np.float64), Z])
        known = np.zeros(context.shape, dtype=bool)
        seed = int(rng.integers(2**31 - 1))
        filled = start_fill(self._start_used(), stacked, np.vstack([known, mask]), seed)
        return filled[context.shape[0] :]

    def _cell_lr(self, rows_per_step: int, n_rows: int) -> float:
        """RMSprop rate of the missing cells when ``rows_per_step`` of ``n_rows`` rows are drawn."""
        if not getattr(self, "cell_lr_correction", False):
            return self.lr
        factor = visit_step_factor(rows_per_step / n_rows) / visit_step_factor(_REFERENCE_SHARE)
        return self.lr / max(1.0, factor)

    def _start_used(self) -> str:
        """The fit's start; an imputer pickled before ``init_`` existed used what ``init`` names."""
        return str(getattr(self, "init_", getattr(self, "init", "mean")))

    def _loss(self, z1: Tensor, z2: Tensor) -> Tensor:
        return transport_loss(
            z1,
            z2,
            cost=self.cost,  # type: ignore[arg-type]
            solver=self.solver,  # type: ignore[arg-type]
            epsilon=self.epsilon_,
        )

    def _run(
        self,
        step: Callable[[int], Tensor],
        optimizer: torch.optim.Optimizer | None,
        n_iter: int,
        device: torch.device,
        dtype: torch.dtype,
        stage: str,
        monitor: _HoldoutMonitor | None = None,
    ) -> np.ndarray:
        """Run up to ``n_iter`` optimisation steps; returns the losses of the steps run."""
        history = torch.empty(n_iter, device=device, dtype=dtype)
        report_every = max(1, n_iter // 10)
        started = time.perf_counter()
        done = 0
        for it in range(n_iter):
            loss = step(it)
            if optimizer is not None:  # None: nothing to optimise, the loss is only recorded
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            history[it] = loss.detach()
            done = it + 1
            if done % 100 == 0 or done == n_iter:
                self._check_finite(history[:done], stage)
            if self.verbose and (done % report_every == 0 or done == n_iter):
                per_it = (time.perf_counter() - started) / done * 1e3
                print(
                    f"{self._owner()} {stage}: iteration {done}/{n_iter}, loss "
                    f"{float(loss.detach()):.5f} ({per_it:.1f} ms/iteration)",
                    file=sys.stderr,
                )
            if self.callback is not None:
                progress = FitProgress(done, n_iter, float(loss.detach()), stage)
                if self.callback(progress) is True:
                    break
            if monitor is not None and done % _VALIDATE_EVERY == 0 and monitor.should_stop(done):
                if self.verbose:
                    print(
                        f"{self._owner()} {stage}: early stop at iteration {done}; best held-out "
                        f"error at iteration {monitor.best_iteration}",
                        file=sys.stderr,
                    )
                break
        return history[:done].cpu().double().numpy()

    def _check_finite(self, history: Tensor, stage: str) -> None:
        if not bool(torch.isfinite(history).all()):
            first = int((~torch.isfinite(history)).nonzero()[0, 0]) + 1
            raise FloatingPointError(
                f"{self._owner()} {stage}: the loss became non-finite at iteration {first}; lower "
                f"lr (now {self.lr}) or use dtype='float64'."
            )

    def _fit_column_means(self) -> np.ndarray:
        return np.asarray(self.X_fit_, dtype=np.float64).mean(axis=0)

    def _fill_from_fit(self, values: np.ndarray) -> np.ndarray:
        out = values.copy()
        mask = np.isnan(values)
        filled = np.asarray(self.X_fit_, dtype=np.float64) * self.scale_ + self.mean_
        out[mask] = filled[mask].astype(out.dtype)
        return out

    def _wrap(self, X: Any, out: np.ndarray) -> Any:
        if not isinstance(X, pd.DataFrame):
            return out
        frame = pd.DataFrame(out, index=X.index, columns=X.columns)
        for name, dtype in X.dtypes.items():
            if pd.api.types.is_float_dtype(dtype) and dtype != frame[name].dtype:
                frame[name] = frame[name].astype(dtype)
        return frame


def _missing_parameters(
    Z: np.ndarray,
    mask: np.ndarray,
    rng: np.random.Generator,
    noise: float,
    device: torch.device,
    dtype: torch.dtype,
    *,
    fill: np.ndarray | None = None,
    start: np.ndarray | None = None,
) -> tuple[nn.Parameter, Tensor, Tensor, Tensor]:
    """Missing cells as one parameter vector, initialised at the column mean plus N(0, noise²).

    ``fill`` replaces the column means; ``start`` (the shape of ``Z``) gives every missing cell
    its own starting value instead (the noise is added either way). Returns
    ``(theta, X0, mask, slot)``: ``X0`` holds the observed values (0 where missing) and
    ``slot[i, j]`` is the index in ``theta`` of the missing cell ``(i, j)``.
    """
    rows, cols = np.nonzero(mask)
    if start is not None:
        centre = start[rows, cols]
    else:
        means = fill if fill is not None else np.nanmean(np.where(mask, np.nan, Z), axis=0)
        centre = means[cols]
    init = centre + noise * rng.standard_normal(rows.size)
    theta = nn.Parameter(torch.as_tensor(init, device=device, dtype=dtype))
    X0 = torch.as_tensor(np.where(mask, 0.0, Z), device=device, dtype=dtype)
    slot = np.zeros(mask.shape, dtype=np.int64)
    slot[rows, cols] = np.arange(rows.size)
    return (
        theta,
        X0,
        torch.as_tensor(mask, device=device),
        torch.as_tensor(slot, device=device),
    )


def visit_step_factor(share: float, alpha: float = _RMSPROP_ALPHA) -> float:
    """How many times ``lr`` RMSprop's step on a missing cell is, each time its row is drawn,
    when each step draws a ``share`` of the rows.

    A cell whose row is not drawn has a zero gradient, so its running mean of squared gradients
    decays by ``alpha`` a step while its value stays put. Rows are drawn about every ``1 / share``
    steps, so that mean settles near ``(1 - alpha) / (1 - alpha ** (1 / share))`` times the
    squared gradient, and the step it normalises is the square root of the inverse times ``lr``:
    1 when every row is in every batch, 1.27 at a share of 0.62 (a small table halved into two
    batches), 4.3 at 1,024 of 20,640 rows (california).
    """
    share = min(1.0, share)
    return math.sqrt((1.0 - alpha ** (1.0 / share)) / (1.0 - alpha))


def _assemble(X0: Tensor, mask: Tensor, slot: Tensor, theta: Tensor) -> Tensor:
    """Observed values where observed, the parameters where missing (differentiable in theta)."""
    if theta.numel() == 0:
        return X0
    return torch.where(mask, theta[slot], X0)


def _default_transform_iter(n_new: int, per_batch: int, max_iter: int) -> int:
    """Enough steps for each new row to take part in about 200 of them, at most ``max_iter``."""
    wanted = math.ceil(200 * n_new / per_batch)
    return max(1, min(max(wanted, 200), max_iter))


def _fingerprint(values: np.ndarray) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(values.shape).encode())
    digest.update(str(values.dtype).encode())
    digest.update(np.ascontiguousarray(values).tobytes())
    return digest.hexdigest()


def _choose_start(
    Z: np.ndarray, mask: np.ndarray, rng: np.random.Generator, seed: int
) -> tuple[str, dict[str, float]]:
    """``init="auto"``: ICE's start, or the forest's where it imputes probe cells clearly better.

    A share (``_PROBE_FRACTION``) of the observed cells is hidden, both candidates impute them
    along with the missing cells, and their mean absolute errors (standardised units) on the
    probe cells are compared. The forest is chosen when its error is below ``_FOREST_MARGIN``
    times ICE's: on small tables TDM refines ICE's start further even where the forest's start
    is slightly better (BENCHMARKS.md, "Start choice (selection masks)"), and ICE is the cheaper.
    No ground truth of the missing cells is used. Returns the choice and both scores.
    """
    probe = _holdout_cells(mask, _PROBE_FRACTION, rng)
    hidden = mask | probe
    scores = {
        name: float(np.abs(start_fill(name, Z, hidden, seed)[probe] - Z[probe]).mean())
        for name in ("ice", "forest")
    }
    choice = "forest" if scores["forest"] < _FOREST_MARGIN * scores["ice"] else "ice"
    return choice, scores


def _holdout_cells(mask: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A random ``fraction`` of the observed cells (at least one), never a column's last one."""
    observed = np.flatnonzero(~mask.ravel())
    n_hold = max(1, round(fraction * observed.size))
    flat = np.zeros(mask.size, dtype=bool)
    flat[rng.choice(observed, size=min(n_hold, observed.size), replace=False)] = True
    holdout = flat.reshape(mask.shape)
    for j in np.flatnonzero((mask | holdout).all(axis=0)):  # keep one observed cell per column
        holdout[np.flatnonzero(holdout[:, j])[0], j] = False
    return holdout


class _HoldoutMonitor:
    """Self-supervised stopping: the error on held-out observed cells, and the best iterate.

    Every ``_VALIDATE_EVERY`` steps, the mean absolute error between the current values of the
    held-out cells and their true (standardised) values is computed. The best iterate (missing
    cells and network weights) is kept; training stops once it has not improved for
    ``patience`` steps. No ground truth of the really missing cells is used.
    """

    def __init__(
        self,
        theta: Tensor,
        network: nn.Module,
        slot: Tensor,
        holdout: np.ndarray,
        Z: np.ndarray,
        patience: int,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        self.theta = theta
        self.network = network
        self.index = slot[torch.as_tensor(holdout, device=device)]
        self.truth = torch.as_tensor(Z[holdout], device=device, dtype=dtype)
        self.patience = patience
        self.best = self._score()
        self.scores: list[float] = [self.best]  # scores[k] is at step k * _VALIDATE_EVERY
        self.best_iteration = 0
        self.best_theta = theta.detach().clone()
        self.best_network = _state_copy(network)

    @torch.no_grad()
    def _score(self) -> float:
        return float((self.theta[self.index] - self.truth).abs().mean())

    @torch.no_grad()
    def should_stop(self, iteration: int) -> bool:
        score = self._score()
        self.scores.append(score)
        if score < self.best * (1 - 1e-4):
            self.best, self.best_iteration = score, iteration
            self.best_theta.copy_(self.theta)
            self.best_network = _state_copy(self.network)
        return iteration - self.best_iteration >= self.patience

    @torch.no_grad()
    def restore_best(self) -> int:
        """Put the best iterate back in place; returns its iteration (0: the initial values)."""
        self.theta.copy_(self.best_theta)
        self.network.load_state_dict(self.best_network)
        return self.best_iteration


def _state_copy(network: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in network.state_dict().items()}
