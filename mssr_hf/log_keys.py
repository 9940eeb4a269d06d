"""The names of the replay and memory statistics that ``MSSRTrainer`` adds to the trainer's logs (``log_history``,
tensorboard, wandb, ...; reporters prefix them with ``train/``), for code that reads them back, such as
:mod:`mssr_hf.plotting`, and of the evaluation ``ContinualRunner`` logs after each stage (:mod:`mssr_hf.tracking`;
reporters show ``eval_x`` as ``eval/x``). Framework-free: strings only.

``replay/*`` are the replay schedule's state and its running counts over the stage; ``memory/*`` are
:meth:`SampleMemory.summary <mssr_hf.memory.SampleMemory.summary>` of the replay bank (strength mean, min and
5/50/95% quantiles, mean stability), each under :func:`memory_key`, plus the count of skipped non-finite losses and,
once replayed samples have been seen again, the calibration of the fitted forgetting model
(:meth:`ForgettingModel.calibration <mssr_hf.memory.ForgettingModel.calibration>`).
"""

from __future__ import annotations

REPLAY_RATIO = "replay/ratio"  # replay ratio λ of the last trained step (0.0: it did not replay)
REPLAY_REPLAYED_SAMPLES = "replay/replayed_samples"  # samples replayed so far by this stage's trainer
REPLAY_REPLAY_STEPS = "replay/replay_steps"  # optimizer steps so far (this stage) with replay in them
REPLAY_PROBE_SECONDS = "replay/probe_seconds"  # time spent on probe losses (`loss` strategy)
REPLAY_EVAL_SECONDS = "replay/eval_seconds"  # time spent evaluating earlier tasks (`accuracy` strategy)
REPLAY_STEPS_TO_NEXT = "replay/steps_to_next"  # steps until the next scheduled replay (interval strategies)
REPLAY_BOOKKEEPING_SECONDS = "replay/bookkeeping_seconds"  # time in MSSRTrainer's own per-step work

MEMORY_PREFIX = "memory/"


def memory_key(stat: str) -> str:
    """The log key of one :meth:`SampleMemory.summary <mssr_hf.memory.SampleMemory.summary>` statistic."""
    return MEMORY_PREFIX + stat


MEMORY_SKIPPED_LOSSES = memory_key("skipped_losses")  # non-finite losses the memory skipped (it spans stages)
MEMORY_STRENGTH_MEAN = memory_key("strength_mean")  # mean memory strength m of the replay bank
MEMORY_STRENGTH_Q05 = memory_key("strength_q05")
MEMORY_STRENGTH_Q95 = memory_key("strength_q95")

# The fitted forgetting model's calibration (logged once replayed samples have been seen again; see
# ForgettingModel.calibration): observations in the window, and the correlation of the observed loss rise with the
# predicted rise and with -log m.
MEMORY_CALIBRATION_KEYS = tuple(
    memory_key(stat) for stat in ("calibration_observations", "calibration_r_predicted", "calibration_r_neg_log_m")
)

# What ContinualRunner logs after each stage (mssr_hf.tracking), at the stage's last global optimizer step.
EVAL_STAGE = "eval_stage"  # the stage just finished (0-based)


def eval_score_key(task: str) -> str:
    """The log key of a task's score after a stage (shown as ``eval/score/<task>``)."""
    return f"eval_score/{task}"


def eval_probe_key(task: str) -> str:
    """The log key of the probe task's score after a stage (shown as ``eval/probe/<task>``)."""
    return f"eval_probe/{task}"


def eval_metric_key(metric: str) -> str:
    """The log key of a continual-learning metric of the accuracy matrix so far, e.g. ``eval_average_forgetting``
    (shown as ``eval/average_forgetting``)."""
    return f"eval_{metric}"
