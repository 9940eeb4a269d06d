"""The memory's clock (``memory_time_unit``), the fitted forgetting models (loss rise and loss gap), selection by
predicted rise and, within each task, by predicted gap, the replay budget cap and the within-stage ratio profile:
hand-computed values and properties."""

import math

import pytest
import torch
from conftest import make_memory
from hypothesis import example, given, settings
from hypothesis import strategies as st
from torch.testing import assert_close

from mssr_hf.memory import (
    ForgettingModel,
    HyperparameterError,
    SampleMemory,
    calibrated_log_weights,
    forgetting_features,
    gap_features,
    memory_time,
    ridge_solution,
)
from mssr_hf.scheduler import ratio_profile, replay_allowance, stratified_choice, uniform_choice, weighted_choice

torch.set_num_threads(1)
PROP = settings(max_examples=50, deadline=None)


def t64(*values):
    return torch.tensor(values, dtype=torch.float64)


# ================================================================================================================
# The clock
# ================================================================================================================


class TestMemoryTime:
    def test_paper_clock_is_the_step(self):
        assert_close(memory_time(torch.tensor([0, 7, 250]), [(0, 0.0, 1.0)]), t64(0, 7, 250))

    def test_piecewise_segments(self):
        # steps 0-100 at 1 step per unit, then 50 steps per unit from step 100 (time 100), then 4 from step 200:
        # T(50) = 50; T(150) = 100 + 50/50 = 101; T(200) = 100 + 100/50 = 102; T(220) = 102 + 20/4 = 107
        segments = [(0, 0.0, 1.0), (100, 100.0, 50.0), (200, 102.0, 4.0)]
        assert_close(memory_time(torch.tensor([50, 150, 200, 220]), segments), t64(50, 101, 102, 107))

    def test_set_time_unit_keeps_earlier_times(self):
        mem = make_memory(2)
        mem.set_time_unit(50, step=100)
        mem.set_time_unit(4, step=200)
        assert mem.time_segments == [(0, 0.0, 1.0), (100, 100.0, 50.0), (200, 102.0, 4.0)]
        assert_close(mem.time([60, 150, 220]), t64(60, 101, 107))
        mem.set_time_unit(4, step=300)  # unchanged unit: no new segment
        assert len(mem.time_segments) == 3

    def test_bad_unit_and_time_going_back(self):
        mem = make_memory(1)
        with pytest.raises(ValueError, match="memory time unit"):
            mem.set_time_unit(0, step=1)
        mem.observe([0], [1.0], step=10)
        with pytest.raises(ValueError, match="time cannot go back"):
            mem.set_time_unit(5, step=9)

    def test_hazard_in_memory_time(self):
        # alpha = 0.01, gamma_d = 0 (no difficulty), S = 1: h = 0.01 per unit. 10 steps per unit, 200 steps
        # unseen = 20 units: log m = -0.01 * 20 = -0.2
        mem = make_memory(1, gamma_d=0.0)
        mem.set_time_unit(10, step=0)
        assert_close(mem.log_strength([0], step=200), t64(-0.2))
        assert_close(mem.elapsed_since_review([0], step=200), t64(20))

    @PROP
    @given(unit=st.floats(1.5, 40.0), steps=st.lists(st.integers(1, 30), min_size=1, max_size=6))
    def test_a_unit_of_u_steps_is_the_step_clock_with_rates_divided_by_u(self, unit, steps):
        """Time unit u == the paper's clock with alpha, gamma_d and rho divided by u (same m, S, weights)."""
        slow = make_memory(4, alpha=0.01, gamma_d=0.2, rho=0.01, phi="identity")
        slow.set_time_unit(unit, step=0)
        fast = make_memory(4, alpha=0.01 / unit, gamma_d=0.2 / unit, rho=0.01 / unit, phi="identity")
        step = 0
        for i, gap in enumerate(steps):
            step += gap
            ids, losses = [i % 4, (i + 1) % 4], [0.5 + i, 2.0 - 0.1 * i]
            for mem in (slow, fast):
                mem.expose(ids, losses, step)
                mem.update_hazard(step)
        later = step + 17
        assert_close(slow.log_strength(step=later), fast.log_strength(step=later), rtol=1e-9, atol=1e-12)
        assert_close(slow.stability, fast.stability, rtol=1e-9, atol=1e-12)

    def test_default_clock_is_unchanged_and_state_round_trips(self):
        mem = make_memory(3)
        mem.expose([0, 1], [1.0, 2.0], step=4)
        mem.set_time_unit(8, step=10)
        other = make_memory(3)
        other.load_state_dict(mem.state_dict())
        assert other.time_segments == mem.time_segments
        assert_close(other.log_strength(step=30), mem.log_strength(step=30))


# ================================================================================================================
# The forgetting model
# ================================================================================================================


