"""MSSRTrainer on a tiny random Llama: losses, ids, replay composition, resume, baselines' costs, bad input."""

import copy
import json
import logging
import math
import re

import pytest
import torch
from conftest import arithmetic_rows, make_memory
from datasets import Dataset, concatenate_datasets
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import SFTConfig, SFTTrainer

from mssr_hf.errors import InputError
from mssr_hf.mssr_config import MSSRConfig, scaled_replay_settings
from mssr_hf.mssr_trainer import (
    COMPLETE_NAME,
    REPLAY_STATE_KEYS,
    MSSRTrainer,
    last_complete_checkpoint,
    read_checkpoint,
)
from mssr_hf.sampler import MixedReplaySampler
from mssr_hf.scheduler import interval_steps

pytestmark = pytest.mark.slow

COMMON = dict(
    report_to=[], bf16=False, use_cpu=True, gradient_checkpointing=False, per_device_train_batch_size=2,
    gradient_accumulation_steps=2, logging_steps=1, save_strategy="no", learning_rate=1e-3, max_length=32,
    disable_tqdm=True, seed=7,
)  # fmt: skip


def load(model_dir):
    return AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)


def config(tmp_path, **overrides):
    return MSSRConfig(output_dir=str(tmp_path / "out"), **{**COMMON, **overrides})


def task_and_bank(n_task=32, n_bank=48):
    return Dataset.from_list(arithmetic_rows(n_task, "-", seed=1)), Dataset.from_list(arithmetic_rows(n_bank, "+", 2))


class Recorder:
    """Records every (step, ids, per-sample losses) the memory observes, through the trainer's exposure listeners."""

    def __init__(self, trainer):
        self.trainer, self.calls = trainer, []
        trainer.exposure_listeners.append(self.record)

    def record(self, memory, ids, losses, step):
        self.calls.append((step, ids.clone(), losses.clone()))

    def ids_by_step(self):
        out = {}
        for step, ids, _ in self.calls:
            out.setdefault(step, []).extend(ids.tolist())
        return out


def count_forwards(model):
    calls = []
    model.register_forward_hook(lambda *a: calls.append(1))
    return calls


def step_losses(trainer):
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def test_none_matches_plain_sft_trainer(tiny_model_dir, tmp_path):
    """replay_strategy='none' is SFTTrainer: same per-step losses, same number of forward passes."""
    task, _ = task_and_bank()
    model, tok = load(tiny_model_dir)
    plain_forwards = count_forwards(model)
    plain = SFTTrainer(model, SFTConfig(output_dir=str(tmp_path / "plain"), max_steps=8, **COMMON),
                       train_dataset=task, processing_class=tok)  # fmt: skip
    plain.train()

    model, tok = load(tiny_model_dir)
    mssr_forwards = count_forwards(model)
    ours = MSSRTrainer(model, config(tmp_path, max_steps=8, replay_strategy="none"), train_dataset=task,
                       processing_class=tok)  # fmt: skip
    recorder = Recorder(ours)
    ours.train()

    assert len(step_losses(ours)) == 8
    torch.testing.assert_close(torch.tensor(step_losses(ours)), torch.tensor(step_losses(plain)), atol=1e-6, rtol=0)
    assert len(mssr_forwards) == len(plain_forwards) == 8 * 2  # one forward per micro-batch
    # Every task sample was observed once (32 rows = 8 steps x 4), at steps 1..8.
    assert sorted(i for ids in recorder.ids_by_step().values() for i in ids) == list(range(32))
    assert sorted(recorder.ids_by_step()) == list(range(1, 9))


def test_per_sample_losses_match_logits(tiny_model_dir, tmp_path):
    """The memory receives each sample's mean completion-token NLL, for the right id (lr=0 keeps weights fixed)."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    trainer = MSSRTrainer(model, config(tmp_path, max_steps=6, learning_rate=0.0, replay_strategy="fixed",
                                        replay_fixed_interval=2, replay_lambda0=0.5),
                          train_dataset=task, replay_dataset=bank, processing_class=tok)  # fmt: skip
    recorder = Recorder(trainer)
    trainer.train()
    model.eval()
    rows = trainer.train_dataset
    id_col = rows[trainer.args.replay_id_column]
    checked = 0
    for _, ids, losses in recorder.calls:
        for sample_id, loss in zip(ids.tolist(), losses.tolist()):
            row = rows[id_col.index(sample_id)]
            input_ids = torch.tensor([row["input_ids"]])
            labels = torch.tensor(row["labels"][1:])
            with torch.no_grad():
                logits = model(input_ids=input_ids).logits[0, :-1]  # (T-1, V)
            mask = labels != -100
            nll = -torch.log_softmax(logits.double(), -1)[torch.arange(labels.numel()), labels.clamp(min=0)]
            expected = float(nll[mask].mean())
            assert loss == pytest.approx(expected, abs=1e-5)
            checked += 1
    assert checked == 6 * 4


def test_replay_steps_hold_planned_bank_samples(tiny_model_dir, tmp_path):
    """At mssr_full's replay steps, round(lambda * global batch) samples come from the bank; elsewhere none."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    args = config(
        tmp_path,
        max_steps=12,
        replay_strategy="mssr_full",
        replay_first_interval=2,
        replay_lambda0=0.5,
        replay_lambda_min=0.25,
        replay_beta_r=0.05,
        replay_refresh_interval=3,
        replay_buffer_size=16,
    )
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok)
    recorder = Recorder(trainer)
    trainer.train()
    bank_ids = set(range(48))  # the bank gets ids 0..47, the task 48..79
    replay_steps = interval_steps(2, 0.5, 0.05, 13)  # [2, 5, 9]
    assert replay_steps == [2, 5, 9]
    by_step = recorder.ids_by_step()
    for step in range(1, 13):
        ids = by_step[step]
        assert len(ids) == 4
        from_bank = [i for i in ids if i in bank_ids]
        # lambda_t = 0.25 + 0.25 e^{-0.05 t}: t=2 -> 0.476, t=5 -> 0.445, t=9 -> 0.410; x 4 -> 2 each
        expected = round((0.25 + 0.25 * math.exp(-0.05 * step)) * 4) if step in replay_steps else 0
        assert len(from_bank) == expected, (step, ids)
        assert len(set(ids)) == len(ids)
    assert trainer.counters["replayed_samples"] == 6 and trainer.counters["replay_steps"] == 3
    # Replayed samples were reviewed: their last review is their replay step.
    for step in replay_steps:
        for i in by_step[step]:
            if i in bank_ids:
                assert int(trainer.memory.last_review[i]) >= step


