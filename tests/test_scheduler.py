"""Tests for ``mssr_hf.scheduler``: replay timing, ratio, selection and the replay strategies.

The pinned semantics are DESIGN.md section 4; equations are cited by their ``\\label{}`` in the paper's source
(``eq:interval_expand``, ``eq:ratio_decay_appendix``, ``eq:prob_weight``, ``eq:tau_star``). Expected values are
worked out by hand in the comments (or by an independent transcription of the formula), not by the code under test.

"""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

import pytest
import torch
from conftest import make_memory
from conftest import make_strategy as build
from hypothesis import given, settings
from hypothesis import strategies as st

from mssr_hf.memory import SampleMemory
from mssr_hf.scheduler import (
    STRATEGY_NAMES,
    AccuracyTriggeredReplay,
    IntervalReplay,
    LossTriggeredReplay,
    NoReplay,
    ReplaySignals,
    ReplayStrategy,
    ThresholdReplay,
    draw_buffer,
    interval_steps,
    replay_ratio,
    replay_times,
    uniform_choice,
    weighted_choice,
)
from mssr_hf.state_io import load_state, save_state

HYP = settings(max_examples=50, deadline=None)
ALL_NAMES = ("none", "fixed", "loss", "accuracy", "mssr_sch", "mssr_spl", "mssr_full")


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def plans(strategy, steps, memory=None) -> dict[int, float]:
    """{step: ratio} of the steps (in order) that replay."""
    out = {}
    for step in steps:
        ratio = strategy.plan(step, memory)
        if ratio:
            out[step] = ratio
    return out


def ratio(step: int, lambda0: float = 0.3, lambda_min: float = 0.05, beta_r: float = 1e-5) -> float:
    """Hand-written eq:ratio_decay_appendix (independent of the module): lambda_min + (lambda0-lambda_min) e^{-b t}."""
    return lambda_min + (lambda0 - lambda_min) * math.exp(-beta_r * step)


def decayed_memory(n: int = 20, review_step: int = 500) -> SampleMemory:
    """n samples added at step 0; the first half reviewed at ``review_step`` (m = 1 there), the second half never
    reviewed: h = alpha / s_init = 0.01, so m = e^{-0.01 * 500} = e^{-5} ~ 0.0067 at step 500."""
    memory = make_memory(n)
    memory.review(torch.arange(n // 2), review_step)
    return memory


# ================================================================================================================
# 1. interval_steps (eq:interval_expand)
# ================================================================================================================


def test_interval_steps_defaults_hand_computed():
    # t1 = D1 = 100
    # D2 = 100    * (1 + 0.5 e^-0.05) = 100    * 1.475615 = 147.5615 -> t2 = 247.5615 -> 248
    # D3 = 147.56 * (1 + 0.5 e^-0.10) = 147.56 * 1.452419 = 214.3218 -> t3 = 461.8833 -> 462
    # D4 = 214.32 * (1 + 0.5 e^-0.15) = 214.32 * 1.430354 = 306.5561 -> t4 = 768.4394 -> 768
    # D5 = 306.56 * (1 + 0.5 e^-0.20) = 306.56 * 1.409365 = 432.0496 -> t5 = 1200.489 -> 1200
    # D6 = 432.05 * (1 + 0.5 e^-0.25) = 432.05 * 1.389400 = 600.2898 -> t6 = 1800.779 -> 1801
    # D7 = 600.29 * (1 + 0.5 e^-0.30) = 600.29 * 1.370409 = 822.6428 -> t7 = 2623.4   >= 2000: cut
    assert interval_steps() == [100, 248, 462, 768, 1200, 1801]
    assert interval_steps(100, 0.5, 0.05, 2000) == [100, 248, 462, 768, 1200, 1801]


def test_interval_steps_round_half_up():
    # eta_p = 0: D = 2.5 throughout; t = 2.5, 5.0, 7.5, 10.0 (exact in binary) -> 3, 5, 8, 10.
    # Python's round() (half to even) would give 2, 5, 8, 10: 2.5 must go *up*.
    assert interval_steps(2.5, eta_p=0.0, rho_p=0.05, horizon=11) == [3, 5, 8, 10]
    # rho_p = 0: D_{k+1} = 1.5 D_k, all exact binary fractions:
    # D = 1, 1.5, 2.25, 3.375, 5.0625 -> t = 1, 2.5, 4.75, 8.125, 13.1875 -> 1, 3, 5, 8, 13 (2.5 -> 3, not 2)
    assert interval_steps(1, eta_p=0.5, rho_p=0.0, horizon=20) == [1, 3, 5, 8, 13]


def test_interval_steps_horizon_is_exclusive():
    # defaults: 248 and 1801 are replay steps; a horizon equal to a step drops it, one more keeps it.
    assert interval_steps(horizon=248) == [100]
    assert interval_steps(horizon=249) == [100, 248]
    assert interval_steps(horizon=1801) == [100, 248, 462, 768, 1200]
    assert interval_steps(horizon=1802) == [100, 248, 462, 768, 1200, 1801]
    assert interval_steps(horizon=100) == []
    assert interval_steps(horizon=0) == []


def test_interval_steps_eta_zero_is_fixed_grid():
    # eta_p = 0: D_{k+1} = D_k (1 + 0) = D_1, so t_k = k * D_1.
    assert interval_steps(7, eta_p=0.0, rho_p=0.3, horizon=50) == [7, 14, 21, 28, 35, 42, 49]
    assert interval_steps(100, eta_p=0.0, horizon=2000) == list(range(100, 2000, 100))


def _reference_times(first_interval, eta_p, rho_p, horizon):
    """Independent transcription of DESIGN 4: unrounded (t_k, D_k) with round-half-up(t_k) < horizon."""
    out, t, d, k = [], first_interval, first_interval, 1
    while math.floor(t + 0.5) < horizon:
        out.append((t, d))
        d = d * (1 + eta_p * math.exp(-rho_p * k))
        t, k = t + d, k + 1
    return out


@HYP
@given(
    first_interval=st.floats(1.0, 300.0),
    eta_p=st.floats(0.0, 2.0),
    rho_p=st.floats(0.0, 1.0),
    horizon=st.integers(1, 5000),
)
def test_interval_steps_properties(first_interval, eta_p, rho_p, horizon):
    times = interval_steps(first_interval, eta_p, rho_p, horizon)
    ref = _reference_times(first_interval, eta_p, rho_p, horizon)
    assert times == [math.floor(t + 0.5) for t, _ in ref]
    assert all(1 <= t < horizon for t in times)
    # strictly increasing (every interval is >= first_interval >= 1)
    assert all(b > a for a, b in zip(times, times[1:]))
    # the (unrounded) intervals never shrink ...
    deltas = [d for _, d in ref]
    assert all(b >= a for a, b in zip(deltas, deltas[1:]))
    # ... so the rounded ones never shrink by more than the rounding jitter (|round(t) - t| <= 1/2 twice -> < 2)
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(b >= a - 1 for a, b in zip(gaps, gaps[1:]))
    # the first interval is exactly first_interval (rounded)
    if times:
        assert times[0] == math.floor(first_interval + 0.5)


@HYP
@given(
    first_interval=st.floats(1.0, 200.0),
    eta_p=st.floats(0.0, 1.5),
    rho_p=st.floats(0.0, 0.5),
    horizon=st.integers(0, 3000),
)
def test_interval_steps_horizon_only_cuts(first_interval, eta_p, rho_p, horizon):
    long = interval_steps(first_interval, eta_p, rho_p, horizon + 5000)
    assert interval_steps(first_interval, eta_p, rho_p, horizon) == [t for t in long if t < horizon]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(first_interval=0), "first_interval"),
        (dict(first_interval=-5), "first_interval"),
        (dict(first_interval=float("nan")), "first_interval"),
        (dict(eta_p=-0.1), "eta_p"),
        (dict(rho_p=-0.01), "rho_p"),
    ],
)
def test_interval_steps_bad_inputs(kwargs, name):
    with pytest.raises(ValueError, match=name):
        interval_steps(**kwargs)