class TestForgettingModel:
    def test_features(self):
        # [1, log(1 + dt), l_hat]
        assert_close(forgetting_features(t64(0, math.e - 1), t64(0.25, 1)), t64(1, 0, 0.25, 1, 1, 1).view(2, 3))

    def test_ridge_by_hand(self):
        # one observation x = [1, 0, 0], y = 2, lambda = 1, prior 0: w = (A + I)^-1 b = [2 / 2, 0, 0]
        gram = torch.zeros(1, 3, 3, dtype=torch.float64)
        gram[0, 0, 0] = 1
        moment = t64(2, 0, 0).view(1, 3)
        assert_close(ridge_solution(gram, moment, t64(0, 0, 0), 1.0), t64(1, 0, 0).view(1, 3))
        # with the prior w0 = [0, 0.5, 0]: the unobserved direction stays at the prior, (0 + 1 * 0.5) / (0 + 1)
        assert_close(ridge_solution(gram, moment, t64(0, 0.5, 0), 1.0), t64(1, 0.5, 0).view(1, 3))

    def test_decayed_evidence_by_hand(self):
        # decay 0.5: after y=2 then y=4 at x = [1, 0, 0]: A = 0.5 * 1 + 1 = 1.5, b = 0.5 * 2 + 4 = 5,
        # w_0 = 5 / (1.5 + 1) = 2
        model = ForgettingModel(decay=0.5, prior=0.0)
        model.grow(1)
        x = t64(1, 0, 0).view(1, 3)
        for y in (2.0, 4.0):
            model.update(torch.tensor([0]), x, t64(y), t64(0))
        assert_close(model.weights, t64(2, 0, 0).view(1, 3))

    def test_prior_before_any_observation(self):
        model = ForgettingModel(decay=0.99, prior=0.3)
        model.grow(2)
        # predicted rise = 0.3 * log(1 + dt)
        features = forgetting_features(t64(0, 9), t64(0.5, 0.5))
        assert_close(model.predict(torch.tensor([0, 1]), features), t64(0, 0.3 * math.log(10)))

    def test_fit_recovers_a_known_log_per_cohort(self):
        """A synthetic review log: cohort 0 rises by 0.5 log(1+dt) + 0.2 l_hat, cohort 1 by 1 - 0.1 log(1+dt)."""
        g = torch.Generator().manual_seed(0)
        model = ForgettingModel(decay=1.0, prior=0.0, strength=1e-6)
        model.grow(2)
        true = t64(0.0, 0.5, 0.2, 1.0, -0.1, 0.0).view(2, 3)
        for _ in range(20):
            cohort = torch.randint(0, 2, (16,), generator=g)
            x = forgetting_features(torch.rand(16, generator=g, dtype=torch.float64) * 50,
                                    torch.rand(16, generator=g, dtype=torch.float64))  # fmt: skip
            model.update(cohort, x, (true[cohort] * x).sum(1), torch.zeros(16, dtype=torch.float64))
        assert_close(model.weights, true, rtol=0, atol=1e-4)
        # calibration scores each batch with the prediction made before it was folded in: the first batch was
        # predicted by the prior (all 0), every later one by a fit that is already nearly exact
        assert 0.85 < model.calibration()["calibration_r_predicted"] < 1.0

    def test_memory_fits_the_observed_rise_since_the_last_exposure(self):
        # sample 0 (cohort 0) is seen at loss 1.0 at step 1, again at loss 3.0 at step 11: one observation, rise 2
        # after 10 steps; with a tiny ridge and one cohort, the intercept-only direction gets it all.
        mem = make_memory(1, calibration_decay=1.0, calibration_prior=0.0)
        mem.expose([0], [1.0], step=1)
        mem.expose([0], [3.0], step=11)
        assert float(mem.forgetting.scores[0]) == 1.0
        x = forgetting_features(t64(10), t64(0.5))[0]  # l_hat: no quantiles yet -> 0.5
        # ridge with lambda = 1 on one observation: w = x y / (|x|^2 + 1)
        expected = x * 2.0 / (x @ x + 1.0)
        assert_close(mem.forgetting.weights[0], expected)
        assert_close(mem.last_loss, t64(3.0))


# ================================================================================================================
# Selection by predicted rise
# ================================================================================================================


