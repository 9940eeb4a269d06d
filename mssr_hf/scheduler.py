"""Dataset-level replay schedule: *when* to replay, *how much*, and *which* samples (paper Sec. 3.2, App. B).

- :func:`interval_steps` and :func:`replay_times`: the replay steps of a stage (``eq:interval_expand`` and the
  ablation patterns of Table ``tab:scheduler_variants``).
- :func:`replay_ratio`: the decaying replay ratio (``eq:ratio_decay_appendix``).
- :func:`uniform_choice` / :func:`weighted_choice`: selection without replacement, uniform or by memory weights
  (Gumbel-top-k on log-weights, ``eq:prob_weight``), used both for the buffer refresh (bank -> buffer) and for the
  replay part of a batch (buffer -> batch); :func:`draw_buffer` adds the staleness cap. :func:`stratified_choice`
  (the ``forgotten`` weighting) keeps each task's uniform share and builds its weighted draw from a uniform draw's
  picks (:func:`regroup_picks`, :func:`couple_picks`), so it and uniform selection share their random numbers.
- The strategies: small objects behind the :class:`ReplayStrategy` protocol; :func:`build_strategy` maps the names
  ``none``, ``fixed``, ``loss``, ``accuracy``, ``mssr_sch``, ``mssr_spl``, ``mssr_full`` onto them. It takes every
  setting explicitly (``MSSRConfig`` holds the defaults) and checks each against one rule table (``_RULES``).

Steps: ``step`` is the 1-based global index of the optimizer step a batch is formed for; a stage that starts after
``stage_start`` completed optimizer steps has relative steps ``r = step - stage_start`` in ``1..num_steps``.

This module imports torch only.
"""

from __future__ import annotations

import copy
import hashlib
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch

from .memory import HyperparameterError, SampleMemory

INTERVAL_PATTERNS = ("expanding", "fixed", "geometric", "ebbinghaus", "threshold")
RATIO_PROFILES = ("constant", "front")
STRATEGY_NAMES = ("none", "fixed", "loss", "accuracy", "mssr_sch", "mssr_spl", "mssr_full")

# Review times of the classic spacing schedules (Table tab:scheduler_variants), in units of `interval_unit` steps.
_GEOMETRIC_BASE = (1, 3, 7, 15)  # 2^k - 1
_EBBINGHAUS_BASE = (1, 2, 4, 7, 15, 30)  # then doubling: 60, 120, ...


# ----------------------------------------------------------------------------------------------------------------
# When and how much
# ----------------------------------------------------------------------------------------------------------------


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def interval_steps(
    first_interval: float = 100, eta_p: float = 0.5, rho_p: float = 0.05, horizon: int = 2000
) -> list[int]:
    r"""Replay steps of one stage, relative to the stage start, with expanding intervals (``eq:interval_expand``):

    $$t_1 = \Delta_1 = \text{first\_interval}, \quad \Delta_{k+1} = \Delta_k (1 + \eta_p e^{-\rho_p k}),
    \quad t_{k+1} = t_k + \Delta_{k+1}$$

    Each $t_k$ is rounded half up; steps at or beyond ``horizon`` are dropped.

    Args:
        first_interval (`float`): $\Delta t_r^{(1)}$, >= 1 step. eta_p (`float`): expansion gain $\eta_p \ge 0$.
        rho_p (`float`): decay of the gain $\rho_p \ge 0$. horizon (`int`): the stage length in optimizer steps.
    """
    if not (math.isfinite(first_interval) and first_interval >= 1):
        raise ValueError(f"first_interval must be a finite number of steps >= 1, got {first_interval}")
    if not (math.isfinite(eta_p) and eta_p >= 0):
        raise ValueError(f"eta_p must be a finite number >= 0, got {eta_p}")
    if not (math.isfinite(rho_p) and rho_p >= 0):
        raise ValueError(f"rho_p must be a finite number >= 0, got {rho_p}")
    times: list[int] = []
    t = delta = float(first_interval)
    k = 1
    while _round_half_up(t) < horizon:
        times.append(_round_half_up(t))
        delta *= 1.0 + eta_p * math.exp(-rho_p * k)
        t += delta
        k += 1
    return times


def replay_ratio(step: int, lambda0: float = 0.3, lambda_min: float = 0.05, beta_r: float = 1e-5) -> float:
    r"""Replay ratio at global optimizer ``step`` (``eq:ratio_decay_appendix``, bounded by $\lambda_0$):
    $\lambda_t = \lambda_{min} + (\lambda_0 - \lambda_{min}) e^{-\beta_r t}$."""
    return lambda_min + (lambda0 - lambda_min) * math.exp(-beta_r * step)