def test_exposure_listeners_see_each_exposure_first_and_bookkeeping_is_counted(tiny_model_dir, tmp_path):
    """A listener passed to the trainer is called before every memory.expose, with the memory as it was (no id of the
    call reviewed at that step yet); MSSRTrainer's own work is timed in counters and logged."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    calls = []

    def listener(memory, ids, losses, step):
        calls.append((step, ids.tolist(), bool((memory.last_review[ids] < step).all())))

    args = config(tmp_path, max_steps=4, replay_strategy="fixed", replay_fixed_interval=1, replay_lambda0=0.5)
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok,
                          exposure_listeners=[listener])  # fmt: skip
    trainer.train()
    assert [step for step, _, _ in calls] == [1, 1, 2, 2, 3, 3, 4, 4]  # one call per micro-batch
    assert all(before for _, _, before in calls)
    for step, ids, _ in calls:
        assert all(int(trainer.memory.last_review[i]) >= step for i in ids)  # then the memory took them
    assert trainer.counters["bookkeeping_seconds"] > 0
    logged = [e["replay/bookkeeping_seconds"] for e in trainer.state.log_history if "loss" in e]  # every step
    assert len(logged) == 4 and logged == sorted(logged) and logged[-1] > 0


class StopAt(TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True


def test_resume_continues_identically(tiny_model_dir, tmp_path):
    """8 steps straight == 4 steps, stop, resume_from_checkpoint: same memory, replay ids and losses; the same epochs
    in the log and the same summary train_loss, also when resumed at the last checkpoint (no step left to train)."""
    task, bank = task_and_bank()
    replay = dict(max_steps=8, replay_strategy="mssr_full", replay_first_interval=1, replay_eta_p=0.3,
                  replay_refresh_interval=3, replay_buffer_size=12, replay_lambda0=0.5, save_strategy="steps",
                  save_steps=4)  # fmt: skip

    def run(out, resume=None, stop=None):
        model, tok = load(tiny_model_dir)
        trainer = MSSRTrainer(model, config(out, **replay), train_dataset=task, replay_dataset=bank,
                              processing_class=tok, callbacks=[StopAt(stop)] if stop else None)  # fmt: skip
        recorder = Recorder(trainer)
        trainer.output = trainer.train(resume_from_checkpoint=resume)
        return trainer, recorder

    straight, straight_rec = run(tmp_path / "a")
    run(tmp_path / "b", stop=4)
    checkpoint = tmp_path / "b" / "out" / "checkpoint-4"
    assert (checkpoint / "mssr_state.safetensors").is_file() and (checkpoint / "mssr_state.json").is_file()
    resumed, resumed_rec = run(tmp_path / "b", resume=str(checkpoint))
    at_end, at_end_rec = run(tmp_path / "b", resume=str(tmp_path / "b" / "out" / "checkpoint-8"))

    for key, value in straight.memory.state_dict().items():
        other = resumed.memory.state_dict()[key]
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, other), key
        else:
            assert value == other, key
    straight_ids, resumed_ids = straight_rec.ids_by_step(), resumed_rec.ids_by_step()
    assert sorted(resumed_ids) == [5, 6, 7, 8]
    for step in (5, 6, 7, 8):
        assert resumed_ids[step] == straight_ids[step]
    assert straight.counters["replayed_samples"] == resumed.counters["replayed_samples"] > 0
    # The resumed trainer's history holds steps 1-4 from trainer_state.json and steps 5-8 it trained itself.
    assert len(step_losses(resumed)) == 8
    torch.testing.assert_close(
        torch.tensor(step_losses(resumed)), torch.tensor(step_losses(straight)), atol=1e-6, rtol=0
    )
    # The epoch goes on from where it stopped (0.625 at step 5, not 0.125), and the summary train_loss is the mean
    # over all 8 steps: the parent's averages the steps of one train() call (0.0 for a call that trains none).
    epochs = [[e["epoch"] for e in t.state.log_history] for t in (straight, resumed, at_end)]
    assert epochs[0] == epochs[1] == epochs[2] and epochs[0][4] == 0.625
    assert at_end_rec.calls == []  # nothing left to train
    mean = sum(step_losses(straight)) / 8
    for trainer in (straight, resumed, at_end):
        assert trainer.output.training_loss == pytest.approx(mean, rel=1e-6)
        assert trainer.state.log_history[-1]["train_loss"] == trainer.output.training_loss
        assert trainer.state.log_history[-1]["replay/replayed_samples"] == straight.counters["replayed_samples"]


def test_resume_passes_over_incomplete_and_corrupt_checkpoints(tiny_model_dir, tmp_path, caplog):
    """A checkpoint counts once MSSRTrainer's completion record, written last, is there and every file in it has the
    size it was written with and reads back. resume_from_checkpoint=True takes the newest such checkpoint and logs
    why it passed over each newer one; a named checkpoint that is not complete is refused, naming the file."""
    task, bank = task_and_bank()
    replay = dict(max_steps=6, replay_strategy="fixed", replay_fixed_interval=1, save_strategy="steps", save_steps=1)

    def trainer():
        model, tok = load(tiny_model_dir)
        return MSSRTrainer(model, config(tmp_path, **replay), train_dataset=task, replay_dataset=bank,
                           processing_class=tok)  # fmt: skip

    straight = trainer()
    straight.train()
    out = tmp_path / "out"
    assert last_complete_checkpoint(out) == (str(out / "checkpoint-6"), [])
    written = json.loads((out / "checkpoint-6" / COMPLETE_NAME).read_text())["files"]
    assert {"model.safetensors", "optimizer.pt", "trainer_state.json", "mssr_state.json"} <= set(written)
    assert sorted(read_checkpoint(out / "checkpoint-6")[0]) == sorted(REPLAY_STATE_KEYS)  # the keys it checks

    # Each checkpoint from the newest down is left as a killed save or a damaged disk leaves one.
    (out / "checkpoint-7").mkdir()  # killed right after the folder appeared
    (out / "checkpoint-6" / COMPLETE_NAME).unlink()  # killed before the completion record
    tensors = out / "checkpoint-5" / "mssr_state.safetensors"
    tensors.write_bytes(tensors.read_bytes()[:100])  # truncated
    tree = out / "checkpoint-4" / "mssr_state.json"
    tree.write_text("x" * tree.stat().st_size)  # garbled, same size
    tree = out / "checkpoint-3" / "mssr_state.json"
    state = json.loads(tree.read_text())
    del state["planned"]
    tree.write_text(json.dumps(state))  # a key missing (recorded as written: another version's state)
    written = json.loads((out / "checkpoint-3" / COMPLETE_NAME).read_text())
    written["files"]["mssr_state.json"] = tree.stat().st_size
    (out / "checkpoint-3" / COMPLETE_NAME).write_text(json.dumps(written))
    (out / "checkpoint-1" / "trainer_state.json").unlink()

    checkpoint, skipped = last_complete_checkpoint(out)
    assert checkpoint == str(out / "checkpoint-2")
    expected = [
        f"{out / 'checkpoint-7'} holds no mssr_state files",
        f"{out / 'checkpoint-6'} has no {COMPLETE_NAME}",
        f"{tensors} holds 100 bytes",
        f"{out / 'checkpoint-4' / 'mssr_state.json'} cannot be read: JSONDecodeError",
        f"{out / 'checkpoint-3' / 'mssr_state'}.json lacks ['planned']",
    ]  # fmt: skip
    assert [reason[: len(start)] for reason, start in zip(skipped, expected)] == expected
    with pytest.raises(ValueError, match=re.escape(f"{tensors} holds 100 bytes")):
        trainer().train(resume_from_checkpoint=str(out / "checkpoint-5"))
    with pytest.raises(ValueError, match=re.escape(f"{out / 'checkpoint-1' / 'trainer_state.json'} is missing")):
        trainer().train(resume_from_checkpoint=str(out / "checkpoint-1"))

    # True resumes from checkpoint-2, says which newer ones it passed over, and goes on as the straight run did.
    caplog.set_level(logging.WARNING, logger="mssr_hf")
    resumed = trainer()
    recorder = Recorder(resumed)
    resumed.train(resume_from_checkpoint=True)
    assert sorted(recorder.ids_by_step()) == [3, 4, 5, 6]
    warnings = [r.getMessage() for r in caplog.records if r.name == "mssr_hf.mssr_trainer"]
    assert len(warnings) == 5 and all(f"Resuming from {out / 'checkpoint-2'}" in w for w in warnings)
    assert step_losses(resumed) == pytest.approx(step_losses(straight), abs=1e-6)
    assert resumed.counters["replayed_samples"] == straight.counters["replayed_samples"]
    for key, value in straight.memory.state_dict().items():
        other = resumed.memory.state_dict()[key]
        assert torch.equal(value, other) if torch.is_tensor(value) else value == other, key


def test_resume_with_another_batch_layout_or_seed_is_refused(tiny_model_dir, tmp_path):
    """The checkpoint's sampler state records how the global batch was formed and the seed; resuming with another
    gradient accumulation, per-device batch (even at the same global batch) or seed fails before training."""
    task, bank = task_and_bank()
    replay = dict(max_steps=4, replay_strategy="fixed", replay_fixed_interval=1, save_strategy="steps", save_steps=2)
    model, tok = load(tiny_model_dir)
    MSSRTrainer(model, config(tmp_path, **replay), train_dataset=task, replay_dataset=bank, processing_class=tok,
                callbacks=[StopAt(2)]).train()  # fmt: skip
    checkpoint = str(tmp_path / "out" / "checkpoint-2")
    changes = [
        (dict(gradient_accumulation_steps=1), "gradient_accumulation_steps: saved 2, now 1; global_batch: saved 4, "
         "now 2"),
        (dict(per_device_train_batch_size=4, gradient_accumulation_steps=1), "per_device_train_batch_size: saved 2, "
         "now 4"),
        (dict(seed=8), "seed: saved 7, now 8"),
    ]  # fmt: skip
    for change, message in changes:
        model, tok = load(tiny_model_dir)
        trainer = MSSRTrainer(model, config(tmp_path, **{**replay, **change}), train_dataset=task,
                              replay_dataset=bank, processing_class=tok)  # fmt: skip
        recorder = Recorder(trainer)
        with pytest.raises(ValueError, match=re.escape(message)):
            trainer.train(resume_from_checkpoint=checkpoint)
        assert recorder.calls == []  # refused before any step


def _with_ids(rows: list[dict], start: int) -> Dataset:
    return Dataset.from_list([{**row, "mssr_id": start + k} for k, row in enumerate(rows)])


def test_a_bank_tokenized_stage_by_stage_trains_as_one_tokenized_whole(tiny_model_dir, tmp_path):
    """Tokenize-once keeps results: the third stage of a sequence, its bank built by the earlier stages' trainers
    (next_replay_dataset), trains on the rows SFTTrainer makes of task + raw bank in one go (token ids, labels, ids,
    order, the over-long rows dropped), and takes the same steps as a trainer that tokenizes the raw bank itself, as
    MSSRTrainer did before (replayed ids and per-sample losses at every step, per-step losses)."""
    long = {"prompt": "1 + 1 = " * 20, "completion": " 2"}  # longer than max_length=32: trl drops it
    task1 = _with_ids(arithmetic_rows(20, "+", seed=1) + [long], 0)
    task2 = _with_ids(arithmetic_rows(20, "-", seed=2), 21)
    task3 = _with_ids([long] + arithmetic_rows(24, "*", seed=3), 41)
    replay = dict(replay_strategy="fixed", replay_fixed_interval=1, replay_lambda0=0.5, replay_buffer_size=8)
    model, tok = load(tiny_model_dir)
    stage1 = MSSRTrainer(model, config(tmp_path, max_steps=1, replay_strategy="none"), train_dataset=task1,
                         processing_class=tok)  # fmt: skip
    stage2 = MSSRTrainer(model, config(tmp_path, max_steps=1, **replay), train_dataset=task2,
                         replay_dataset=stage1.next_replay_dataset(), processing_class=tok)  # fmt: skip
    bank = stage2.next_replay_dataset()
    assert sorted(bank.column_names) == ["input_ids", "labels", "mssr_id"] and len(bank) == 40  # the long row dropped

    trained = {}
    for flow, replay_dataset in (("tokenized once", bank), ("whole bank", concatenate_datasets([task1, task2]))):
        model, tok = load(tiny_model_dir)
        trainer = MSSRTrainer(model, config(tmp_path / flow, max_steps=6, **replay), train_dataset=task3,
                              replay_dataset=replay_dataset, processing_class=tok)  # fmt: skip
        recorder = Recorder(trainer)
        rows = trainer.train_dataset.select_columns(["input_ids", "labels", "mssr_id"]).to_list()
        trainer.train()
        trained[flow] = (rows, [(s, i.tolist(), loss.tolist()) for s, i, loss in recorder.calls], step_losses(trainer))
    plain = SFTTrainer(load(tiny_model_dir)[0], SFTConfig(output_dir=str(tmp_path / "plain"), max_steps=1, **COMMON),
                       train_dataset=concatenate_datasets([task3, task1, task2]), processing_class=tok)  # fmt: skip
    reference = plain.train_dataset.select_columns(["input_ids", "labels", "mssr_id"]).to_list()

    assert trained["tokenized once"][0] == trained["whole bank"][0] == reference
    assert [row["mssr_id"] for row in reference] == list(range(42, 66)) + list(range(20)) + list(range(21, 41))
    assert trained["tokenized once"][1] == trained["whole bank"][1]  # (step, ids, per-sample losses) of every batch
    assert trained["tokenized once"][2] == trained["whole bank"][2] and len(trained["whole bank"][2]) == 6
    replayed = [i for _, ids, _ in trained["whole bank"][1] for i in ids if i < 41]
    assert len(replayed) == 6 * 2  # every step replayed round(0.5 * 4) bank samples


def test_get_train_dataloader_builds_the_stage_sampler(tiny_model_dir, tmp_path):
    """get_train_dataloader builds the mixed-replay sampler, begins the stage (plans the first steps) and hands the
    sampler to the parent's loader: one optimizer step's micro-batches are that step's planned global batch."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    args = config(tmp_path, max_steps=6, replay_strategy="fixed", replay_fixed_interval=1, replay_lambda0=0.5)
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok)
    assert trainer.replay_sampler is None
    loader = trainer.get_train_dataloader()
    sampler = trainer.replay_sampler
    assert isinstance(sampler, MixedReplaySampler) and sampler.global_batch == 4
    assert sorted(trainer.planned) == list(range(1, trainer.lookahead + 1))  # the stage began
    assert len(loader) == 6 * 2  # 6 optimizer steps x 2 micro-batches of 2
    twin = copy.deepcopy(sampler)
    batches = iter(loader)
    first_step = torch.cat([next(batches)[args.replay_id_column] for _ in range(2)]).tolist()
    rows = twin.batch_for_step(1).tolist()
    assert first_step == [trainer.train_dataset[r][args.replay_id_column] for r in rows]
    assert sum(i < 48 for i in first_step) == 2  # round(0.5 * 4) bank samples (ids 0..47)


