"""Trains MSSRTrainer under `accelerate launch` and writes what each rank saw (used by tests/test_distributed.py).

ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 tests/scripts/ddp_replay.py MODEL_DIR OUT_DIR
"""

import json
import sys
from pathlib import Path

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import arithmetic_rows  # noqa: E402

from mssr_hf.mssr_config import MSSRConfig  # noqa: E402
from mssr_hf.mssr_trainer import MSSRTrainer  # noqa: E402
from mssr_hf.state_io import save_state  # noqa: E402

torch.set_num_threads(1)


class RecordingTrainer(MSSRTrainer):
    """Records this rank's micro-batch ids per step, and every global batch its sampler formed."""

    local_ids: dict[int, list[int]]
    global_batches: dict[int, list[int]]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.model.training:
            step = self.step_offset + self.state.global_step + 1
            self.local_ids.setdefault(step, []).extend(inputs[self.args.replay_id_column].tolist())
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def _get_train_sampler(self, train_dataset=None):
        sampler = super()._get_train_sampler(train_dataset)
        form = sampler.batch_for_step
        ids = self.train_dataset[self.args.replay_id_column]

        def recording_batch_for_step(step):
            rows = form(step)
            self.global_batches[step] = [int(ids[r]) for r in rows.tolist()]
            return rows

        sampler.batch_for_step = recording_batch_for_step
        return sampler


def main(model_dir: str, out_dir: str) -> None:
    out = Path(out_dir)
    task = Dataset.from_list(arithmetic_rows(64, "-", seed=1))
    bank = Dataset.from_list(arithmetic_rows(48, "+", seed=2))
    args = MSSRConfig(
        output_dir=str(out / "run"), report_to=[], bf16=False, use_cpu=True, gradient_checkpointing=False,
        per_device_train_batch_size=2, gradient_accumulation_steps=2, max_steps=10, logging_steps=1,
        save_strategy="no", learning_rate=1e-3, max_length=32, disable_tqdm=True, seed=3,
        ddp_find_unused_parameters=False, replay_strategy="mssr_full", replay_first_interval=1, replay_eta_p=0.4,
        replay_lambda0=0.5, replay_refresh_interval=3, replay_buffer_size=16,
    )  # fmt: skip
    trainer = RecordingTrainer(
        AutoModelForCausalLM.from_pretrained(model_dir), args, train_dataset=task, replay_dataset=bank,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )  # fmt: skip
    trainer.local_ids, trainer.global_batches = {}, {}
    trainer.train()
    rank = trainer.args.process_index
    save_state(out, f"memory_rank{rank}", trainer.memory.state_dict())
    record = {
        "world_size": trainer.args.world_size,
        "local_ids": trainer.local_ids,
        "global_batches": {s: b for s, b in trainer.global_batches.items() if s <= 10},
        "replayed_samples": trainer.counters["replayed_samples"],
        "replay_steps": trainer.strategy.replay_steps(),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(*sys.argv[1:3])
