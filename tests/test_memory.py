"""Tests for ``mssr_hf/memory.py``: the per-sample memory of MSSR (paper Sec. 3.1, App. A; DESIGN.md section 3).

Equations are cited by their ``\\label{}`` in ``paper/mssr-paper.tex``. Expected numbers are computed by hand; the
arithmetic is written next to each one.
"""

import json
import math

import pytest
import torch
from conftest import make_memory
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file
from torch.testing import assert_close

from mssr_hf.memory import (
    consolidated_stability,
    decayed_log_strength,
    difficulty,
    ema_loss_update,
    gain_log_weights,
    hazard,
    loss_quantiles,
    normalize_log_weights,
    normalized_loss,
    power_log_weights,
)

torch.set_num_threads(1)

NAN, INF = float("nan"), float("inf")
STATE_TENSORS = ("ema_loss", "seen", "stability", "hazard", "anchor_step", "log_m_anchor", "last_review")
PROP = settings(max_examples=50, deadline=None)


def t64(*values):
    return torch.tensor(values, dtype=torch.float64)


def i64(*values):
    return torch.tensor(values, dtype=torch.int64)


def close(actual, expected, rtol=1e-12, atol=1e-14):
    if not isinstance(expected, torch.Tensor):
        expected = torch.as_tensor(expected, dtype=actual.dtype)
    assert_close(actual, expected, rtol=rtol, atol=atol)


def snapshot(mem):
    return {name: getattr(mem, name).clone() for name in STATE_TENSORS}


def assert_same_memory(a, b):
    """Every state tensor, the RNG state and the scalar state are exactly equal."""
    for name in STATE_TENSORS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert torch.equal(x, y), name
    assert torch.equal(a.generator.get_state(), b.generator.get_state())
    assert (a.clock, a.skipped_losses, a.loss_range, a.seed) == (b.clock, b.skipped_losses, b.loss_range, b.seed)


# Hyperparameters with round numbers for the hand-computed scenarios.
SIMPLE = dict(
    phi="identity", alpha=0.01, gamma_d=0.2, ema_beta=0.5, quantiles=(0.0, 1.0), eta_s=0.05, beta_s=0.5, rho=0.01,
    gamma_s=1.0, s_min=1.0, s_max=10.0, s_init=1.0, sigma_s=0.0,
)  # fmt: skip


# ================================================================================================================
# 1. Pure functions, one per equation, against hand-computed values
# ================================================================================================================


class TestEma:
    """eq:ema_app: the first observation sets the value, then beta * prev + (1 - beta) * new."""

    def test_first_observation_sets_value_then_blends(self):
        ema, loss = t64(0.0, 2.0, 4.0), t64(3.0, 1.0, 0.0)
        seen = torch.tensor([False, True, True])
        out = ema_loss_update(ema, loss, seen, beta=0.9)
        # [unseen -> 3.0, 0.9*2 + 0.1*1 = 1.9, 0.9*4 + 0.1*0 = 3.6]
        close(out, t64(3.0, 1.9, 3.6))

    def test_beta_half(self):
        out = ema_loss_update(t64(1.0), t64(5.0), torch.tensor([True]), beta=0.5)
        close(out, t64(3.0))  # 0.5*1 + 0.5*5 = 3


class TestQuantileNormalisation:
    """eq:quantile_app: clip((l - Q_l) / max(Q_u - Q_l, 1e-8), 0, 1), quantiles by linear interpolation."""

    def test_values_and_clipping(self):
        out = normalized_loss(t64(0.0, 1.0, 2.0, 3.0, 4.0), 1.0, 3.0)
        # (x - 1)/2: [-0.5 -> 0, 0, 0.5, 1, 1.5 -> 1]
        close(out, t64(0.0, 0.0, 0.5, 1.0, 1.0))

    def test_floor_1e8_for_a_degenerate_range(self):
        # Q_u - Q_l = 5e-9 < 1e-8: the denominator is 1e-8, not 5e-9.
        out = normalized_loss(t64(2.5e-9, 0.0, 5e-9), 0.0, 5e-9)
        # [2.5e-9/1e-8 = 0.25, 0, 5e-9/1e-8 = 0.5]  (without the floor: 0.5, 0, 1)
        close(out, t64(0.25, 0.0, 0.5), rtol=1e-9, atol=1e-12)
        # Q_u == Q_l == 2: (x-2)/1e-8: [0, 1e-9/1e-8 = 0.1, -0.1 -> 0, 1e8 -> 1]; all finite
        out = normalized_loss(t64(2.0, 2.0 + 1e-9, 2.0 - 1e-9, 3.0), 2.0, 2.0)
        close(out, t64(0.0, 0.1, 0.0, 1.0), rtol=1e-6, atol=1e-6)

    def test_loss_quantiles_by_hand(self):
        # n=3, q=0.05: pos = 0.05*2 = 0.1 -> 1 + 0.1*(2-1) = 1.1; q=0.95: pos = 1.9 -> 2 + 0.9*(3-2) = 2.9
        q_l, q_u = loss_quantiles(t64(3.0, 1.0, 2.0), 0.05, 0.95)
        assert q_l == pytest.approx(1.1, abs=1e-12) and q_u == pytest.approx(2.9, abs=1e-12)
        # n=2, q=0.25: pos = 0.25 -> 0 + 0.25*10 = 2.5; q=0.5: pos = 0.5 -> 5
        assert loss_quantiles(t64(10.0, 0.0), 0.25, 0.5) == pytest.approx((2.5, 5.0), abs=1e-12)
        # n=1: every quantile is the single value; q=0 and q=1 are the min and max
        assert loss_quantiles(t64(5.0), 0.05, 0.95) == (5.0, 5.0)
        assert loss_quantiles(t64(4.0, -1.0, 7.0, 2.0), 0.0, 1.0) == (-1.0, 7.0)

    @pytest.mark.parametrize("n", [1, 2, 3, 7, 20, 101, 1000])
    def test_loss_quantiles_equals_torch_quantile(self, n):
        gen = torch.Generator().manual_seed(n)
        values = torch.randn(n, generator=gen, dtype=torch.float64) * 3.0 + 1.0
        levels = [0.0, 0.05, 0.1, 1 / 3, 0.5, 0.77, 0.95, 1.0]
        expected = torch.quantile(values, torch.tensor(levels, dtype=torch.float64), interpolation="linear")
        for q_low, q_high in zip(levels[:-1], levels[1:]):
            got = torch.tensor(loss_quantiles(values, q_low, q_high), dtype=torch.float64)
            want = torch.stack([expected[levels.index(q_low)], expected[levels.index(q_high)]])
            assert_close(got, want, rtol=1e-12, atol=1e-12)

    def test_loss_quantiles_with_ties(self):
        values = t64(1.0, 1.0, 1.0, 2.0, 2.0, 9.0)
        want = torch.quantile(values, t64(0.05, 0.95))
        assert_close(t64(*loss_quantiles(values, 0.05, 0.95)), want, rtol=1e-12, atol=1e-12)


