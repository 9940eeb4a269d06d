"""A real `kill -9` of `mssr-hf train` (a subprocess) mid-save, at a checkpoint boundary, as a checkpoint folder
appears and during evaluation; each time the same command is run again, and the last rerun ends with exactly the
uninterrupted run's results, logs, memory and weights."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "killable_train.py"
# Three stages of six optimizer steps, a checkpoint every two (examples/configs/cpu_tiny.yaml, smaller).
SETTINGS = ["--train_size", "48", "--eval_size", "8", "--max_steps", "6", "--save_strategy", "steps", "--save_steps",
            "2", "--disable_tqdm", "true"]  # fmt: skip


class Run:
    """One output folder; each `start` launches the training command on it as a new process."""

    def __init__(self, tmp_path: Path, name: str, model_dir: str):
        self.out, self.flag, self.log = tmp_path / name, tmp_path / f"{name}.paused", tmp_path / f"{name}.log"
        self.model_dir = model_dir

    def start(self, pause: str = "none") -> subprocess.Popen:
        self.flag.unlink(missing_ok=True)
        config = ROOT / "examples" / "configs" / "cpu_tiny.yaml"
        cmd = [sys.executable, str(SCRIPT), str(self.flag), pause, str(config), "--model_name_or_path", self.model_dir,
               "--output_dir", str(self.out), *SETTINGS]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        with self.log.open("a") as log:
            return subprocess.Popen(cmd, env=env, stdout=log, stderr=log, cwd=ROOT)

    def finish(self) -> None:
        assert self.start().wait(timeout=300) == 0, self.log.read_text()[-4000:]

    def kill_when(self, process: subprocess.Popen, ready, timeout: float = 300) -> None:
        """``kill -9`` the process as soon as ``ready()`` holds."""
        deadline = time.monotonic() + timeout
        while not ready():
            assert process.poll() is None, f"exited before the kill point:\n{self.log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, "kill point not reached"
            time.sleep(0.002)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL

    def kill_at(self, pause: str) -> None:
        self.kill_when(self.start(pause), self.flag.is_file)

    def stage(self, k: int) -> Path:
        return next(self.out.glob(f"stage-0{k}-*"))

    def results(self) -> dict:
        return json.loads((self.out / "results.json").read_text())


def test_killed_runs_rerun_to_the_uninterrupted_result(tiny_model_dir, tmp_path):
    straight = Run(tmp_path, "straight", tiny_model_dir)
    straight.finish()
    run = Run(tmp_path, "killed", tiny_model_dir)

    # Mid-save: the parent trainer has written checkpoint-4 of stage 0, the replay state and completion record not.
    run.kill_at("stage-00:on_save:4")
    checkpoint = run.stage(0) / "checkpoints" / "checkpoint-4"
    assert (checkpoint / "trainer_state.json").is_file() and not (checkpoint / "mssr_state.json").exists()
    assert not (checkpoint / "mssr_complete.json").exists()

    # At a checkpoint boundary: stage 1's checkpoint-4 is complete, step 5 has not begun.
    run.kill_at("stage-01:on_step_begin:4")
    assert (run.stage(0) / "metrics.json").is_file()  # the rerun finished stage 0 (from its checkpoint-2)
    assert (run.stage(1) / "checkpoints" / "checkpoint-4" / "mssr_complete.json").is_file()

    # As stage 1's last checkpoint folder appears, whatever it holds at that instant.
    run.kill_when(run.start(), (run.stage(1) / "checkpoints" / "checkpoint-6").exists)

    # During evaluation: stage 2 has trained; its scores and files are not written yet.
    run.kill_at("stage-02:on_train_end:6")
    assert not (run.stage(2) / "metrics.json").exists()

    run.finish()
    expected, got = straight.results(), run.results()
    assert got["matrix"] == expected["matrix"] and got["metrics"] == expected["metrics"]
    for k, (a, b) in enumerate(zip(expected["stages"], got["stages"])):
        for key in ("strategy", "steps", "replayed_samples", "replay_steps", "step_offset", "memory_sha256"):
            assert a[key] == b[key], (k, key)
        # Every logged value but timings and trl's token count (which restarts after a resume, see README):
        # losses, gradient norms, learning rates, epochs, replay and memory statistics, the summary train_loss.
        assert _untimed(b["log_history"]) == _untimed(a["log_history"]), k
        for name in ("model.safetensors", "memory.safetensors", "memory.json"):
            assert (run.stage(k) / name).read_bytes() == (straight.stage(k) / name).read_bytes(), (k, name)


def _untimed(history: list[dict]) -> list[dict]:
    timed = ("_runtime", "_per_second", "_seconds")
    return [{k: v for k, v in entry.items() if not k.endswith(timed) and k != "num_tokens"} for entry in history]
