"""ContinualRunner end to end on the tiny model: stage directories, adapters, cards, results, reading a stage back,
resume, config guard, publishing to a stand-in Hub client."""

import copy
import dataclasses
import json
import logging
import os
from pathlib import Path

import pytest
import torch
import yaml
from conftest import arithmetic_rows, hub_metadata_problem
from datasets import Dataset
from peft import LoraConfig, PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from mssr_hf import cl_metrics, layout
from mssr_hf.continual import ContinualRunner, UnpublishedStagesError
from mssr_hf.mssr_config import MSSRConfig
from mssr_hf.state_io import file_sizes, load_state
from mssr_hf.tasks import TaskSpec

pytestmark = pytest.mark.slow


def arithmetic_task(op: str, seed: int) -> TaskSpec:
    """The answer is the operation's name: one word per task, learnable in a few steps, and tasks interfere."""
    name = {"+": "add", "-": "sub", "*": "mul"}[op]
    word = {"+": " plus", "-": " minus", "*": " times"}[op]

    def to_example(row):
        return {"prompt": row["prompt"], "completion": word, "reference": word.strip()}

    rows = Dataset.from_list(arithmetic_rows(60, op, seed))
    return TaskSpec(name=name, source=rows, to_example=to_example, max_new_tokens=4)


TASKS = [arithmetic_task("+", 1), arithmetic_task("-", 2), arithmetic_task("*", 3)]


def run_args(out, **overrides):
    base = dict(
        output_dir=str(out), report_to=[], bf16=False, use_cpu=True, gradient_checkpointing=False,
        per_device_train_batch_size=4, gradient_accumulation_steps=1, max_steps=6, logging_steps=1,
        save_strategy="steps", save_steps=2, learning_rate=2e-3, max_length=32, disable_tqdm=True, seed=11,
        replay_strategy="mssr_full", replay_first_interval=1, replay_refresh_interval=2, replay_buffer_size=16,
        replay_lambda0=0.5,
    )  # fmt: skip
    return MSSRConfig(**{**base, **overrides})


def runner(model_dir, out, callbacks=None, hub_api=None, lora=True, probe_task=None, cls=ContinualRunner, tasks=TASKS,
           **overrides):  # fmt: skip
    return cls(
        model_dir, tasks, run_args(out, **overrides), tokenizer=AutoTokenizer.from_pretrained(model_dir),
        peft_config=LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]) if lora else None,
        eval_size=6, eval_batch_size=4, callbacks=callbacks, hub_api=hub_api, probe_task=probe_task,
    )  # fmt: skip


class KillAt(TrainerCallback):
    """Simulates a crash: raises inside stage `stage` after optimizer step `step`."""

    def __init__(self, stage_dir_name, step):
        self.stage_dir_name, self.step = stage_dir_name, step

    def on_step_end(self, args, state, control, **kwargs):
        if self.stage_dir_name in args.output_dir and state.global_step == self.step:
            raise RuntimeError("killed")


class RecordingHub:
    """Stand-in for `huggingface_hub.HfApi`; creating a branch in ``fail_branches`` ("*": any) fails, as on a Hub
    outage, and an upload whose model card names an invalid ``base_model`` is refused, as the Hub refuses it."""

    def __init__(self, fail_branches=()):
        self.calls, self.fail_branches = [], set(fail_branches)

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def create_branch(self, repo_id, branch, **kwargs):
        self.calls.append(("create_branch", repo_id, branch))
        if branch in self.fail_branches or "*" in self.fail_branches:
            raise ConnectionError("503 Service Unavailable")

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs["repo_id"], kwargs.get("revision"), kwargs["folder_path"]))
        problem = hub_metadata_problem(kwargs["folder_path"])  # the Hub refuses an invalid base_model
        if problem is not None:
            raise ValueError(problem)

    def uploads(self):
        return [(Path(c[3]).name, c[2]) for c in self.calls if c[0] == "upload_folder"]