def test_replay_state_is_written_on_save_by_the_saving_process_only(tiny_model_dir, tmp_path):
    """The on_save callback writes the replay state into output_dir/checkpoint-N when args.should_save, else not."""
    from types import SimpleNamespace

    from mssr_hf.mssr_trainer import _ReplayCallback
    from mssr_hf.state_io import has_state

    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    trainer = MSSRTrainer(model, config(tmp_path, max_steps=2), train_dataset=task, replay_dataset=bank,
                          processing_class=tok)  # fmt: skip
    trainer.train()
    callback = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, _ReplayCallback))
    folder = tmp_path / "out" / "checkpoint-2"
    folder.mkdir(parents=True)
    for should_save in (False, True):
        args = SimpleNamespace(should_save=should_save, output_dir=str(tmp_path / "out"))
        callback.on_save(args, trainer.state, trainer.control)
        assert has_state(folder, "mssr_state") == should_save
    with pytest.raises(RuntimeError, match="checkpoint-2.*wrote none"):  # no folder from the parent: fail loudly
        callback.on_save(SimpleNamespace(should_save=True, output_dir=str(tmp_path / "elsewhere")), trainer.state,
                         trainer.control)  # fmt: skip


def test_training_without_the_fused_forward_fails_loudly(tiny_model_dir, tmp_path, monkeypatch):
    """If the parent's compute_loss stops running the fused forward (as a future trl might), training raises naming
    the installed and the tested trl instead of leaving the memory without losses; evaluation does not raise."""
    import trl

    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    trainer = MSSRTrainer(model, config(tmp_path, max_steps=2), train_dataset=task, replay_dataset=bank,
                          processing_class=tok)  # fmt: skip

    def parent_without_fused_forward(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        return (outputs.loss, outputs) if return_outputs else outputs.loss

    monkeypatch.setattr(SFTTrainer, "compute_loss", parent_without_fused_forward)
    with pytest.raises(RuntimeError, match=rf"installed trl {re.escape(trl.__version__)} .* trl 1\.16\.0"):
        trainer.train()
    batch = trainer._prepare_inputs(trainer.data_collator([trainer.train_dataset[i] for i in range(2)]))
    trainer.model.eval()
    assert torch.isfinite(trainer.compute_loss(trainer.model, batch))


def test_loss_baseline_pays_for_probes(tiny_model_dir, tmp_path):
    """`loss` runs real probe forwards on buffer samples every probe interval and logs their time."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    forwards = count_forwards(model)
    args = config(tmp_path, max_steps=6, replay_strategy="loss", replay_probe_interval=2, replay_probe_size=6,
                  replay_probe_threshold=0.0, learning_rate=5e-3)  # fmt: skip
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok)
    trainer.train()
    # 6 steps x 2 micro-batches, plus 3 probes x 3 batches of 2.
    assert len(forwards) == 12 + 3 * 3
    assert trainer.counters["probe_seconds"] > 0
    assert trainer.strategy.reference is not None
    logged = [e for e in trainer.state.log_history if "replay/probe_seconds" in e]
    assert logged and logged[-1]["replay/probe_seconds"] > 0


def test_accuracy_baseline_evaluates_and_triggers(tiny_model_dir, tmp_path):
    """`accuracy` calls the caller's evaluation every interval and replays after a score drop."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    scores = iter([0.9, 0.5, 0.5])
    calls = []

    def evaluate_fn(m):
        calls.append(m.training)
        return {"task0": next(scores)}

    args = config(tmp_path, max_steps=7, replay_strategy="accuracy", replay_eval_interval=2, replay_eval_drop=0.1,
                  replay_lambda0=0.5)  # fmt: skip
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok,
                          evaluate_fn=evaluate_fn)  # fmt: skip
    recorder = Recorder(trainer)
    trainer.train()
    assert calls == [False, False, False]  # steps 2, 4, 6; model in eval mode
    assert trainer.counters["eval_seconds"] > 0
    # The drop seen after step 4 makes step 4 + lookahead (= 6) replay 2 bank samples; nothing else replays.
    by_step = recorder.ids_by_step()
    replayed = {s: sum(i < 48 for i in ids) for s, ids in by_step.items()}
    assert replayed == {1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 2, 7: 0}