class TestDifficulty:
    """App. A, "Choices of the monotone mapping" (eq:sigmoid_phi for the default)."""

    @pytest.mark.parametrize(
        "phi, kwargs, x, expected",
        [
            # sigmoid 1/(1+e^{-k(x-c)}), k=10, c=0.5: x=0.5 -> 1/(1+e^0) = 0.5; x=0.6 -> 1/(1+e^{-1}) = 0.7310585786
            # x=0 -> 1/(1+e^5) = 0.0066928509; x=1 -> 1/(1+e^{-5}) = 0.9933071491
            ("sigmoid", {}, [0.5, 0.6, 0.0, 1.0], [0.5, 0.7310585786300049, 0.006692850924284855, 0.9933071490757153]),
            # k=4, c=0.3, x=0.8 -> 1/(1+e^{-4*0.5}) = 1/(1+e^{-2}) = 0.8807970780
            ("sigmoid", {"k": 4.0, "c": 0.3}, [0.8], [0.8807970779778823]),
            ("identity", {}, [0.0, 0.25, 1.0], [0.0, 0.25, 1.0]),
            # x^p: 0.5^2 = 0.25, 1^2 = 1, 0^2 = 0
            ("power", {"p": 2.0}, [0.5, 1.0, 0.0], [0.25, 1.0, 0.0]),
            # 0.25^0.5 = 0.5; 0.1^3 = 0.001
            ("power", {"p": 0.5}, [0.25], [0.5]),
            ("power", {"p": 3.0}, [0.1], [0.001]),
            # log(1+kx)/log(1+k), k=10: x=0.1 -> log 2 / log 11 = 0.6931471806/2.3978952728 = 0.2890648263
            # x=1 -> 1, x=0 -> 0
            ("log", {"kappa": 10.0}, [0.1, 1.0, 0.0], [0.2890648263178878, 1.0, 0.0]),
            # k=1, x=0.5 -> log 1.5 / log 2 = 0.5849625007
            ("log", {"kappa": 1.0}, [0.5], [0.5849625007211562]),
        ],
    )
    def test_values(self, phi, kwargs, x, expected):
        close(difficulty(t64(*x), phi, **kwargs), t64(*expected))

    @pytest.mark.parametrize("phi", ["sigmoid", "identity", "power", "log"])
    def test_monotone_and_in_unit_interval(self, phi):
        x = torch.linspace(0, 1, 101, dtype=torch.float64)
        y = difficulty(x, phi)
        assert (y >= 0).all() and (y <= 1).all()
        assert (y[1:] >= y[:-1]).all()

    def test_unknown_phi(self):
        with pytest.raises(ValueError, match="phi"):
            difficulty(t64(0.5), "tanh")


class TestHazardAndDecay:
    """eq:retention_update / eq:epoch_update: h = (alpha + gamma_d phi) / S; log m_t = log m_a - h (t - t_a)."""

    def test_hazard_values(self):
        out = hazard(t64(0.5, 1.0, 0.0), t64(1.0, 2.0, 4.0), alpha=0.01, gamma_d=0.2)
        # [(0.01 + 0.2*0.5)/1 = 0.11, (0.01 + 0.2*1)/2 = 0.105, (0.01 + 0)/4 = 0.0025]
        close(out, t64(0.11, 0.105, 0.0025))
        # (0.05 + 0.5*0.2)/5 = 0.15/5 = 0.03
        close(hazard(t64(0.2), t64(5.0), alpha=0.05, gamma_d=0.5), t64(0.03))

    def test_default_sigmoid_hazard_at_half(self):
        # h = (0.01 + 0.2*sigmoid(10*(0.5-0.5)))/1 = (0.01 + 0.1)/1 = 0.11
        close(hazard(difficulty(t64(0.5), "sigmoid"), t64(1.0), 0.01, 0.2), t64(0.11))

    def test_decayed_log_strength(self):
        out = decayed_log_strength(t64(0.0, -1.0, -0.5), t64(0.1, 0.2, 0.0), t64(10.0, 5.0, 1000.0))
        # [0 - 0.1*10 = -1, -1 - 0.2*5 = -2, -0.5 - 0 = -0.5]
        close(out, t64(-1.0, -2.0, -0.5))


class TestConsolidation:
    """eq:reset_spacing: S+ = clip(S + eta_s (S_max-S)^beta_s e^{-rho dt} (1-m)^gamma_s + eps, s_min, s_max)."""

    BASE = dict(eta_s=0.05, s_max=10.0, beta_s=0.5, rho=0.01, gamma_s=1.0, s_min=1.0)

    @pytest.mark.parametrize(
        "S, m, dt, overrides, noise, expected",
        [
            # 1 + 0.05 * 9^0.5 * e^0 * (1-0.5)^1 = 1 + 0.05*3*0.5 = 1.075
            (1.0, 0.5, 0.0, {}, None, 1.075),
            # 6 + 0.05 * 4^0.5 * e^{-0.01*100} * 0.8 = 6 + 0.05*2*0.3678794412*0.8 = 6.0294303553
            (6.0, 0.2, 100.0, {}, None, 6.029430355293715),
            # gamma_s = 2: 1 + 0.05*3*1*0.5^2 = 1 + 0.0375 = 1.0375
            (1.0, 0.5, 0.0, {"gamma_s": 2.0}, None, 1.0375),
            # beta_s = 1 (no saturation curvature): 1 + 0.05*9*1*0.5 = 1.225
            (1.0, 0.5, 0.0, {"beta_s": 1.0}, None, 1.225),
            # saturation: S = S_max -> (10-10)^0.5 = 0, no gain: 10
            (10.0, 0.0, 0.0, {}, None, 10.0),
            # error-driven: m = 1 -> (1-1)^1 = 0, no gain: 3
            (3.0, 1.0, 0.0, {}, None, 3.0),
            # clip to s_max: 9 + 10 * 1^0.5 * 1 * (1-0)^1 = 19 -> 10
            (9.0, 0.0, 0.0, {"eta_s": 10.0}, None, 10.0),
            # clip to s_min: 1 + 0 (m = 1) - 0.5 = 0.5 -> 1
            (1.0, 1.0, 0.0, {}, -0.5, 1.0),
            # noise inside the range: 2 + 0 + 0.3 = 2.3
            (2.0, 1.0, 0.0, {}, 0.3, 2.3),
            # gamma_s = 0 with m = 1: (1-1)^0 = 1 -> 1 + 0.05*3*1*1 = 1.15
            (1.0, 1.0, 0.0, {"gamma_s": 0.0}, None, 1.15),
        ],
    )
    def test_values(self, S, m, dt, overrides, noise, expected):
        kwargs = {**self.BASE, **overrides}
        out = consolidated_stability(t64(S), t64(m), t64(dt), noise=None if noise is None else t64(noise), **kwargs)
        close(out, t64(expected))

    def test_vectorised(self):
        out = consolidated_stability(t64(1.0, 6.0), t64(0.5, 0.2), t64(0.0, 100.0), **self.BASE)
        close(out, t64(1.075, 6.029430355293715))  # the first two cases above, in one call