def replay_times(
    pattern: str | Sequence[int],
    horizon: int,
    *,
    first_interval: float = 100,
    eta_p: float = 0.5,
    rho_p: float = 0.05,
    interval_unit: int = 1,
) -> list[int]:
    """Replay steps of a stage (relative, ``1..horizon-1``) for an interval ``pattern``:

    - ``expanding``: :func:`interval_steps` (the MSSR default);
    - ``fixed``: every ``first_interval`` steps;
    - ``geometric``: ``{1, 3, 7, 15, ...} * interval_unit`` (times ``2^k - 1``);
    - ``ebbinghaus``: ``{1, 2, 4, 7, 15, 30, 60, ...} * interval_unit`` (doubling after 30);
    - a sequence of ints: those steps.
    """
    if not isinstance(pattern, str):
        times = sorted({int(t) for t in pattern})
        if times and times[0] < 1:
            raise ValueError(f"explicit replay steps must be >= 1, got {times[0]}")
        return [t for t in times if t < horizon]
    if pattern == "expanding":
        return interval_steps(first_interval, eta_p, rho_p, horizon)
    if interval_unit < 1:
        raise ValueError(f"interval_unit must be >= 1, got {interval_unit}")
    if pattern == "fixed":
        if not first_interval >= 1:
            raise ValueError(f"the fixed interval must be >= 1 step, got {first_interval}")
        step = _round_half_up(first_interval)
        return list(range(step, horizon, step))
    if pattern in ("geometric", "ebbinghaus"):
        base = list(_GEOMETRIC_BASE if pattern == "geometric" else _EBBINGHAUS_BASE)
        while base[-1] * interval_unit < horizon:
            base.append(2 * base[-1] + 1 if pattern == "geometric" else 2 * base[-1])
        return [b * interval_unit for b in base if b * interval_unit < horizon]
    raise ValueError(f"interval pattern must be one of {INTERVAL_PATTERNS[:-1]} or a list of steps, got {pattern!r}")


def ratio_profile(profile: str, stage_step: int, num_steps: int) -> float:
    r"""Factor on the replay ratio at relative step $r$ = ``stage_step`` of an $N$ = ``num_steps``-step stage; its
    mean over the stage is 1, so a profile moves replay within a stage without changing how much is replayed.

    - ``constant``: 1.
    - ``front``: $\tfrac12 + \tfrac12\, e^{-(r-1)/\tau} / \overline{e^{-(r-1)/\tau}}$ with $\tau = N/10$: half the
      budget spread evenly, half in a burst at the start of the stage, when the new task moves the model most (about
      5.5 at the first step, below 1 after about a quarter of the stage, 0.5 at the end). Interval replay restarts at
      every stage start for the same reason (``eq:interval_expand``).
    """
    if profile == "constant" or num_steps <= 0:
        return 1.0
    if profile == "front":
        tau = num_steps / 10.0
        r = min(max(stage_step, 1), num_steps) - 1
        # the mean of e^{-r/tau} over r = 0..N-1 (a geometric series)
        mean = (1.0 - math.exp(-num_steps / tau)) / (num_steps * (1.0 - math.exp(-1.0 / tau)))
        return 0.5 + 0.5 * math.exp(-r / tau) / mean
    raise ValueError(f"ratio profile must be one of {RATIO_PROFILES}, got {profile!r}")


def replay_allowance(max_share: float, batch: int, stage_step: int, spent: int) -> int:
    r"""Replay samples a step may take under a replay budget: what the stage has earned by relative step
    ``stage_step`` (``max_share`` of each step's ``batch``) minus what it has ``spent``,
    $\lfloor \text{share} \cdot B \cdot r \rfloor - \text{spent}$ (never below 0). Unspent allowance carries
    over, so the strategy still chooses when to replay; over any prefix of the stage the replayed share is at most
    ``max_share``."""
    return max(0, math.floor(max_share * batch * stage_step + 1e-9) - spent)


# ----------------------------------------------------------------------------------------------------------------
# Which samples
# ----------------------------------------------------------------------------------------------------------------