@pytest.mark.parametrize("kind", ["text", "conversational"])
def test_lora_and_dataset_kinds(tiny_model_dir, tmp_path, kind):
    """LoRA adapters with text and conversational datasets: per-sample losses reach the memory."""
    from peft import LoraConfig

    def convert(rows):
        if kind == "text":
            return [{"text": r["prompt"] + r["completion"]} for r in rows]
        turns = [
            [{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["completion"]}] for r in rows
        ]
        return [{"messages": t} for t in turns]

    task = Dataset.from_list(convert(arithmetic_rows(16, "-", 1)))
    bank = Dataset.from_list(convert(arithmetic_rows(16, "+", 2)))
    model, tok = load(tiny_model_dir)
    trainer = MSSRTrainer(model, config(tmp_path, max_steps=4, replay_strategy="fixed", replay_fixed_interval=1,
                                        replay_lambda0=0.5),
                          train_dataset=task, replay_dataset=bank, processing_class=tok,
                          peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))  # fmt: skip
    recorder = Recorder(trainer)
    trainer.train()
    assert sum(p.numel() for n, p in trainer.model.named_parameters() if p.requires_grad and "lora" not in n) == 0
    losses = torch.cat([losses for _, _, losses in recorder.calls])
    assert losses.numel() == 16 and torch.isfinite(losses).all() and (losses > 0).all()
    assert trainer.counters["replayed_samples"] == 4 * 2
    trained = torch.cat([ids for _, ids, _ in recorder.calls]).unique()
    assert torch.equal(torch.nonzero(trainer.memory.seen).flatten(), trained)