# ================================================================================================================
# 2. replay_ratio (eq:ratio_decay_appendix)
# ================================================================================================================


def test_replay_ratio_hand_computed():
    # step 0: 0.05 + 0.25 e^0 = 0.3 = lambda0 (the appendix form is bounded by lambda0; the main-text form
    # lambda0 e^{-bt} + lambda_min would give 0.35 here)
    assert replay_ratio(0) == pytest.approx(0.3, abs=1e-15)
    # step 1e5, beta_r 1e-5: 0.05 + 0.25 e^{-1} = 0.05 + 0.25 * 0.36787944117 = 0.14196986029
    assert replay_ratio(100_000) == pytest.approx(0.14196986029, abs=1e-10)
    # step 2000, beta_r 1e-3: 0.05 + 0.25 e^{-2} = 0.05 + 0.25 * 0.13533528324 = 0.08383382081
    assert replay_ratio(2000, beta_r=1e-3) == pytest.approx(0.08383382081, abs=1e-10)
    # custom lambdas, step 10, beta_r 0.1: 0.1 + (0.5 - 0.1) e^{-1} = 0.1 + 0.4 * 0.36787944117 = 0.24715177647
    assert replay_ratio(10, lambda0=0.5, lambda_min=0.1, beta_r=0.1) == pytest.approx(0.24715177647, abs=1e-10)
    # large step -> lambda_min (0.25 e^{-100} ~ 1e-44)
    assert replay_ratio(10_000_000) == pytest.approx(0.05, abs=1e-15)
    # beta_r = 0: constant lambda0
    assert replay_ratio(123_456, beta_r=0.0) == pytest.approx(0.3, abs=1e-15)


@HYP
@given(
    lambda0=st.floats(0.0, 1.0),
    frac=st.floats(0.0, 1.0),
    beta_r=st.floats(0.0, 1e-2),
    s1=st.integers(0, 10**7),
    s2=st.integers(0, 10**7),
)
def test_replay_ratio_bounded_and_non_increasing(lambda0, frac, beta_r, s1, s2):
    lambda_min = lambda0 * frac
    lo, hi = sorted((s1, s2))
    r_lo, r_hi = replay_ratio(lo, lambda0, lambda_min, beta_r), replay_ratio(hi, lambda0, lambda_min, beta_r)
    eps = 1e-12
    for r in (r_lo, r_hi):
        assert lambda_min - eps <= r <= lambda0 + eps
    assert r_hi <= r_lo + eps


# ================================================================================================================
# 3. replay_times (tab:scheduler_variants)
# ================================================================================================================


def test_replay_times_expanding_is_interval_steps():
    assert replay_times("expanding", 2000) == [100, 248, 462, 768, 1200, 1801]
    assert replay_times("expanding", 20, first_interval=1, eta_p=0.5, rho_p=0.0) == [1, 3, 5, 8, 13]


def test_replay_times_fixed():
    assert replay_times("fixed", 10, first_interval=3) == [3, 6, 9]
    assert replay_times("fixed", 9, first_interval=3) == [3, 6]  # 9 is not < 9
    assert replay_times("fixed", 301, first_interval=100) == [100, 200, 300]
    assert replay_times("fixed", 5, first_interval=1) == [1, 2, 3, 4]
    assert replay_times("fixed", 10, first_interval=2.5) == [3, 6, 9]  # interval rounded half up: 2.5 -> 3
    with pytest.raises(ValueError):
        replay_times("fixed", 10, first_interval=0.5)


def test_replay_times_geometric():
    # 2^k - 1: 1, 3, 7, 15, 31, 63, 127, ...
    assert replay_times("geometric", 100) == [1, 3, 7, 15, 31, 63]
    assert replay_times("geometric", 128) == [1, 3, 7, 15, 31, 63, 127]
    assert replay_times("geometric", 127) == [1, 3, 7, 15, 31, 63]
    # unit 10: 10, 30, 70, 150, 310 (>= 301: cut)
    assert replay_times("geometric", 301, interval_unit=10) == [10, 30, 70, 150]
    assert replay_times("geometric", 2) == [1]
    assert replay_times("geometric", 1) == []


def test_replay_times_ebbinghaus():
    # 1, 2, 4, 7, 15, 30, then doubling: 60, 120, 240, ...
    assert replay_times("ebbinghaus", 200) == [1, 2, 4, 7, 15, 30, 60, 120]
    assert replay_times("ebbinghaus", 241) == [1, 2, 4, 7, 15, 30, 60, 120, 240]
    # unit 10: 10, 20, 40, 70, 150, 300, 600
    assert replay_times("ebbinghaus", 601, interval_unit=10) == [10, 20, 40, 70, 150, 300, 600]
    assert replay_times("ebbinghaus", 16, interval_unit=1) == [1, 2, 4, 7, 15]
    assert replay_times("ebbinghaus", 5, interval_unit=1) == [1, 2, 4]


def test_replay_times_explicit_list():
    assert replay_times([30, 5, 5, 12, 99, 100, 250], 100) == [5, 12, 30, 99]  # sorted, deduplicated, < horizon
    assert replay_times((3, 1, 2), 10) == [1, 2, 3]
    assert replay_times([], 10) == []
    for bad in ([0, 5], [5, -3], [-1]):
        with pytest.raises(ValueError):
            replay_times(bad, 100)


@pytest.mark.parametrize("pattern", ["spiral", "", "Fixed", "threshold"])
def test_replay_times_unknown_pattern(pattern):
    with pytest.raises(ValueError, match="pattern"):
        replay_times(pattern, 100)


def test_replay_times_bad_unit():
    with pytest.raises(ValueError, match="interval_unit"):
        replay_times("geometric", 100, interval_unit=0)


# ================================================================================================================
# 4. uniform_choice / weighted_choice (Gumbel-top-k on eq:prob_weight)
# ================================================================================================================


def _check_choice(out: torch.Tensor, candidates: torch.Tensor, k: int) -> None:
    assert out.numel() == min(k, candidates.numel())
    assert len(set(out.tolist())) == out.numel()
    assert set(out.tolist()) <= set(candidates.tolist())


@HYP
@given(n=st.integers(0, 40), k=st.integers(0, 50), seed=st.integers(0, 2**31), log_scale=st.floats(0.0, 50.0))
def test_choices_distinct_subset_count(n, k, seed, log_scale):
    candidates = torch.arange(100, 100 + 3 * n, 3)  # ids that are not positions
    _check_choice(uniform_choice(candidates, k, gen(seed)), candidates, k)
    log_w = torch.randn(n, generator=gen(seed + 1), dtype=torch.float64) * log_scale
    _check_choice(weighted_choice(candidates, log_w, k, gen(seed)), candidates, k)


@pytest.mark.parametrize("which", ["uniform", "weighted"])
def test_choices_seeded_determinism(which):
    candidates = torch.arange(50)
    log_w = torch.linspace(-2.0, 2.0, 50, dtype=torch.float64)

    def draw(seed):
        if which == "uniform":
            return uniform_choice(candidates, 10, gen(seed))
        return weighted_choice(candidates, log_w, 10, gen(seed))

    assert torch.equal(draw(0), draw(0))
    assert torch.equal(draw(7), draw(7))
    assert not torch.equal(draw(0), draw(1))


def _first_pick_counts(log_w: torch.Tensor, draws: int, seed: int = 0) -> torch.Tensor:
    g = gen(seed)
    candidates = torch.arange(log_w.numel())
    counts = torch.zeros(log_w.numel())
    for _ in range(draws):
        counts[weighted_choice(candidates, log_w, 1, g)] += 1
    return counts