class TestReplayWeights:
    """eq:prob_weight (m^-zeta, normalised) and the scheduler-side (1-m)^beta_m e^{rho dt}."""

    def test_power_weights_normalised(self):
        log_m = torch.log(t64(1.0, 0.5, 0.25))
        # zeta=1: w = [1, 2, 4] -> [1/7, 2/7, 4/7]
        close(normalize_log_weights(power_log_weights(log_m, 1.0)), t64(1 / 7, 2 / 7, 4 / 7))
        # zeta=2: w = [1, 4, 16] -> [1/21, 4/21, 16/21]
        close(normalize_log_weights(power_log_weights(log_m, 2.0)), t64(1 / 21, 4 / 21, 16 / 21))
        # zeta=0: uniform
        close(normalize_log_weights(power_log_weights(log_m, 0.0)), t64(1 / 3, 1 / 3, 1 / 3))

    def test_gain_weights(self):
        log_w = gain_log_weights(torch.log(t64(0.5, 1.0, 0.5)), t64(10.0, 0.0, 0.0), beta_m=2.0, rho=0.1)
        # log[(1-0.5)^2 e^{0.1*10}] = 2 log 0.5 + 1 = -0.3862943611; m = 1 -> log 0 = -inf;
        # log[(0.5)^2 e^0] = log 0.25 = -1.3862943611
        close(log_w[[0, 2]], t64(-0.3862943611198906, -1.3862943611198906))
        assert log_w[1].item() == -INF
        # p = [0.25e, 0, 0.25] / (0.25e + 0.25) = [e/(e+1), 0, 1/(e+1)] = [0.7310585786, 0, 0.2689414214]
        close(normalize_log_weights(log_w), t64(0.7310585786300049, 0.0, 0.2689414213699951))

    def test_normalize_all_zero_weights_is_uniform_and_empty(self):
        close(normalize_log_weights(t64(-INF, -INF, -INF, -INF)), t64(0.25, 0.25, 0.25, 0.25))
        assert normalize_log_weights(t64()).numel() == 0

    def test_normalize_is_finite_for_huge_log_weights(self):
        p = normalize_log_weights(t64(1e300, 1e300 - 1e290, -1e300))
        assert torch.isfinite(p).all() and p.sum().item() == pytest.approx(1.0, abs=1e-12)
        close(p, t64(1.0, 0.0, 0.0))


# ================================================================================================================
# 2. SampleMemory scenario computed by hand
# ================================================================================================================


class TestScenario:
    """extend -> observe -> review -> update_hazard -> strength, every state tensor checked (DESIGN.md section 3)."""

    def test_full_scenario(self):
        mem = make_memory(3, **SIMPLE)
        # extend at step 0: S = s_init = 1, h = alpha / s_init = 0.01, log m = 0, anchor = last review = 0
        close(mem.stability, t64(1.0, 1.0, 1.0))
        close(mem.hazard, t64(0.01, 0.01, 0.01))
        close(mem.log_m_anchor, t64(0.0, 0.0, 0.0))
        assert torch.equal(mem.anchor_step, i64(0, 0, 0)) and torch.equal(mem.last_review, i64(0, 0, 0))

        mem.observe([0, 1], [1.0, 3.0], step=2)
        close(mem.ema_loss, t64(1.0, 3.0, 0.0))  # first observations set the EMA
        assert mem.seen.tolist() == [True, True, False]
        # no update_hazard yet: everyone (seen or not) has normalised loss 0.5
        close(mem.normalized_loss(torch.arange(3)), t64(0.5, 0.5, 0.5))

        mem.review([0], step=10)
        # m0 = exp(-0.01*10) = 0.9048374180; dt = 10 - 0 = 10
        # S0 = 1 + 0.05 * (10-1)^0.5 * e^{-0.01*10} * (1 - 0.9048374180)
        #    = 1 + 0.15 * 0.9048374180 * 0.0951625820 = 1.0129159997
        s0 = 1.0129159997436967
        # h0 = (0.01 + 0.2 * phi(0.5)) / S0 = 0.11 / 1.0129159997 = 0.1085973566  (identity phi, no quantiles yet)
        close(mem.stability, t64(s0, 1.0, 1.0))
        close(mem.hazard, t64(0.10859735657037095, 0.01, 0.01))
        close(mem.log_m_anchor, t64(0.0, 0.0, 0.0))
        assert torch.equal(mem.anchor_step, i64(10, 0, 0)) and torch.equal(mem.last_review, i64(10, 0, 0))
        # lazy strength at 15: [exp(-0.1085973566*5) = 0.5810103066, exp(-0.01*15) = 0.8607079764 (x2)]
        close(mem.strength(step=15), t64(0.5810103066121493, 0.8607079764250578, 0.8607079764250578))
        close(mem.strength([0], step=10), t64(1.0))

        mem.update_hazard(step=20)
        # quantiles (0, 1) of the seen EMA [1, 3]: Q_l = 1, Q_u = 3; l_hat = [(1-1)/2 = 0, (3-1)/2 = 1, unseen 0.5]
        assert mem.loss_range == (1.0, 3.0)
        close(mem.normalized_loss(torch.arange(3)), t64(0.0, 1.0, 0.5))
        # h = [(0.01 + 0)/S0 = 0.0098724870, (0.01 + 0.2)/1 = 0.21, (0.01 + 0.1)/1 = 0.11]
        close(mem.hazard, t64(0.009872486960942813, 0.21, 0.11))
        # right endpoint: log m = [0 - 0.0098724870*(20-10) = -0.0987248696, 0 - 0.21*20 = -4.2, 0 - 0.11*20 = -2.2]
        close(mem.log_m_anchor, t64(-0.09872486960942813, -4.2, -2.2))
        assert torch.equal(mem.anchor_step, i64(20, 20, 20)) and torch.equal(mem.last_review, i64(10, 0, 0))
        close(mem.stability, t64(s0, 1.0, 1.0))  # update_hazard never touches S

        mem.observe([1, 1, 2], [5.0, 2.0, 2.5], step=25)
        # id 1 twice: one observation of the mean 3.5 -> 0.5*3 + 0.5*3.5 = 3.25; id 2 first observation -> 2.5
        close(mem.ema_loss, t64(1.0, 3.25, 2.5))
        close(mem.hazard, t64(0.009872486960942813, 0.21, 0.11))  # observe never touches the hazard

        mem.review([1, 2, 1], step=30)  # ids deduplicated
        # m1 = exp(-4.2 - 0.21*10) = exp(-6.3) = 0.0018363048; dt = 30
        # S1 = 1 + 0.05 * 3 * e^{-0.3} * (1 - 0.0018363048) = 1 + 0.15*0.7408182207*0.9981636952 = 1.1109186779
        # l_hat1 = clip((3.25 - 1)/2 = 1.125) = 1 -> h1 = 0.21 / 1.1109186779 = 0.1890327386
        # m2 = exp(-2.2 - 0.11*10) = exp(-3.3) = 0.0368831674; dt = 30
        # S2 = 1 + 0.15 * 0.7408182207 * (1 - 0.0368831674) = 1.1070241747
        # l_hat2 = (2.5 - 1)/2 = 0.75 -> h2 = (0.01 + 0.2*0.75) / S2 = 0.16 / 1.1070241747 = 0.1445316224
        s1, s2 = 1.1109186778966256, 1.1070241747351637
        close(mem.stability, t64(s0, s1, s2))
        close(mem.hazard, t64(0.009872486960942813, 0.18903273855977165, 0.14453162239052025))
        close(mem.log_m_anchor, t64(-0.09872486960942813, 0.0, 0.0))
        assert torch.equal(mem.anchor_step, i64(20, 30, 30)) and torch.equal(mem.last_review, i64(10, 30, 30))

        # lazy log m at 40: [-0.0987248696 - 0.0098724870*20 = -0.2961746088, -0.1890327386*10 = -1.8903273856,
        #                    -0.1445316224*10 = -1.4453162239]
        close(mem.log_strength(step=40), t64(-0.2961746088282844, -1.8903273855977165, -1.4453162239052026))

        mem.update_hazard(step=40)
        # quantiles (0, 1) of [1, 3.25, 2.5]: Q = (1, 3.25); l_hat = [0, 1, 1.5/2.25 = 2/3]
        # h = [0.01/S0, 0.21/S1, (0.01 + 0.2*2/3)/S2 = 0.1433333/1.1070241747 = 0.1294762451]
        close(mem.hazard, t64(0.009872486960942813, 0.18903273855977165, 0.1294762450581744))
        # log m(40) = [h unchanged: -0.2961746088, -1.8903273856; right endpoint: -0.1294762451*10 = -1.2947624506]
        close(mem.log_m_anchor, t64(-0.2961746088282844, -1.8903273855977165, -1.2947624505817439))
        # power weights zeta = 1: p ∝ m^-1 = exp(-log m) = [1.3447049337, 6.6215361218, 3.6501287852] / 11.6163698407
        close(mem.replay_weights(step=40), t64(0.11575948012444062, 0.5700176744215906, 0.3142228454539689))

    def test_never_seen_samples_use_half(self):
        mem = make_memory(3, **SIMPLE)
        mem.observe([0, 1], [1.0, 3.0], step=0)
        mem.update_hazard(step=0)
        # seen: (1-1)/2 = 0, (3-1)/2 = 1; never-seen: 0.5 -> h = [0.01, 0.21, 0.01 + 0.2*0.5 = 0.11]
        close(mem.hazard, t64(0.01, 0.21, 0.11))
        mem.review([2], step=5)  # still never seen: 0.5 in the review's hazard too
        # m = exp(-0.11*5) = 0.5769498104; S = 1 + 0.15 * e^{-0.05} * (1 - 0.5769498104)
        s = 1 + 0.15 * math.exp(-0.05) * (1 - math.exp(-0.55))
        close(mem.hazard[2:], t64(0.11 / s))

    def test_before_first_update_everyone_uses_half(self):
        mem = make_memory(2, **SIMPLE)
        mem.observe([0, 1], [0.0, 100.0], step=0)
        mem.review([0, 1], step=0)  # m = 1 -> no consolidation gain, S stays 1
        # loss_range is None: l_hat = 0.5 for both despite very different losses -> h = 0.11/1
        assert mem.loss_range is None
        close(mem.hazard, t64(0.11, 0.11))

    def test_default_hparams_are_the_papers(self):
        hp = make_memory(0).hparams()
        assert hp == {
            "alpha": 0.01, "gamma_d": 0.2, "phi": "sigmoid", "phi_k": 10.0, "phi_c": 0.5, "phi_p": 2.0,
            "phi_kappa": 10.0, "ema_beta": 0.95, "quantiles": [0.05, 0.95], "eta_s": 0.05, "beta_s": 0.5,
            "rho": 0.01, "gamma_s": 1.0, "s_min": 1.0, "s_max": 10.0, "s_init": 1.0, "sigma_s": 0.0, "zeta": 1.0,
            "weighting": "power", "beta_m": 1.0,
            # not the paper's: the calibrated forgetting model's (used only by weighting="calibrated")
            "calibration_decay": 0.99, "calibration_prior": 0.1,
            "task_gap_weight": 0.0,  # beyond the paper, off: tasks keep a uniform draw's share
        }  # fmt: skip


