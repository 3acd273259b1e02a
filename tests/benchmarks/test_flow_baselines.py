"""The pieces of MCFlow, EMFlow and MIRACLE that the shared contract does not reach: the flow's
log-density, EMFlow's latent conditioning, MIRACLE's graph and the clipped decodings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchmarks.baselines import EMFlowImputer, MCFlowImputer, MIRACLEImputer
from benchmarks.baselines._flow import build_flow, flow_log_density
from tdm.simulate import simulate_mcar


@pytest.fixture(scope="module")
def table() -> tuple[np.ndarray, np.ndarray]:
    """Correlated 5-column data (120 rows) with 25% of the cells missing."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((120, 2)) @ rng.standard_normal((2, 5))
    X += 0.2 * rng.standard_normal(X.shape)
    mask = simulate_mcar(X, 0.25, random_state=4)
    return X, np.where(mask, np.nan, X)


def test_flow_log_density_is_the_change_of_variables_formula() -> None:
    """log p(x) = log N(f(x); μ, Σ) + log|det J_f(x)|, J_f from autograd, Σ⁻¹ = L Lᵀ."""
    flow = build_flow(4, 2, 8, seed=0, device=torch.device("cpu")).double()
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, generator=generator, dtype=torch.float64)
    a = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    cov = a @ a.T + 0.5 * torch.eye(4, dtype=torch.float64)
    mean = torch.randn(4, generator=generator, dtype=torch.float64)
    chol = torch.linalg.cholesky(torch.linalg.inv(cov))
    log_p, z = flow_log_density(flow, x, mean, chol)
    base = torch.distributions.MultivariateNormal(mean, covariance_matrix=cov)
    for i in range(3):
        jacobian = torch.autograd.functional.jacobian(lambda r: flow(r.unsqueeze(0))[0], x[i])
        expected = base.log_prob(z[i]) + torch.linalg.slogdet(jacobian)[1]
        torch.testing.assert_close(log_p[i], expected)


def test_emflow_conditions_each_row_on_its_observed_latents() -> None:
    """The E-step's latent is μ_m + Σ_mo Σ_oo⁻¹ (z_o - μ_o) on the missing coordinates, z on the
    observed ones; its covariance sum is Σ_mm - Σ_mo Σ_oo⁻¹ Σ_om on each missing block."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5))
    cov = a @ a.T + np.eye(5)
    mean = rng.standard_normal(5)
    z = rng.standard_normal((4, 5))
    missing = np.array(
        [[1, 0, 0, 1, 0], [0, 0, 0, 0, 0], [0, 1, 1, 1, 1], [1, 0, 1, 0, 0]], dtype=bool
    )
    z_hat, cond = EMFlowImputer()._condition(
        torch.as_tensor(z), torch.as_tensor(missing), torch.as_tensor(mean), torch.as_tensor(cov)
    )
    expected_cov = np.zeros((5, 5))
    for i in range(4):
        m, o = missing[i], ~missing[i]
        want = z[i].copy()
        gain = cov[np.ix_(m, o)] @ np.linalg.inv(cov[np.ix_(o, o)])
        want[m] = mean[m] + gain @ (z[i, o] - mean[o])
        np.testing.assert_allclose(z_hat[i].numpy(), want, rtol=1e-10, atol=1e-12)
        expected_cov[np.ix_(m, m)] += cov[np.ix_(m, m)] - gain @ cov[np.ix_(o, m)]
    np.testing.assert_allclose(cond.numpy(), expected_cov, rtol=1e-10, atol=1e-10)


def test_miracle_graph_has_no_self_edges_and_no_self_masking(table: tuple) -> None:
    """A feature never feeds its own reconstruction nor its own missingness indicator."""
    _, X_missing = table
    imputer = MIRACLEImputer(max_iter=30, reimpute_every=10, random_state=0, device="cpu")
    imputer.fit(X_missing)
    assert np.all(np.diag(imputer.adjacency_) == 0.0)
    weights = imputer.network_.input_weights().detach()
    for k in range(5):  # every column of this table has a missing cell: indicator k is 5 + k
        assert torch.all(weights[5 + k, k] == 0.0)
        assert torch.all(weights[5 + k, (k + 1) % 5] != 0.0)
    assert imputer.n_rounds_ == 3  # re-imputed after steps 10 and 20, not after the last


@pytest.mark.parametrize("cls", [MCFlowImputer, EMFlowImputer], ids=["mcflow", "emflow"])
def test_flow_decodings_stay_in_the_observed_range(cls: type, table: tuple) -> None:
    """Decoded cells are clipped to each column's observed range, so no flow blows up a cell."""
    _, X_missing = table
    imputer = cls(max_iter=2, steps_per_round=10, lr=1e-2, random_state=0, device="cpu")
    out = imputer.fit_transform(X_missing)
    assert np.isfinite(out).all()
    assert (out >= np.nanmin(X_missing, axis=0) - 1e-9).all()
    assert (out <= np.nanmax(X_missing, axis=0) + 1e-9).all()
    assert np.isfinite(imputer.loss_history_).all()