def _chi2(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_weighted_choice_frequencies_match_weights():
    # weights 1:2:3:4 -> p = .1 .2 .3 .4; 4000 draws -> expected 400, 800, 1200, 1600.
    # chi-square with 3 dof: P(chi2 > 16.27) = 0.001.
    log_w = torch.log(torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64))
    counts = _first_pick_counts(log_w, 4000)
    assert _chi2(counts, torch.tensor([0.1, 0.2, 0.3, 0.4])) < 16.27
    # and it is not uniform (chi2 against uniform would be ~ 800 here)
    assert _chi2(counts, torch.full((4,), 0.25)) > 100


def test_uniform_choice_frequencies_are_uniform():
    g = gen(3)
    counts = torch.zeros(5)
    for _ in range(3000):
        counts[uniform_choice(torch.arange(5), 1, g)] += 1
    assert _chi2(counts, torch.full((5,), 0.2)) < 18.47  # 4 dof, p = 0.001


def test_weighted_choice_with_k_greater_than_one_prefers_heavy():
    # p = (1, 1, 1, 97)/100 -> id 3 is in almost every draw of 2
    log_w = torch.log(torch.tensor([1.0, 1.0, 1.0, 97.0], dtype=torch.float64))
    g = gen(0)
    hits = sum(3 in weighted_choice(torch.arange(4), log_w, 2, g).tolist() for _ in range(500))
    assert hits >= 490


def test_weighted_choice_minus_inf_never_picked_while_finite_remain():
    ninf = float("-inf")
    log_w = torch.tensor([ninf, 0.0, ninf, 3.0, -2.0, ninf], dtype=torch.float64)
    candidates = torch.tensor([10, 11, 12, 13, 14, 15])
    for seed in range(200):
        assert set(weighted_choice(candidates, log_w, 3, gen(seed)).tolist()) == {11, 13, 14}
        assert set(weighted_choice(candidates, log_w, 1, gen(seed)).tolist()) <= {11, 13, 14}
        out = weighted_choice(candidates, log_w, 4, gen(seed)).tolist()
        assert {11, 13, 14} <= set(out) and len(set(out)) == 4
    # all -inf: still min(k, n) distinct candidates
    all_ninf = torch.full((6,), ninf, dtype=torch.float64)
    _check_choice(weighted_choice(candidates, all_ninf, 4, gen(0)), candidates, 4)


def test_weighted_choice_huge_magnitudes():
    # shifting all log-weights by +-1e6 does not change p; 1e6 vs -1e6 is certainty
    for shift in (1e6, -1e6):
        log_w = torch.tensor([shift, shift + math.log(3.0)], dtype=torch.float64)
        counts = _first_pick_counts(log_w, 2000, seed=1)
        assert _chi2(counts, torch.tensor([0.25, 0.75])) < 10.83  # 1 dof, p = 0.001
    log_w = torch.tensor([-1e6, 1e6, 0.0, -1e6], dtype=torch.float64)
    g = gen(0)
    for _ in range(200):
        out = weighted_choice(torch.arange(4), log_w, 2, g)
        assert out.tolist() == [1, 2]
    out = weighted_choice(torch.arange(4), log_w, 4, gen(0))
    assert sorted(out.tolist()) == [0, 1, 2, 3]


@pytest.mark.parametrize("shape", [(3,), (5, 1), (1, 4)])
def test_weighted_choice_shape_mismatch(shape):
    with pytest.raises(ValueError, match="log_weights"):
        weighted_choice(torch.arange(4), torch.zeros(shape, dtype=torch.float64), 2, gen(0))


def test_zeta_zero_gives_uniform_weights():
    memory = make_memory(10, zeta=0.0)
    memory.review(torch.arange(5), 400)  # ids 0..4: m = 1; ids 5..9: m = e^{-4}
    ids = torch.arange(10)
    assert torch.all(memory.replay_log_weights(ids, 400) == 0)
    assert torch.allclose(memory.replay_weights(ids, 400), torch.full((10,), 0.1, dtype=torch.float64))
    # so the weighted strategy picks the decayed half about half of the time
    strategy = build("mssr_full")
    g = gen(0)
    decayed = sum(int(strategy.select(ids, 1, 400, memory, g).item() >= 5) for _ in range(2000))
    assert 900 <= decayed <= 1100  # binomial(2000, 1/2): sd 22


# ================================================================================================================
# 5. draw_buffer with the staleness cap (tab:replay_impl_params)
# ================================================================================================================


def _staleness_memory() -> SampleMemory:
    """10 samples added at step 0; last reviews: id 2 @5, id 1 @20, id 0 @30, id 3 @40, ids 4..9 @90.
    At step 100 they have gone unreviewed for 70, 80, 95, 60, 10, ..., 10 steps."""
    memory = make_memory(10)
    for ids, step in (([2], 5), ([1], 20), ([0], 30), ([3], 40), (list(range(4, 10)), 90)):
        memory.review(ids, step)
    return memory


@pytest.mark.parametrize("name", ["fixed", "mssr_sch", "mssr_full"])
def test_draw_buffer_staleness_first(name):
    memory, strategy, bank = _staleness_memory(), build(name), torch.arange(10)
    # cap 60: stale are those with > 60 steps: id 2 (95), id 1 (80), id 0 (70); id 3 (exactly 60) is not
    for seed in range(20):
        out = draw_buffer(bank, 6, strategy, memory, 100, gen(seed), staleness_cap=60)
        assert out[:3].tolist() == [2, 1, 0]  # longest-unreviewed first
        assert set(out[3:].tolist()) <= set(range(3, 10))
        _check_choice(out, bank, 6)
    # buffer smaller than the stale set: the longest-unreviewed ones only
    assert draw_buffer(bank, 2, strategy, memory, 100, gen(0), staleness_cap=60).tolist() == [2, 1]
    assert draw_buffer(bank, 3, strategy, memory, 100, gen(0), staleness_cap=60).tolist() == [2, 1, 0]
    # the filling part is the strategy's select on the non-stale rest with the same generator
    out = draw_buffer(bank, 6, strategy, memory, 100, gen(5), staleness_cap=60)
    rest = strategy.select(torch.arange(3, 10), 3, 100, memory, gen(5))
    assert out[3:].tolist() == rest.tolist()


@pytest.mark.parametrize("name", ["fixed", "mssr_sch", "mssr_spl", "mssr_full"])
def test_draw_buffer_cap_zero_or_nothing_stale_is_select(name):
    memory, strategy, bank = _staleness_memory(), build(name), torch.arange(10)
    for seed in range(5):
        expected = strategy.select(bank, 4, 100, memory, gen(seed))
        assert torch.equal(draw_buffer(bank, 4, strategy, memory, 100, gen(seed), staleness_cap=0), expected)
        # cap 100: nobody has gone > 100 steps unreviewed
        assert torch.equal(draw_buffer(bank, 4, strategy, memory, 100, gen(seed), staleness_cap=100), expected)
    if name in ("fixed", "mssr_sch"):  # uniform strategies need no memory; the cap needs one and is skipped
        expected = strategy.select(bank, 4, 100, None, gen(0))
        assert torch.equal(draw_buffer(bank, 4, strategy, None, 100, gen(0), staleness_cap=60), expected)


@pytest.mark.parametrize("name", ["fixed", "mssr_full"])
@pytest.mark.parametrize("cap", [0, 60])
def test_draw_buffer_larger_than_bank(name, cap):
    memory, strategy = _staleness_memory(), build(name)
    bank = torch.tensor([9, 7, 5, 3, 1, 0, 2])
    out = draw_buffer(bank, 1024, strategy, memory, 100, gen(0), staleness_cap=cap)
    assert sorted(out.tolist()) == sorted(bank.tolist())
    empty = draw_buffer(bank[:0], 1024, strategy, memory, 100, gen(0), staleness_cap=cap)
    assert empty.numel() == 0