class TestCalibratedSelection:
    @PROP
    @given(values=st.lists(st.floats(-5, 5), min_size=2, max_size=30, unique=True), zeta=st.floats(0.1, 10))
    @example(values=[5e-324, 0.0], zeta=0.5)  # a subnormal gap: zeta * 5e-324 rounds to 0, a tie
    def test_weights_keep_the_order_of_the_predicted_rise(self, values, zeta):
        rise = torch.tensor(values, dtype=torch.float64)
        order = torch.argsort(rise)
        log_w = calibrated_log_weights(rise, zeta)[order]
        assert bool((log_w.diff() >= 0).all())  # never reversed
        # and strictly kept wherever the rises differ by more than rounding (subnormal gaps may underflow to a tie)
        apart = rise[order].diff() > max(1e-12 * float(rise.std()), 1e-300)
        assert bool((log_w.diff()[apart] > 0).all())

    @PROP
    @given(values=st.lists(st.floats(-5, 5), min_size=4, max_size=30, unique=True), k=st.integers(1, 3))
    def test_strong_prioritisation_selects_the_largest_rises(self, values, k):
        rise = torch.tensor(values, dtype=torch.float64)
        if float((rise.sort().values.diff()).min()) < 1e-3 * float(rise.std()):
            return  # near-ties: any order is right
        picked = weighted_choice(torch.arange(rise.numel()), calibrated_log_weights(rise, 1e6), k,
                                 torch.Generator().manual_seed(0))  # fmt: skip
        assert set(picked.tolist()) == set(torch.topk(rise, k).indices.tolist())

    def test_zeta_zero_is_uniform(self):
        assert torch.equal(calibrated_log_weights(t64(1, 5, 2), 0.0), t64(0, 0, 0))

    def test_memory_prefers_the_cohort_whose_loss_rises(self):
        """Cohort 0 was forgotten (its losses rose by 2 at every exposure), cohort 1 was not: the calibrated memory
        replays cohort 0's samples far more often than uniform selection does."""
        mem = make_memory(weighting="calibrated", zeta=3.0)
        first, second = mem.extend(20, step=0), mem.extend(20, step=0)
        for step in range(1, 9):
            mem.expose(first, torch.full((20,), 1.0 + 2.0 * step, dtype=torch.float64), step)
            mem.expose(second, torch.full((20,), 1.0, dtype=torch.float64), step)
        rise = mem.predicted_rise(step=12)
        assert float(rise[first].min()) > float(rise[second].max())
        g = torch.Generator().manual_seed(1)
        bank = torch.arange(40)
        picks = torch.cat([weighted_choice(bank, mem.replay_log_weights(bank, 12), 5, g) for _ in range(200)])
        assert (picks < 20).float().mean() > 0.9  # uniform: 0.5


# ================================================================================================================
# The gap model and selection within each task ("forgotten")
# ================================================================================================================


class TestGapModel:
    def test_features(self):
        # [1, log(1 + dt), last gap]
        assert_close(gap_features(t64(0, math.e - 1), t64(0.5, -0.2)), t64(1, 0, 0.5, 1, 1, -0.2).view(2, 3))

    def test_best_loss_and_one_gap_observation_by_hand(self):
        # Sample 0: loss 2.0 at step 0 (its first: best 2), 1.0 at step 10 (gap 1 - 2 = -1 after 10 steps, with a
        # last gap of 0; new best 1), 1.5 at step 30. Prior w0 = [0, 0, 1] (calibration_prior 0), lambda = 1, no decay.
        mem = make_memory(1, calibration_decay=1.0, calibration_prior=0.0)
        mem.expose([0], [2.0], step=0)
        mem.expose([0], [1.0], step=10)
        assert_close(mem.best_loss, t64(1.0))
        assert_close(mem.last_loss, t64(1.0))
        # one observation x = [1, log 11, 0], y = -1. (I + x x^T)^-1 = I - x x^T / (1 + |x|^2) and x . w0 = 0, so
        # w = w0 + x y / (1 + |x|^2)
        x = t64(1, math.log(11), 0)
        assert_close(mem.gap_model.weights[0], t64(0, 0, 1) + x * -1.0 / (1 + x @ x))
        # the prediction at step 30: last gap 1.0 - 1.0 = 0, 20 steps unseen
        w = mem.gap_model.weights[0]
        assert_close(mem.predicted_gap([0], step=30), (w * t64(1, math.log(21), 0)).sum().view(1))
        mem.expose([0], [1.5], step=30)  # gap 1.5 - 1 = 0.5: the second observation
        assert float(mem.gap_model.scores[0]) == 2.0 and float(mem.best_loss) == 1.0

    def test_a_cohorts_gap_fit_starts_when_the_next_cohort_arrives(self):
        # Exposures in a task's own stage are learning, not forgetting: adding the next cohort (the next stage)
        # returns the previous one's gap fit to the prior; the rise model keeps its evidence.
        mem = make_memory(calibration_decay=1.0)
        first = mem.extend(3, step=0)
        for step in (1, 2, 3):
            mem.expose(first, t64(3.0 - step, 2.5 - step, 2.0), step)
        assert not torch.equal(mem.gap_model.weights[0], mem.gap_model.prior_weights)
        rise_fit = mem.forgetting.weights[0].clone()
        mem.extend(2, step=3)
        assert_close(mem.gap_model.weights, mem.gap_model.prior_weights.expand(2, 3))
        assert float(mem.gap_model.gram.abs().sum()) == 0.0
        assert_close(mem.forgetting.weights[0], rise_fit)

    def test_state_round_trips(self):
        mem = make_memory(4, weighting="forgotten")
        mem.expose([0, 1, 2], [2.0, 1.0, 3.0], step=1)
        mem.expose([0, 1], [1.5, 2.5], step=5)
        other = make_memory(4, weighting="forgotten")
        other.load_state_dict(mem.state_dict())
        assert torch.equal(other.best_loss, mem.best_loss)
        assert_close(other.predicted_gap(step=9), mem.predicted_gap(step=9))


