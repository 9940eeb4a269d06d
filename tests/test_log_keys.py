"""``mssr_hf.log_keys`` names exactly what MSSRTrainer logs, so that the plots (which read the logs back) and users'
dashboards find it."""

import pytest
from conftest import arithmetic_rows, make_memory
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from mssr_hf import log_keys
from mssr_hf.mssr_config import MSSRConfig
from mssr_hf.mssr_trainer import MSSRTrainer

pytestmark = pytest.mark.slow


def test_the_trainer_logs_the_keys_log_keys_names_and_no_other(tiny_model_dir, tmp_path):
    args = MSSRConfig(
        output_dir=str(tmp_path / "out"), report_to=[], bf16=False, use_cpu=True, gradient_checkpointing=False,
        per_device_train_batch_size=2, logging_steps=1, save_strategy="no", max_steps=4, max_length=32,
        disable_tqdm=True, replay_strategy="mssr_full", replay_first_interval=1,
    )  # fmt: skip
    task, bank = (Dataset.from_list(arithmetic_rows(16, op, seed)) for op, seed in (("-", 1), ("+", 2)))
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tokenizer)
    trainer.train()

    logged = {key for entry in trainer.state.log_history for key in entry}
    named = {
        value
        for name, value in vars(log_keys).items()
        if name.isupper() and name not in ("MEMORY_PREFIX", "MEMORY_CALIBRATION_KEYS") and not name.startswith("EVAL")
    }  # the EVAL_ keys are ContinualRunner's (tests/test_tracking.py)
    summary = {log_keys.memory_key(stat) for stat in make_memory(1).summary(step=0)}  # memory/<stat> of the bank
    assert named <= logged
    ours = {key for key in logged if key.startswith(("replay/", log_keys.MEMORY_PREFIX))}
    # the calibration keys appear once a replayed sample has been seen twice
    assert named | summary <= ours <= named | summary | set(log_keys.MEMORY_CALIBRATION_KEYS)