def test_three_stages_end_to_end(tiny_model_dir, tmp_path):
    hub = RecordingHub()
    out = tmp_path / "run"
    probe = dataclasses.replace(arithmetic_task("*", 9), name="probe")  # evaluated after every stage, never trained
    results = runner(tiny_model_dir, out, hub_api=hub, push_to_hub=True, hub_model_id="me/mssr-run",
                     probe_task=probe).run()  # fmt: skip
    assert len(results["probe"]) == 3 and all(isinstance(v, float) for v in results["probe"])
    assert results["probe_task"] == "probe" and "probe" not in results["tasks"]

    stage_dirs = sorted(p.name for p in out.glob("stage-*"))
    assert stage_dirs == ["stage-00-add", "stage-01-sub", "stage-02-mul"]
    for k, name in enumerate(stage_dirs):
        stage = out / name
        for f in ("adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "memory.safetensors",
                  "memory.json", "metrics.json", "README.md"):  # fmt: skip
            assert (stage / f).is_file(), (name, f)
        # Each stage's adapter loads onto the base model.
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), str(stage))
        assert any("lora_A" in n for n, _ in model.named_parameters())
        assert not (stage / "training_args.bin").exists()  # the stage folder holds no pickle
        card = (stage / "README.md").read_text()
        front = yaml.safe_load(card.split("---")[1])
        # A local base model is no Hub id: the card does not name it in its metadata (the Hub would refuse it).
        assert "base_model" not in front and tiny_model_dir not in card.split("---")[1]
        assert front["library_name"] == "peft" and {"lora", "mssr", "mssr_full"} <= set(front["tags"])
        assert front["model-index"][0]["name"] == "me/mssr-run"
        scores = {r["task"]["name"]: r["metrics"][0]["value"] for r in front["model-index"][0]["results"]}
        expected = {t: results["matrix"][k][i] for i, t in enumerate(["add", "sub", "mul"][: k + 1])}
        assert scores == pytest.approx({**expected, "probe": results["probe"][k]}, abs=1e-4)
        assert f'PeftModel.from_pretrained(base, "me/mssr-run", revision="{name}")' in card
        memory = load_state(stage, "memory")
        assert memory["stability"].numel() == 57 * (k + 1)  # 60 rows, 95% kept for training

    # Results: a lower-triangular matrix, metrics computed from it, one record per stage, replay after stage 0.
    assert results == json.loads((out / "results.json").read_text())
    assert results["eval_sizes"] == [3, 3, 3]  # eval_size=6, but 5% of 60 rows are held out
    matrix = results["matrix"]
    assert [len(row) for row in matrix] == [3, 3, 3]
    assert (matrix[0][1], matrix[0][2], matrix[1][2]) == (None, None, None)  # not seen yet
    lower = [row[: i + 1] for i, row in enumerate(matrix)]
    assert results["metrics"] == pytest.approx(cl_metrics.summarize(lower))
    stages = results["stages"]
    assert [s["strategy"] for s in stages] == ["none", "mssr_full", "mssr_full"]
    assert stages[0]["replayed_samples"] == 0 and stages[1]["replayed_samples"] > 0
    assert [s["step_offset"] for s in stages] == [0, 6, 12]
    for plot in ("accuracy_matrix.png", "task_scores.png", "replay_timeline.png"):
        assert (out / "plots" / plot).stat().st_size > 0

    # Published: one branch per stage plus main.
    branches = [c[2] for c in hub.calls if c[0] == "create_branch"]
    assert branches == ["stage-00-add", "stage-01-sub", "stage-02-mul"]
    uploads = [(c[2], c[3]) for c in hub.calls if c[0] == "upload_folder"]
    assert ("stage-02-mul", str(out / "stage-02-mul")) in uploads and ("main", str(out / "stage-02-mul")) in uploads


def test_push_honours_hub_revision_and_hub_private_repo(tiny_model_dir, tmp_path):
    hub = RecordingHub()
    runner(tiny_model_dir, tmp_path / "run", tasks=TASKS[:1], max_steps=1, hub_api=hub, push_to_hub=True,
           hub_model_id="me/run", hub_revision="latest", hub_private_repo=True).run()  # fmt: skip
    assert hub.calls[0] == ("create_repo", "me/run", {"private": True, "exist_ok": True, "repo_type": "model"})
    assert hub.uploads() == [("stage-00-add", "stage-00-add"), ("stage-00-add", "latest")]
    card = (tmp_path / "run" / "stage-00-add" / "README.md").read_text()
    assert 'PeftModel.from_pretrained(base, "me/run", revision="stage-00-add")' in card
    assert 'the latest stage is also at revision="latest"' in card