class TestStratifiedSelection:
    def test_each_group_gets_what_uniform_selection_gives_it(self):
        # 10 of 40 candidates in groups of 10 / 30: on average 2.5 / 7.5 picks, whatever the weights
        groups = torch.tensor([0] * 10 + [1] * 30)
        log_w = torch.cat([torch.full((10,), -50.0), torch.full((30,), 50.0)]).double()  # weights favour group 1
        g = torch.Generator().manual_seed(0)
        counts = torch.stack([torch.bincount(groups[stratified_choice(torch.arange(40), groups, log_w, 10, g)],
                                             minlength=2) for _ in range(2000)]).double()  # fmt: skip
        assert_close(counts.mean(0), t64(2.5, 7.5), rtol=0, atol=0.1)
        assert torch.equal(counts.sum(1), torch.full((2000,), 10.0, dtype=torch.float64))

    @PROP
    @given(sizes=st.lists(st.integers(1, 8), min_size=1, max_size=4), k=st.integers(0, 12), seed=st.integers(0, 99))
    def test_within_a_group_the_largest_weights_come_first(self, sizes, k, seed):
        groups = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
        n = groups.numel()
        log_w = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).double() * 1e6  # distinct, extreme
        picked = stratified_choice(torch.arange(n), groups, log_w, k, torch.Generator().manual_seed(seed))
        assert picked.numel() == min(k, n) == torch.unique(picked).numel()
        for group in range(len(sizes)):
            members = torch.nonzero(groups == group).flatten()
            chosen = set(picked.tolist()) & set(members.tolist())
            best = members[torch.argsort(log_w[members], descending=True)[: len(chosen)]]
            assert chosen == set(best.tolist())

    def test_the_memory_replays_within_each_task_the_samples_predicted_most_forgotten(self):
        """Task 0's first 5 samples were still far above their best loss when last seen, its other 5 back at it; task
        1 is untouched. 'forgotten' keeps the tasks' uniform shares and, within task 0, takes the forgotten ones."""
        mem = make_memory(weighting="forgotten", zeta=50.0, calibration_decay=1.0)
        first = mem.extend(10, step=0)
        mem.expose(first, torch.full((10,), 0.1, dtype=torch.float64), 1)  # learned in its stage: best 0.1
        second = mem.extend(10, step=1)
        mem.expose(second, torch.full((10,), 0.1, dtype=torch.float64), 2)
        for step in (3, 6, 9):  # replays of task 0: half forgotten (loss 2.0), half retained (0.1)
            mem.expose(first, torch.cat([torch.full((5,), 2.0), torch.full((5,), 0.1)]).double(), step)
        gap = mem.predicted_gap(first, step=12)
        assert float(gap[:5].min()) > float(gap[5:].max())
        assert mem.stratified
        from mssr_hf.scheduler import _StrategyBase  # the shared select() of every strategy

        strategy, uniform = _StrategyBase(weighted=True, event_steps=1), _StrategyBase(weighted=False, event_steps=1)
        g, g_u = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
        bank = torch.arange(20)
        picks = [strategy.select(bank, 4, 12, mem, g) for _ in range(300)]
        picks_u = [uniform.select(bank, 4, 12, None, g_u) for _ in range(300)]
        assert torch.equal(g.get_state(), g_u.get_state())  # uniform replay's stream, draw after draw
        for p, p_u in zip(picks, picks_u):  # each draw keeps the uniform draw's tasks, and its task-1 samples
            assert torch.equal(p >= 10, p_u >= 10) and torch.equal(p[p >= 10], p_u[p_u >= 10])
        from_first = torch.cat([p[p < 10] for p in picks])
        assert abs(from_first.numel() / (4 * 300) - 0.5) < 0.05  # task shares stay uniform
        assert (from_first < 5).float().mean() > 0.95  # within task 0: the forgotten half

    def test_one_pick_lands_on_a_member_with_probability_proportional_to_its_weight(self):
        # weights 1, 1, 2, 4 within group 0 (group 1 flat): P = 1/8, 1/8, 2/8, 4/8 for a pick that falls in group 0
        groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
        log_w = torch.log(t64(1, 1, 2, 4, 1, 1, 1, 1))
        g = torch.Generator().manual_seed(0)
        picks = torch.cat([stratified_choice(torch.arange(8), groups, log_w, 1, g) for _ in range(12000)])
        in_group = picks[picks < 4]
        assert abs(in_group.numel() / 12000 - 0.5) < 0.02  # the group's uniform share
        assert_close(torch.bincount(in_group, minlength=4).double() / in_group.numel(), t64(1, 1, 2, 4) / 8,
                     rtol=0, atol=0.02)  # fmt: skip

    @PROP
    @given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4), k=st.integers(0, 40), seed=st.integers(0, 99),
           spread=st.floats(0.1, 20.0))  # fmt: skip
    def test_within_group_weights_change_only_the_picks_they_must(self, sizes, k, seed, spread):
        """Against uniform selection from the same seed: the same stream afterwards and the same count per group; a
        changed pick (whose uniform pick was still free) goes to a heavier member of its group."""
        groups = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
        n = groups.numel()
        log_w = spread * torch.rand(n, generator=torch.Generator().manual_seed(seed + 1000), dtype=torch.float64)
        candidates = torch.arange(100, 100 + n)
        g_w, g_u = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        picked = stratified_choice(candidates, groups, log_w, k, g_w)
        uniform = uniform_choice(candidates, k, g_u)
        assert torch.equal(g_w.get_state(), g_u.get_state())
        assert picked.numel() == min(k, n) == torch.unique(picked).numel()
        assert torch.equal(groups[picked - 100], groups[uniform - 100])  # group by group, in draw order
        for j in torch.nonzero(picked != uniform).flatten().tolist():
            if int(uniform[j]) not in picked[:j].tolist():
                assert float(log_w[picked[j] - 100]) > float(log_w[uniform[j] - 100])

    def test_uniform_selection_draws_the_same_group_counts(self):
        # The group counts are those of a uniform draw from the same generator state: the weights never move replay
        # between groups.
        groups = torch.tensor([0, 0, 1, 1, 1, 2])
        log_w = t64(9, -9, 9, -9, 0, 3)
        for seed in range(20):
            picked = stratified_choice(torch.arange(6), groups, log_w, 3, torch.Generator().manual_seed(seed))
            uniform = uniform_choice(torch.arange(6), 3, torch.Generator().manual_seed(seed))
            assert torch.equal(
                torch.bincount(groups[picked], minlength=3), torch.bincount(groups[uniform], minlength=3)
            )

    @PROP
    @given(sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4), k=st.integers(0, 40), seed=st.integers(0, 99),
           level=st.floats(-5, 5), tilt=st.booleans())  # fmt: skip
    def test_equal_weights_pick_exactly_what_uniform_selection_picks(self, sizes, k, seed, level, tilt):
        # common random numbers: with nothing to tilt by, the same samples as uniform_choice from the same state, and
        # the generator left in the same state
        groups = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
        n = groups.numel()
        candidates = torch.arange(100, 100 + n)
        flat = torch.full((n,), level, dtype=torch.float64)
        g_mixed, g_uniform = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        picked = stratified_choice(candidates, groups, flat, k, g_mixed, flat.clone() if tilt else None)
        assert torch.equal(picked, uniform_choice(candidates, k, g_uniform))
        assert torch.equal(g_mixed.get_state(), g_uniform.get_state())

    def test_unequal_weights_still_draw_by_weight(self):
        # one differing weight is enough to leave the uniform path: the within-group draw follows the weights
        groups = torch.zeros(6, dtype=torch.int64)
        log_w = t64(0, 0, 0, 0, 0, 60)
        for seed in range(20):
            assert 5 in stratified_choice(torch.arange(6), groups, log_w, 1, torch.Generator().manual_seed(seed))

    def test_a_tilted_rule_replays_what_er_replays_until_its_weights_differ(self):
        """The preset's selection (stratified, zeta 0, task tilt) against the uniform one, from one seed: with
        one earlier task every pick is the same, gaps or not; once two tasks show different gaps, only the picks the
        tilt moves (from the task with the smaller gap to the other) differ, at every step."""
        from mssr_hf.scheduler import _StrategyBase

        mem = make_memory(weighting="forgotten", zeta=0.0, calibration_decay=1.0, task_gap_weight=1.0)
        first = mem.extend(30, step=0)
        mem.expose(first, torch.full((30,), 0.1, dtype=torch.float64), 1)  # task 0's stage
        second = mem.extend(30, step=2)
        mem.expose(second, torch.full((30,), 0.1, dtype=torch.float64), 3)  # task 1's stage, task 0 replayed:
        mem.expose(first, torch.linspace(0.1, 3.0, 30, dtype=torch.float64), 4)  # gaps 0 to 2.9
        assert float(mem.task_gaps(torch.tensor([0]))) > 0
        tilted, uniform = _StrategyBase(weighted=True, event_steps=1), _StrategyBase(weighted=False, event_steps=1)
        g_t, g_u = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
        for step in range(5, 30):
            assert torch.equal(tilted.select(first, 7, step, mem, g_t, by_task_gap=True),
                               uniform.select(first, 7, step, mem, g_u))  # fmt: skip
        mem.extend(30, step=30)  # task 2's stage: tasks 0 and 1 replayed, task 1 with the smaller gap (0.4)
        mem.expose(second, torch.full((30,), 0.5, dtype=torch.float64), 31)
        bank = torch.cat([first, second])
        weights = mem.task_log_weights(bank)
        assert float(weights[0]) > float(weights[-1])
        draws_t = [tilted.select(bank, 7, 33, mem, g_t, by_task_gap=True) for _ in range(200)]
        draws_u = [uniform.select(bank, 7, 33, mem, g_u) for _ in range(200)]
        assert sum(int((d < 30).sum()) for d in draws_t) > sum(int((d < 30).sum()) for d in draws_u) + 100
        assert torch.equal(g_t.get_state(), g_u.get_state())  # the same stream, draw after draw
        for d_t, d_u in zip(draws_t, draws_u):
            moved = d_t != d_u
            assert bool((d_u[moved] >= 30).all()) and bool((d_t[moved] < 30).all())  # task 1 -> task 0 only
        assert 0 < sum(int((d_t != d_u).sum()) for d_t, d_u in zip(draws_t, draws_u)) < 7 * 200 / 2


