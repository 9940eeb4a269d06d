"""Two real CPU processes (gloo) under `accelerate launch`: both ranks hold the same memory and make the same replay
choices, and their micro-batches together are the planned global batch."""

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from mssr_hf.state_io import load_state

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).parent / "scripts" / "ddp_replay.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_cpu_processes(script, *script_args, timeout=300):
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
           "--main_process_port", str(free_port()), str(script), *map(str, script_args)]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def test_two_processes_share_memory_and_replay_plan(tiny_model_dir, tmp_path):
    launch_two_cpu_processes(SCRIPT, tiny_model_dir, tmp_path)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]

    # Identical replay choices: both ranks' samplers formed the same global batches.
    assert ranks[0]["global_batches"] == ranks[1]["global_batches"]
    assert sorted(ranks[0]["global_batches"], key=int) == [str(s) for s in range(1, 11)]
    # Their micro-batches together are the planned global batch (per_device 2 x accumulation 2 x 2 ranks = 8).
    for step, batch in ranks[0]["global_batches"].items():
        together = ranks[0]["local_ids"][step] + ranks[1]["local_ids"][step]
        assert len(batch) == 8 and Counter(together) == Counter(batch), step
        assert not set(ranks[0]["local_ids"][step]) & set(ranks[1]["local_ids"][step])
    # Replay really happened, from the bank (ids 0..47), at the planned steps only.
    bank_per_step = {int(s): sum(i < 48 for i in b) for s, b in ranks[0]["global_batches"].items()}
    assert {s for s, n in bank_per_step.items() if n} == set(ranks[0]["replay_steps"]) & set(range(1, 11))
    assert sum(bank_per_step.values()) == ranks[0]["replayed_samples"] == ranks[1]["replayed_samples"] > 0

    # Identical memory state on both ranks (gathered ids and losses), every tensor bit for bit.
    memories = [load_state(tmp_path, f"memory_rank{r}") for r in (0, 1)]
    for key, value in memories[0].items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, memories[1][key]), key
        else:
            assert value == memories[1][key], key
    # Every sample trained on either rank was observed by both.
    trained = {i for r in ranks for ids in r["local_ids"].values() for i in ids}
    assert set(torch.nonzero(memories[0]["seen"]).flatten().tolist()) == trained