def test_evaluation_reaches_tensorboard_on_one_global_step_axis(tiny_model_dir, tmp_path):
    """report_to=["tensorboard"]: after each stage, every seen task's score and the running forgetting and BWT are
    written at the stage's last global step (one axis across stages), with the plots as images; read back from the
    event file."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    results = runner(tiny_model_dir, out, tasks=TASKS[:2], max_steps=3, report_to=["tensorboard"]).run()
    event_files = list((out / "runs").rglob("events.out.tfevents.*"))
    assert len(event_files) == 1  # the run's own folder; the stages' training logs are under their checkpoints/
    events = EventAccumulator(str(event_files[0].parent), size_guidance={"images": 0})
    events.Reload()

    def series(tag):
        return [(e.step, round(e.value, 5)) for e in events.Scalars(tag)]

    matrix, metrics = results["matrix"], results["metrics"]
    assert series("eval/score/add") == [(3, round(matrix[0][0], 5)), (6, round(matrix[1][0], 5))]
    assert series("eval/score/sub") == [(6, round(matrix[1][1], 5))]
    assert series("eval/stage") == [(3, 0.0), (6, 1.0)]
    assert series("eval/average_forgetting") == [(3, 0.0), (6, round(metrics["average_forgetting"], 5))]
    assert series("eval/backward_transfer")[-1] == (6, round(metrics["backward_transfer"], 5))
    images = set(events.Tags()["images"])
    assert {"plots/accuracy_matrix", "plots/task_scores", "plots/replay_timeline"} <= images
    assert [e.step for e in events.Images("plots/accuracy_matrix")] == [3, 6]
    assert events.Images("plots/accuracy_matrix")[-1].width > 100


def test_progress_label_shows_one_bar_per_stage_instead_of_printed_logs(tiny_model_dir, tmp_path, capsys):
    """With progress_label, each stage shows one bar ("<label> · stage k/n · <task>", its steps and their rate, then
    the scoring) and the trainer prints nothing: its logs still reach results.json. Without it, transformers' printer
    (disable_tqdm) prints every log dictionary."""

    def make(out, **kwargs):
        return ContinualRunner(tiny_model_dir, TASKS[:2], run_args(out, max_steps=4, logging_steps=1),
                               tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir), eval_size=6,
                               eval_batch_size=4, **kwargs)  # fmt: skip

    results = make(tmp_path / "bars", progress_label="demo").run()
    captured = capsys.readouterr()
    assert "'loss'" not in captured.out and "'loss'" not in captured.err
    bars = [line for line in captured.err.replace("\r", "\n").splitlines() if "stage" in line]
    assert any(line.startswith("demo · stage 1/2 · add: 100%") and "4/4" in line and "step/s, scored 1 task" in line
               for line in bars), bars  # fmt: skip
    assert any(line.startswith("demo · stage 2/2 · sub: 100%") and "scored 2 tasks" in line for line in bars)
    assert "eval add" not in captured.err  # no bar of the evaluation's own under the stage's
    assert all(any("loss" in entry for entry in stage["log_history"]) for stage in results["stages"])

    make(tmp_path / "printed").run()
    assert captured.out.count("'loss'") == 0 and capsys.readouterr().out.count("{'loss'") == 2 * 4


def test_a_run_without_matplotlib_trains_evaluates_and_saves_without_plots(tiny_model_dir, tmp_path, monkeypatch,
                                                                         caplog):  # fmt: skip
    """matplotlib is the `plots` extra: without it, a run finishes its stages as usual and says once that it draws no
    plots."""
    import sys

    import mssr_hf.continual

    for name in [n for n in sys.modules if n.startswith(("matplotlib.", "mssr_hf.plotting"))]:
        monkeypatch.delitem(sys.modules, name)  # restored after the test
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    monkeypatch.setattr(mssr_hf.continual, "_PLOTS_SKIPPED", [])  # the note is given once per process
    out = tmp_path / "run"
    results = runner(tiny_model_dir, out, tasks=TASKS[:2], max_steps=1).run()
    assert len(results["matrix"]) == 2 and layout.is_finished(out / "stage-01-sub")
    assert not (out / "plots").exists()
    assert (
        caplog.text.count('matplotlib is not installed: the run writes no plots (pip install "mssr-hf[plots]")') <= 1
    )


def test_a_failed_push_is_retried_and_the_run_says_what_is_unpublished(tiny_model_dir, tmp_path):
    """Stage 0's push fails (and again after stage 1, which publishes): the run ends with an error naming stage 0 and
    carrying the results. Published stages are recorded apart from finished ones. A rerun while the Hub is down fails
    the same way (never a success with a stage unpublished); once it is up, a rerun trains nothing and pushes stage 0
    only, to its branch, not to main (which holds stage 1); the next rerun has nothing to push."""
    out = tmp_path / "run"
    hub = {"push_to_hub": True, "hub_model_id": "me/mssr-run"}
    failing = RecordingHub(fail_branches={"stage-00-add"})
    with pytest.raises(UnpublishedStagesError, match="not published to the Hub repo 'me/mssr-run': stage-00-add") as e:
        runner(tiny_model_dir, out, tasks=TASKS[:2], max_steps=2, hub_api=failing, **hub).run()
    assert "503 Service Unavailable" in str(e.value) and e.value.stages == ["stage-00-add"]
    assert e.value.results == json.loads((out / "results.json").read_text()) and len(e.value.results["matrix"]) == 2
    assert [c[2] for c in failing.calls if c[0] == "create_branch"] == ["stage-00-add", "stage-00-add", "stage-01-sub"]
    assert failing.uploads() == [("stage-01-sub", "stage-01-sub"), ("stage-01-sub", "main")]
    assert layout.is_finished(out / "stage-00-add") and layout.is_finished(out / "stage-01-sub")
    assert list(json.loads((out / "published.json").read_text())) == ["stage-01-sub"]

    down = RecordingHub(fail_branches={"*"})
    with pytest.raises(UnpublishedStagesError, match="stage-00-add"):
        runner(tiny_model_dir, out, tasks=TASKS[:2], max_steps=2, hub_api=down, **hub).run()

    steps, working = CountSteps(), RecordingHub()
    results = runner(tiny_model_dir, out, tasks=TASKS[:2], max_steps=2, hub_api=working, callbacks=[steps],
                     **hub).run()  # fmt: skip
    assert steps.steps == 0 and results == e.value.results
    assert working.uploads() == [("stage-00-add", "stage-00-add")]  # its branch only: main holds stage 1
    published = json.loads((out / "published.json").read_text())
    assert published["stage-00-add"] == {"repo_id": "me/mssr-run", "revision": "stage-00-add", "main": False}

    quiet = RecordingHub()
    runner(tiny_model_dir, out, tasks=TASKS[:2], max_steps=2, hub_api=quiet, **hub).run()
    assert quiet.calls == []


def test_bad_output_dir_or_hub_settings_fail_before_anything_is_written(tiny_model_dir, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match=f"output_dir {afile} is a file, not a folder"):
        runner(tiny_model_dir, afile).run()
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.access(locked, os.W_OK):  # root writes anywhere: take a folder the kernel refuses to anyone
        locked = Path("/sys/kernel")
        if not locked.is_dir():
            pytest.skip("no folder this process cannot write to")
    with pytest.raises(ValueError, match=f"output_dir {locked} cannot be written to: Permission denied"):
        runner(tiny_model_dir, locked).run()
    assert afile.read_text() == "x"
    with pytest.raises(ValueError, match="push_to_hub needs a repo: set hub_model_id"):
        runner(tiny_model_dir, tmp_path / "run", push_to_hub=True)
    assert not (tmp_path / "run").exists()


def test_evaluation_fits_long_prompts_into_max_length(tiny_model_dir, tmp_path):
    """Prompts of thousands of tokens: training rows are fitted to max_length, and so are evaluation prompts (the
    model never sees more than max_length tokens at evaluation)."""
    word = " plus"

    def long_example(row):
        return {"prompt": "numbers " * 3000 + row["prompt"], "completion": word, "reference": word.strip()}

    task = TaskSpec(name="long", source=Dataset.from_list(arithmetic_rows(40, "+", 1)), to_example=long_example,
                    max_new_tokens=4)  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    lengths = []
    model.register_forward_pre_hook(
        lambda module, args, kwargs: lengths.append((module.training, kwargs["input_ids"].shape[1])), with_kwargs=True
    )
    ContinualRunner(model, [task], run_args(tmp_path / "run", max_steps=1, max_length=32), eval_size=4,
                    tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir)).run()  # fmt: skip
    at_evaluation = [n for training, n in lengths if not training]
    assert at_evaluation and max(at_evaluation) <= 32 and max(n for _, n in lengths) <= 32


class RecordingRunner(ContinualRunner):
    """Keeps a copy of what each stage hands to saving, to compare with what `load_stage` reads back."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.handed = {}

    def _save_stage(self, stage, trainer, memory, strategy, results):
        super()._save_stage(stage, trainer, memory, strategy, results)
        self.handed[stage] = copy.deepcopy({
            "results": results, "memory": memory.state_dict(),
            "strategy": strategy.state_dict() if strategy is not None else None,
            "lora": {n: p.detach() for n, p in trainer.model.named_parameters() if "lora_" in n},
        })  # fmt: skip