def test_tensorboard_logs_replay_stats(tiny_model_dir, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    args = config(tmp_path, max_steps=4, replay_strategy="mssr_full", replay_first_interval=1,
                  report_to=["tensorboard"])  # fmt: skip
    MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok).train()
    events = EventAccumulator(str(next((tmp_path / "out").rglob("events.out.tfevents.*")).parent))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in ("train/replay/ratio", "train/replay/replayed_samples", "train/memory/strength_mean",
                "train/memory/stability_mean", "train/replay/steps_to_next"):  # fmt: skip
        assert tag in tags, sorted(tags)
    assert events.Scalars("train/replay/ratio")[0].value == pytest.approx(0.3, abs=1e-3)  # step 1 replays


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "field, value",
    [("replay_strategy", "sometimes"), ("memory_ema_beta", 1.0), ("memory_s_min", 20.0), ("replay_lambda0", 1.5),
     ("replay_lambda_min", 0.5), ("replay_zeta", -1.0), ("memory_quantile_low", 0.99), ("memory_phi", "tanh"),
     ("replay_buffer_size", 0), ("replay_interval_pattern", "3,0"), ("replay_first_interval", 0),
     ("packing", True), ("padding_free", True), ("replay_weighting", "rank"), ("replay_threshold", 1.0),
     ("per_device_train_batch_size", 0), ("gradient_accumulation_steps", 0), ("max_steps", 0), ("max_steps", -5),
     ("num_train_epochs", 0), ("replay_ratio_profile", "late")],
)  # fmt: skip
def test_bad_config_values_name_the_field(tmp_path, field, value):
    with pytest.raises(ValueError, match=field):
        config(tmp_path, **{field: value})


