"""mssr_hf: memory-aware adaptive replay (MSSR) for continual LLM fine-tuning on the Hugging Face stack."""

from .continual import ContinualRunner, UnpublishedStagesError
from .memory import SampleMemory
from .mssr_config import MSSRConfig, scaled_replay_settings
from .mssr_trainer import MSSRTrainer
from .scheduler import (
    STRATEGY_NAMES,
    AccuracyTriggeredReplay,
    IntervalReplay,
    LossTriggeredReplay,
    NoReplay,
    ReplaySignals,
    ReplayStrategy,
    ThresholdReplay,
    build_strategy,
    interval_steps,
    replay_ratio,
    replay_times,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "STRATEGY_NAMES",
    "AccuracyTriggeredReplay",
    "ContinualRunner",
    "IntervalReplay",
    "LossTriggeredReplay",
    "MSSRConfig",
    "MSSRTrainer",
    "NoReplay",
    "ReplaySignals",
    "ReplayStrategy",
    "SampleMemory",
    "ThresholdReplay",
    "UnpublishedStagesError",
    "build_strategy",
    "interval_steps",
    "replay_ratio",
    "replay_times",
    "scaled_replay_settings",
]