def assert_same_state(a, b, where="state"):
    """Equal nested state dicts: tensors equal in value and dtype, everything else equal."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same_state(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_load_stage_reads_back_what_each_stage_saved(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match="stage 0 \\(add\\) is not finished"):
        runner(tiny_model_dir, out).load_stage(0)
    run = runner(tiny_model_dir, out, cls=RecordingRunner, tasks=TASKS[:2], max_steps=4)
    results = run.run()

    assert sorted(run.handed) == [0, 1]
    for stage, handed in run.handed.items():
        saved = run.load_stage(stage)
        assert (saved.stage, saved.task, saved.path) == (stage, TASKS[stage].name, run.stage_dir(stage))
        assert saved.results == handed["results"]  # stage 0: as results.json was before stage 1 rewrote it
        record = handed["results"]["stages"][stage]
        files = saved.metrics.pop("files")  # the size of every other file of the stage, written with it
        assert files == file_sizes(saved.path, skip=("checkpoints", "metrics.json"))
        assert {"adapter_model.safetensors", "memory.safetensors", "README.md"} <= set(files)
        assert saved.metrics == {"stage": stage, **record, "scores": handed["results"]["matrix"][stage]}
        assert_same_state(saved.memory.state_dict(), handed["memory"], "memory")
        assert (saved.strategy is None) == (stage == 0) == (handed["strategy"] is None)
        if stage > 0:
            assert saved.strategy.name == "mssr_full"
            assert_same_state(saved.strategy.state_dict(), handed["strategy"], "strategy")
        model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), str(saved.path))
        assert_same_state({n: p.detach() for n, p in model.named_parameters() if "lora_" in n}, handed["lora"])
    assert run.load_stage(1).results == results


def test_killed_run_resumes_to_the_same_results(tiny_model_dir, tmp_path, caplog):
    """Full fine-tuning (the tiny model learns each task's answer word, then forgets it: a non-trivial matrix). The
    rerun passes over an empty checkpoint folder (a save killed as it began) and a checkpoint with a truncated replay
    state, resumes from the complete one before them, and ends with the uninterrupted run's results."""
    settings = dict(lora=False, learning_rate=1e-2)
    straight = runner(tiny_model_dir, tmp_path / "straight", **settings).run()
    assert straight["matrix"][0][0] > 0  # the first task was (partly) learned: the matrix is not trivially 0

    out = tmp_path / "killed"
    with pytest.raises(RuntimeError, match="killed"):
        runner(tiny_model_dir, out, callbacks=[KillAt("stage-01-sub", 5)], **settings).run()
    assert (out / "stage-00-add" / "metrics.json").is_file()
    assert not (out / "stage-01-sub" / "metrics.json").is_file()
    checkpoints = out / "stage-01-sub" / "checkpoints"
    assert (checkpoints / "checkpoint-4").is_dir()
    (checkpoints / "checkpoint-999").mkdir()
    truncated = checkpoints / "checkpoint-4" / "mssr_state.safetensors"
    truncated.write_bytes(truncated.read_bytes()[:-10])
    weights_before = (out / "stage-00-add" / "model.safetensors").read_bytes()

    caplog.set_level(logging.WARNING, logger="mssr_hf")
    resumed = runner(tiny_model_dir, out, **settings).run()
    warnings = [r.getMessage() for r in caplog.records if r.name == "mssr_hf.continual"]
    assert len(warnings) == 2 and all(f"resumes from {checkpoints / 'checkpoint-2'}" in w for w in warnings)
    assert "checkpoint-999 holds no mssr_state files" in warnings[0] and f"{truncated} holds" in warnings[1]
    assert (out / "stage-00-add" / "model.safetensors").read_bytes() == weights_before  # not retrained
    assert resumed["matrix"] == straight["matrix"]
    assert resumed["metrics"] == pytest.approx(straight["metrics"])
    for key in ("replayed_samples", "replay_steps", "steps", "step_offset"):
        assert [s[key] for s in resumed["stages"]] == [s[key] for s in straight["stages"]]
    losses = [[e["loss"] for e in s["log_history"] if "loss" in e] for s in (resumed, straight) for s in s["stages"]]
    for resumed_losses, straight_losses in zip(losses[:3], losses[3:]):  # per-step training losses, every stage
        assert resumed_losses == pytest.approx(straight_losses, abs=1e-5)
    a = load_state(out / "stage-02-mul", "memory")
    b = load_state(tmp_path / "straight" / "stage-02-mul", "memory")
    for key, value in a.items():
        if isinstance(value, torch.Tensor):
            assert torch.allclose(value.double(), b[key].double(), atol=1e-9, rtol=0), key


class CountSteps(TrainerCallback):
    def __init__(self):
        self.steps = 0

    def on_step_end(self, args, state, control, **kwargs):
        self.steps += 1


def test_a_damaged_finished_stage_runs_again(tiny_model_dir, tmp_path, caplog):
    """A finished stage whose file was truncated since is not taken as finished: the rerun names the file and runs the
    stage again from its last complete checkpoint (here its last step: nothing left to train), and every later
    stage too, to the same results."""
    out = tmp_path / "run"
    first = runner(tiny_model_dir, out, tasks=TASKS[:2], max_steps=4).run()
    memory = out / "stage-00-add" / "memory.safetensors"
    intact = memory.read_bytes()
    memory.write_bytes(intact[:50])
    assert not layout.is_finished(out / "stage-00-add") and layout.is_finished(out / "stage-01-sub")
    later = (out / "stage-01-sub" / "metrics.json").read_text()
    (out / "stage-01-sub" / "metrics.json").write_text(later.replace('"stage": 1', '"stage": 1, "stale": true', 1))
    assert json.loads((out / "stage-01-sub" / "metrics.json").read_text())["stale"]

    caplog.set_level(logging.WARNING, logger="mssr_hf")
    steps = CountSteps()
    again = runner(tiny_model_dir, out, tasks=TASKS[:2], max_steps=4, callbacks=[steps]).run()
    warnings = [r.getMessage() for r in caplog.records if r.name == "mssr_hf.continual"]
    assert len(warnings) == 1 and f"{memory} holds 50 bytes" in warnings[0] and "runs again" in warnings[0]
    assert steps.steps == 0  # both stages resumed from their last checkpoint
    assert memory.read_bytes() == intact
    assert "stale" not in (out / "stage-01-sub" / "metrics.json").read_text()  # stage 1 was saved again too
    assert again["matrix"] == first["matrix"] and again["metrics"] == first["metrics"]
    assert [s["log_history"][:-1] for s in again["stages"]] == [s["log_history"][:-1] for s in first["stages"]]


def test_changed_config_is_refused_once_the_folder_holds_a_checkpoint(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    # Stopped before its first checkpoint (save_steps=2): nothing to resume from, so another configuration may take
    # the folder over.
    with pytest.raises(RuntimeError, match="killed"):
        runner(tiny_model_dir, out, callbacks=[KillAt("stage-00-add", 1)]).run()
    with pytest.raises(RuntimeError, match="killed"):
        runner(tiny_model_dir, out, learning_rate=1e-4, callbacks=[KillAt("stage-00-add", 3)]).run()
    assert json.loads((out / "run_config.json").read_text())["config"]["training"]["learning_rate"] == 1e-4
    assert (out / "stage-00-add" / "checkpoints" / "checkpoint-2" / "mssr_complete.json").is_file()
    # Now checkpoint-2 is there to resume from: another configuration is refused, naming what changed.
    with pytest.raises(ValueError, match="learning_rate: 0.0001 -> 0.002"):
        runner(tiny_model_dir, out).run()
    with pytest.raises(ValueError, match="replay_lambda0"):
        runner(tiny_model_dir, out, learning_rate=1e-4, replay_lambda0=0.2).run()