# ================================================================================================================
# The ratio profile within a stage
# ================================================================================================================


class TestRatioProfile:
    @PROP
    @given(num_steps=st.integers(1, 3000), profile=st.sampled_from(["constant", "front"]))
    def test_the_mean_over_a_stage_is_one(self, num_steps, profile):
        values = [ratio_profile(profile, r, num_steps) for r in range(1, num_steps + 1)]
        assert math.fsum(values) / num_steps == pytest.approx(1.0, rel=1e-9)
        assert all(v > 0 for v in values)

    def test_front_by_hand(self):
        # N = 10, tau = 1: mean of e^-r over r = 0..9 is (1 - e^-10) / (10 (1 - e^-1)); factor = 0.5 + 0.5 e^-r / mean
        mean = (1 - math.exp(-10)) / (10 * (1 - math.exp(-1)))
        assert ratio_profile("front", 1, 10) == pytest.approx(0.5 + 0.5 / mean)
        assert ratio_profile("front", 4, 10) == pytest.approx(0.5 + 0.5 * math.exp(-3) / mean)
        assert ratio_profile("front", 12, 10) == ratio_profile("front", 10, 10)  # past the stage: its last value
        assert ratio_profile("constant", 7, 10) == 1.0
        with pytest.raises(ValueError, match="ratio profile"):
            ratio_profile("late", 1, 10)

    def test_a_strategy_scales_its_ratio_by_the_profile(self):
        from conftest import make_strategy

        strategy = make_strategy("fixed", fixed_interval=1, lambda0=0.1, ratio_profile="front")
        strategy.begin_stage(100, 10, torch.arange(5))
        assert strategy.plan(101, None) == pytest.approx(0.1 * ratio_profile("front", 1, 10))
        assert strategy.plan(110, None) == pytest.approx(0.1 * ratio_profile("front", 10, 10))
        flat = make_strategy("fixed", fixed_interval=1, lambda0=0.1)
        flat.begin_stage(100, 10, torch.arange(5))
        assert flat.plan(101, None) == pytest.approx(0.1)


