"""The OT step: the assignment solver is optimal, and each loss equals POT's value and gradient."""

from __future__ import annotations

import numpy as np
import ot
import pytest
import torch
from scipy.optimize import linear_sum_assignment

from tdm.transport import (
    ASSIGNMENT_GRID,
    assignment,
    auction_assignment,
    pairwise_cost,
    plan_cost,
    sinkhorn_plan,
    transport_terms,
)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 300])
def test_assignment_is_optimal(n: int) -> None:
    rng = np.random.default_rng(n)
    C = rng.random((n, n)) * 10
    perm = assignment(C)
    assert sorted(perm.tolist()) == list(range(n))  # a permutation
    rows, cols = linear_sum_assignment(C)
    assert C[np.arange(n), perm].sum() == pytest.approx(C[rows, cols].sum(), rel=1e-9)


def test_assignment_is_within_the_grid_bound_on_near_ties() -> None:
    """Costs that differ by less than the rounding grid: the permutation is a valid one and its
    true total is within ``n * max|C| / ASSIGNMENT_GRID`` of the optimum (the documented bound)."""
    rng = np.random.default_rng(1)
    n = 200
    C = 1.0 + rng.random((n, n)) * 5.0 / ASSIGNMENT_GRID  # every entry within 5 grid steps
    C[0, 0] = 2.0
    perm = assignment(C)
    assert sorted(perm.tolist()) == list(range(n))
    rows, cols = linear_sum_assignment(C)
    gap = C[np.arange(n), perm].sum() - C[rows, cols].sum()
    assert 0.0 <= gap <= n * np.abs(C).max() / ASSIGNMENT_GRID


def test_assignment_is_exact_on_clustered_points() -> None:
    """The matrices a fit produces: clustered latent points (cells imputed at the column mean),
    hence many near-ties. The optimum must still be found."""
    rng = np.random.default_rng(2)
    z = rng.normal(size=(512, 8)) * 0.3 + rng.integers(0, 3, size=(512, 1))
    z[rng.random(z.shape) < 0.3] = 0.0
    C = np.sqrt(((z[:256, None] - z[None, 256:]) ** 2).sum(-1)).astype(np.float32)
    rows, cols = linear_sum_assignment(C.astype(np.float64))
    ours = C.astype(np.float64)[np.arange(256), assignment(C)].sum()
    assert ours == pytest.approx(C.astype(np.float64)[rows, cols].sum(), rel=1e-6)


def test_assignment_handles_tiny_costs() -> None:
    """Regression: a contracted latent space gives costs near 1e-9; the solver must stay optimal."""
    rng = np.random.default_rng(0)
    C = rng.random((128, 128)) * 1e-9
    rows, cols = linear_sum_assignment(C)
    assert C[np.arange(128), assignment(C)].sum() == pytest.approx(C[rows, cols].sum(), rel=1e-6)


@pytest.mark.parametrize("width", [5, 40], ids=["differences", "centred-expansion"])
@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean"])
def test_contracted_cloud_far_from_origin_is_matched_exactly(cost: str, width: int) -> None:
    """Regression: costs by the |a|² + |b|² - 2ab expansion cancel in float32 for a small cloud
    far from the origin (a contracted latent space); the ties made LAPJV crawl (100-900 ms on
    64 x 64) and the matching wrong. The loss must equal the exact float64 OT cost, on the
    narrow points (differences) and on the wide ones (the expansion, centred, in float64)."""
    g = torch.Generator().manual_seed(9)
    offset = 300.0
    z1 = (offset + 1e-2 * torch.randn(64, width, generator=g)).float()
    z2 = (offset + 1e-2 * torch.randn(64, width, generator=g)).float()
    ours = float(transport_terms(z1, z2, cost=cost, solver="assignment").loss)  # type: ignore[arg-type]
    M = pairwise_cost(z1.double(), z2.double(), cost).numpy()  # type: ignore[arg-type]
    uniform = np.full(64, 1 / 64)
    assert ours == pytest.approx(ot.emd2(uniform, uniform, M), rel=1e-3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_assignment_refuses_non_finite_costs_before_the_solver(bad: float) -> None:
    """A NaN or infinite cost (a diverged fit) is an error; LAPJV is never called with it (it
    corrupts the process's heap, seen as an abort later)."""
    C = np.random.default_rng(0).random((64, 64)).astype(np.float32)
    C[3, 4] = bad
    with pytest.raises(FloatingPointError, match="non-finite"):
        assignment(C)


def test_assignment_rejects_non_square() -> None:
    with pytest.raises(ValueError, match="square"):
        assignment(np.zeros((3, 4)))


_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, _CUDA])]