def test_draw_buffer_weighted_prefers_decayed():
    memory, bank = decayed_memory(20), torch.arange(20)
    out = draw_buffer(bank, 5, build("mssr_full"), memory, 500, gen(0))
    assert (out >= 10).sum() >= 4


# ================================================================================================================
# 6. The strategies
# ================================================================================================================

BANK = torch.arange(8)


def _expanding_defaults_300():
    # interval_steps(100, 0.5, 0.05) below 301: t1 = 100, t2 = 248 (t3 = 462 is past the stage)
    return [100, 248]


@pytest.mark.parametrize(
    "name, kwargs, expected",
    [
        ("none", {}, {}),
        ("fixed", dict(fixed_interval=100), {t: 0.3 for t in (100, 200, 300)}),
        ("fixed", dict(fixed_interval=70, lambda0=0.2), {t: 0.2 for t in (70, 140, 210, 280)}),
        ("mssr_spl", dict(first_interval=100), {t: 0.3 for t in (100, 200, 300)}),
        ("mssr_spl", dict(first_interval=60, fixed_interval=7), {t: 0.3 for t in (60, 120, 180, 240, 300)}),
        ("mssr_sch", {}, {t: ratio(t) for t in _expanding_defaults_300()}),
        ("mssr_full", {}, {t: ratio(t) for t in _expanding_defaults_300()}),
        # first_interval 20, rho_p 0 -> D = 20, 30, 45, 67.5, 101.25 -> t = 20, 50, 95, 162.5 -> 163, 263.75 -> 264
        (
            "mssr_full",
            dict(first_interval=20, rho_p=0.0, beta_r=1e-3),
            {t: ratio(t, beta_r=1e-3) for t in (20, 50, 95, 163, 264)},
        ),
    ],
)
def test_interval_strategies_first_stage(name, kwargs, expected):
    strategy = build(name, **kwargs)
    strategy.begin_stage(0, 300, BANK)
    got = plans(strategy, range(1, 301))
    assert got.keys() == expected.keys()
    for step, value in expected.items():
        assert got[step] == pytest.approx(value, rel=1e-12)
    if isinstance(strategy, IntervalReplay):
        assert strategy.replay_steps() == sorted(expected)


def test_mssr_full_defaults_full_stage():
    strategy = build("mssr_full")
    strategy.begin_stage(0, 2000, BANK)
    assert strategy.replay_steps() == [100, 248, 462, 768, 1200, 1801]
    got = plans(strategy, range(1, 2001))
    assert sorted(got) == [100, 248, 462, 768, 1200, 1801]
    # beta_r = 1e-5: ratio(1801) = 0.05 + 0.25 e^{-0.01801} = 0.05 + 0.25 * 0.982151 = 0.2955378
    assert got[1801] == pytest.approx(0.2955378, abs=1e-6)


@pytest.mark.parametrize("name", ["mssr_sch", "mssr_full"])
def test_second_stage_restarts_intervals_ratio_keeps_decaying(name):
    strategy = build(name, beta_r=1e-3)
    strategy.begin_stage(0, 300, BANK)
    first = plans(strategy, range(1, 301))
    strategy.begin_stage(300, 300, torch.arange(16))
    second = plans(strategy, range(301, 601))
    # relative steps 100 and 248 in both stages -> global 100, 248 then 400, 548
    assert sorted(first) == [100, 248]
    assert sorted(second) == [400, 548]
    # ratio over the *global* step: 0.05 + 0.25 e^{-0.4} = 0.05 + 0.25 * 0.670320 = 0.217580
    assert second[400] == pytest.approx(0.2175800115, abs=1e-9)
    assert first[100] == pytest.approx(0.05 + 0.25 * math.exp(-0.1), rel=1e-12)
    assert second[548] == pytest.approx(0.05 + 0.25 * math.exp(-0.548), rel=1e-12)
    assert first[100] > first[248] > second[400] > second[548]


def test_fixed_second_stage_constant_ratio():
    strategy = build("fixed", fixed_interval=100, beta_r=1e-3)
    strategy.begin_stage(0, 300, BANK)
    strategy.begin_stage(300, 250, BANK)  # stage may differ in length: 100, 200 relative; 300 > 250
    assert plans(strategy, range(301, 551)) == {400: 0.3, 500: 0.3}


def test_er_is_fixed_with_interval_one():
    strategy = build("fixed", fixed_interval=1, lambda0=0.25)
    strategy.begin_stage(50, 40, BANK)
    assert plans(strategy, range(51, 91)) == {s: 0.25 for s in range(51, 91)}


def test_fixed_ignores_interval_pattern():
    strategy = build("fixed", interval_pattern="geometric", fixed_interval=50)
    strategy.begin_stage(0, 200, BANK)
    assert sorted(plans(strategy, range(1, 201))) == [50, 100, 150, 200]


def test_none_never_replays():
    strategy = build("none")
    assert isinstance(strategy, NoReplay)
    strategy.begin_stage(0, 300, BANK)
    strategy.observe(5, ReplaySignals(probe_loss=100.0, scores={"a": 0.0}))
    assert plans(strategy, range(1, 301)) == {}


def _trigger_everything(strategy):
    """Signals that would trigger the loss / accuracy baselines."""
    for step, loss, score in ((1, 1.0, 0.9), (2, 10.0, 0.1)):
        strategy.observe(step, ReplaySignals(probe_loss=loss, scores={"a": score}))


@pytest.mark.parametrize(
    "name, kwargs",
    [(n, {}) for n in ALL_NAMES]
    + [("mssr_full", dict(interval_pattern="threshold")), ("mssr_sch", dict(interval_pattern="threshold"))]
    + [("fixed", dict(fixed_interval=1)), ("mssr_full", dict(interval_pattern="ebbinghaus"))],
)
def test_empty_bank_never_replays(name, kwargs):
    strategy = build(name, **kwargs)
    memory = make_memory(0)
    strategy.begin_stage(0, 300, torch.arange(0))
    _trigger_everything(strategy)
    assert plans(strategy, range(3, 301), memory) == {}


def test_before_begin_stage_no_replay():
    for name in ALL_NAMES:
        strategy = build(name, fixed_interval=1)
        assert plans(strategy, range(1, 50)) == {}


@pytest.mark.parametrize(
    "name, kwargs, expected",
    [
        ("fixed", dict(fixed_interval=100), [100, 101, 102, 200, 201, 202, 300]),
        ("mssr_spl", dict(first_interval=100), [100, 101, 102, 200, 201, 202, 300]),
        ("mssr_full", {}, [100, 101, 102, 248, 249, 250]),
        ("mssr_sch", dict(interval_pattern=[10, 298]), [10, 11, 12, 298, 299, 300]),
    ],
)
def test_event_steps_three(name, kwargs, expected):
    strategy = build(name, event_steps=3, **kwargs)
    strategy.begin_stage(0, 300, BANK)
    assert sorted(plans(strategy, range(1, 301))) == expected
    assert strategy.replay_steps() == expected


def test_event_steps_three_second_stage():
    strategy = build("mssr_sch", event_steps=3, beta_r=1e-3)
    strategy.begin_stage(1000, 300, BANK)
    got = plans(strategy, range(1001, 1301))
    assert sorted(got) == [1100, 1101, 1102, 1248, 1249, 1250]
    for step, value in got.items():  # each step of the event at its own global-step ratio
        assert value == pytest.approx(ratio(step, beta_r=1e-3), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(interval_pattern="fixed", first_interval=40), [40, 80, 120, 160, 200, 240, 280]),
        (dict(interval_pattern="geometric", interval_unit=10), [10, 30, 70, 150]),
        (dict(interval_pattern="geometric"), [1, 3, 7, 15, 31, 63, 127, 255]),
        (dict(interval_pattern="ebbinghaus", interval_unit=10), [10, 20, 40, 70, 150, 300]),
        (dict(interval_pattern="ebbinghaus"), [1, 2, 4, 7, 15, 30, 60, 120, 240]),
        (dict(interval_pattern=[300, 5, 5, 299, 301, 1000]), [5, 299, 300]),
        (dict(interval_pattern=(17,)), [17]),
        (dict(interval_pattern="expanding", first_interval=50, eta_p=0.0), [50, 100, 150, 200, 250, 300]),
    ],
)
def test_mssr_full_interval_patterns(kwargs, expected):
    strategy = build("mssr_full", beta_r=1e-3, **kwargs)
    strategy.begin_stage(200, 300, BANK)
    got = plans(strategy, range(201, 501))
    assert sorted(got) == [200 + t for t in expected]
    for step, value in got.items():
        assert value == pytest.approx(ratio(step, beta_r=1e-3), rel=1e-12)