def test_config_leaves_resuming_to_the_replay_sampler(tmp_path):
    """HF's batch skipping is off in every MSSRConfig: the replay sampler resumes its own position."""
    args = config(tmp_path, ignore_data_skip=False)
    assert args.ignore_data_skip is True


def test_scaled_replay_settings(tmp_path):
    """The paper's step counts (set for 2000 steps per stage) scaled to the stage length, at least 1 step each."""
    paper = scaled_replay_settings(2000)
    defaults = config(tmp_path)
    assert paper == {name: getattr(defaults, name) for name in paper}  # 2000 steps: the paper's values, unchanged
    # 200 steps: a tenth of each (100 -> 10, 50 -> 5, 500 -> 50).
    assert scaled_replay_settings(200) == {
        "replay_first_interval": 10, "replay_fixed_interval": 10, "replay_refresh_interval": 5,
        "replay_probe_interval": 5, "replay_eval_interval": 10, "replay_staleness_cap": 50,
    }  # fmt: skip
    assert set(scaled_replay_settings(1).values()) == {1}
    config(tmp_path, **scaled_replay_settings(7))  # valid settings at any length
    for bad in (0, -5, 2.5, "200"):
        with pytest.raises(ValueError, match="steps must be an int >= 1"):
            scaled_replay_settings(bad)