# ================================================================================================================
# 3. Lemma A.1 (eq:closed_form_app) and the right-endpoint epoch update (eq:epoch_update)
# ================================================================================================================

# Default sigmoid phi with S = 1 and losses [1, 2, 3] (quantiles 0.05/0.95 -> Q = (1.1, 2.9), l_hat = [0, 0.5, 1]):
# h = 0.01 + 0.2*sigmoid(10*(l_hat - 0.5)) = [0.01 + 0.2*0.0066928509 = 0.0113385702, 0.11, 0.01 + 0.2*0.9933071491
# = 0.2086614298]
H_LOW, H_MID, H_HIGH = 0.011338570184856971, 0.11, 0.20866142981514307


class TestClosedForm:
    def _memory(self):
        mem = make_memory(3, ema_beta=0.5)
        mem.observe([0, 1, 2], [1.0, 2.0, 3.0], step=0)
        mem.update_hazard(step=0)
        close(mem.hazard, t64(H_LOW, H_MID, H_HIGH))
        return mem

    def test_constant_hazard_stepwise_equals_closed_form(self):
        stepwise, lazy = self._memory(), self._memory()
        for t in range(1, 51):
            stepwise.update_hazard(step=t)  # m_{t} = m_{t-1} exp(-h), nothing changes h in between
            close(stepwise.hazard, t64(H_LOW, H_MID, H_HIGH))
        manual = [-sum(h for _ in range(50)) for h in (H_LOW, H_MID, H_HIGH)]  # log m = -sum_{tau<50} h
        # closed form: -50 h = [-0.5669285092, -5.5, -10.4330714908]
        close(stepwise.log_strength(step=50), t64(*manual), rtol=1e-12, atol=1e-12)
        close(stepwise.log_strength(step=50), t64(-0.5669285092428486, -5.5, -10.433071490757153), rtol=1e-12)
        close(lazy.log_strength(step=50), stepwise.log_strength(step=50), rtol=1e-12, atol=1e-12)
        lazy.update_hazard(step=50)
        close(lazy.log_strength(), stepwise.log_strength(), rtol=1e-12, atol=1e-12)

    def test_piecewise_constant_hazard(self):
        """The hazard changes once, at step 20 (after that step's update): log m(50) = -(20 h_old + 30 h_new)."""
        stepwise, blocks = self._memory(), self._memory()
        for mem, updates in ((stepwise, range(1, 21)), (blocks, [20])):
            for t in updates:
                mem.update_hazard(step=t)
            # EMA 0.5: [0.5*1 + 0.5*5 = 3, 2, 3] -> sorted [2, 3, 3]: Q_l = 2 + 0.1*1 = 2.1, Q_u = 3 + 0.9*0 = 3
            # l_hat = [(3-2.1)/0.9 = 1, clip(-0.1/0.9) = 0, 1] -> h_new = [H_HIGH, H_LOW, H_HIGH]
            mem.observe([0, 1, 2], [5.0, 2.0, 3.0], step=20)
        for t in range(21, 51):
            stepwise.update_hazard(step=t)
        blocks.update_hazard(step=50)
        close(stepwise.hazard, t64(H_HIGH, H_LOW, H_HIGH))
        # [-(20*0.0113385702 + 30*0.2086614298) = -6.4866142982, -(20*0.11 + 30*0.0113385702) = -2.5401571055,
        #  -50*0.2086614298 = -10.4330714908]
        expected = t64(-6.486614298151432, -2.540157105545709, -10.433071490757153)
        close(stepwise.log_strength(), expected, rtol=1e-12)
        close(blocks.log_strength(), expected, rtol=1e-12)
        manual = t64(*[-(20 * a + 30 * b) for a, b in ((H_LOW, H_HIGH), (H_MID, H_LOW), (H_HIGH, H_HIGH))])
        close(stepwise.log_strength(), manual, rtol=1e-12)

    def test_right_endpoint_when_observe_changes_quantiles_between_updates(self):
        """log m(T_e) = log m(T_{e-1}) - h(T_e) (T_e - T_{e-1}), h(T_e) from the statistics at T_e."""
        mem = self._memory()
        mem.observe([0, 1, 2], [5.0, 2.0, 3.0], step=10)  # mid-epoch: h(20) = [H_HIGH, H_LOW, H_HIGH] (see above)
        close(mem.log_strength(step=20), t64(-20 * H_LOW, -20 * H_MID, -20 * H_HIGH))  # lazy, old hazard
        mem.update_hazard(step=20)
        # [-20*0.2086614298 = -4.1732285963, -20*0.0113385702 = -0.2267714037, -4.1732285963]
        close(mem.log_strength(), t64(-4.173228596302861, -0.2267714036971394, -4.173228596302861))
        # not the step-by-step value -(10 h_old + 10 h_new): the whole epoch uses the right endpoint
        assert mem.log_strength()[0].item() != pytest.approx(-(10 * H_LOW + 10 * H_HIGH))

        mem.observe([0, 1, 2], [1.0, 2.0, 3.0], step=30)
        # EMA [0.5*3 + 0.5*1 = 2, 2, 3] -> sorted [2, 2, 3]: Q_l = 2 + 0.1*0 = 2, Q_u = 2 + 0.9*1 = 2.9
        # l_hat = [0, 0, 1] -> h(40) = [H_LOW, H_LOW, H_HIGH]
        mem.update_hazard(step=40)
        # [-4.1732285963 - 20*0.0113385702 = -4.4, -0.2267714037 - 0.2267714037 = -0.4535428074,
        #  -4.1732285963 - 4.1732285963 = -8.3464571926]
        close(mem.log_strength(), t64(-4.4, -0.4535428073942788, -8.346457192605722))
        assert mem.loss_range == pytest.approx((2.0, 2.9), abs=1e-12)


