"""MSSRConfig: `trl.SFTConfig` plus the memory and replay settings of MSSR, and the one map from those settings
onto the objects they configure.

- :class:`MSSRConfig` holds every ``memory_*`` / ``replay_*`` default (the paper's values). Its ``__post_init__``
  builds the sample memory and the replay strategy once, so their constructors' checks apply; a rejected value is
  reported under the config's field name. Fields no constructor takes are checked here.
- :data:`FIELD_ARGUMENTS` maps each of those fields to its constructor argument; :func:`memory_from_config` and
  :func:`strategy_from_config` build :class:`~mssr_hf.memory.SampleMemory` and the strategy
  (:func:`~mssr_hf.scheduler.build_strategy`) from a config through it.
- :func:`scaled_replay_settings` scales the step-count defaults to a shorter stage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trl import SFTConfig

from .memory import PHI_CHOICES, WEIGHTINGS, HyperparameterError, SampleMemory
from .scheduler import RATIO_PROFILES, STRATEGY_NAMES, ReplayStrategy, build_strategy

# Named settings of `replay_preset`: each sets the fields a user left at their defaults. "paper" is the paper's tables
# (the defaults themselves). "recommended" is the memory-aware setting chosen on bench/retention.py's development
# sequence; paired with experience replay's draws at the same budget it is level on the report sequences and a little
# ahead on random ones (+0.008 final average over 50 paired runs), so it is not a default (BENCHMARKS.md).
REPLAY_PRESETS: dict[str, dict[str, object]] = {
    "paper": {},
    # Replay in every batch at `replay_lambda0` (experience replay's budget, 30%); each step's replay is shared between
    # the earlier tasks by how far above their best loss their replayed samples have recently been (weight 1 + gap /
    # mean gap), uniformly within a task; no staleness cap. It replays the samples uniform replay draws from the same
    # seed, except the picks the gaps move between tasks. Chosen on the development sequence (BENCHMARKS.md).
    "recommended": {
        "replay_strategy": "mssr_spl", "replay_first_interval": 1, "replay_lambda_min": 0.0,
        "replay_staleness_cap": 0, "replay_weighting": "forgotten", "replay_zeta": 0.0, "replay_task_gap_weight": 1.0,
    },
}  # fmt: skip


@dataclass
class MSSRConfig(SFTConfig):
    r"""
    Configuration class for [`MSSRTrainer`]: every [`~trl.SFTConfig`] field plus the sample memory (`memory_*`, paper
    Table `tab:memory_hparams`) and the replay schedule (`replay_*`, Tables `tab:replay_hparams` and
    `tab:replay_impl_params`). Defaults are the paper's; the paper's intervals assume 2000 optimizer steps per stage,
    so scale `replay_first_interval`, `replay_refresh_interval` and `replay_staleness_cap` for short stages.

    `ignore_data_skip` is always `True`: the replay sampler resumes its own position from a checkpoint.

    Parameters:
        > Strategy

        replay_strategy (`str`, *optional*, defaults to `"mssr_full"`):
            One of `none`, `fixed`, `loss`, `accuracy`, `mssr_sch`, `mssr_spl`, `mssr_full`.
        replay_id_column (`str`, *optional*, defaults to `"mssr_id"`):
            Dataset column holding each sample's integer id in the sample memory; added by the trainer if missing.

        > Sample memory (Sec. 3.1, App. A)

        memory_alpha (`float`, *optional*, defaults to `0.01`): baseline decay alpha.
        memory_gamma_d (`float`, *optional*, defaults to `0.2`): loss sensitivity gamma_d.
        memory_phi (`str`, *optional*, defaults to `"sigmoid"`): mapping phi: `sigmoid`, `identity`, `power`, `log`.
        memory_phi_k (`float`, *optional*, defaults to `10.0`): sigmoid slope k.
        memory_phi_c (`float`, *optional*, defaults to `0.5`): sigmoid centre c.
        memory_phi_p (`float`, *optional*, defaults to `2.0`): exponent p of the `power` mapping.
        memory_phi_kappa (`float`, *optional*, defaults to `10.0`): kappa of the `log` mapping.
        memory_ema_beta (`float`, *optional*, defaults to `0.95`): EMA coefficient of the per-sample loss.
        memory_quantile_low (`float`, *optional*, defaults to `0.05`): lower quantile q_l of the loss normalisation.
        memory_quantile_high (`float`, *optional*, defaults to `0.95`): upper quantile q_u of the loss normalisation.
        memory_eta_s (`float`, *optional*, defaults to `0.05`): consolidation step eta_s.
        memory_beta_s (`float`, *optional*, defaults to `0.5`): saturation exponent beta_s.
        memory_rho (`float`, *optional*, defaults to `0.01`): spacing sensitivity rho.
        memory_gamma_s (`float`, *optional*, defaults to `1.0`): error-driven reinforcement gamma_s.
        memory_s_min (`float`, *optional*, defaults to `1.0`): lower stability clip S_min.
        memory_s_max (`float`, *optional*, defaults to `10.0`): upper stability clip S_max.
        memory_s_init (`float`, *optional*, defaults to `1.0`): initial stability S_0.
        memory_sigma_s (`float`, *optional*, defaults to `0.0`): std of the consolidation noise.
        memory_time_unit (`str`, *optional*, defaults to `"1"`): optimizer steps per memory time unit (a number), or
            `"epoch"` for the stage's optimizer steps per epoch of its task. The hazards, consolidation spacing,
            strength threshold and staleness cap run on memory time. `"1"` is the paper's main text (t counts
            steps); `"epoch"` its Algorithm 1.
        memory_calibration_decay (`float`, *optional*, defaults to `0.99`): weight the fitted forgetting models keep
            of their past evidence at each exposure (used by `replay_weighting="calibrated"` and `"forgotten"`).
        memory_calibration_prior (`float`, *optional*, defaults to `0.1`): the fitted forgetting models' prior slope
            of the loss rise (or gap) on log(1 + memory time unseen).

        > Replay schedule (Sec. 3.2, App. B)

        replay_interval_pattern (`str`, *optional*, defaults to `"expanding"`):
            `expanding`, `fixed`, `geometric`, `ebbinghaus`, `threshold`, or comma-separated replay steps.
        replay_first_interval (`float`, *optional*, defaults to `100`): first replay interval Delta t_r^(1), steps.
        replay_eta_p (`float`, *optional*, defaults to `0.5`): interval expansion gain eta_p.
        replay_rho_p (`float`, *optional*, defaults to `0.05`): decay rate of the expansion gain rho_p.
        replay_interval_unit (`int`, *optional*, defaults to `1`): step unit of the `geometric`/`ebbinghaus` patterns.
        replay_threshold (`float`, *optional*, defaults to `0.5`): mean-strength trigger theta of `threshold`.
        replay_lambda0 (`float`, *optional*, defaults to `0.3`): initial replay ratio lambda_0.
        replay_lambda_min (`float`, *optional*, defaults to `0.05`): minimal replay ratio lambda_min.
        replay_beta_r (`float`, *optional*, defaults to `1e-5`): replay ratio decay rate beta_r.
        replay_zeta (`float`, *optional*, defaults to `1.0`): prioritisation strength zeta.
        replay_weighting (`str`, *optional*, defaults to `"power"`): `power` (m^-zeta), `gain`, `calibrated` (by the
            loss rise predicted by a forgetting model fitted online to the observed rises), or `forgotten` (each task
            keeps the share uniform selection gives it; within a task, by how far a sample's loss is predicted to lie
            above the lowest it has had, from a model fitted online to the observed gaps; the draw starts from
            uniform selection's picks and moves only those the weights require, so from one seed it replays what
            uniform replay would, except the moved picks). The last two are beyond the paper.
        replay_task_gap_weight (`float`, *optional*, defaults to `0.0`): with `replay_weighting="forgotten"`, how
            much an earlier task's share of each replay step grows with the loss gap its replayed samples have
            recently shown (weight 1 + kappa * gap / mean gap per task; beyond the paper). 0: each task keeps the
            share a uniform draw gives it. The buffer is drawn with uniform shares; the per-step draw is tilted.
        replay_beta_m (`float`, *optional*, defaults to `1.0`): exponent beta_m of the `gain` weighting.
        replay_event_steps (`int`, *optional*, defaults to `1`): consecutive optimizer steps per replay event.
        replay_ratio_profile (`str`, *optional*, defaults to `"constant"`): how the ratio varies within a stage, at
            the same mean: `constant`, or `front` (half of it in a burst at the start of the stage, decaying over a
            tenth of the stage; the new task moves the model most at first). Used by the interval strategies
            (`fixed`, `mssr_sch`, `mssr_spl`, `mssr_full`); the threshold trigger, `loss` and `accuracy` ignore it.

        > Replay buffer (App. E)

        replay_buffer_size (`int`, *optional*, defaults to `1024`): active buffer size drawn from the bank.
        replay_refresh_interval (`int`, *optional*, defaults to `50`): steps between buffer refreshes and hazard
            updates.
        replay_staleness_cap (`int`, *optional*, defaults to `500`): bank samples unreviewed for more steps enter the
            buffer first (memory-weighted strategies; 0 disables).
        replay_seed (`int`, *optional*): seed of the replay sampler; defaults to `seed`.
        replay_max_share (`float`, *optional*): at most this share of each stage's trained samples is replayed: a
            replay step takes only what the stage has earned so far (share x global batch per step, minus what it
            replayed). The strategy still decides when and which. `None`: no cap.
        replay_preset (`str`, *optional*): a named setting of the replay and memory fields (`REPLAY_PRESETS`);
            `"paper"` is the paper's tables (the defaults); `"recommended"` replays in every batch at experience
            replay's budget and shares it between earlier tasks by their observed forgetting (BENCHMARKS.md). A
            preset sets the fields that are left at their defaults (a field set to its default value counts as left:
            pass `replay_preset="paper"` to keep the defaults).

        > Baselines

        replay_fixed_interval (`int`, *optional*, defaults to `100`): interval of `fixed` (1: classical experience
            replay).
        replay_probe_interval (`int`, *optional*, defaults to `50`): steps between probe-loss measurements (`loss`).
        replay_probe_size (`int`, *optional*, defaults to `32`): buffer samples in the probe set (`loss`).
        replay_probe_threshold (`float`, *optional*, defaults to `0.05`): relative probe-loss rise that triggers
            replay (`loss`).
        replay_eval_interval (`int`, *optional*, defaults to `100`): steps between evaluations of earlier tasks
            (`accuracy`).
        replay_eval_drop (`float`, *optional*, defaults to `0.02`): score drop from the best that triggers replay
            (`accuracy`).
    """

    replay_strategy: str = field(
        default="mssr_full",
        metadata={
            "help": "none, fixed, loss, accuracy, mssr_sch, mssr_spl or mssr_full.",
            "choices": list(STRATEGY_NAMES),
        },
    )
    replay_id_column: str = field(default="mssr_id", metadata={"help": "Column with each sample's memory id."})

    memory_alpha: float = field(default=0.01, metadata={"help": "Baseline decay alpha (Eq. retention_update)."})
    memory_gamma_d: float = field(default=0.2, metadata={"help": "Loss sensitivity gamma_d of the hazard."})
    memory_phi: str = field(
        default="sigmoid",
        metadata={"help": "Monotone mapping phi of the normalised loss.", "choices": list(PHI_CHOICES)},
    )
    memory_phi_k: float = field(default=10.0, metadata={"help": "Slope k of the sigmoid phi."})
    memory_phi_c: float = field(default=0.5, metadata={"help": "Centre c of the sigmoid phi."})
    memory_phi_p: float = field(default=2.0, metadata={"help": "Exponent p of the power phi."})
    memory_phi_kappa: float = field(default=10.0, metadata={"help": "kappa of the log phi."})
    memory_ema_beta: float = field(default=0.95, metadata={"help": "EMA coefficient of the per-sample loss."})
    memory_quantile_low: float = field(default=0.05, metadata={"help": "Lower quantile q_l of loss normalisation."})
    memory_quantile_high: float = field(default=0.95, metadata={"help": "Upper quantile q_u of loss normalisation."})
    memory_eta_s: float = field(default=0.05, metadata={"help": "Consolidation step eta_s (Eq. reset_spacing)."})
    memory_beta_s: float = field(default=0.5, metadata={"help": "Saturation exponent beta_s of consolidation."})
    memory_rho: float = field(default=0.01, metadata={"help": "Spacing sensitivity rho of consolidation."})
    memory_gamma_s: float = field(default=1.0, metadata={"help": "Error-driven reinforcement gamma_s."})
    memory_s_min: float = field(default=1.0, metadata={"help": "Lower stability clip S_min."})
    memory_s_max: float = field(default=10.0, metadata={"help": "Upper stability clip S_max."})
    memory_s_init: float = field(default=1.0, metadata={"help": "Initial stability of a new sample."})
    memory_sigma_s: float = field(default=0.0, metadata={"help": "Std of the consolidation noise epsilon."})
    memory_time_unit: str = field(
        default="1",
        metadata={"help": "Optimizer steps per memory time unit (a number), or 'epoch' (the stage's epoch)."},
    )
    memory_calibration_decay: float = field(
        default=0.99, metadata={"help": "Evidence kept per exposure by the fitted forgetting model."}
    )
    memory_calibration_prior: float = field(
        default=0.1, metadata={"help": "Prior slope of the fitted forgetting model on log(1 + time unseen)."}
    )

    replay_interval_pattern: str = field(
        default="expanding",
        metadata={"help": "Replay steps: expanding, fixed, geometric, ebbinghaus, threshold, or e.g. '10,25,60'."},
    )
    replay_first_interval: float = field(default=100, metadata={"help": "First replay interval, optimizer steps."})
    replay_eta_p: float = field(default=0.5, metadata={"help": "Interval expansion gain eta_p."})
    replay_rho_p: float = field(default=0.05, metadata={"help": "Decay rate rho_p of the expansion gain."})
    replay_interval_unit: int = field(default=1, metadata={"help": "Step unit of geometric/ebbinghaus patterns."})
    replay_threshold: float = field(default=0.5, metadata={"help": "Mean-strength trigger of the threshold pattern."})
    replay_lambda0: float = field(default=0.3, metadata={"help": "Initial replay ratio lambda_0."})
    replay_lambda_min: float = field(default=0.05, metadata={"help": "Minimal replay ratio lambda_min."})
    replay_beta_r: float = field(default=1e-5, metadata={"help": "Replay ratio decay rate beta_r per step."})
    replay_zeta: float = field(default=1.0, metadata={"help": "Prioritisation strength zeta (p ~ m^-zeta)."})
    replay_weighting: str = field(
        default="power",
        metadata={
            "help": "Replay weights: power (m^-zeta), gain, calibrated, or forgotten.",
            "choices": list(WEIGHTINGS),
        },
    )
    replay_task_gap_weight: float = field(
        default=0.0,
        metadata={"help": "forgotten weighting: tasks' replay shares grow with their observed loss gap (0: off)."},
    )
    replay_beta_m: float = field(default=1.0, metadata={"help": "Exponent beta_m of the gain weighting."})
    replay_event_steps: int = field(default=1, metadata={"help": "Consecutive optimizer steps per replay event."})
    replay_ratio_profile: str = field(
        default="constant",
        metadata={
            "help": "How the ratio varies within a stage at the same mean: constant, or front (a burst at the start).",
            "choices": list(RATIO_PROFILES),
        },
    )

    replay_buffer_size: int = field(default=1024, metadata={"help": "Active replay buffer size."})
    replay_refresh_interval: int = field(
        default=50, metadata={"help": "Steps between buffer refreshes and hazard updates."}
    )
    replay_staleness_cap: int = field(
        default=500, metadata={"help": "Bank samples unreviewed for longer enter the buffer first (0: off)."}
    )
    replay_seed: int | None = field(default=None, metadata={"help": "Seed of the replay sampler (default: seed)."})
    replay_max_share: float | None = field(
        default=None, metadata={"help": "At most this share of each stage's samples is replayed (None: no cap)."}
    )
    replay_preset: str | None = field(
        default=None,
        metadata={
            "help": "Named replay/memory settings (paper, recommended); sets the fields left at their defaults.",
            "choices": list(REPLAY_PRESETS),
        },
    )

    replay_fixed_interval: int = field(default=100, metadata={"help": "Interval of the fixed strategy (1: ER)."})
    replay_probe_interval: int = field(default=50, metadata={"help": "Steps between probe losses (loss strategy)."})
    replay_probe_size: int = field(default=32, metadata={"help": "Buffer samples in the probe set (loss strategy)."})
    replay_probe_threshold: float = field(
        default=0.05, metadata={"help": "Relative probe-loss rise that triggers replay (loss strategy)."}
    )
    replay_eval_interval: int = field(
        default=100, metadata={"help": "Steps between evaluations of earlier tasks (accuracy strategy)."}
    )
    replay_eval_drop: float = field(
        default=0.02, metadata={"help": "Score drop from the best that triggers replay (accuracy strategy)."}
    )

    def __post_init__(self):
        self._apply_preset()
        if isinstance(self.replay_interval_pattern, (list, tuple)):  # the config holds it as text: "10,25,60"
            self.replay_interval_pattern = ",".join(str(int(t)) for t in self.replay_interval_pattern)
        self._check_unbuilt_fields()
        # Build the memory and the strategy once: their constructors hold the rules of the fields they take.
        for target, build in (("memory", memory_from_config), ("strategy", strategy_from_config)):
            try:
                build(self)
            except HyperparameterError as error:
                raise self._field_error(target, error) from error
        # MSSRTrainer's sampler resumes its own position from the checkpoint; HF's batch skipping on resume would
        # skip as many batches again from there (and their replay plans would never reach the memory).
        self.ignore_data_skip = True
        super().__post_init__()

    def _check_unbuilt_fields(self) -> None:
        """The fields no constructor takes (the others are checked by the objects they configure)."""

        def count(name: str, low: int) -> bool:  # an int >= low
            value = getattr(self, name)
            return isinstance(value, int) and not isinstance(value, bool) and value >= low

        checks = (
            # Training fields the parent accepts but that would fail later (after files are written) or mean another
            # thing than asked: max_steps=0 trains one step at learning rate 0, a negative one means num_train_epochs.
            ("per_device_train_batch_size", count("per_device_train_batch_size", 1), "must be an int >= 1"),
            ("gradient_accumulation_steps", count("gradient_accumulation_steps", 1), "must be an int >= 1"),
            ("max_steps", self.max_steps == -1 or count("max_steps", 1), "must be an int >= 1, or -1 to train "
             "num_train_epochs epochs"),
            ("num_train_epochs", self.max_steps != -1 or (isinstance(self.num_train_epochs, (int, float))
             and self.num_train_epochs > 0), "must be > 0 when max_steps is -1"),
            ("replay_id_column", bool(self.replay_id_column), "give a column name"),
            ("replay_buffer_size", count("replay_buffer_size", 1), "must be an int >= 1"),
            ("replay_refresh_interval", count("replay_refresh_interval", 1), "must be an int >= 1"),
            ("replay_probe_size", count("replay_probe_size", 1), "must be an int >= 1"),
            ("replay_staleness_cap", count("replay_staleness_cap", 0), "must be an int >= 0 (0 disables it)"),
            ("replay_max_share", self.replay_max_share is None or (isinstance(self.replay_max_share, (int, float))
             and 0 < self.replay_max_share <= 1), "must lie in (0, 1], or be None for no cap"),
            ("memory_time_unit", _time_unit(self.memory_time_unit) is not None, "give optimizer steps per memory "
             "time unit (a number > 0) or 'epoch'"),
            ("packing", not self.packing, "packing merges samples into one row, so per-sample ids and losses are "
             "lost; set packing=False"),
            ("padding_free", not self.padding_free, "padding-free batches lose per-sample boundaries; set "
             "padding_free=False"),
        )  # fmt: skip
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"MSSRConfig.{name}={getattr(self, name)!r} is invalid: {rule}.")
        self.memory_time_unit = str(self.memory_time_unit)  # a YAML number arrives as int/float

    def _field_error(self, target: str, error: HyperparameterError) -> ValueError:
        """``error`` of ``target``'s constructor, told in this config's field names (quoted words stay as they are)."""
        arguments = FIELD_ARGUMENTS[target]
        names = [name for name, argument in arguments.items() if argument == error.argument]
        if not names:
            return error
        field_of = {argument: name for name, argument in arguments.items()}
        rule = re.sub(r"(?<!')\b\w+\b(?!')", lambda m: field_of.get(m.group(), m.group()), error.rule)
        setting = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return ValueError(f"MSSRConfig.{setting} is invalid: {rule}.")

    def _apply_preset(self) -> None:
        if self.replay_preset is None:
            return
        if self.replay_preset not in REPLAY_PRESETS:
            raise ValueError(
                f"MSSRConfig.replay_preset={self.replay_preset!r} is invalid: choose one of {list(REPLAY_PRESETS)}."
            )
        for name, value in REPLAY_PRESETS[self.replay_preset].items():
            if getattr(self, name) == MSSRConfig.__dataclass_fields__[name].default:
                setattr(self, name, value)

    def time_unit_steps(self, steps_per_epoch: int) -> float:
        """Optimizer steps per memory time unit for a stage with ``steps_per_epoch`` steps per epoch."""
        unit = _time_unit(self.memory_time_unit)
        return float(steps_per_epoch) if unit == "epoch" else unit

    def interval_pattern(self) -> str | list[int]:
        """`replay_interval_pattern` as a pattern name or a list of steps (``"10,25,60"`` -> ``[10, 25, 60]``); any
        other text is returned as it is, for :func:`~mssr_hf.scheduler.build_strategy` to reject."""
        steps = [s.strip() for s in str(self.replay_interval_pattern).split(",")]
        if all(s.isdigit() for s in steps):
            return [int(s) for s in steps]
        return self.replay_interval_pattern

    def resolved_replay_seed(self) -> int:
        """``replay_seed``, or ``seed`` when it is not set."""
        return self.seed if self.replay_seed is None else self.replay_seed


# Every MSSRConfig field that configures the sample memory or the replay strategy, by object: field -> that
# constructor's keyword argument. The one map between the two: it builds both objects and names the field when a
# constructor rejects a value. Fields that share an argument (the two quantiles) are passed as a tuple, in order.
FIELD_ARGUMENTS: dict[str, dict[str, str]] = {
    "memory": {  # SampleMemory(num_samples, seed=..., **arguments)
        "memory_alpha": "alpha", "memory_gamma_d": "gamma_d", "memory_phi": "phi", "memory_phi_k": "phi_k",
        "memory_phi_c": "phi_c", "memory_phi_p": "phi_p", "memory_phi_kappa": "phi_kappa",
        "memory_ema_beta": "ema_beta", "memory_quantile_low": "quantiles", "memory_quantile_high": "quantiles",
        "memory_eta_s": "eta_s", "memory_beta_s": "beta_s", "memory_rho": "rho", "memory_gamma_s": "gamma_s",
        "memory_s_min": "s_min", "memory_s_max": "s_max", "memory_s_init": "s_init", "memory_sigma_s": "sigma_s",
        "replay_zeta": "zeta", "replay_weighting": "weighting", "replay_beta_m": "beta_m",
        "memory_calibration_decay": "calibration_decay", "memory_calibration_prior": "calibration_prior",
        "replay_task_gap_weight": "task_gap_weight",
    },
    "strategy": {  # build_strategy(**arguments)
        "replay_strategy": "name", "replay_interval_pattern": "interval_pattern",
        "replay_first_interval": "first_interval", "replay_eta_p": "eta_p", "replay_rho_p": "rho_p",
        "replay_interval_unit": "interval_unit", "replay_fixed_interval": "fixed_interval",
        "replay_lambda0": "lambda0", "replay_lambda_min": "lambda_min", "replay_beta_r": "beta_r",
        "replay_threshold": "threshold", "replay_event_steps": "event_steps",
        "replay_ratio_profile": "ratio_profile",
        "replay_probe_interval": "probe_interval", "replay_probe_threshold": "probe_threshold",
        "replay_eval_interval": "eval_interval", "replay_eval_drop": "eval_drop",
    },
}  # fmt: skip


def constructor_arguments(target: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``target`` (``"memory"``: :class:`~mssr_hf.memory.SampleMemory` but ``seed``;
    ``"strategy"``: :func:`~mssr_hf.scheduler.build_strategy`) from MSSRConfig field ``values`` (a config's
    ``vars()``, or the fields' defaults)."""
    grouped: dict[str, list[Any]] = {}
    for name, argument in FIELD_ARGUMENTS[target].items():
        grouped.setdefault(argument, []).append(values[name])
    return {argument: group[0] if len(group) == 1 else tuple(group) for argument, group in grouped.items()}