def test_bad_datasets_fail_before_training(tiny_model_dir, tmp_path):
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    args = config(tmp_path, max_steps=2)
    renamed_bank = bank.rename_columns({"prompt": "question", "completion": "answer"})
    with pytest.raises(InputError, match=r"replay_dataset has the columns \['question', 'answer'\]; SFT needs"):
        MSSRTrainer(model, args, train_dataset=task, replay_dataset=[bank.select(range(8)), renamed_bank],
                    processing_class=tok)  # fmt: skip
    with pytest.raises(ValueError, match="needs a non-empty replay_dataset"):
        MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank.select([]), processing_class=tok)
    with pytest.raises(ValueError, match="needs a non-empty replay_dataset"):
        MSSRTrainer(model, args, train_dataset=task, processing_class=tok)
    with pytest.raises(ValueError, match="mssr_id.*missing from the other"):
        MSSRTrainer(model, args, train_dataset=task.add_column("mssr_id", list(range(48, 80))), replay_dataset=bank,
                    processing_class=tok)  # fmt: skip
    with pytest.raises(ValueError, match="every sample needs its memory id"):
        MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok,
                    memory=make_memory(80))  # fmt: skip
    with pytest.raises(ValueError, match="unique"):
        MSSRTrainer(model, args, train_dataset=task.add_column("mssr_id", [0] * 32),
                    replay_dataset=bank.add_column("mssr_id", list(range(48))), processing_class=tok)  # fmt: skip
    with pytest.raises(ValueError, match="evaluate_fn"):
        MSSRTrainer(model, config(tmp_path, replay_strategy="accuracy"), train_dataset=task, replay_dataset=bank,
                    processing_class=tok)  # fmt: skip
    with pytest.raises(TypeError, match="MSSRConfig"):
        MSSRTrainer(model, SFTConfig(output_dir=str(tmp_path), bf16=False, use_cpu=True), train_dataset=task,
                    processing_class=tok)  # fmt: skip
    with pytest.raises(ValueError, match="map-style"):
        MSSRTrainer(model, args, train_dataset=task.to_iterable_dataset(), replay_dataset=bank, processing_class=tok)
    with pytest.raises(ValueError, match="train_dataset is empty"):
        MSSRTrainer(model, args, train_dataset=task.select([]), replay_dataset=bank, processing_class=tok)
    renamed = task.rename_columns({"prompt": "question", "completion": "answer"})
    with pytest.raises(ValueError, match=r"train_dataset has the columns \['question', 'answer'\]; SFT needs"):
        MSSRTrainer(model, args, train_dataset=renamed, replay_dataset=bank, processing_class=tok)


def test_empty_completions_are_trained_with_a_warning(tiny_model_dir, tmp_path):
    task, bank = task_and_bank()
    task = task.map(lambda row, i: {"completion": "" if i < 3 else row["completion"]}, with_indices=True)
    model, tok = load(tiny_model_dir)
    with pytest.warns(UserWarning, match="3 of 32 train_dataset rows have an empty completion"):
        trainer = MSSRTrainer(model, config(tmp_path, max_steps=1), train_dataset=task, replay_dataset=bank,
                              processing_class=tok)  # fmt: skip
    assert trainer.task_rows.numel() == 32  # still trained on: the end-of-sequence token is their target


def test_resume_from_foreign_checkpoint_is_refused(tiny_model_dir, tmp_path):
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    plain = SFTTrainer(model, SFTConfig(output_dir=str(tmp_path / "plain"), max_steps=2, save_strategy="steps",
                                        save_steps=2, **{k: v for k, v in COMMON.items() if k != "save_strategy"}),
                       train_dataset=task, processing_class=tok)  # fmt: skip
    plain.train()
    trainer = MSSRTrainer(model, config(tmp_path, max_steps=4), train_dataset=task, replay_dataset=bank,
                          processing_class=tok)  # fmt: skip
    with pytest.raises(ValueError, match="not written by MSSRTrainer"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "plain" / "checkpoint-2"))


def test_qlora_4bit_on_cpu(tiny_model_dir, tmp_path):
    """4-bit NF4 base weights (bitsandbytes on CPU) + LoRA: trains, replays, and the memory gets finite losses."""
    import bitsandbytes as bnb
    from peft import LoraConfig
    from transformers import BitsAndBytesConfig

    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.float32)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, quantization_config=quant, dtype=torch.float32)
    assert isinstance(model.model.layers[0].self_attn.q_proj, bnb.nn.Linear4bit)
    task, bank = task_and_bank(16, 16)
    args = config(tmp_path, max_steps=4, replay_strategy="fixed", replay_fixed_interval=1, replay_lambda0=0.5)
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank,
                          processing_class=AutoTokenizer.from_pretrained(tiny_model_dir),
                          peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))  # fmt: skip
    recorder = Recorder(trainer)
    trainer.train()
    losses = torch.cat([losses for _, _, losses in recorder.calls])
    assert losses.numel() == 16 and torch.isfinite(losses).all()
    assert trainer.counters["replayed_samples"] == 8
    assert len(step_losses(trainer)) == 4 and all(math.isfinite(v) for v in step_losses(trainer))


def test_non_finite_losses_are_skipped_and_counted(tiny_model_dir, tmp_path):
    """A row whose loss is inf/NaN is counted in memory/skipped_losses and neither observed nor reviewed."""
    from types import SimpleNamespace

    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    trainer = MSSRTrainer(model, config(tmp_path, max_steps=2), train_dataset=task, replay_dataset=bank,
                          processing_class=tok)  # fmt: skip
    before = trainer.memory.state_dict()
    log_probs = torch.tensor([[-1.0, -3.0], [-float("inf"), -1.0], [float("nan"), -2.0]])  # (B=3, T-1=2)
    output = SimpleNamespace(log_probs=log_probs, label_mask=torch.ones(3, 2, dtype=torch.bool))
    trainer._observe(torch.tensor([50, 51, 52]), output)
    memory = trainer.memory
    assert memory.skipped_losses == 2
    assert bool(memory.seen[50]) and not bool(memory.seen[51]) and not bool(memory.seen[52])
    assert float(memory.ema_loss[50]) == pytest.approx(2.0)  # mean of 1 and 3
    assert int(memory.last_review[50]) == 1
    for i in (51, 52):  # untouched
        assert float(memory.ema_loss[i]) == float(before["ema_loss"][i])
        assert int(memory.last_review[i]) == int(before["last_review"][i])
        assert float(memory.stability[i]) == float(before["stability"][i])
    assert trainer.replay_stats()["memory/skipped_losses"] == 2