def uniform_choice(candidates: torch.Tensor, k: int, generator: torch.Generator) -> torch.Tensor:
    """``min(k, n)`` distinct entries of ``candidates`` (shape ``(n,)``), uniformly without replacement."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    n = candidates.numel()
    k = min(k, n)
    if 4 * k > n:
        return candidates[torch.randperm(n, generator=generator)[:k]]
    # k << n: draw positions i.i.d. and keep first occurrences (sequential sampling without replacement), which
    # touches O(k) memory instead of shuffling the whole bank.
    picked = torch.zeros(0, dtype=torch.int64)
    while picked.numel() < k:
        draw = torch.cat([picked, torch.randint(n, (k + k // 2 + 8,), generator=generator)])
        uniq, inverse = torch.unique(draw, return_inverse=True)
        first = torch.full((uniq.numel(),), draw.numel(), dtype=torch.int64)
        first.scatter_reduce_(0, inverse, torch.arange(draw.numel()), reduce="amin")
        picked = uniq[torch.argsort(first)]
    return candidates[picked[:k]]


def weighted_choice(
    candidates: torch.Tensor, log_weights: torch.Tensor, k: int, generator: torch.Generator
) -> torch.Tensor:
    r"""``min(k, n)`` distinct entries of ``candidates`` drawn without replacement with probabilities proportional to
    $\exp(\text{log\_weights})$: Gumbel-top-k, $\arg\mathrm{top}_k(\log w_i + g_i)$, $g_i \sim \mathrm{Gumbel}(0,1)$.

    Works in log space, so weights of any magnitude are fine; entries with $\log w = -\infty$ come last.
    """
    if log_weights.shape != candidates.shape:
        raise ValueError(
            f"log_weights must match candidates, got {tuple(log_weights.shape)} vs {tuple(candidates.shape)}"
        )
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    k = min(k, candidates.numel())
    u = torch.rand(candidates.numel(), generator=generator, dtype=torch.float64).clamp_(min=1e-300)
    keys = log_weights.to(torch.float64) - torch.log(-torch.log(u))
    return candidates[torch.topk(keys, k).indices]


def _all_equal(values: torch.Tensor) -> bool:
    """Whether ``values`` is non-empty, finite and constant (exactly)."""
    return values.numel() > 0 and bool(torch.isfinite(values).all()) and bool((values == values[0]).all())


def side_generator(generator: torch.Generator) -> torch.Generator:
    """A generator seeded from a hash of ``generator``'s state, which it leaves untouched: randomness for a step that
    a uniform rule does not take, drawn without moving the stream that rule shares (see :func:`stratified_choice`).
    Deterministic: the same state gives the same side generator."""
    digest = hashlib.blake2b(generator.get_state().numpy().tobytes(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little") >> 1)


def regroup_picks(picks: torch.Tensor, group_log_weights: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    r"""Turn ``picks`` (distinct positions of a uniform draw, in draw order) into a draw whose group shares follow
    ``group_log_weights`` (one per position, equal within a group), changing as few picks as possible: a maximal
    coupling, pick by pick.

    A pick from group $g$ (weight $w_g$, positions' mean weight $\bar w$) stays with probability
    $\min(1, w_g/\bar w)$; a pick that does not stay moves to a not yet picked member of a group above the mean,
    drawn with probability proportional to $w_g - \bar w$ (so a group's chance is its unpicked members times
    $w_g - \bar w$). While few of a group's members are picked, each pick lands in group $g$ with probability
    $n_g w_g / \sum_h n_h w_h$, as one weighted pick would: $q_g \min(1, w_g/\bar w) + P(\text{move})
    \cdot n_g (w_g - \bar w)^+ / \sum_h n_h (w_h - \bar w)^+$ with $q_g = n_g/n$. If the groups above the mean run
    out of members, a move goes to any unpicked position.

    Picks from groups at or above the mean weight never change, and a moved pick keeps its place in the order.
    """
    k, n = picks.numel(), group_log_weights.numel()
    if k == 0 or k >= n or not bool(torch.isfinite(group_log_weights.max())):
        return picks
    weight = torch.exp(group_log_weights.to(torch.float64) - group_log_weights.max())
    excess = (weight - weight.mean()).clamp(min=0)  # per position; sums per group to n_g (w_g - mean)
    stays = torch.rand(k, generator=generator, dtype=torch.float64) < weight[picks] / weight.mean()
    if bool(stays.all()):
        return picks
    taken = torch.zeros(n, dtype=torch.bool)
    taken[picks[stays]] = True
    out = picks.clone()
    for i in torch.nonzero(~stays).flatten().tolist():
        free = ~taken
        target = excess * free  # a position-level draw: a group's chance is its free members' total excess
        if not bool((target > 0).any()):
            target = free.to(torch.float64)
        position = int(torch.multinomial(target, 1, generator=generator))
        taken[position] = True
        out[i] = position
    return out


def couple_picks(picks: torch.Tensor, log_weights: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    r"""Turn ``picks`` (distinct positions of a uniform draw, in draw order) into a draw without replacement by
    ``log_weights`` (one per position), changing as few picks as it can: successive sampling, each pick coupled
    maximally with the uniform pick in its place.

    For the $j$-th pick, with $F$ the positions not yet taken and $\bar w_F$ their mean weight: the uniform pick $p$
    stays with probability $\min(1, w_p / \bar w_F)$; otherwise the pick goes to a position of $F$ drawn with
    probability proportional to $(w_i - \bar w_F)^+$, or by $w_i$ if $p$ was already taken. While $p$ is (close to)
    uniform over $F$, pick $j$ lands on $i \in F$ with probability $w_i / \sum_F w$: the law of successive weighted
    sampling (Gumbel-top-k's). So the heaviest free position is never left for a lighter one when the weights are
    extreme (top-k), and equal weights keep every pick. Draws from ``generator`` (pass a :func:`side_generator`)."""
    k, n = picks.numel(), log_weights.numel()
    if k == 0 or k >= n or _all_equal(log_weights) or not bool(torch.isfinite(log_weights.max())):
        return picks
    log_weights = log_weights.to(torch.float64)
    stay = torch.rand(k, generator=generator, dtype=torch.float64)
    taken = torch.zeros(n, dtype=torch.bool)
    out = picks.clone()
    for j, p in enumerate(picks.tolist()):
        free_log = log_weights.masked_fill(taken, -math.inf)
        top = free_log.max()
        if not bool(torch.isfinite(top)):  # nothing free has weight: any free position
            weight = (~taken).to(torch.float64)
        else:
            weight = torch.exp(free_log - top)  # relative to the heaviest free position: no underflow to all-zero
        mean = float(weight.sum()) / (n - j)
        if not taken[p] and float(stay[j]) * mean < float(weight[p]):
            choice = p
        else:
            target = (weight - mean).clamp(min=0) if not taken[p] else weight
            if not bool((target > 0).any()):
                target = weight
            choice = int(torch.multinomial(target, 1, generator=generator))
        taken[choice] = True
        out[j] = choice
    return out


def stratified_choice(
    candidates: torch.Tensor,
    groups: torch.Tensor,
    log_weights: torch.Tensor,
    k: int,
    generator: torch.Generator,
    group_log_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""``min(k, n)`` distinct entries of ``candidates``: how many come from each group is drawn exactly as uniform
    selection would draw them (``k`` uniform picks, counted per group), and which ones within a group by
    ``log_weights``. So the weights move replay between the samples of one group (one task), never between groups.

    Within a group the uniform picks are turned into a weighted draw by :func:`couple_picks`: successive sampling by
    the weights (each pick lands on a free member with probability proportional to its weight, the law of
    Gumbel-top-k), each pick coupled with the uniform pick in its place, so a pick changes only as often as the
    weights require (never, when they are equal; always to the heaviest free member, when they are extreme).

    With ``group_log_weights`` (one per candidate, equal within a group), the uniform picks are first regrouped by
    :func:`regroup_picks`: a group's expected share grows with its weight times its size, and every pick the
    weights do not require to move stays what uniform selection picked.

    Common random numbers: the uniform picks come from :func:`uniform_choice` on ``generator``, and every move is
    drawn from :func:`side_generator`, so a weighted rule and a uniform rule with the same seed consume the same
    stream: the generator is left where uniform selection leaves it, and the result differs from
    ``uniform_choice(candidates, k, generator)`` only in the moved picks (when every weight is equal, not at all). So
    a weighted rule and its uniform control replay the same samples except where the weights act, at every step.

    Args:
        candidates (`torch.Tensor`): shape ``(n,)``. groups (`torch.Tensor`): each candidate's group, ints >= 0,
            shape ``(n,)``. log_weights (`torch.Tensor`): shape ``(n,)``. k (`int`): how many, >= 0.
        group_log_weights (`torch.Tensor`, *optional*): shape ``(n,)``.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    k = min(k, candidates.numel())
    if k == 0:
        return candidates[:0]
    tilted = group_log_weights is not None and not _all_equal(group_log_weights)
    flat = _all_equal(log_weights)
    if flat and not tilted:
        return uniform_choice(candidates, k, generator)
    picks = uniform_choice(torch.arange(candidates.numel()), k, generator)
    side = side_generator(generator)
    if tilted:
        picks = regroup_picks(picks, group_log_weights, side)
    if flat:
        return candidates[picks]
    # Within each group: successive weighted sampling, coupled pick by pick with the uniform picks (couple_picks).
    pick_groups = groups[picks]
    out = picks.clone()
    for group in torch.unique(pick_groups).tolist():
        members = torch.nonzero(groups == group).flatten()
        at = torch.nonzero(pick_groups == group).flatten()
        local = torch.searchsorted(members, picks[at])
        out[at] = members[couple_picks(local, log_weights[members], side)]
    return candidates[out]


def draw_buffer(
    bank_ids: torch.Tensor,
    size: int,
    strategy: ReplayStrategy,
    memory: SampleMemory | None,
    step: int,
    generator: torch.Generator,
    staleness_cap: int = 0,
) -> torch.Tensor:
    """Re-draw the active replay buffer (``size`` ids) from the bank. With ``staleness_cap > 0`` and a memory, samples
    not reviewed for more than ``staleness_cap`` memory time units (optimizer steps on the paper's clock) are taken
    first (longest-unreviewed first; the "staleness
    safety cap" of Table ``tab:replay_impl_params``); the strategy's :meth:`ReplayStrategy.select` fills the rest
    (without ``by_task_gap``: the buffer holds tasks at a uniform draw's shares)."""
    if staleness_cap > 0 and memory is not None and bank_ids.numel():
        unseen_for = memory.elapsed_since_review(bank_ids, step)
        stale = unseen_for > staleness_cap
        if bool(stale.any()):
            order = torch.argsort(unseen_for[stale], descending=True, stable=True)
            forced = bank_ids[stale][order][:size]
            rest = bank_ids[~stale]
            picked = (
                strategy.select(rest, size - forced.numel(), step, memory, generator)
                if size > forced.numel()
                else forced[:0]
            )
            return torch.cat([forced, picked])
    return strategy.select(bank_ids, size, step, memory, generator)


# ----------------------------------------------------------------------------------------------------------------
# Strategies
# ----------------------------------------------------------------------------------------------------------------


def _finite(value: Any) -> bool:
    return isinstance(value, numbers.Real) and math.isfinite(value)


def _is_pattern(value: Any, _: Mapping[str, Any]) -> bool:
    if isinstance(value, str):
        return value in INTERVAL_PATTERNS
    return isinstance(value, Sequence) and all(isinstance(t, numbers.Real) and t >= 1 for t in value)


_INT_AT_LEAST_1 = (lambda v, _: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "must be an int >= 1")
_NON_NEGATIVE = (lambda v, _: _finite(v) and v >= 0, "must be a finite number >= 0")

# The rule of every strategy setting, by build_strategy's argument names: (check(value, all values), rule). The one
# place these rules are written: build_strategy checks every argument it is given, whether the named strategy uses
# it or not (so a setting is checked where a run is configured), and each strategy checks its own fields.
_RULES: dict[str, tuple[Callable[[Any, Mapping[str, Any]], bool], str]] = {
    "interval_pattern": (_is_pattern, f"use one of {INTERVAL_PATTERNS} or a list of steps >= 1 such as [10, 25, 60]"),
    "first_interval": (lambda v, _: _finite(v) and v >= 1, "must be a finite number of steps >= 1"),
    "eta_p": _NON_NEGATIVE,
    "rho_p": _NON_NEGATIVE,
    "interval_unit": _INT_AT_LEAST_1,
    "fixed_interval": _INT_AT_LEAST_1,
    "lambda0": (lambda v, _: _finite(v) and 0 <= v <= 1, "must lie in [0, 1]"),
    "lambda_min": (lambda v, s: _finite(v) and 0 <= v <= s["lambda0"], "must lie in [0, lambda0={lambda0}]"),
    "beta_r": _NON_NEGATIVE,
    "threshold": (lambda v, _: _finite(v) and 0 < v < 1, "must lie in (0, 1)"),
    "event_steps": _INT_AT_LEAST_1,
    "probe_interval": _INT_AT_LEAST_1,
    "probe_threshold": _NON_NEGATIVE,
    "eval_interval": _INT_AT_LEAST_1,
    "eval_drop": _NON_NEGATIVE,
    "ratio_profile": (lambda v, _: v in RATIO_PROFILES, f"use one of {RATIO_PROFILES}"),
}


def _check_settings(owner: str, values: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> None:
    """Check ``values`` (keyed by `_RULES` names) in order; the first broken rule raises a
    :class:`~mssr_hf.memory.HyperparameterError` naming ``labels.get(name, name)``."""
    for name, value in values.items():
        ok, rule = _RULES[name]
        if not ok(value, values):
            raise HyperparameterError(owner, (labels or {}).get(name, name), value, rule.format(**values))


@dataclass
class ReplaySignals:
    """What a strategy may observe after an optimizer step: a probe loss on buffer samples, or validation scores of
    earlier tasks (higher is better). ``None`` where nothing was measured at that step."""

    probe_loss: float | None = None
    scores: Mapping[str, float] | None = None


@runtime_checkable
class ReplayStrategy(Protocol):
    """What the trainer needs from a replay strategy. A user may pass any object with these members.

    - ``probe_interval`` / ``eval_interval``: every how many optimizer steps the trainer must measure a probe loss
      on buffer samples / validation scores of earlier tasks and pass them to :meth:`observe` (0: never).
    - ``begin_stage``: a new task starts after ``stage_start`` completed steps and runs ``num_steps`` steps; the
      bank holds ``bank_ids``.
    - ``plan``: the fraction of optimizer step ``step``'s global batch to take from the buffer (0.0: no replay).
      Called once per step, in order, on every rank with identical inputs.
    - ``select``: which ``k`` of ``candidates`` to replay (also used to refresh the buffer from the bank). The
      trainer passes ``by_task_gap=True`` to each step's draw, and only when the memory's ``task_gap_weight`` is
      above 0: the draw may then shift replay between tasks by their observed forgetting.
    """

    name: str
    probe_interval: int
    eval_interval: int

    def begin_stage(self, stage_start: int, num_steps: int, bank_ids: torch.Tensor) -> None: ...

    def plan(self, step: int, memory: SampleMemory | None) -> float: ...

    def observe(self, step: int, signals: ReplaySignals) -> None: ...

    def select(
        self,
        candidates: torch.Tensor,
        k: int,
        step: int,
        memory: SampleMemory | None,
        generator: torch.Generator,
        by_task_gap: bool = False,
    ) -> torch.Tensor: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(kw_only=True)
class _StrategyBase:
    """Shared bookkeeping: the stage window, uniform or memory-weighted selection, and the state round trip.

    Hyperparameter fields have no defaults: :func:`build_strategy` passes the values (``MSSRConfig`` holds the
    defaults). ``_settings`` names the fields checked by `_RULES`, ``_rule_names`` those that go by another name there.
    """

    _settings: ClassVar[tuple[str, ...]] = ("event_steps",)
    _rule_names: ClassVar[dict[str, str]] = {}

    weighted: bool = False
    event_steps: int
    stage_start: int = 0
    num_steps: int = 0
    bank_size: int = 0
    probe_interval: int = 0
    eval_interval: int = 0
    name: str = field(default="base", init=False)

    def begin_stage(self, stage_start: int, num_steps: int, bank_ids: torch.Tensor) -> None:
        if stage_start < 0 or num_steps < 0:
            raise ValueError(f"stage_start and num_steps must be >= 0, got {stage_start}, {num_steps}")
        self.stage_start, self.num_steps, self.bank_size = int(stage_start), int(num_steps), int(bank_ids.numel())

    def observe(self, step: int, signals: ReplaySignals) -> None:
        pass

    def select(
        self,
        candidates: torch.Tensor,
        k: int,
        step: int,
        memory: SampleMemory | None,
        generator: torch.Generator,
        by_task_gap: bool = False,
    ) -> torch.Tensor:
        if self.weighted:
            if memory is None:
                raise ValueError(f"strategy {self.name!r} selects by memory weights and needs a SampleMemory")
            log_weights = memory.replay_log_weights(candidates, step)
            if memory.stratified:
                task_weights = memory.task_log_weights(candidates) if by_task_gap else None
                groups = memory.cohort[candidates]
                return stratified_choice(candidates, groups, log_weights, k, generator, task_weights)
            return weighted_choice(candidates, log_weights, k, generator)
        return uniform_choice(candidates, k, generator)

    def _check(self) -> None:
        """Check the fields named in ``_settings``, called by every strategy's ``__post_init__``."""
        values = {self._rule_names.get(f, f): getattr(self, f) for f in self._settings}
        _check_settings(type(self).__name__, values, {rule: f for f, rule in self._rule_names.items()})

    def state_dict(self) -> dict[str, Any]:
        """JSON primitives only; a snapshot (later changes to the strategy do not reach it)."""
        state = {k: copy.deepcopy(v) for k, v in vars(self).items() if not k.startswith("_")}
        state["kind"] = type(self).__name__
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("name") != self.name or state.get("kind") != type(self).__name__:
            raise ValueError(
                f"state is for strategy {state.get('name')!r} ({state.get('kind')}), "
                f"not {self.name!r} ({type(self).__name__})"
            )
        for key, value in state.items():
            if key not in ("name", "kind"):
                setattr(self, key, copy.deepcopy(value))
        self._after_load()

    def _after_load(self) -> None:
        pass


@dataclass(kw_only=True)
class NoReplay(_StrategyBase):
    """``none``: sequential fine-tuning, no replay."""

    def __post_init__(self) -> None:
        self.name = "none"
        self._check()

    def plan(self, step: int, memory: SampleMemory | None) -> float:
        return 0.0


@dataclass(kw_only=True)
class IntervalReplay(_StrategyBase):
    """Replay at scheduled steps of each stage. ``fixed`` (every ``first_interval`` steps, constant ratio $\\lambda_0$,
    uniform), ``mssr_sch`` (expanding intervals ``eq:interval_expand`` + decaying ratio ``eq:dynamic_ratio``, uniform),
    ``mssr_spl`` (fixed intervals, constant ratio, memory-weighted selection ``eq:prob_weight``) and ``mssr_full``
    (expanding + decaying + weighted) are all instances.

    A replay event mixes replay into ``event_steps`` consecutive optimizer steps starting at each replay step.
    """

    _settings = ("event_steps", "lambda0", "lambda_min", "beta_r")

    pattern: str | list[int]
    first_interval: float
    eta_p: float
    rho_p: float
    interval_unit: int
    lambda0: float
    lambda_min: float
    beta_r: float
    decay_ratio: bool
    label: str
    ratio_profile: str = "constant"

    def __post_init__(self) -> None:
        self.name = self.label
        self._check()
        if isinstance(self.pattern, tuple):
            self.pattern = list(self.pattern)
        # Validate the pattern now rather than at begin_stage.
        replay_times(self.pattern, 2, first_interval=self.first_interval, eta_p=self.eta_p, rho_p=self.rho_p,
                     interval_unit=self.interval_unit)  # fmt: skip
        self._times: set[int] = set()

    def begin_stage(self, stage_start: int, num_steps: int, bank_ids: torch.Tensor) -> None:
        super().begin_stage(stage_start, num_steps, bank_ids)
        self._after_load()

    def _after_load(self) -> None:
        times = replay_times(
            self.pattern, self.num_steps + 1, first_interval=self.first_interval, eta_p=self.eta_p,
            rho_p=self.rho_p, interval_unit=self.interval_unit,
        )  # fmt: skip
        self._times = {t + j for t in times for j in range(self.event_steps)}

    def replay_steps(self) -> list[int]:
        """The relative steps (``1..num_steps``) of the current stage that replay."""
        return sorted(t for t in self._times if 1 <= t <= self.num_steps)

    def plan(self, step: int, memory: SampleMemory | None) -> float:
        relative = step - self.stage_start
        if self.bank_size == 0 or relative not in self._times:
            return 0.0
        ratio = (
            self.lambda0 if not self.decay_ratio else replay_ratio(step, self.lambda0, self.lambda_min, self.beta_r)
        )
        return ratio * ratio_profile(self.ratio_profile, relative, self.num_steps)


@dataclass(kw_only=True)
class ThresholdReplay(_StrategyBase):
    """``interval_pattern="threshold"`` (App. B, $\\tau^\\star$ of ``eq:tau_star``): replay when the mean memory
    strength of the bank falls below ``threshold``; at least ``min_gap`` steps between replay events."""

    _settings = ("event_steps", "lambda0", "lambda_min", "beta_r", "threshold")

    threshold: float
    min_gap: int
    lambda0: float
    lambda_min: float
    beta_r: float
    label: str
    last_event: int = -(10**18)
    pending: int = 0
    bank_ranges: list[list[int]] = field(default_factory=list)  # the bank's ids as [start, end) runs (JSON-sized)

    def __post_init__(self) -> None:
        self.name = self.label
        self._check()
        self._bank_ids = torch.zeros(0, dtype=torch.int64)

    def begin_stage(self, stage_start: int, num_steps: int, bank_ids: torch.Tensor) -> None:
        super().begin_stage(stage_start, num_steps, bank_ids)
        ids = torch.unique(bank_ids.to(torch.int64))  # sorted
        breaks = (torch.nonzero(ids[1:] != ids[:-1] + 1).flatten() + 1).tolist()
        starts, ends = [0] + breaks, breaks + [ids.numel()]
        self.bank_ranges = [[int(ids[a]), int(ids[b - 1]) + 1] for a, b in zip(starts, ends) if b > a]
        self._after_load()

    def _after_load(self) -> None:
        runs = [torch.arange(a, b) for a, b in self.bank_ranges]
        self._bank_ids = torch.cat(runs) if runs else torch.zeros(0, dtype=torch.int64)

    def plan(self, step: int, memory: SampleMemory | None) -> float:
        if self.bank_size == 0:
            return 0.0
        if memory is None:
            raise ValueError("threshold-triggered replay needs a SampleMemory")
        if self.pending == 0 and step - self.last_event >= self.min_gap:
            mean_strength = float(memory.strength(self._bank_ids, step).mean())
            if mean_strength < self.threshold:
                self.pending, self.last_event = self.event_steps, step
        if self.pending == 0:
            return 0.0
        self.pending -= 1
        return replay_ratio(step, self.lambda0, self.lambda_min, self.beta_r)


@dataclass(kw_only=True)
class _TriggeredReplay(_StrategyBase):
    """The baselines' replay event: once :meth:`observe` sees a trigger, the next ``event_steps`` steps replay a
    fraction $\\lambda_0$ of the batch, uniformly."""

    lambda0: float
    pending: int = 0

    def plan(self, step: int, memory: SampleMemory | None) -> float:
        if self.bank_size == 0 or self.pending == 0:
            return 0.0
        self.pending -= 1
        return self.lambda0


@dataclass(kw_only=True)
class LossTriggeredReplay(_TriggeredReplay):
    """``loss`` baseline: every ``probe_interval`` steps the trainer measures the mean loss of a fixed probe set of
    buffer samples (extra forwards, timed and logged); the first probe of a stage is the reference, and a probe loss
    above ``reference * (1 + threshold)`` triggers a replay event (ratio $\\lambda_0$, uniform) on the next steps."""

    _settings = ("event_steps", "lambda0", "probe_interval", "threshold")
    _rule_names = {"threshold": "probe_threshold"}

    probe_interval: int
    threshold: float
    reference: float | None = None

    def __post_init__(self) -> None:
        self.name = "loss"
        self._check()

    def begin_stage(self, stage_start: int, num_steps: int, bank_ids: torch.Tensor) -> None:
        super().begin_stage(stage_start, num_steps, bank_ids)
        self.reference, self.pending = None, 0

    def observe(self, step: int, signals: ReplaySignals) -> None:
        loss = signals.probe_loss
        if loss is None or not math.isfinite(loss):
            return
        if self.reference is None:
            self.reference = loss
        elif loss > self.reference * (1.0 + self.threshold):
            self.pending = self.event_steps


@dataclass(kw_only=True)
class AccuracyTriggeredReplay(_TriggeredReplay):
    """``accuracy`` baseline: every ``eval_interval`` steps the trainer evaluates the earlier tasks' validation
    subsets (through a caller-supplied callable; extra time, logged); a score more than ``drop`` below that task's
    best so far triggers a replay event (ratio $\\lambda_0$, uniform) on the next steps."""

    _settings = ("event_steps", "lambda0", "eval_interval", "drop")
    _rule_names = {"drop": "eval_drop"}

    eval_interval: int
    drop: float
    best: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = "accuracy"
        self._check()

    def observe(self, step: int, signals: ReplaySignals) -> None:
        if not signals.scores:
            return
        dropped = False
        for task, score in signals.scores.items():
            best = self.best.get(task)
            if best is not None and score < best - self.drop:
                dropped = True
            self.best[task] = score if best is None else max(best, score)
        if dropped:
            self.pending = self.event_steps


def build_strategy(
    name: str, *, interval_pattern: str | Sequence[int], first_interval: float, eta_p: float, rho_p: float,
    interval_unit: int, fixed_interval: int, lambda0: float, lambda_min: float, beta_r: float, threshold: float,
    event_steps: int, probe_interval: int, probe_threshold: float, eval_interval: int, eval_drop: float,
    ratio_profile: str = "constant",
) -> ReplayStrategy:  # fmt: skip
    """The strategy called ``name`` (one of :data:`STRATEGY_NAMES`).

    Every setting is required (``MSSRConfig``'s ``replay_*`` fields hold the defaults; ``strategy_from_config`` in
    :mod:`mssr_hf.mssr_config` builds from a config) and checked, whether ``name`` uses it or not: a value outside its
    range raises a :class:`~mssr_hf.memory.HyperparameterError` naming the argument and the rule.

    ``interval_pattern`` applies to ``mssr_sch`` and ``mssr_full`` (``expanding``, ``fixed``, ``geometric``,
    ``ebbinghaus``, a list of steps, or ``threshold``: replay when the bank's mean strength falls below
    ``threshold``); ``fixed`` replays every ``fixed_interval`` steps, ``mssr_spl`` every ``first_interval`` steps;
    ``probe_*`` configure ``loss``, ``eval_*`` ``accuracy``.
    """
    settings = {key: value for key, value in locals().items() if key != "name"}
    if name not in STRATEGY_NAMES:
        raise HyperparameterError("build_strategy", "name", name, f"choose one of {STRATEGY_NAMES}")
    _check_settings("build_strategy", settings)
    ratio = dict(lambda0=lambda0, lambda_min=lambda_min, beta_r=beta_r)
    schedule = dict(first_interval=first_interval, eta_p=eta_p, rho_p=rho_p, interval_unit=interval_unit)
    if name == "none":
        return NoReplay(event_steps=event_steps)
    if name == "loss":
        return LossTriggeredReplay(probe_interval=probe_interval, threshold=probe_threshold, lambda0=lambda0,
                                   event_steps=event_steps)  # fmt: skip
    if name == "accuracy":
        return AccuracyTriggeredReplay(eval_interval=eval_interval, drop=eval_drop, lambda0=lambda0,
                                       event_steps=event_steps)  # fmt: skip
    if name in ("fixed", "mssr_spl"):  # fixed intervals, constant ratio; mssr_spl selects by memory weights
        every = fixed_interval if name == "fixed" else first_interval
        return IntervalReplay(pattern="fixed", **{**schedule, "first_interval": every}, decay_ratio=False,
                              weighted=name == "mssr_spl", label=name, event_steps=event_steps,
                              ratio_profile=ratio_profile, **ratio)  # fmt: skip
    weighted = name == "mssr_full"  # mssr_sch or mssr_full
    if interval_pattern == "threshold":
        return ThresholdReplay(threshold=threshold, min_gap=max(1, event_steps), weighted=weighted, label=name,
                               event_steps=event_steps, **ratio)  # fmt: skip
    pattern = interval_pattern if isinstance(interval_pattern, str) else [int(t) for t in interval_pattern]
    return IntervalReplay(pattern=pattern, decay_ratio=True, weighted=weighted, label=name, event_steps=event_steps,
                          ratio_profile=ratio_profile, **schedule, **ratio)  # fmt: skip