# ================================================================================================================
# 4. Finite for any elapsed time
# ================================================================================================================


class TestFiniteForAnyElapsedTime:
    HP = dict(alpha=50.0, gamma_d=50.0, s_min=0.01, s_init=0.01, s_max=1.0)  # h between 5000 and 10000

    def _memory(self, **kw):
        mem = make_memory(4, **{**self.HP, **kw})
        mem.observe([0, 1, 2], [1.0, 2.0, 3.0], step=0)
        mem.update_hazard(step=0)
        mem.review([3], step=5)
        return mem

    @pytest.mark.parametrize("step", [10**6, 10**12, 10**15])
    @pytest.mark.parametrize("weighting", ["power", "gain"])
    def test_queries_finite(self, step, weighting):
        mem = self._memory(weighting=weighting)
        log_m = mem.log_strength(step=step)
        assert torch.isfinite(log_m).all()
        assert (log_m < -1000.0).all()  # m far below 1e-300 (exp(-1000) underflows to 0 in float64)
        m = mem.strength(step=step)
        assert (m == 0.0).all()
        p = mem.replay_weights(step=step)
        assert torch.isfinite(p).all() and (p >= 0).all()
        assert p.sum().item() == pytest.approx(1.0, abs=1e-12)
        if weighting == "power":
            # the largest hazard (id 2, l_hat = 1) wins: p = one-hot at 2
            close(p, t64(0.0, 0.0, 1.0, 0.0))
        else:
            # m ~ 0 -> (1-m)^beta_m = 1, p ∝ e^{0.01 dt}, dt = [step, step, step, step - 5]:
            # p = [1, 1, 1, e^{-0.05}] / (3 + e^{-0.05}) = [1, 1, 1, 0.9512294245] / 3.9512294245
            #   = [0.2530857848, 0.2530857848, 0.2530857848, 0.2407426455]
            # (at step 1e12 / 1e15, rho dt ~ 1e10 / 1e13 is only resolved to ~1e-6 / ~2e-3 in float64)
            atol = {10**6: 1e-12, 10**12: 1e-5, 10**15: 5e-3}[step]
            expected = t64(0.2530857848443873, 0.2530857848443873, 0.2530857848443873, 0.24074264546683805)
            close(p, expected, rtol=0, atol=atol)
            assert p[0] == p[1] == p[2] and p[3] < p[0]

    def test_update_and_review_at_huge_steps(self):
        mem = self._memory()
        for step in (10**6, 10**12, 10**15):
            mem.update_hazard(step=step)
            assert torch.isfinite(mem.log_m_anchor).all()
        mem.review([0, 1], step=10**15)
        assert torch.isfinite(mem.stability).all() and torch.isfinite(mem.hazard).all()
        close(mem.strength([0, 1]), t64(1.0, 1.0))
        p = mem.replay_weights()
        assert torch.isfinite(p).all() and p.sum().item() == pytest.approx(1.0, abs=1e-12)

    def test_gain_weight_zero_right_after_review(self):
        mem = make_memory(3, weighting="gain", beta_m=1.0, rho=0.01)
        mem.review([0], step=10)
        log_w = mem.replay_log_weights(step=10)
        assert log_w[0].item() == -INF  # m = 1 -> (1 - 1)^1 = 0
        p = mem.replay_weights(step=10)
        # ids 1, 2: m = exp(-0.01*10), dt = 10: equal weights -> [0, 0.5, 0.5]
        close(p, t64(0.0, 0.5, 0.5))

    def test_gain_all_weights_zero_is_uniform(self):
        mem = make_memory(3, weighting="gain")
        mem.review([0, 1, 2], step=7)
        assert (mem.replay_log_weights() == -INF).all()
        close(mem.replay_weights(), t64(1 / 3, 1 / 3, 1 / 3))

    def test_gain_beta_m_zero(self):
        mem = make_memory(3, weighting="gain", beta_m=0.0, rho=0.01)
        mem.review([0], step=5)
        # (1-m)^0 = 1 for every m: p ∝ e^{0.01 dt}, dt = [0, 5, 5] -> [1, e^0.05, e^0.05] / (1 + 2 e^0.05)
        # = [1/3.1025421928, 1.0512710964/3.1025421928] = [0.3223163257, 0.3388418371, 0.3388418371]
        close(mem.replay_weights(step=5), t64(0.3223163257331788, 0.3388418371334106, 0.3388418371334106))

    def test_absurd_hazard_times_time_stays_finite(self):
        # h = 1e300 / 1e-5 = 1e305 per step, for 1e15 steps: the product overflows float64; log m is clamped.
        mem = make_memory(3, alpha=1e300, s_min=1e-5, s_init=1e-5)
        mem.review([0], step=10**15)
        assert torch.isfinite(mem.log_strength(step=10**15 + 10)).all()
        p = mem.replay_weights(step=10**15 + 10)
        assert torch.isfinite(p).all() and float(p.sum()) == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["s_max", "eta_s", "rho", "sigma_s", "phi_k", "beta_m"])
def test_infinite_hyperparameters_are_refused(name):
    with pytest.raises(ValueError, match=name):
        make_memory(2, **{name: float("inf")})


def test_numpy_integer_steps_are_accepted():
    import numpy as np

    mem = make_memory(2)
    mem.review([0], step=np.int64(3))
    assert mem.clock == 3 and isinstance(mem.clock, int)


def test_observe_with_only_non_finite_losses_advances_the_clock():
    mem = make_memory(2)
    mem.observe([0, 1], [float("nan"), float("inf")], step=4)
    assert mem.clock == 4 and mem.skipped_losses == 2
    with pytest.raises(ValueError, match="earlier than"):
        mem.review([0], step=3)


# ================================================================================================================
# 5. hypothesis properties
# ================================================================================================================

LOSS = st.one_of(st.floats(-5.0, 50.0, allow_nan=False), st.sampled_from([NAN, INF, -INF]))