# ================================================================================================================
# The replay budget
# ================================================================================================================


class TestReplayAllowance:
    def test_by_hand(self):
        # share 0.2, batch 10: 2 samples earned per step. Step 3: 6 earned, 4 spent -> 2.
        assert replay_allowance(0.2, 10, 3, 4) == 2
        assert replay_allowance(0.2, 10, 3, 7) == 0  # never negative
        assert replay_allowance(0.05, 8, 5, 0) == 2  # floor(0.05 * 8 * 5) = floor(2.0) = 2

    @PROP
    @given(share=st.floats(0.01, 1.0), batch=st.integers(1, 64), wants=st.lists(st.integers(0, 64), max_size=60))
    def test_any_prefix_stays_within_the_share(self, share, batch, wants):
        spent = 0
        for step, want in enumerate(wants, start=1):
            spent += min(want, replay_allowance(share, batch, step, spent))
            assert spent <= share * batch * step + 1e-6


# ================================================================================================================
# Replay shifted between tasks by their observed gap (task_gap_weight)
# ================================================================================================================


def _two_task_memory(**overrides) -> SampleMemory:
    """Task 0 (ids 0, 1) and task 1 (id 2), learned to loss 1, then replayed once: task 0 at losses 2 and 4 (gaps 1
    and 3), task 1 at 1 (gap 0). No decay."""
    mem = make_memory(weighting="forgotten", calibration_decay=1.0, **overrides)
    mem.extend(2, step=0)
    mem.extend(1, step=0)
    mem.expose([0, 1, 2], [1.0, 1.0, 1.0], step=1)  # first exposures: the best losses, no gap observed
    mem.expose([0, 1, 2], [2.0, 4.0, 1.0], step=2)
    return mem