def _time_unit(value: Any) -> float | str | None:
    """``memory_time_unit`` as "epoch" or a number of steps > 0; None when it is neither."""
    if value == "epoch":
        return value
    try:
        unit = float(value)
    except (TypeError, ValueError):
        return None
    return unit if math.isfinite(unit) and unit > 0 else None


def memory_from_config(args: MSSRConfig, num_samples: int = 0) -> SampleMemory:
    """A :class:`~mssr_hf.memory.SampleMemory` of ``num_samples`` samples with the hyperparameters of ``args``."""
    return SampleMemory(num_samples, seed=args.resolved_replay_seed(), **constructor_arguments("memory", vars(args)))


def strategy_from_config(args: MSSRConfig) -> ReplayStrategy:
    """The strategy named by ``args.replay_strategy`` with the ``replay_*`` settings of ``args``."""
    arguments = constructor_arguments("strategy", vars(args))
    return build_strategy(**{**arguments, "interval_pattern": args.interval_pattern()})


PAPER_STAGE_STEPS = 2000  # the stage length the paper's replay intervals were set for


# The step counts of the paper's tables: their defaults assume PAPER_STAGE_STEPS optimizer steps per stage.
PAPER_STEP_FIELDS = (
    "replay_first_interval", "replay_fixed_interval", "replay_refresh_interval", "replay_probe_interval",
    "replay_eval_interval", "replay_staleness_cap",
)  # fmt: skip