def test_memory_time_unit_epoch_and_replay_cap(tiny_model_dir, tmp_path):
    """memory_time_unit="epoch": the memory's clock runs in the stage's epochs (32 task rows / global batch 4 = 8
    steps per epoch). replay_max_share=0.125 under experience replay at ratio 0.5: at most 1 in 8 samples replayed,
    i.e. floor(0.125 * 4 * t) - spent per step t: 1 bank sample every other step (2 of 4 wanted)."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    args = config(tmp_path, max_steps=8, replay_strategy="fixed", replay_fixed_interval=1, replay_lambda0=0.5,
                  replay_lambda_min=0.0, memory_time_unit="epoch", replay_max_share=0.125,
                  replay_weighting="calibrated")  # fmt: skip
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok)
    recorder = Recorder(trainer)
    trainer.train()
    assert trainer.memory.time_segments == [(0, 0.0, 8.0)]
    by_step = recorder.ids_by_step()
    replayed = [sum(i < 48 for i in by_step[step]) for step in range(1, 9)]
    assert replayed == [0, 1, 0, 1, 0, 1, 0, 1]
    assert trainer.counters["replayed_samples"] == 4 <= 0.125 * 8 * 4
    assert float(trainer.memory.time(8)) == 1.0  # 8 steps = one epoch of memory time


def test_calibration_is_logged_and_selection_uses_it(tiny_model_dir, tmp_path):
    """With replay_weighting="calibrated", the fitted forgetting model's calibration reaches the logs once replayed
    samples have been seen twice."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    args = config(tmp_path, max_steps=10, replay_strategy="mssr_spl", replay_first_interval=1, replay_lambda0=0.5,
                  replay_buffer_size=8, replay_refresh_interval=2, replay_weighting="calibrated")  # fmt: skip
    trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok)
    trainer.train()
    logged = [e for e in trainer.state.log_history if "memory/calibration_observations" in e]
    assert logged and logged[-1]["memory/calibration_observations"] > 0
    assert -1.0 <= logged[-1]["memory/calibration_r_predicted"] <= 1.0


def test_each_steps_draw_is_tilted_by_task_gap_and_the_buffer_is_not(tiny_model_dir, tmp_path):
    """replay_task_gap_weight > 0: the trainer asks each step's draw to shift replay between tasks by their observed
    gap (by_task_gap=True) and refreshes the buffer without it; at 0 it never passes the keyword (a user's strategy
    need not know it)."""
    task, bank = task_and_bank()
    model, tok = load(tiny_model_dir)
    for weight in (1.0, 0.0):
        args = config(tmp_path, max_steps=6, replay_strategy="mssr_spl", replay_first_interval=1,
                      replay_lambda0=0.25, replay_buffer_size=16, replay_refresh_interval=2,
                      replay_weighting="forgotten", replay_task_gap_weight=weight)  # fmt: skip
        trainer = MSSRTrainer(model, args, train_dataset=task, replay_dataset=bank, processing_class=tok)
        calls, select = [], trainer.strategy.select

        def spy(candidates, k, step, memory, generator, calls=calls, select=select, **kwargs):
            calls.append((candidates.numel(), kwargs))
            return select(candidates, k, step, memory, generator, **kwargs)

        trainer.strategy.select = spy
        trainer.train()
        per_step = [kw for n, kw in calls if n == 16]  # draws from the 16-sample buffer
        refresh = [kw for n, kw in calls if n == len(bank)]  # buffer draws from the 48-sample bank
        assert per_step and refresh and all(kw == {} for kw in refresh)
        assert all(kw == ({"by_task_gap": True} if weight else {}) for kw in per_step)
        assert trainer.counters["replayed_samples"] > 0


def test_replay_presets(tmp_path):
    paper, plain = config(tmp_path, replay_preset="paper"), config(tmp_path)
    fields = [f for f in vars(plain) if f.startswith(("replay_", "memory_")) and f != "replay_preset"]
    assert fields and all(getattr(paper, f) == getattr(plain, f) for f in fields)
    recommended = config(tmp_path, replay_preset="recommended", replay_lambda0=0.1)
    assert (recommended.replay_strategy, recommended.replay_weighting, recommended.replay_task_gap_weight) == (
        "mssr_spl", "forgotten", 1.0
    )  # fmt: skip
    assert recommended.replay_staleness_cap == 0 and recommended.replay_first_interval == 1
    assert recommended.replay_zeta == 0.0  # uniform within a task
    assert recommended.replay_lambda0 == 0.1  # a field the user set is theirs
    # fields the preset does not name keep their defaults
    assert recommended.replay_ratio_profile == plain.replay_ratio_profile == "constant"
    with pytest.raises(ValueError, match="replay_preset"):
        config(tmp_path, replay_preset="best")
    with pytest.raises(ValueError, match="memory_time_unit"):
        config(tmp_path, memory_time_unit="week")
    with pytest.raises(ValueError, match="replay_max_share"):
        config(tmp_path, replay_max_share=1.5)