class TestTaskGapWeight:
    def test_task_gaps_by_hand(self):
        mem = _two_task_memory()
        # task 0: gaps 1 + 3 over 2 observations, task 1: 0 over 1; pooled mean 4/3. Shrunk by one pseudo-observation
        # of the pooled mean: (4 + 4/3) / 3 = 16/9 and (0 + 4/3) / 2 = 2/3.
        assert_close(mem.task_gaps(torch.tensor([0, 1])), t64(16 / 9, 2 / 3))
        # a cohort the memory has not observed gets the pooled mean of the asked cohorts
        assert_close(mem.task_gaps(torch.tensor([0, 7])), t64((4 + 2) / 3, 2.0))

    def test_task_log_weights_by_hand(self):
        mem = _two_task_memory(task_gap_weight=1.0)
        # per candidate [16/9, 16/9, 2/3], mean 38/27: log(1 + g / mean) = log(43/19) for task 0, log(28/19) for task 1
        assert_close(mem.task_log_weights([0, 1, 2]), t64(*[math.log(43 / 19)] * 2, math.log(28 / 19)))
        off = _two_task_memory()  # task_gap_weight 0: a uniform draw's shares
        assert_close(off.task_log_weights([0, 1, 2]), t64(0, 0, 0))
        unseen = make_memory(3, weighting="forgotten", task_gap_weight=1.0)  # no gap observed yet: uniform
        assert_close(unseen.task_log_weights([0, 1, 2]), t64(0, 0, 0))

    def test_the_weight_needs_the_forgotten_weighting_and_is_not_negative(self, tmp_path):
        with pytest.raises(HyperparameterError, match="task_gap_weight"):
            make_memory(weighting="power", task_gap_weight=1.0)
        with pytest.raises(HyperparameterError, match="task_gap_weight"):
            make_memory(weighting="forgotten", task_gap_weight=-1.0)
        from mssr_hf import MSSRConfig

        with pytest.raises(
            ValueError, match=r"MSSRConfig\.replay_task_gap_weight=1\.0 is invalid: applies to replay_w"
        ):
            MSSRConfig(output_dir=str(tmp_path), replay_task_gap_weight=1.0)

    def test_group_weights_set_each_groups_share(self):
        # two groups of 20; group 1's weight is 3: one pick comes from it with probability 3/4
        groups = torch.tensor([0] * 20 + [1] * 20)
        group_w = torch.cat([torch.zeros(20), torch.full((20,), math.log(3.0))]).double()
        g = torch.Generator().manual_seed(0)
        picks = torch.cat([stratified_choice(torch.arange(40), groups, torch.zeros(40).double(), 1, g, group_w)
                           for _ in range(4000)])  # fmt: skip
        assert abs(float((groups[picks] == 1).double().mean()) - 0.75) < 0.03
        # equal group weights: the shares of a uniform draw (each group half)
        flat = torch.cat([stratified_choice(torch.arange(40), groups, torch.zeros(40).double(), 4, g,
                                            torch.zeros(40).double()) for _ in range(2000)])  # fmt: skip
        assert abs(float((groups[flat] == 1).double().mean()) - 0.5) < 0.03

    def test_three_groups_get_their_hand_computed_shares(self):
        # sizes 10 / 10 / 20, weights 1 / 2 / 4: one pick lands in each with probability n_g w_g / sum = 10 / 110,
        # 20 / 110 and 80 / 110 (mean weight 2.75: group 0's picks stay with probability 1/2.75, group 1's 2/2.75)
        groups = torch.tensor([0] * 10 + [1] * 10 + [2] * 20)
        group_w = torch.log(torch.tensor([1.0] * 10 + [2.0] * 10 + [4.0] * 20, dtype=torch.float64))
        g = torch.Generator().manual_seed(1)
        picks = torch.cat([stratified_choice(torch.arange(40), groups, torch.zeros(40).double(), 1, g, group_w)
                           for _ in range(6000)])  # fmt: skip
        shares = torch.bincount(groups[picks], minlength=3).double() / 6000
        assert_close(shares, t64(10 / 110, 20 / 110, 80 / 110), rtol=0, atol=0.02)

    @PROP
    @given(sizes=st.lists(st.integers(1, 30), min_size=2, max_size=4), k=st.integers(1, 40), seed=st.integers(0, 99),
           levels=st.lists(st.floats(-3, 3), min_size=4, max_size=4))  # fmt: skip
    def test_a_task_tilt_changes_only_the_picks_it_must_move(self, sizes, k, seed, levels):
        """Against uniform selection from the same seed: the same stream afterwards; picks from groups at or above
        the mean weight unchanged; a changed pick moves into a group above the mean (while one has members left)."""
        groups = torch.cat([torch.full((n,), i) for i, n in enumerate(sizes)])
        n = groups.numel()
        group_w = torch.tensor([levels[i] for i in groups.tolist()], dtype=torch.float64)
        candidates = torch.arange(100, 100 + n)
        g_t, g_u = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
        picked = stratified_choice(candidates, groups, torch.zeros(n).double(), k, g_t, group_w)
        uniform = uniform_choice(candidates, k, g_u)
        assert torch.equal(g_t.get_state(), g_u.get_state())
        assert picked.numel() == min(k, n) == torch.unique(picked).numel()
        weight = torch.exp(group_w - group_w.max())
        above = weight >= weight.mean()
        assert bool((picked == uniform)[above[uniform - 100]].all())
        moved = picked != uniform
        strictly_above = weight > weight.mean()
        strictly_above[picked - 100] = False  # what is left unpicked there: if any, no move had to fall back
        if bool(strictly_above.any()):
            assert bool((weight[picked[moved] - 100] > weight.mean()).all())

    def test_the_side_generator_is_deterministic_and_leaves_the_stream_alone(self):
        from mssr_hf.scheduler import side_generator

        g = torch.Generator().manual_seed(5)
        before = g.get_state()
        first = torch.rand(4, generator=side_generator(g), dtype=torch.float64)
        assert torch.equal(g.get_state(), before)
        assert torch.equal(first, torch.rand(4, generator=side_generator(g), dtype=torch.float64))
        torch.rand(1, generator=g)
        assert not torch.equal(first, torch.rand(4, generator=side_generator(g), dtype=torch.float64))

    @PROP
    @given(gap_0=st.integers(0, 50), gap_1=st.integers(0, 50), kappa=st.floats(0.1, 4.0))
    def test_the_task_with_the_larger_gap_gets_the_larger_weight_and_none_loses_more_than_the_bound(
        self, gap_0, gap_1, kappa
    ):
        mem = make_memory(weighting="forgotten", calibration_decay=1.0, task_gap_weight=kappa)
        mem.extend(4, step=0)
        mem.extend(4, step=0)
        mem.expose(torch.arange(8), torch.ones(8, dtype=torch.float64), step=1)
        mem.expose(torch.arange(8), t64(*[1 + gap_0 / 10] * 4, *[1 + gap_1 / 10] * 4), step=2)
        w = mem.task_log_weights(torch.arange(8))
        if gap_0 > gap_1:
            assert float(w[0]) > float(w[4])
        elif gap_1 > gap_0:
            assert float(w[4]) > float(w[0])
        # share of each task relative to a uniform draw's (1/2): at least 1 / (1 + kappa)
        share = torch.exp(w[[0, 4]]) / torch.exp(w[[0, 4]]).sum()
        assert float(share.min()) >= 0.5 / (1 + kappa) - 1e-9

    def test_each_steps_draw_leans_to_the_forgotten_task_and_the_buffer_does_not(self):
        """Task 0's replays sit 3 above their best loss, task 1's at it. With by_task_gap (each step's draw) task 0
        gets (1 + 2) / ((1 + 2) + 1) = 3/4 of the picks (kappa 1: weights 1 + g / mean g = 1 + 2, 1 + 0); the buffer
        draw (draw_buffer, without it) keeps the uniform half."""
        from mssr_hf.scheduler import _StrategyBase, draw_buffer

        mem = make_memory(weighting="forgotten", calibration_decay=1.0, task_gap_weight=1.0, zeta=0.0)
        mem.extend(20, step=0)
        mem.extend(20, step=0)
        mem.expose(torch.arange(40), torch.ones(40, dtype=torch.float64), step=1)
        mem.expose(torch.arange(40), torch.cat([torch.full((20,), 4.0), torch.ones(20)]).double(), step=2)
        # shrinkage moves the task gaps only slightly (20 observations each): (60 + 1.5) / 21 and 1.5 / 21
        strategy = _StrategyBase(weighted=True, event_steps=1)
        g = torch.Generator().manual_seed(0)
        bank = torch.arange(40)
        tilted = torch.cat([strategy.select(bank, 1, 3, mem, g, by_task_gap=True) for _ in range(4000)])
        gaps = mem.task_gaps(torch.tensor([0, 1]))
        weights = 1 + gaps / gaps.mean()
        assert abs(float((tilted < 20).double().mean()) - float(weights[0] / weights.sum())) < 0.03
        assert abs(float(weights[0] / weights.sum()) - 0.75) < 0.02
        plain = torch.cat([draw_buffer(bank, 4, strategy, mem, 3, g) for _ in range(2000)])
        assert abs(float((plain < 20).double().mean()) - 0.5) < 0.03

    def test_with_zeta_0_the_draw_within_a_task_is_uniform_whatever_the_gaps(self):
        """The recommended preset's setting (forgotten, zeta 0, kappa 1) with one earlier task: its samples sit at very
        different gaps (0 to 3.9 above their best loss), yet every sample is drawn equally often: the tilt moves replay
        between tasks only, and zeta 0 leaves the choice within a task uniform."""
        from mssr_hf.scheduler import _StrategyBase

        mem = make_memory(weighting="forgotten", calibration_decay=1.0, task_gap_weight=1.0, zeta=0.0)
        mem.extend(40, step=0)
        mem.expose(torch.arange(40), torch.ones(40, dtype=torch.float64), step=1)
        mem.expose(torch.arange(40), 1.0 + torch.arange(40, dtype=torch.float64) / 10, step=2)
        assert float(mem.predicted_gap(torch.arange(40), 3).std()) > 0  # the gap model does tell the samples apart
        assert torch.equal(mem.replay_log_weights(torch.arange(40), 3), torch.zeros(40, dtype=torch.float64))
        strategy = _StrategyBase(weighted=True, event_steps=1)
        g = torch.Generator().manual_seed(0)
        counts = torch.zeros(40)
        for _ in range(4000):
            counts[strategy.select(torch.arange(40), 2, 3, mem, g, by_task_gap=True)] += 1
        # 200 expected draws per sample; binomial sd about 14, so 5 sd either side
        assert float(counts.min()) > 130 and float(counts.max()) < 270
        assert abs(float(counts[:20].sum() - counts[20:].sum())) < 400  # low and high gaps alike (sd about 89)