def test_explicit_list_with_nonpositive_step_is_rejected():
    with pytest.raises(ValueError):
        strategy = build("mssr_full", interval_pattern=[0, 5])
        strategy.begin_stage(0, 100, BANK)


@HYP
@given(interval=st.integers(1, 60), event_steps=st.integers(1, 5), start=st.integers(0, 5000), n=st.integers(0, 200))
def test_fixed_strategy_grid_property(interval, event_steps, start, n):
    strategy = build("fixed", fixed_interval=interval, event_steps=event_steps, lambda0=0.4)
    strategy.begin_stage(start, n, BANK)
    got = plans(strategy, range(start + 1, start + n + 1))
    expected = {start + m * interval + j for m in range(1, n // interval + 1) for j in range(event_steps)}
    assert set(got) == {s for s in expected if s <= start + n}
    assert all(v == 0.4 for v in got.values())


# ---------------------------------------------------------------- threshold (App. B, eq:tau_star)


def test_threshold_pattern_builds_threshold_replay():
    for name in ("mssr_sch", "mssr_full"):
        strategy = build(name, interval_pattern="threshold", threshold=0.3)
        assert isinstance(strategy, ThresholdReplay)
        assert strategy.name == name and strategy.threshold == 0.3
        assert strategy.weighted == (name == "mssr_full")
    with pytest.raises(ValueError, match="threshold"):
        build("mssr_full", interval_pattern="threshold", threshold=1.0)
    with pytest.raises(ValueError, match="threshold"):
        build("mssr_full", interval_pattern="threshold", threshold=0.0)


def test_threshold_first_trigger_hand_computed():
    # 4 samples added at step 0, never reviewed: h = alpha / s_init = 0.01, m(t) = e^{-0.01 t} for all.
    # mean m < 0.5 <=> t > 100 ln 2 = 69.31 -> the first replay is at step 70.
    memory = make_memory(4)
    strategy = build("mssr_full", interval_pattern="threshold", threshold=0.5, beta_r=1e-3)
    strategy.begin_stage(0, 300, torch.arange(4))
    got = plans(strategy, range(1, 101), memory)
    assert min(got) == 70
    assert got[70] == pytest.approx(0.05 + 0.25 * math.exp(-0.07), rel=1e-12)
    # threshold 0.3: t > 100 ln(1/0.3) = 120.4 -> 121
    strategy = build("mssr_sch", interval_pattern="threshold", threshold=0.3)
    strategy.begin_stage(0, 300, torch.arange(4))
    assert min(plans(strategy, range(1, 200), make_memory(4))) == 121


def test_threshold_replays_exactly_when_bank_strength_below():
    # replayed samples are reviewed (as the trainer does), which resets m to 1; the oracle is the bank's mean m
    memory = make_memory(6)
    bank = torch.arange(6)
    strategy = build("mssr_full", interval_pattern="threshold", threshold=0.6)
    strategy.begin_stage(0, 600, bank)
    events = []
    for step in range(1, 601):
        below = float(memory.strength(bank, step).mean()) < 0.6
        r = strategy.plan(step, memory)
        assert (r > 0) == below, step
        if r > 0:
            events.append(step)
            memory.review(bank, step)
    # several separate events, the first at t > 100 ln(1/0.6) = 51.08 -> 52
    assert events[0] == 52 and len(events) >= 3
    assert all(b - a > 1 for a, b in zip(events, events[1:]))


def test_threshold_event_steps():
    memory = make_memory(4)
    strategy = build("mssr_full", interval_pattern="threshold", threshold=0.5, event_steps=3)
    strategy.begin_stage(0, 300, torch.arange(4))
    events = []
    for step in range(1, 200):
        if strategy.plan(step, memory) > 0:
            events.append(step)
            if len(events) % 3 == 0:  # review at the end of each event
                memory.review(torch.arange(4), step)
    # first event 70, 71, 72 (three consecutive steps), then nothing until the bank decays again
    assert events[:3] == [70, 71, 72]
    assert 73 not in events
    # without reviews the bank stays below the threshold: events of 3 steps, back to back (min_gap = event_steps)
    strategy = build("mssr_full", interval_pattern="threshold", threshold=0.5, event_steps=3)
    strategy.begin_stage(0, 300, torch.arange(4))
    assert sorted(plans(strategy, range(1, 120), make_memory(4))) == list(range(70, 120))


def test_threshold_needs_memory():
    strategy = build("mssr_full", interval_pattern="threshold")
    strategy.begin_stage(0, 10, BANK)
    with pytest.raises(ValueError, match="SampleMemory"):
        strategy.plan(1, None)


def test_threshold_uses_the_bank_ids():
    # DESIGN 4: "the mean strength of the replay bank", the bank being the ids given to begin_stage, which need not
    # be 0..n-1. ids 0..4 reviewed at 200 (m = 1); ids 5..9 never: m(201) = e^{-0.01 * 201} = 0.134
    memory = make_memory(10)
    memory.review(torch.arange(5), 200)
    strategy = build("mssr_sch", interval_pattern="threshold", threshold=0.5)
    strategy.begin_stage(200, 100, torch.arange(5, 10))  # decayed bank: mean m 0.134 < 0.5
    assert strategy.plan(201, memory) > 0
    strategy = build("mssr_sch", interval_pattern="threshold", threshold=0.5)
    strategy.begin_stage(200, 100, torch.tensor([0, 2, 4]))  # fresh bank: mean m(201) = e^{-h} ~ 0.9 > 0.5
    assert strategy.plan(201, memory) == 0.0
    strategy = build("mssr_sch", interval_pattern="threshold", threshold=0.5)
    strategy.begin_stage(200, 100, torch.tensor([0, 1, 7, 8, 9]))  # mixed: (2 * 0.9 + 3 * 0.134) / 5 = 0.44 < 0.5
    assert strategy.plan(201, memory) > 0


# ---------------------------------------------------------------- loss baseline


def test_loss_strategy():
    strategy = build("loss", probe_interval=10, probe_threshold=0.1, event_steps=2, lambda0=0.25)
    assert isinstance(strategy, LossTriggeredReplay) and strategy.probe_interval == 10
    strategy.begin_stage(0, 200, BANK)
    assert plans(strategy, range(1, 11)) == {}
    strategy.observe(10, ReplaySignals(probe_loss=2.0))  # first probe: the reference
    assert strategy.reference == 2.0
    assert plans(strategy, range(11, 21)) == {}
    strategy.observe(20, ReplaySignals(probe_loss=2.15))  # 2.15 <= 2.0 * 1.1 = 2.2: no
    assert plans(strategy, range(21, 31)) == {}
    strategy.observe(30, ReplaySignals(probe_loss=1.0))  # lower: no, and the reference stays
    assert strategy.reference == 2.0
    assert plans(strategy, range(31, 41)) == {}
    strategy.observe(40, ReplaySignals(probe_loss=2.3))  # 2.3 > 2.2: the next event_steps = 2 plans replay
    assert plans(strategy, range(41, 51)) == {41: 0.25, 42: 0.25}
    strategy.observe(50, ReplaySignals(probe_loss=float("nan")))  # ignored
    strategy.observe(50, ReplaySignals(probe_loss=float("inf")))  # ignored
    strategy.observe(50, ReplaySignals(scores={"a": 0.0}))  # no probe loss: ignored
    assert plans(strategy, range(51, 61)) == {}
    assert strategy.reference == 2.0
    strategy.observe(60, ReplaySignals(probe_loss=2.5))
    assert strategy.pending == 2
    # strictly above: a loss of exactly reference * (1 + threshold) does not trigger (2.0 * 1.5 = 3.0 exactly)
    exact = build("loss", probe_threshold=0.5)
    exact.begin_stage(0, 100, BANK)
    exact.observe(10, ReplaySignals(probe_loss=2.0))
    exact.observe(20, ReplaySignals(probe_loss=3.0))
    assert plans(exact, range(21, 30)) == {}
    exact.observe(30, ReplaySignals(probe_loss=3.0000001))
    assert plans(exact, range(31, 40)) == {31: 0.3}
    # begin_stage resets the reference and any pending event
    strategy.begin_stage(200, 200, BANK)
    assert strategy.reference is None and strategy.pending == 0
    assert plans(strategy, range(201, 211)) == {}
    strategy.observe(210, ReplaySignals(probe_loss=5.0))  # new reference, although 5.0 > 2.2
    assert plans(strategy, range(211, 221)) == {}
    strategy.observe(220, ReplaySignals(probe_loss=5.4))  # 5.4 <= 5.5
    assert plans(strategy, range(221, 231)) == {}
    strategy.observe(230, ReplaySignals(probe_loss=5.6))  # 5.6 > 5.5
    assert plans(strategy, range(231, 241)) == {231: 0.25, 232: 0.25}


def test_loss_strategy_nan_first_probe_is_not_the_reference():
    strategy = build("loss", probe_threshold=0.05)
    strategy.begin_stage(0, 100, BANK)
    strategy.observe(50, ReplaySignals(probe_loss=float("nan")))
    assert strategy.reference is None
    strategy.observe(100, ReplaySignals(probe_loss=3.0))
    assert strategy.reference == 3.0
    assert plans(strategy, [101]) == {}


def test_loss_strategy_bad_config():
    with pytest.raises(ValueError, match="probe_interval"):
        build("loss", probe_interval=0)
    with pytest.raises(ValueError, match="threshold"):
        build("loss", probe_threshold=-0.1)


# ---------------------------------------------------------------- accuracy baseline


def test_accuracy_strategy():
    strategy = build("accuracy", eval_interval=10, eval_drop=0.05, lambda0=0.2)
    assert isinstance(strategy, AccuracyTriggeredReplay) and strategy.eval_interval == 10
    strategy.begin_stage(0, 100, BANK)
    strategy.observe(10, ReplaySignals(scores={"a": 0.80}))
    assert plans(strategy, range(11, 21)) == {}
    strategy.observe(20, ReplaySignals(scores={"a": 0.77}))  # drop 0.03 <= 0.05: no
    assert plans(strategy, range(21, 31)) == {}
    strategy.observe(30, ReplaySignals(scores={"a": 0.70}))  # drop 0.10 from the best 0.80: replay next step
    assert plans(strategy, range(31, 41)) == {31: 0.2}
    strategy.observe(40, ReplaySignals(scores={"a": 0.90}))  # a rise never triggers; best 0.90
    assert plans(strategy, range(41, 51)) == {}
    assert strategy.best == {"a": 0.90}
    strategy.observe(50, ReplaySignals(scores={"a": 0.87, "b": 0.60}))  # a -0.03, b new: no
    assert plans(strategy, range(51, 61)) == {}
    strategy.observe(60, ReplaySignals(scores={"a": 0.88, "b": 0.52}))  # b -0.08 from its own best: replay
    assert plans(strategy, range(61, 71)) == {61: 0.2}
    strategy.observe(70, ReplaySignals(scores=None))
    strategy.observe(70, ReplaySignals(scores={}))
    strategy.observe(70, ReplaySignals(probe_loss=100.0))
    assert plans(strategy, range(71, 81)) == {}
    assert strategy.best == {"a": 0.90, "b": 0.60}
    # the best is tracked per task across stages
    strategy.begin_stage(100, 100, torch.arange(20))
    assert strategy.best == {"a": 0.90, "b": 0.60}
    strategy.observe(110, ReplaySignals(scores={"a": 0.82, "b": 0.60, "c": 0.1}))  # a: 0.82 < 0.90 - 0.05
    assert plans(strategy, range(111, 121)) == {111: 0.2}


def test_accuracy_strategy_drop_is_strict():
    # best 0.75, drop 0.25: a score of exactly 0.5 (exact in binary) is not a drop of *more* than 0.25
    strategy = build("accuracy", eval_drop=0.25)
    strategy.begin_stage(0, 100, BANK)
    strategy.observe(10, ReplaySignals(scores={"a": 0.75}))
    strategy.observe(20, ReplaySignals(scores={"a": 0.5}))
    assert plans(strategy, range(21, 30)) == {}
    strategy.observe(30, ReplaySignals(scores={"a": 0.4999}))
    assert plans(strategy, range(31, 40)) == {31: 0.3}


def test_accuracy_strategy_event_steps():
    strategy = build("accuracy", eval_drop=0.0, event_steps=3)
    strategy.begin_stage(0, 100, BANK)
    strategy.observe(10, ReplaySignals(scores={"a": 0.5}))
    strategy.observe(20, ReplaySignals(scores={"a": 0.4}))
    assert plans(strategy, range(21, 40)) == {21: 0.3, 22: 0.3, 23: 0.3}


def test_accuracy_strategy_bad_config():
    with pytest.raises(ValueError, match="eval_interval"):
        build("accuracy", eval_interval=0)
    with pytest.raises(ValueError, match="drop"):
        build("accuracy", eval_drop=-0.01)


# ---------------------------------------------------------------- selection of the strategies


@pytest.mark.parametrize("name", ["mssr_spl", "mssr_full"])
def test_weighted_strategies_prefer_decayed_samples(name):
    # ids 10..19 have m = e^{-5}: weight m^{-1} = e^5 = 148.4 vs 1 for ids 0..9;
    # P(first pick decayed) = 10 e^5 / (10 e^5 + 10) = 0.9933
    memory, ids = decayed_memory(20), torch.arange(20)
    strategy = build(name)
    g = gen(0)
    picks = torch.cat([strategy.select(ids, 5, 500, memory, g) for _ in range(200)])
    assert float((picks >= 10).double().mean()) > 0.95
    firsts = [int(strategy.select(ids, 1, 500, memory, g).item() >= 10) for _ in range(1000)]
    assert sum(firsts) >= 980  # expected 993.3, sd 2.6


@pytest.mark.parametrize("name", ["fixed", "loss", "accuracy", "mssr_sch", "none"])
def test_uniform_strategies_ignore_memory(name):
    memory, ids = decayed_memory(20), torch.arange(20)
    strategy = build(name)
    g = gen(0)
    picks = torch.cat([strategy.select(ids, 5, 500, memory, g) for _ in range(200)])
    assert 0.44 <= float((picks >= 10).double().mean()) <= 0.56  # 1000 picks, p = 1/2
    # same as uniform_choice with the same generator, with or without a memory
    assert torch.equal(strategy.select(ids, 5, 500, memory, gen(3)), uniform_choice(ids, 5, gen(3)))
    assert torch.equal(strategy.select(ids, 5, 500, None, gen(3)), uniform_choice(ids, 5, gen(3)))


@pytest.mark.parametrize(
    "name, kwargs", [("mssr_spl", {}), ("mssr_full", {}), ("mssr_full", dict(interval_pattern="threshold"))]
)
def test_weighted_strategies_need_memory(name, kwargs):
    strategy = build(name, **kwargs)
    with pytest.raises(ValueError, match="SampleMemory"):
        strategy.select(torch.arange(5), 2, 10, None, gen(0))
    with pytest.raises(ValueError, match="SampleMemory"):
        draw_buffer(torch.arange(5), 2, strategy, None, 10, gen(0))


def test_weighted_select_matches_weighted_choice():
    memory, ids = decayed_memory(20), torch.tensor([3, 17, 5, 12, 19, 0])
    out = build("mssr_full").select(ids, 3, 500, memory, gen(4))
    expected = weighted_choice(ids, memory.replay_log_weights(ids, 500), 3, gen(4))
    assert torch.equal(out, expected)


# ================================================================================================================
# 7. state_dict / load_state_dict
# ================================================================================================================

STATE_CASES = [
    ("none", {}),
    ("fixed", dict(fixed_interval=30, event_steps=2)),
    ("loss", dict(probe_interval=10, probe_threshold=0.05, event_steps=2)),
    ("accuracy", dict(eval_interval=10, eval_drop=0.03, event_steps=2)),
    ("mssr_sch", dict(first_interval=20, beta_r=1e-3)),
    ("mssr_spl", dict(first_interval=25)),
    ("mssr_full", dict(first_interval=15, event_steps=3, beta_r=1e-3)),
    ("mssr_full", dict(interval_pattern="threshold", threshold=0.6, event_steps=2)),
    ("mssr_sch", dict(interval_pattern=[7, 151, 152, 290])),
    ("mssr_full", dict(interval_pattern="ebbinghaus", interval_unit=5)),
]
STATE_IDS = [f"{n}-{'-'.join(map(str, k.values()))}" for n, k in STATE_CASES]


def _signals(step: int) -> ReplaySignals:
    # a probe loss that wanders up and down; scores for two tasks that rise and fall
    return ReplaySignals(
        probe_loss=1.0 + 0.3 * math.sin(step / 17.0),
        scores={"a": 0.7 + 0.1 * math.sin(step / 23.0), "b": 0.5 + 0.1 * math.cos(step / 11.0)},
    )


def _drive(strategy, memory: SampleMemory, bank: torch.Tensor, steps) -> list[float]:
    """The trainer's loop: plan; replayed samples are reviewed; probe / eval signals at their intervals."""
    out = []
    for step in steps:
        r = strategy.plan(step, memory)
        out.append(r)
        if r > 0:
            memory.review(bank, step)
        if (strategy.probe_interval and step % strategy.probe_interval == 0) or (
            strategy.eval_interval and step % strategy.eval_interval == 0
        ):
            strategy.observe(step, _signals(step))
    return out


def _same(x: Any, y: Any) -> bool:
    """Deep equality of two states that may hold tensors (a tensor equals a tensor or list of the same values)."""
    if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
        return torch.equal(torch.as_tensor(x), torch.as_tensor(y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return type(x) is type(y) and x == y


def _checkpoint_round_trip(state: dict[str, Any], directory) -> dict[str, Any]:
    """Through the project's checkpoint writer (safetensors + JSON), as MSSRTrainer saves the strategy."""
    save_state(directory, "strategy", state)
    return load_state(directory, "strategy")


def _primitive(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, list):
        return all(_primitive(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _primitive(v) for k, v in value.items())
    return False


@pytest.mark.parametrize("name, kwargs", STATE_CASES, ids=STATE_IDS)
def test_state_dict_round_trip_mid_stage(name, kwargs, tmp_path):
    bank = torch.arange(6)
    a, memory_a = build(name, **kwargs), make_memory(6)
    a.begin_stage(0, 300, bank)
    before = _drive(a, memory_a, bank, range(1, 151))
    state = a.state_dict()
    assert state["name"] == name
    snapshot = _checkpoint_round_trip(state, tmp_path)
    memory_b = make_memory(6)
    memory_b.load_state_dict(copy.deepcopy(memory_a.state_dict()))

    b = build(name, **kwargs)
    b.load_state_dict(snapshot)
    assert _same(b.state_dict(), state)
    after_a = _drive(a, memory_a, bank, range(151, 301))
    after_b = _drive(b, memory_b, bank, range(151, 301))
    assert after_a == after_b
    assert _same(a.state_dict(), b.state_dict())
    if name != "none":
        assert any(before + after_a), "the scenario should replay at least once"
    # and a second stage continues identically too
    a.begin_stage(300, 100, bank)
    b.begin_stage(300, 100, bank)
    assert _drive(a, memory_a, bank, range(301, 401)) == _drive(b, memory_b, bank, range(301, 401))


PRIMITIVE_CASES = [pytest.param(n, k, id=i) for (n, k), i in zip(STATE_CASES, STATE_IDS)]


@pytest.mark.parametrize("name, kwargs", PRIMITIVE_CASES)
def test_state_dict_is_json_primitives(name, kwargs):
    bank = torch.arange(6)
    a, memory = build(name, **kwargs), make_memory(6)
    assert _primitive(a.state_dict())  # before any stage
    a.begin_stage(0, 300, bank)
    _drive(a, memory, bank, range(1, 151))
    state = a.state_dict()
    assert _primitive(state), state
    b = build(name, **kwargs)
    b.load_state_dict(json.loads(json.dumps(state)))
    assert b.state_dict() == state


def test_state_round_trip_keeps_trigger_state():
    loss = build("loss", probe_threshold=0.1, event_steps=3)
    loss.begin_stage(0, 100, BANK)
    loss.observe(10, ReplaySignals(probe_loss=1.0))
    loss.observe(20, ReplaySignals(probe_loss=2.0))
    assert loss.plan(21, None) == 0.3  # one of three event steps used
    restored = build("loss", probe_threshold=0.1, event_steps=3)
    restored.load_state_dict(json.loads(json.dumps(loss.state_dict())))
    assert restored.reference == 1.0 and restored.pending == 2 and restored.bank_size == 8
    assert plans(restored, range(22, 30)) == {22: 0.3, 23: 0.3}

    acc = build("accuracy")
    acc.begin_stage(0, 100, BANK)
    acc.observe(10, ReplaySignals(scores={"a": 0.9, "b": 0.4}))
    acc.observe(20, ReplaySignals(scores={"a": 0.5}))
    restored = build("accuracy")
    restored.load_state_dict(json.loads(json.dumps(acc.state_dict())))
    assert restored.best == {"a": 0.9, "b": 0.4} and restored.pending == 1
    assert plans(restored, range(21, 30)) == {21: 0.3}

    thr = build("mssr_full", interval_pattern="threshold", event_steps=2)
    thr.begin_stage(0, 300, torch.arange(4))
    memory = make_memory(4)
    assert thr.plan(70, memory) > 0  # m = e^{-0.7} = 0.497 < 0.5: first of two event steps
    restored = build("mssr_full", interval_pattern="threshold", event_steps=2)
    restored.load_state_dict(copy.deepcopy(thr.state_dict()))
    assert restored.pending == 1 and restored.last_event == 70
    assert restored.plan(71, memory) > 0


SNAPSHOT_CASES = [pytest.param(n, k, id=i) for (n, k), i in zip(STATE_CASES, STATE_IDS)]


@pytest.mark.parametrize("name, kwargs", SNAPSHOT_CASES)
def test_state_dict_is_a_snapshot(name, kwargs):
    """A saved state does not change when the strategy goes on, nor does a restored strategy share it."""
    bank = torch.arange(6)
    a, memory = build(name, **kwargs), make_memory(6)
    a.begin_stage(0, 300, bank)
    _drive(a, memory, bank, range(1, 101))
    state = a.state_dict()
    frozen = copy.deepcopy(state)
    b = build(name, **kwargs)
    b.load_state_dict(state)
    _drive(a, memory, bank, range(101, 301))
    assert _same(state, frozen)
    assert _same(b.state_dict(), frozen)


def test_accuracy_state_dict_aliasing_repro():
    a = build("accuracy")
    a.begin_stage(0, 100, BANK)
    a.observe(10, ReplaySignals(scores={"t": 0.5}))
    state = a.state_dict()
    a.observe(20, ReplaySignals(scores={"t": 0.9}))
    assert state["best"] == {"t": 0.5}  # a snapshot, not the live dict


@pytest.mark.parametrize("source", ALL_NAMES)
def test_loading_another_strategys_state_raises(source):
    state = build(source).state_dict()
    for target in ALL_NAMES:
        if target == source:
            build(target).load_state_dict(copy.deepcopy(state))
            continue
        with pytest.raises(ValueError, match=source):
            build(target).load_state_dict(copy.deepcopy(state))
    with pytest.raises(ValueError):
        build(source).load_state_dict({})


def test_threshold_state_does_not_load_into_interval_strategy():
    state = build("mssr_full", interval_pattern="threshold").state_dict()
    with pytest.raises(ValueError):
        build("mssr_full").load_state_dict(state)


# ================================================================================================================
# 8. Protocol and build_strategy
# ================================================================================================================


@pytest.mark.parametrize(
    "name, kwargs",
    [(n, {}) for n in ALL_NAMES] + [("mssr_full", dict(interval_pattern="threshold"))],
)
def test_built_strategies_satisfy_protocol(name, kwargs):
    strategy = build(name, **kwargs)
    assert isinstance(strategy, ReplayStrategy)
    assert strategy.name == name
    assert isinstance(strategy.probe_interval, int) and isinstance(strategy.eval_interval, int)


def test_probe_and_eval_intervals():
    assert build("loss", probe_interval=25).probe_interval == 25
    assert build("accuracy", eval_interval=40).eval_interval == 40
    for name in ("none", "fixed", "mssr_sch", "mssr_spl", "mssr_full"):
        strategy = build(name)
        assert strategy.probe_interval == 0 and strategy.eval_interval == 0
    assert build("loss").eval_interval == 0 and build("accuracy").probe_interval == 0


def test_strategy_names_constant():
    assert tuple(STRATEGY_NAMES) == ALL_NAMES


class _EveryOtherStep:
    """A user-written strategy: plain class, no inheritance, only the protocol's members."""

    name = "every_other"
    probe_interval = 0
    eval_interval = 0

    def begin_stage(self, stage_start, num_steps, bank_ids):
        self.start = stage_start

    def plan(self, step, memory):
        return 0.5 if (step - self.start) % 2 == 0 else 0.0

    def observe(self, step, signals):
        pass

    def select(self, candidates, k, step, memory, generator):
        return candidates[:k]

    def state_dict(self):
        return {"start": self.start}

    def load_state_dict(self, state):
        self.start = state["start"]


class _MissingPlan:
    name = "broken"
    probe_interval = 0
    eval_interval = 0

    def begin_stage(self, stage_start, num_steps, bank_ids): ...

    def observe(self, step, signals): ...

    def select(self, candidates, k, step, memory, generator): ...

    def state_dict(self): ...

    def load_state_dict(self, state): ...


def test_user_strategy_satisfies_protocol():
    user = _EveryOtherStep()
    assert isinstance(user, ReplayStrategy)
    assert not isinstance(_MissingPlan(), ReplayStrategy)
    # and draw_buffer accepts it (staleness cap off: no memory needed)
    assert draw_buffer(torch.arange(10, 20), 3, user, None, 1, gen(0)).tolist() == [10, 11, 12]
    with_stale = draw_buffer(torch.arange(10), 4, user, _staleness_memory(), 100, gen(0), staleness_cap=60)
    assert with_stale.tolist() == [2, 1, 0, 3]  # stale first, then the user's select on the rest (ids 3..9)


@pytest.mark.parametrize("bad", ["replay", "MSSR_FULL", "er", ""])
def test_build_unknown_name(bad):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        build(bad)


@pytest.mark.parametrize("bad", ["spiral", "Ebbinghaus", "linear"])
def test_build_unknown_interval_pattern(bad):
    with pytest.raises(ValueError, match=bad):
        build("mssr_full", interval_pattern=bad)


@pytest.mark.parametrize("name", ["fixed", "mssr_sch", "mssr_spl", "mssr_full"])
def test_build_rejects_lambda_min_above_lambda0(name):
    with pytest.raises(ValueError, match="lambda_min"):
        build(name, lambda0=0.1, lambda_min=0.2)
    with pytest.raises(ValueError, match="lambda0"):
        build(name, lambda0=1.5, lambda_min=0.05)
    with pytest.raises(ValueError, match="lambda_min"):
        build(name, lambda0=0.3, lambda_min=-0.01)
    build(name, lambda0=0.2, lambda_min=0.2)  # equal is fine (constant ratio)


@pytest.mark.parametrize("name", ["mssr_sch", "mssr_full"])
def test_build_threshold_rejects_lambda_min_above_lambda0(name):
    with pytest.raises(ValueError, match="lambda_min"):
        build(name, interval_pattern="threshold", lambda0=0.1, lambda_min=0.2)


@pytest.mark.parametrize("name", ["fixed", "mssr_sch", "mssr_spl", "mssr_full"])
def test_build_rejects_zero_event_steps(name):
    with pytest.raises(ValueError, match="event_steps"):
        build(name, event_steps=0)


@pytest.mark.parametrize(
    "name, kwargs", [("loss", {}), ("accuracy", {}), ("mssr_full", {"interval_pattern": "threshold"})]
)
def test_build_triggered_rejects_zero_event_steps(name, kwargs):
    with pytest.raises(ValueError, match="event_steps"):
        build(name, event_steps=0, **kwargs)


def test_begin_stage_rejects_negative():
    for name in ALL_NAMES:
        with pytest.raises(ValueError):
            build(name).begin_stage(-1, 10, BANK)
        with pytest.raises(ValueError):
            build(name).begin_stage(0, -10, BANK)


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(first_interval=0.3), "first_interval"), (dict(first_interval=math.inf), "first_interval"),
     (dict(eta_p=math.nan), "eta_p"), (dict(rho_p=math.nan), "rho_p")],
)  # fmt: skip
def test_interval_steps_names_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        interval_steps(**kwargs)


def test_negative_k_is_refused():
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="k must be"):
        uniform_choice(torch.arange(5), -1, g)
    with pytest.raises(ValueError, match="k must be"):
        weighted_choice(torch.arange(5), torch.zeros(5, dtype=torch.float64), -1, g)


def test_explicit_pattern_with_step_zero_fails_at_build():
    with pytest.raises(ValueError, match=">= 1"):
        build("mssr_full", interval_pattern=[0, 5])


@pytest.mark.parametrize("name", ["loss", "accuracy"])
def test_triggered_strategies_bound_lambda0(name):
    with pytest.raises(ValueError, match="lambda0"):
        build(name, lambda0=1.5)


def test_uniform_choice_sparse_path_is_uniform_and_distinct():
    """k << n takes the i.i.d.-draw path: still k distinct ids, each included with probability k / n."""
    n, k, trials = 400, 8, 4000  # 4k <= n: the sparse path
    g = torch.Generator().manual_seed(5)
    counts = torch.zeros(n)
    for _ in range(trials):
        picked = uniform_choice(torch.arange(n), k, g)
        assert picked.numel() == k and picked.unique().numel() == k
        counts[picked] += 1
    expected = trials * k / n  # 80 per id
    # Binomial(4000, 0.02): sd = sqrt(4000 * 0.02 * 0.98) = 8.85; every id within 5 sd, and the chi-square near n-1.
    assert (counts - expected).abs().max() < 5 * 8.85
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert 300 < chi2 < 520  # n - 1 = 399 degrees of freedom, roughly +-5 sd
