"""Contract tests of the invertible network f: every configuration is a bijection with a bounded,
correct log-determinant and a gradient for every weight."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from tdm.coupling import AffineCoupling, Conditioner, InvertibleNetwork, bounded_log_scale

CONFIGS = [
    pytest.param(1, 3, "joint", "scaled", id="D1-T3"),
    pytest.param(2, 1, "joint", "scaled", id="D2-T1"),
    pytest.param(5, 3, "joint", "scaled", id="D5-T3"),
    pytest.param(8, 2, "joint", "scaled", id="D8-T2"),
    pytest.param(1, 2, "separate", "scaled", id="D1-T2-separate"),
    pytest.param(7, 3, "separate", "scaled", id="D7-T3-separate"),
    pytest.param(6, 3, "joint", "unscaled", id="D6-T3-unscaled"),
    pytest.param(7, 3, "separate", "unscaled", id="D7-T3-separate-unscaled"),
]
ARGS = ("n_features", "n_blocks", "conditioner", "squash")


def make(
    n_features: int,
    n_blocks: int,
    conditioner: str = "joint",
    squash: str = "scaled",
    seed: int = 0,
) -> InvertibleNetwork:
    generator = torch.Generator().manual_seed(seed)
    return InvertibleNetwork(
        n_features, n_blocks=n_blocks, generator=generator, conditioner=conditioner, squash=squash
    ).double()


@pytest.mark.parametrize(ARGS, CONFIGS)
def test_forward_keeps_shape_and_inverse_recovers_input(
    n_features: int, n_blocks: int, conditioner: str, squash: str
) -> None:
    net = make(n_features, n_blocks, conditioner, squash)
    x = torch.randn(64, n_features, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    z = net(x)
    assert z.shape == x.shape
    assert not torch.allclose(z, x)  # a random network is not the identity
    torch.testing.assert_close(net.inverse(z), x, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(ARGS, CONFIGS)
def test_every_parameter_gets_a_gradient(
    n_features: int, n_blocks: int, conditioner: str, squash: str
) -> None:
    net = make(n_features, n_blocks, conditioner, squash)
    x = torch.randn(32, n_features, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    net(x).square().sum().backward()
    for name, p in net.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name  # a dead weight would mean a zero-size or unused layer


@pytest.mark.parametrize(ARGS, CONFIGS)
def test_log_det_equals_autograd_jacobian(
    n_features: int, n_blocks: int, conditioner: str, squash: str
) -> None:
    net = make(n_features, n_blocks, conditioner, squash)
    x = torch.randn(4, n_features, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    expected = torch.stack(
        [
            torch.linalg.slogdet(
                torch.autograd.functional.jacobian(lambda r: net(r[None])[0], row)
            )[1]
            for row in x
        ]
    )
    torch.testing.assert_close(net.log_abs_det_jacobian(x), expected)


@pytest.mark.parametrize(("squash", "slope"), [("scaled", 2 / math.pi), ("unscaled", 4 / math.pi)])
def test_log_scale_bound_holds_even_for_huge_weights(squash: str, slope: float) -> None:
    raw = torch.tensor([-1e6, -10.0, 0.0, 1e-3, 10.0, 1e6], dtype=torch.float64)
    bounded = bounded_log_scale(raw, clamp=2.0, squash=squash)
    assert bool((bounded.abs() < 2.0).all())
    # Odd, increasing, slope 2/π at zero (scaled) or 2c/π (unscaled, c = 2): s ≈ slope * raw.
    assert bool((bounded.diff() >= 0).all())
    small = bounded_log_scale(torch.tensor([-1e-4, 1e-4], dtype=torch.float64), 2.0, squash)
    torch.testing.assert_close(small, torch.tensor([-1e-4, 1e-4], dtype=torch.float64) * slope)


def test_unscaled_squash_is_freias_atan_clamp_and_an_unknown_one_is_refused() -> None:
    """ "unscaled" is FrEIA's RealNVP clamp, c * 0.636 * atan(raw), to its rounded constant."""
    raw = torch.linspace(-6.0, 6.0, 25, dtype=torch.float64)
    freia = 2.0 * 0.636 * torch.atan(raw)
    torch.testing.assert_close(bounded_log_scale(raw, 2.0, "unscaled"), freia, rtol=1e-3, atol=0)
    with pytest.raises(ValueError, match=r"squash must be one of .*'steep'"):
        InvertibleNetwork(3, squash="steep")

    block = AffineCoupling(6, partial(Conditioner, width=12, clamp=2.0)).double()
    with torch.no_grad():
        for p in block.parameters():
            p.mul_(1e4)  # push the conditioners far out of their usual range
    x = torch.randn(16, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    log_det = block.log_abs_det_jacobian(x)
    assert bool(torch.isfinite(log_det).all())
    assert bool((log_det.abs() < 6 * 2.0).all())  # D columns, each |log-scale| < clamp


def test_zero_blocks_is_the_identity() -> None:
    net = make(4, 0)
    x = torch.randn(8, 4, dtype=torch.float64)
    torch.testing.assert_close(net(x), x)
    assert list(net.parameters()) == []


def test_same_generator_seed_gives_same_weights_and_state_dict_round_trips() -> None:
    a, b, c = make(5, 3, seed=7), make(5, 3, seed=7), make(5, 3, seed=8)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb)
    assert any(
        not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters(), strict=True)
    )
    c.load_state_dict(a.state_dict())
    x = torch.randn(8, 5, dtype=torch.float64)
    torch.testing.assert_close(c(x), a(x))


def test_separate_conditioners_have_the_published_networks_shape() -> None:
    """RealNVP's two MLPs per update: on 13 columns, 3 blocks of width 26 hold 12,870 weights
    (counted on the published code's network), the log-scale and the shift from different
    weights; the joint network has one MLP per update. An unknown kind is refused."""
    separate, joint = make(13, 3, "separate"), make(13, 3)
    assert sum(p.numel() for p in separate.parameters()) == 12_870
    assert any("shift_net" in name for name, _ in separate.named_parameters())
    assert not any("shift_net" in name for name, _ in joint.named_parameters())
    with pytest.raises(ValueError, match="conditioner must be one of"):
        InvertibleNetwork(3, conditioner="shared")
