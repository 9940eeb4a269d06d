"""mssr_hf: memory-aware adaptive replay (MSSR) for continual LLM fine-tuning on the Hugging Face stack."""

import sys

# peft imports bitsandbytes whenever it is installed (peft.helpers), and bitsandbytes, imported on a CPU, logs "Failed
# to load CPU gemm_4bit_forward from kernels-community" and takes most of a second. Held back while this package's
# modules import peft, it is imported when a 4-bit or 8-bit model is loaded (transformers' quantizer imports it then).
# peft's availability checks run later and find it; only peft.helpers' layer-condition tool keeps `bnb = None`.
_HOLD_BITSANDBYTES = "bitsandbytes" not in sys.modules
if _HOLD_BITSANDBYTES:
    sys.modules["bitsandbytes"] = None  # makes `import bitsandbytes` fail (ImportError) until removed below
try:
    from .continual import ContinualRunner, UnpublishedStagesError
    from .errors import InputError, MissingFileError, MissingPackageError
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
    from .version import __version__
finally:
    if _HOLD_BITSANDBYTES and sys.modules.get("bitsandbytes", False) is None:
        del sys.modules["bitsandbytes"]

__all__ = [
    "STRATEGY_NAMES",
    "AccuracyTriggeredReplay",
    "ContinualRunner",
    "InputError",
    "IntervalReplay",
    "LossTriggeredReplay",
    "MSSRConfig",
    "MSSRTrainer",
    "MissingFileError",
    "MissingPackageError",
    "NoReplay",
    "ReplaySignals",
    "ReplayStrategy",
    "SampleMemory",
    "ThresholdReplay",
    "UnpublishedStagesError",
    "__version__",
    "build_strategy",
    "interval_steps",
    "replay_ratio",
    "replay_times",
    "scaled_replay_settings",
]