def _matrix(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform costs, or tie-heavy ones: squared distances between clustered points, a third of
    their coordinates at the centre (the cells of a mean start)."""
    if kind == "random":
        return rng.random((n, n)) * 10
    z = rng.normal(size=(2 * n, 4)) * 0.3 + rng.integers(0, 3, size=(2 * n, 1))
    z[rng.random(z.shape) < 0.3] = 0.0
    return ((z[:n, None] - z[None, n:]) ** 2).sum(-1)


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["random", "tie-heavy"])
@pytest.mark.parametrize("n", [1, 2, 7, 64, 256])
def test_auction_is_exact_on_the_grid_and_within_the_bound(n: int, kind: str, device: str) -> None:
    """The auction's answer is a permutation, optimal on the costs rounded to the grid (as
    LAPJV's), hence within ``n * max|C| / ASSIGNMENT_GRID`` of SciPy's optimum."""
    rng = np.random.default_rng(n)
    C = _matrix(kind, n, rng)
    perm = auction_assignment(torch.as_tensor(C, device=device)).cpu().numpy()
    assert sorted(perm.tolist()) == list(range(n))
    rounded = np.rint(C * (ASSIGNMENT_GRID / np.abs(C).max()))
    rows, cols = linear_sum_assignment(rounded)
    assert rounded[np.arange(n), perm].sum() == rounded[rows, cols].sum()
    rows, cols = linear_sum_assignment(C)
    gap = C[np.arange(n), perm].sum() - C[rows, cols].sum()
    assert 0.0 <= gap <= n * np.abs(C).max() / ASSIGNMENT_GRID


def test_auction_solves_a_batch_as_its_matrices_one_by_one() -> None:
    """A batch of three matrices (one of equal costs, one of zeros) gets each matrix's own
    optimal permutation; a batch of 1 x 1 matrices gets zeros."""
    rng = np.random.default_rng(3)
    C = np.stack([rng.random((48, 48)), np.ones((48, 48)), np.zeros((48, 48))])
    perms = auction_assignment(torch.from_numpy(C)).numpy()
    assert perms.shape == (3, 48)
    for matrix, perm in zip(C, perms, strict=True):
        assert sorted(perm.tolist()) == list(range(48))
        rows, cols = linear_sum_assignment(matrix)
        assert matrix[np.arange(48), perm].sum() == pytest.approx(matrix[rows, cols].sum())
    np.testing.assert_array_equal(perms[0], auction_assignment(torch.from_numpy(C[0])).numpy())
    assert auction_assignment(torch.zeros(2, 1, 1)).tolist() == [[0], [0]]


def test_auction_ends_on_non_finite_costs_and_refuses_non_square() -> None:
    """NaN and infinite costs (a diverged fit, which the step loop reports) still give a
    permutation rather than an endless auction; a non-square matrix is refused."""
    C = torch.from_numpy(np.random.default_rng(0).random((16, 16)))
    C[2, 3], C[5] = float("nan"), float("inf")
    assert sorted(auction_assignment(C).tolist()) == list(range(16))
    with pytest.raises(ValueError, match="square"):
        auction_assignment(torch.zeros(3, 4))


@pytest.mark.gpu
@_CUDA
@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean"])
def test_cuda_transport_terms_solve_on_the_device_and_match_the_cpu(cost: str) -> None:
    """On CUDA the loss comes from the auction, its gradient too, and equals the CPU's (LAPJV's)
    within the grid bound."""
    z1, z2 = _clouds(256, 256, d=5, seed=2)
    cpu = transport_terms(z1, z2, cost=cost, solver="assignment")  # type: ignore[arg-type]
    w1, w2 = z1.detach().cuda().requires_grad_(True), z2.detach().cuda().requires_grad_(True)
    cuda = transport_terms(w1, w2, cost=cost, solver="assignment")  # type: ignore[arg-type]
    (grad,) = torch.autograd.grad(cuda.loss, w1)
    assert cuda.loss.device.type == grad.device.type == "cuda"
    largest = float(pairwise_cost(z1, z2, cost).max())  # type: ignore[arg-type]
    assert abs(float(cuda.loss) - float(cpu.loss)) <= largest / ASSIGNMENT_GRID
    torch.testing.assert_close(cuda.mean_cost.cpu(), cpu.mean_cost)


def _clouds(n: int, m: int, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(n, d, dtype=torch.float64, generator=g, requires_grad=True)
    z2 = (torch.randn(m, d, dtype=torch.float64, generator=g) + 0.5).requires_grad_(True)
    return z1, z2


@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean"])
@pytest.mark.parametrize(
    ("n", "m", "solver"),
    [(32, 32, "assignment"), (32, 32, "emd"), (20, 33, "assignment"), (20, 33, "emd")],
    ids=["equal-assignment", "equal-emd", "unequal-assignment-falls-back", "unequal-emd"],
)
def test_exact_loss_and_gradient_equal_pot(cost: str, n: int, m: int, solver: str) -> None:
    z1, z2 = _clouds(n, m)
    ours = transport_terms(z1, z2, cost=cost, solver=solver).loss  # type: ignore[arg-type]
    (g1, g2) = torch.autograd.grad(ours, (z1, z2))

    M = pairwise_cost(z1, z2, cost)  # type: ignore[arg-type]
    a = torch.full((n,), 1.0 / n, dtype=torch.float64)
    b = torch.full((m,), 1.0 / m, dtype=torch.float64)
    reference = ot.emd2(a, b, M)  # POT's torch backend differentiates through the exact plan
    (r1, r2) = torch.autograd.grad(reference, (z1, z2))
    torch.testing.assert_close(ours, reference)
    torch.testing.assert_close(g1, r1)
    torch.testing.assert_close(g2, r2)


def test_sinkhorn_plan_matches_pot() -> None:
    z1, z2 = _clouds(40, 40, seed=5)
    C = pairwise_cost(z1.detach(), z2.detach(), "sqeuclidean")
    eps = 0.05 * float(C.median())
    ours = sinkhorn_plan(C, eps, tol=1e-9, max_iter=5000)
    uniform = np.full(40, 1 / 40)
    reference = ot.sinkhorn(uniform, uniform, C.numpy(), eps, numItermax=100_000, stopThr=1e-12)
    np.testing.assert_allclose(ours.numpy(), reference, atol=1e-7)


def test_sinkhorn_divergence_is_zero_on_identical_clouds_and_positive_otherwise() -> None:
    z1, z2 = _clouds(30, 30, seed=6)
    same = transport_terms(z1, z1.detach().clone(), solver="sinkhorn", epsilon=0.1).loss
    other = transport_terms(z1, z2, solver="sinkhorn", epsilon=0.1).loss
    assert abs(same.item()) < 1e-6
    assert other.item() > 0.1
    (grad,) = torch.autograd.grad(other, z1)
    assert bool(torch.isfinite(grad).all())


def test_sinkhorn_needs_epsilon_and_unknown_solver_is_refused() -> None:
    z1, z2 = _clouds(5, 5)
    with pytest.raises(ValueError, match="epsilon"):
        transport_terms(z1, z2, solver="sinkhorn")
    with pytest.raises(ValueError, match="solver must be one of"):
        transport_terms(z1, z2, solver="magic")  # type: ignore[arg-type]


@pytest.mark.parametrize("solver", ["assignment", "emd", "sinkhorn"])
def test_transport_terms_give_the_loss_and_the_mean_pair_cost(solver: str) -> None:
    """The mean cost is that of every cross pair, without gradient; for the exact solvers the
    loss over it is 0 for identical batches and 1 when every pairing costs the same."""
    gen = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(16, 3, generator=gen), torch.randn(16, 3, generator=gen)
    terms = transport_terms(z1, z2, solver=solver, epsilon=0.1)  # type: ignore[arg-type]
    torch.testing.assert_close(terms.mean_cost, pairwise_cost(z1, z2, "sqeuclidean").mean())
    assert not terms.mean_cost.requires_grad
    if solver != "sinkhorn":
        assert 0 < float(terms.loss / terms.mean_cost) < 1
        alike = transport_terms(z1, z1.clone(), solver=solver)  # type: ignore[arg-type]
        assert float(alike.loss) == 0.0
        one_point = transport_terms(z1, z2[:1].expand(16, 3), solver=solver)  # type: ignore[arg-type]
        torch.testing.assert_close(one_point.loss, one_point.mean_cost)


@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean"])
@pytest.mark.parametrize("width", [3, 16, 17, 72])
def test_plan_cost_equals_the_float64_differences(cost: str, width: int) -> None:
    """The exact solvers' cost matrix, on either side of the width where it switches to the
    expansion, is the float64 matrix of differences to float32 precision or better."""
    g = torch.Generator().manual_seed(width)
    z1 = (5.0 + torch.randn(256, width, generator=g)).float()
    z2 = (5.0 + torch.randn(256, width, generator=g)).float()
    reference = pairwise_cost(z1.double(), z2.double(), cost)  # type: ignore[arg-type]
    ours = plan_cost(z1, z2, cost).double()  # type: ignore[arg-type]
    torch.testing.assert_close(ours, reference, rtol=1e-6, atol=1e-6)