@st.composite
def hparam_sets(draw, noise=None):
    """Random valid hyperparameters. noise: None (any sigma_s), False (sigma_s = 0) or True (sigma_s > 0)."""
    s_min = draw(st.floats(0.5, 2.0))
    s_max = s_min + draw(st.floats(0.0, 10.0))
    s_init = min(max(s_min + draw(st.floats(0.0, 1.0)) * (s_max - s_min), s_min), s_max)
    if noise is None:
        sigma_s = draw(st.sampled_from([0.0, 0.3, 2.0]))
    else:
        sigma_s = draw(st.floats(0.05, 2.0)) if noise else 0.0
    return dict(
        alpha=draw(st.floats(0.0, 0.1)), gamma_d=draw(st.floats(0.0, 1.0)),
        phi=draw(st.sampled_from(["sigmoid", "identity", "power", "log"])),
        ema_beta=draw(st.floats(0.01, 0.99)),
        quantiles=(draw(st.floats(0.0, 0.45)), draw(st.floats(0.55, 1.0))),
        eta_s=draw(st.floats(0.0, 3.0)), beta_s=draw(st.floats(0.01, 1.0)), rho=draw(st.floats(0.0, 0.1)),
        gamma_s=draw(st.floats(0.0, 3.0)), s_min=s_min, s_max=s_max, s_init=s_init, sigma_s=sigma_s,
        zeta=draw(st.floats(0.0, 3.0)), weighting=draw(st.sampled_from(["power", "gain"])),
        beta_m=draw(st.floats(0.1, 3.0)), seed=draw(st.integers(0, 2**31 - 1)),
    )  # fmt: skip


@st.composite
def op_lists(draw, n, max_ops=20):
    """A sequence of (kind, dt, ...) operations on ids 0..n-1; dt >= 0 is added to the step before the op."""
    ops = []
    for _ in range(draw(st.integers(0, max_ops))):
        kind, dt = draw(st.sampled_from(["observe", "review", "update"])), draw(st.integers(0, 10))
        if kind == "observe":
            ids = draw(st.lists(st.integers(0, n - 1), max_size=6))
            ops.append((kind, dt, ids, draw(st.lists(LOSS, min_size=len(ids), max_size=len(ids)))))
        elif kind == "review":
            ops.append((kind, dt, draw(st.lists(st.integers(0, n - 1), max_size=6))))
        else:
            ops.append((kind, dt))
    return ops


@st.composite
def scenarios(draw, noise=None):
    n = draw(st.integers(1, 6))
    return n, draw(hparam_sets(noise)), draw(op_lists(n))


def apply(mem, op, step):
    step += op[1]
    if op[0] == "observe":
        mem.observe(op[2], op[3], step=step)
    elif op[0] == "review":
        mem.review(op[2], step=step)
    else:
        mem.update_hazard(step=step)
    return step


def run(mem, ops, step=0):
    for op in ops:
        step = apply(mem, op, step)
    return step


class TestProperties:
    @PROP
    @given(scenarios())
    def test_invariants_along_any_sequence(self, scenario):
        """S in [s_min, s_max]; m in (0, 1]; m = 1 right after a review; weights >= 0 summing to 1."""
        n, hp, ops = scenario
        mem, step = make_memory(n, **hp), 0
        for op in ops:
            step = apply(mem, op, step)
            assert (mem.stability >= hp["s_min"]).all() and (mem.stability <= hp["s_max"]).all()
            for query in (step, step + 50):
                m = mem.strength(step=query)
                assert (m > 0).all() and (m <= 1).all()
                p = mem.replay_weights(step=query)
                assert torch.isfinite(p).all() and (p >= 0).all()
                assert p.sum().item() == pytest.approx(1.0, abs=1e-9)
            if op[0] == "review" and op[2]:
                assert (mem.strength(op[2], step=step) == 1.0).all()
        subset = torch.arange(0, n, 2)
        p = mem.replay_weights(subset, step=step + 3)
        assert p.shape == subset.shape and p.sum().item() == pytest.approx(1.0, abs=1e-9)

    @PROP
    @given(scenarios())
    def test_strength_non_increasing_between_reviews(self, scenario):
        """For a fixed state m(t) is non-increasing in t; at update points log m never rises without a review."""
        n, hp, ops = scenario
        mem, step = make_memory(n, **hp), 0
        recorded, last_review = mem.log_strength(step=0), mem.last_review.clone()
        for op in ops:
            step = apply(mem, op, step)
            a, b, c = (mem.log_strength(step=step + d) for d in (0, 3, 40))
            assert (b <= a).all() and (c <= b).all()
            if op[0] == "update":
                now = mem.log_strength()
                unreviewed = mem.last_review == last_review
                assert (now[unreviewed] <= recorded[unreviewed]).all()
                recorded, last_review = now, mem.last_review.clone()

    @PROP
    @given(scenarios(noise=False))
    def test_stability_monotone_under_review_without_noise(self, scenario):
        """sigma_s = 0: every review leaves S >= its previous value; observe / update_hazard leave S unchanged."""
        n, hp, ops = scenario
        mem, step = make_memory(n, **hp), 0
        for op in ops:
            before = mem.stability.clone()
            step = apply(mem, op, step)
            if op[0] == "review":
                assert (mem.stability >= before).all()
            else:
                assert torch.equal(mem.stability, before)

    @PROP
    @given(scenarios(noise=True), st.data())
    def test_state_dict_round_trip_continues_identically(self, scenario, data):
        n, hp, ops = scenario
        more = data.draw(op_lists(n))
        original = make_memory(n, **hp)
        step = run(original, ops)
        restored = make_memory(n + 2, **{**hp, "seed": hp["seed"] + 1})  # other size and seed: all overwritten
        restored.load_state_dict(original.state_dict())
        assert_same_memory(original, restored)
        more = more + [("review", 1, list(range(n)))]  # make sure the generator is used after the restore
        run(original, more, step)
        run(restored, more, step)
        assert_same_memory(original, restored)

    @PROP
    @given(scenarios())
    def test_deterministic_under_seed(self, scenario):
        n, hp, ops = scenario
        a, b = make_memory(n, **hp), make_memory(n, **hp)
        run(a, ops)
        run(b, ops)
        assert_same_memory(a, b)

    def test_different_seeds_differ_with_noise(self):
        hp = dict(s_min=1.0, s_max=10.0, s_init=5.0, sigma_s=0.5)
        a, b = make_memory(8, seed=1, **hp), make_memory(8, seed=2, **hp)
        for mem in (a, b):
            mem.review(range(8), step=3)
        assert not torch.equal(a.stability, b.stability)
        c = make_memory(8, seed=1, **hp)
        c.review(range(8), step=3)
        assert torch.equal(a.stability, c.stability)

    def test_review_deduplicates_noise_draws(self):
        hp = dict(s_init=5.0, sigma_s=0.5, seed=3)
        a, b = make_memory(3, **hp), make_memory(3, **hp)
        a.review([2, 1, 1, 2], step=4)
        b.review([1, 2], step=4)
        assert_same_memory(a, b)


# ================================================================================================================
# 6. extend
# ================================================================================================================


