"""``transform`` on rows unseen in ``fit``: their missing cells start as ``fit``'s did (its
``init_``; a model start beside fitted rows as context). After a model start (ICE or the trees)
that is their imputation unless ``transform_max_iter`` asks for steps; after the mean start they
are optimised with the fitted network held fixed, each batch mixing new rows with fitted ones,
so that the mapped new rows match other fitted rows in transport cost. The fitted imputer is
left as it was (its network is copied), so that several threads may transform with one
imputer."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from tdm._cells import MissingCells
from tdm._optimise import RMSprop, RowSampler, default_transform_iter
from tdm._seeds import seed_of
from tdm._starts import context_start, settle_many_labels
from tdm._validation import resolve_device, resolve_dtype
from tdm.transport import TransportTerms

__all__ = ["impute_new_rows"]


def impute_new_rows(est: Any, values: np.ndarray) -> np.ndarray:
    """The standardised completion of ``values`` (the optimised space, NaN where missing) by
    the fitted batch optimal-transport imputer ``est``; rows with nothing missing are only
    standardised."""
    mask = np.isnan(values)
    filled = (values.astype(np.float64) - est.mean_) / est.scale_
    rows_missing = np.flatnonzero(mask.any(axis=1))
    if rows_missing.size == 0:
        return filled
    owner = est._owner()
    device = resolve_device(est.device, owner)
    dtype = resolve_dtype(est.dtype, owner)
    rng = np.random.default_rng(seed_of(est.random_state))
    Z = filled[rows_missing]
    sub_mask = mask[rows_missing]
    start = None
    if est.init_ != "mean":
        start = context_start(
            est.init_,
            est.X_fit_,
            Z,
            sub_mask,
            rng,
            est.encoding_,
            est._config.n_jobs,
        )
    many = est.encoding_.many_label_cells(sub_mask)
    if many.any():  # their cells keep the start's labels (after the mean start: the commonest)
        if start is None:
            fitted = np.asarray(est.X_fit_, dtype=np.float64)
            known = np.zeros(fitted.shape, dtype=bool)
            stacked = np.vstack([fitted, Z])
            mode = settle_many_labels(
                "mean", stacked, np.vstack([known, sub_mask]), est.encoding_, rng, None
            )
            Z = np.where(many, mode[len(fitted) :], Z)
        else:
            Z = np.where(many, start, Z)
        sub_mask = sub_mask & ~many
    n_new, n_fit = len(rows_missing), est.X_fit_.shape[0]
    B = min(est.batch_size_, n_fit // 2)
    k = min(n_new, max(1, B // 2))  # new rows per batch; the rest of the batch is fitted rows
    n_iter = est.transform_max_iter
    if n_iter is None:
        n_iter = 0 if start is not None else default_transform_iter(n_new, k, est.max_iter)
    cells = MissingCells.build(
        Z,
        sub_mask,
        est.encoding_,
        est._bounded_cells(device, dtype),
        rng,
        est._config.init_noise if n_iter else 0.0,  # no step would take start noise away
        fill=np.asarray(est.X_fit_, dtype=np.float64).mean(axis=0),
        start=start,
    )
    if n_iter == 0 or not cells.parameters():
        filled[rows_missing] = cells.result()
        return filled
    # A copy: several threads may impute with one fitted imputer, whose network stays as fitted.
    network = copy.deepcopy(est.network_).to(device=device, dtype=dtype).requires_grad_(False)
    with torch.no_grad():
        latent_fit = network(torch.as_tensor(est.X_fit_, device=device, dtype=dtype))

    sampler = RowSampler.on(device, rng)

    def step(_: int) -> TransportTerms:
        new = sampler.distinct(n_new, k)
        fit = sampler.distinct(n_fit, 2 * B - k)
        z_new = network(cells.values(new))
        z1 = torch.cat([z_new, latent_fit[fit[: B - k]]])
        return est._loss(z1, latent_fit[fit[B - k :]])

    optimizer = RMSprop(cells.parameters(), lr=est._cell_lr(k, n_new))
    est._run(
        step,
        optimizer,
        n_iter,
        device=device,
        dtype=dtype,
        stage="transform",
        after_step=cells.project_,
    )
    filled[rows_missing] = cells.result()
    return filled