def scaled_replay_settings(steps: int, preset: str | None = None) -> dict[str, int]:
    """The paper's step-count settings (Tables `tab:replay_hparams`, `tab:replay_impl_params`; the defaults of the
    :data:`PAPER_STEP_FIELDS` of :class:`MSSRConfig`), scaled from 2000 optimizer steps per stage to ``steps``, for
    short stages (CPU runs, demos, benchmarks). Every interval is at least 1. ``replay_interval_unit`` is already the
    smallest step and is left alone. With ``preset`` (a :data:`REPLAY_PRESETS` name), the fields that preset sets
    are left out, so that the preset's values hold (a preset only sets fields left at their defaults).

    >>> scaled_replay_settings(200)["replay_first_interval"]
    10
    >>> "replay_staleness_cap" in scaled_replay_settings(200, preset="recommended")
    False
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an int >= 1 (optimizer steps per stage), got {steps!r}")
    if preset is not None and preset not in REPLAY_PRESETS:
        raise ValueError(f"preset={preset!r} is invalid: choose one of {list(REPLAY_PRESETS)}.")
    pinned = REPLAY_PRESETS[preset] if preset else {}
    scale = steps / PAPER_STAGE_STEPS
    defaults = MSSRConfig.__dataclass_fields__
    return {name: max(1, round(defaults[name].default * scale)) for name in PAPER_STEP_FIELDS if name not in pinned}