class TestExtend:
    def test_ids_grow_stage_by_stage_and_old_samples_untouched(self):
        mem = make_memory(0, s_init=2.0, s_min=1.0, s_max=10.0, alpha=0.01, ema_beta=0.5)
        assert len(mem) == 0
        assert torch.equal(mem.extend(3, step=0), i64(0, 1, 2))
        mem.observe([0, 1, 2], [1.0, 2.0, 3.0], step=2)
        mem.review([0, 2], step=5)
        mem.update_hazard(step=10)
        before = snapshot(mem)
        loss_range = mem.loss_range

        assert torch.equal(mem.extend(2, step=12), i64(3, 4))
        assert len(mem) == 5
        for name, old in before.items():
            assert torch.equal(getattr(mem, name)[:3], old), name
        assert mem.loss_range == loss_range
        close(mem.stability[3:], t64(2.0, 2.0))  # S = s_init
        close(mem.hazard[3:], t64(0.005, 0.005))  # h = alpha / s_init = 0.01 / 2
        close(mem.log_m_anchor[3:], t64(0.0, 0.0))
        assert torch.equal(mem.anchor_step[3:], i64(12, 12)) and torch.equal(mem.last_review[3:], i64(12, 12))
        assert mem.seen[3:].tolist() == [False, False]
        close(mem.ema_loss[3:], t64(0.0, 0.0))
        # strength at 22: exp(-0.005*10) = exp(-0.05) = 0.9512294245
        close(mem.strength([3, 4], step=22), t64(0.951229424500714, 0.951229424500714))

        assert mem.extend(0, step=12).numel() == 0 and len(mem) == 5
        assert torch.equal(mem.extend(1, step=20), i64(5))
        assert len(mem) == 6 and mem.anchor_step[5].item() == 20

    def test_constructor_extends_at_step_zero(self):
        mem = make_memory(4)
        assert len(mem) == 4 and torch.equal(mem.anchor_step, i64(0, 0, 0, 0))
        for name in STATE_TENSORS:
            assert getattr(mem, name).numel() == 4, name


# ================================================================================================================
# 7. observe
# ================================================================================================================


class TestObserve:
    def test_non_finite_losses_skipped_and_counted(self):
        mem = make_memory(3, ema_beta=0.5)
        skipped = mem.observe([0, 1, 2, 0], [NAN, INF, -INF, 2.0], step=1)
        assert skipped == 3 and mem.skipped_losses == 3
        close(mem.ema_loss, t64(2.0, 0.0, 0.0))
        assert mem.seen.tolist() == [True, False, False]
        # all non-finite: nothing written, counter keeps adding up
        assert mem.observe([0, 1], [NAN, INF], step=2) == 2
        assert mem.skipped_losses == 5
        close(mem.ema_loss, t64(2.0, 0.0, 0.0))
        assert mem.seen.tolist() == [True, False, False]
        # a finite loss afterwards: 0.5*2 + 0.5*4 = 3
        assert mem.observe([0], [4.0], step=3) == 0
        close(mem.ema_loss, t64(3.0, 0.0, 0.0))

    def test_duplicate_ids_are_one_observation_of_the_mean(self):
        mem = make_memory(3, ema_beta=0.5)
        mem.observe([1, 1, 1], [1.0, 2.0, 6.0], step=0)
        close(mem.ema_loss, t64(0.0, 3.0, 0.0))  # first observation: mean (1+2+6)/3 = 3
        mem.observe([1, 1], [2.0, 6.0], step=1)
        # one observation of the mean 4: 0.5*3 + 0.5*4 = 3.5 (two sequential ones would give 0.5*2.5 + 0.5*6 = 4.25)
        close(mem.ema_loss, t64(0.0, 3.5, 0.0))
        mem.observe([1, 1, 2], [4.0, NAN, 5.0], step=2)
        # only the finite loss of id 1 counts: 0.5*3.5 + 0.5*4 = 3.75; id 2 first observation 5
        close(mem.ema_loss, t64(0.0, 3.75, 5.0))
        assert mem.skipped_losses == 1

    def test_accepts_tensors_and_leaves_other_state_alone(self):
        mem = make_memory(3)
        before = snapshot(mem)
        mem.observe(torch.tensor([2, 0]), torch.tensor([1.5, 0.5], dtype=torch.float32), step=4)
        close(mem.ema_loss, t64(0.5, 0.0, 1.5))
        for name in ("stability", "hazard", "anchor_step", "log_m_anchor", "last_review"):
            assert torch.equal(getattr(mem, name), before[name]), name

    def test_empty_observe(self):
        mem = make_memory(2)
        assert mem.observe([], [], step=0) == 0
        assert not mem.seen.any()


# ================================================================================================================
# 8. state_dict
# ================================================================================================================


def _check_types(obj, path="state"):
    if isinstance(obj, dict):
        for key, value in obj.items():
            assert type(key) is str, f"{path}: key {key!r}"
            _check_types(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            _check_types(value, f"{path}[{i}]")
    else:
        assert type(obj) is torch.Tensor or type(obj) in (int, float, str, bool, type(None)), (path, type(obj))


def _split(obj, path, tensors):
    """Tensors go to ``tensors`` (for safetensors), the rest stays as a JSON-able skeleton."""
    if isinstance(obj, torch.Tensor):
        tensors[path] = obj.contiguous()
        return {"__tensor__": path}
    if isinstance(obj, dict):
        return {k: _split(v, f"{path}/{k}", tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_split(v, f"{path}/{i}", tensors) for i, v in enumerate(obj)]
    return obj


def _join(obj, tensors):
    if isinstance(obj, dict):
        if set(obj) == {"__tensor__"}:
            return tensors[obj["__tensor__"]]
        return {k: _join(v, tensors) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_join(v, tensors) for v in obj]
    return obj


def _assert_states_equal(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), path
    elif isinstance(a, dict):
        assert set(a) == set(b), path
        for key in a:
            _assert_states_equal(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_states_equal(x, y, f"{path}[{i}]")
    else:
        assert type(a) is type(b) and a == b, path


def _busy_memory(**kw):
    mem = make_memory(5, sigma_s=0.3, s_init=3.0, **kw)
    mem.observe([0, 1, 2, 3], [1.0, NAN, 3.0, 0.5], step=1)
    mem.update_hazard(step=4)
    mem.review([1, 3], step=6)
    return mem


class TestStateDict:
    def test_only_plain_types(self):
        for mem in (make_memory(0), make_memory(3), _busy_memory()):
            state = mem.state_dict()
            _check_types(state)
        assert make_memory(2).state_dict()["loss_range"] is None
        assert _busy_memory().state_dict()["loss_range"] is not None

    def test_state_dict_is_a_copy(self):
        mem = _busy_memory()
        state = mem.state_dict()
        state["stability"].fill_(123.0)
        assert (mem.stability != 123.0).all()
        other = make_memory(5, sigma_s=0.3, s_init=3.0)
        other.load_state_dict(mem.state_dict())
        other.stability.fill_(7.0)
        assert (mem.stability != 7.0).all()

    def test_safetensors_and_json_round_trip(self, tmp_path):
        mem = _busy_memory()
        state = mem.state_dict()
        tensors = {}
        skeleton = _split(state, "state", tensors)
        save_file(tensors, str(tmp_path / "memory.safetensors"))
        (tmp_path / "memory.json").write_text(json.dumps(skeleton))

        skeleton = json.loads((tmp_path / "memory.json").read_text())
        loaded = _join(skeleton, load_file(str(tmp_path / "memory.safetensors")))
        _assert_states_equal(state, loaded)
        fresh = make_memory(0, sigma_s=0.3, s_init=3.0)
        fresh.load_state_dict(loaded)
        assert_same_memory(mem, fresh)
        _assert_states_equal(fresh.state_dict(), state)
        # and both continue identically (the noise generator included)
        for m in (mem, fresh):
            m.observe([4, 0], [2.0, 1.0], step=7)
            m.update_hazard(step=9)
            m.review([0, 1, 2, 3, 4], step=12)
        assert_same_memory(mem, fresh)

    def test_strict_hparam_mismatch(self):
        state = _busy_memory().state_dict()
        with pytest.raises(ValueError, match="alpha"):
            make_memory(0, sigma_s=0.3, s_init=3.0, alpha=0.02).load_state_dict(state)
        with pytest.raises(ValueError, match="quantiles"):
            make_memory(0, sigma_s=0.3, s_init=3.0, quantiles=(0.1, 0.9)).load_state_dict(state)
        with pytest.raises(ValueError, match="phi"):
            make_memory(0, sigma_s=0.3, s_init=3.0, phi="log").load_state_dict(state)

    def test_non_strict_loads_state_keeps_own_hparams(self):
        source = _busy_memory()
        target = make_memory(0, sigma_s=0.3, s_init=3.0, alpha=0.02)
        target.load_state_dict(source.state_dict(), strict=False)
        assert target.alpha == 0.02
        for name in STATE_TENSORS:
            assert torch.equal(getattr(target, name), getattr(source, name)), name
        assert (target.clock, target.loss_range) == (source.clock, source.loss_range)

    def test_inconsistent_lengths_rejected(self):
        state = _busy_memory().state_dict()
        state["hazard"] = state["hazard"][:2]
        with pytest.raises(ValueError, match="hazard"):
            make_memory(0, sigma_s=0.3, s_init=3.0).load_state_dict(state)


# ================================================================================================================
# 9. Bad inputs: ValueError naming the argument
# ================================================================================================================


class TestBadInputs:
    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"s_min": 5.0, "s_max": 2.0, "s_init": 3.0}, "s_min.*s_max"),
            ({"s_init": 0.5}, "s_init"),
            ({"s_init": 11.0}, "s_init"),
            ({"s_min": 0.0, "s_init": 1.0}, "s_min"),
            ({"quantiles": (0.5, 0.5)}, "quantiles"),
            ({"quantiles": (0.9, 0.1)}, "quantiles"),
            ({"quantiles": (-0.1, 0.9)}, "quantiles"),
            ({"quantiles": (0.1, 1.5)}, "quantiles"),
            ({"quantiles": (0.1,)}, "quantiles"),
            ({"quantiles": (0.1, 0.5, 0.9)}, "quantiles"),
            ({"zeta": -0.1}, "zeta"),
            ({"zeta": NAN}, "zeta"),
            ({"ema_beta": 0.0}, "ema_beta"),
            ({"ema_beta": 1.0}, "ema_beta"),
            ({"ema_beta": 1.5}, "ema_beta"),
            ({"ema_beta": -0.5}, "ema_beta"),
            ({"phi": "tanh"}, "phi"),
            ({"weighting": "uniform"}, "weighting"),
            ({"alpha": -0.01}, "alpha"),
            ({"alpha": NAN}, "alpha"),
            ({"gamma_d": -0.1}, "gamma_d"),
            ({"beta_s": 0.0}, "beta_s"),
            ({"beta_s": 1.5}, "beta_s"),
            ({"beta_s": -1.0}, "beta_s"),
            ({"eta_s": -0.05}, "eta_s"),
            ({"rho": -0.01}, "rho"),
            ({"gamma_s": -1.0}, "gamma_s"),
            ({"sigma_s": -0.1}, "sigma_s"),
            ({"beta_m": -1.0}, "beta_m"),
            ({"phi_k": 0.0}, "phi_k"),
            ({"phi_p": -2.0}, "phi_p"),
            ({"phi_kappa": 0.0}, "phi_kappa"),
        ],
    )
    def test_bad_hparams(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            make_memory(2, **kwargs)

    def test_good_edge_hparams_accepted(self):
        make_memory(1, beta_s=1.0, quantiles=(0.0, 1.0), zeta=0.0, alpha=0.0, s_min=2.0, s_max=2.0, s_init=2.0)

    def test_negative_num_samples(self):
        with pytest.raises(ValueError, match="num_samples"):
            make_memory(-1)

    @pytest.mark.parametrize("n", [-1, 1.5, "3"])
    def test_extend_bad_n(self, n):
        with pytest.raises(ValueError, match=r"\bn must"):
            make_memory(2).extend(n, step=0)

    @pytest.mark.parametrize("bad_id", [-1, 3, 100])
    def test_ids_out_of_range(self, bad_id):
        mem = make_memory(3)
        pattern = rf"ids must lie in \[0, 3\).*got {bad_id}"
        with pytest.raises(ValueError, match=pattern):
            mem.observe([0, bad_id], [1.0, 1.0], step=0)
        with pytest.raises(ValueError, match=pattern):
            mem.review([bad_id], step=0)
        with pytest.raises(ValueError, match=pattern):
            mem.strength([bad_id])
        with pytest.raises(ValueError, match=pattern):
            mem.replay_weights([1, bad_id])
        assert not mem.seen.any() and mem.clock == 0  # nothing was written

    def test_mismatched_ids_and_losses(self):
        mem = make_memory(3)
        with pytest.raises(ValueError, match="ids and losses"):
            mem.observe([0, 1], [1.0], step=0)
        with pytest.raises(ValueError, match="ids and losses"):
            mem.observe([0], [1.0, 2.0, 3.0], step=0)

    def test_negative_step(self):
        mem = make_memory(3)
        for call in (
            lambda: mem.observe([0], [1.0], step=-1),
            lambda: mem.review([0], step=-1),
            lambda: mem.update_hazard(step=-5),
            lambda: mem.extend(1, step=-3),
            lambda: mem.strength(step=-1),
        ):
            with pytest.raises(ValueError, match=r"step must be >= 0"):
                call()

    def test_step_earlier_than_latest_update(self):
        mem = make_memory(3)
        mem.update_hazard(step=10)
        for call in (
            lambda: mem.observe([0], [1.0], step=5),
            lambda: mem.review([0], step=9),
            lambda: mem.update_hazard(step=9),
            lambda: mem.extend(1, step=3),
            lambda: mem.log_strength(step=2),
            lambda: mem.replay_weights(step=0),
        ):
            with pytest.raises(ValueError, match=r"step=\d+ is earlier"):
                call()
        mem.update_hazard(step=10)  # the same step is fine
        assert len(mem) == 3 and mem.clock == 10


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), LOSS), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 9), LOSS), min_size=1, max_size=12),
    st.floats(0.0, 0.5),
)
def test_expose_equals_observe_then_review_of_finite(first, second, sigma):
    """expose() is observe() followed by review() of the ids whose loss was finite, state for state."""
    a, b = make_memory(10, sigma_s=sigma, seed=3), make_memory(10, sigma_s=sigma, seed=3)
    for step, batch in ((2, first), (9, second)):
        ids = torch.tensor([i for i, _ in batch])
        losses = torch.tensor([v for _, v in batch], dtype=torch.float64)
        assert a.expose(ids, losses, step) == b.observe(ids, losses, step)
        b.review(ids[torch.isfinite(losses)], step)
        a.update_hazard(step + 1)
        b.update_hazard(step + 1)
    for key, value in a.state_dict().items():
        other = b.state_dict()[key]
        assert torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other, key
