"""Data preparation: how fast task rows become training rows, and what an 11-stage sequence spends on it.

Two measurements, both on synthetic letter-string tasks of 10^4 rows and a tiny Llama (preparation does not depend on
the model's size; training is kept to one optimizer step per stage so that it does not hide preparation):

- rows/s of each preparation step on one task, each timed on its own: formatting (``TaskSpec.load``: raw rows to
  prompt/completion/reference), fitting into ``max_length`` (``truncate_keeping_answer``) and tokenizing (building
  an ``MSSRTrainer`` on the task alone, which tokenizes it; its fixed construction cost is included);
- the 11-stage sequence run by ``ContinualRunner`` (1 step per stage, 2 evaluation rows per task): total wall time,
  the time inside ``train()``, and everything else, per stage. "Everything else" is preparation (formatting,
  fitting, tokenizing, building the replay bank) plus the stage's evaluation, saving and plots, which are small
  here and the same before and after.

The script only calls what every version of ``mssr_hf`` since the benchmark's introduction has (``TaskSpec``,
``truncate_keeping_answer``, ``MSSRTrainer``, ``ContinualRunner`` and trainer callbacks), so the same file measures
an older checkout: copy it into that checkout's ``bench/`` and run it from there (``bench/common.py`` puts the
checkout it runs from first on ``sys.path``).

    .venv/bin/python bench/data_prep.py --label after                    # this checkout, ~3 minutes
    # the code before tokenize-once (commit 077aed1), exported next to it:
    git archive 077aed1 | tar -x -C /tmp/before && cp bench/data_prep.py /tmp/before/bench/
    .venv/bin/python /tmp/before/bench/data_prep.py --label before --out bench/results/data_prep   # ~10 minutes
    .venv/bin/python bench/data_prep.py --summary                         # bench/results/data_prep.md

Each run writes ``bench/results/data_prep/<label>.json``; ``--summary`` renders ``bench/results/data_prep.md`` from
them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/common.py, also when this file is loaded by path
from common import ROOT, machine_line, tiny_model_dir  # noqa: E402

ALPHABET = "abcdefghijklmnop"
WORDS = ("copy", "reverse", "sort", "rotate", "swap", "mirror", "shift", "drop", "double", "odd", "even")
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "data_prep"


def task_rows(word: str, size: int, seed: int) -> list[dict]:
    """``size`` rows of a letter-string task: ``letters`` (6-12 letters) and the transformed ``answer``."""
    rng = random.Random(f"{word}-{seed}")
    rows = []
    for _ in range(size):
        letters = [rng.choice(ALPHABET) for _ in range(rng.randint(6, 12))]
        answer = {"reverse": letters[::-1], "sort": sorted(letters), "rotate": letters[1:] + letters[:1]}.get(
            word, letters[::2] if word in ("odd", "drop") else letters
        )
        rows.append({"letters": " ".join(letters), "answer": " ".join(answer)})
    return rows


def to_example(row: dict) -> dict:
    return {"prompt": f"{row['task']}: {row['letters']} =", "completion": f" {row['answer']}",
            "reference": row["answer"]}  # fmt: skip


def make_tasks(stages: int, size: int) -> list:
    from datasets import Dataset

    from mssr_hf.tasks import TaskSpec

    tasks = []
    for k in range(stages):
        word = WORDS[k % len(WORDS)]
        rows = [{**row, "task": word} for row in task_rows(word, size, seed=k)]
        tasks.append(TaskSpec(f"{word}_{k}", Dataset.from_list(rows), to_example, max_new_tokens=4))
    return tasks


def training_args(output_dir: Path, num_proc: int | None, **overrides):
    from mssr_hf.mssr_config import MSSRConfig

    base = dict(
        output_dir=str(output_dir), report_to=[], bf16=False, use_cpu=True, gradient_checkpointing=False,
        per_device_train_batch_size=8, gradient_accumulation_steps=1, max_steps=1, logging_steps=1,
        save_strategy="no", learning_rate=1e-3, max_length=64, disable_tqdm=True, seed=0, dataset_num_proc=num_proc,
        replay_strategy="fixed", replay_fixed_interval=1, replay_lambda0=0.25, replay_buffer_size=256,
    )  # fmt: skip
    return MSSRConfig(**{**base, **overrides})


def rows_per_second(model_dir: Path, workdir: Path, size: int, num_proc: int | None) -> dict:
    """Each preparation step, timed on one task of ``size`` rows."""
    from datasets import disable_caching
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mssr_hf.mssr_trainer import MSSRTrainer
    from mssr_hf.tasks.spec import truncate_keeping_answer

    disable_caching()  # every step does its work (a cache hit would time nothing)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    spec = make_tasks(1, size)[0]
    start = time.perf_counter()
    train, _ = spec.load()
    formatting = time.perf_counter() - start
    start = time.perf_counter()
    fitted = truncate_keeping_answer(train, tokenizer, 64)
    fitting = time.perf_counter() - start
    args = training_args(workdir / "rows_per_second", num_proc, replay_strategy="none")
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    start = time.perf_counter()
    MSSRTrainer(model, args, train_dataset=fitted, processing_class=tokenizer)
    tokenizing = time.perf_counter() - start
    n = len(train)
    return {"rows": n, "formatting_rows_per_s": n / formatting, "fitting_rows_per_s": n / fitting,
            "tokenizing_rows_per_s": n / tokenizing, "formatting_s": formatting, "fitting_s": fitting,
            "tokenizing_s": tokenizing}  # fmt: skip


def sequence(model_dir: Path, workdir: Path, stages: int, size: int, num_proc: int | None) -> dict:
    """The ``stages``-task sequence through ContinualRunner; wall time per stage, and the part inside ``train()``."""
    from transformers import AutoTokenizer, TrainerCallback

    from mssr_hf.continual import ContinualRunner

    marks: list[tuple[str, float]] = []

    class Marks(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            marks.append(("begin", time.perf_counter()))

        def on_train_end(self, args, state, control, **kwargs):
            marks.append(("end", time.perf_counter()))

    args = training_args(workdir / "sequence", num_proc)
    runner = ContinualRunner(str(model_dir), make_tasks(stages, size), args, eval_size=2, eval_batch_size=2,
                             tokenizer=AutoTokenizer.from_pretrained(model_dir), callbacks=[Marks()])  # fmt: skip
    start = time.perf_counter()
    results = runner.run()
    total = time.perf_counter() - start
    begins = [t for kind, t in marks if kind == "begin"]
    ends = [t for kind, t in marks if kind == "end"]
    # Stage k's time outside train(): from the end of stage k-1's train() (the run's start for k = 0) to the start of
    # its own, i.e. stage k-1's evaluation, saving and plots, and stage k's preparation; the last stage's evaluation,
    # saving and plots come after its train() and are counted in `after_last_train_s`.
    previous = [start] + ends[:-1]
    return {
        "stages": stages, "rows_per_task": size, "total_s": total,
        "inside_train_s": sum(e - b for b, e in zip(begins, ends)),
        "outside_train_s_per_stage": [b - p for b, p in zip(begins, previous)],
        "after_last_train_s": start + total - ends[-1],
        "steps": [s["steps"] for s in results["stages"]],
        "replayed_samples": [s["replayed_samples"] for s in results["stages"]],
    }  # fmt: skip


def measure(ns: argparse.Namespace) -> dict:
    import datasets
    import torch
    import transformers
    import trl

    torch.set_num_threads(ns.threads)
    workdir = Path(ns.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    corpus = lambda: [to_example({**r, "task": w})["prompt"] for w in WORDS for r in task_rows(w, 50, 0)]  # noqa: E731
    model_dir = tiny_model_dir(workdir / "tiny-model", corpus)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {
        "label": ns.label,
        "code": _code_version(),
        "num_proc": ns.num_proc,
        "threads": ns.threads,
        "machine": machine_line(),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
            "datasets": datasets.__version__,
        },  # fmt: skip
        "load_average_start": os.getloadavg(),
        "rows_per_second": rows_per_second(model_dir, workdir, ns.rows, ns.num_proc),
        "sequence": sequence(model_dir, workdir, ns.stages, ns.rows, ns.num_proc),
        "load_average_end": os.getloadavg(),
    }
    after = resource.getrusage(resource.RUSAGE_SELF)
    record["cpu_s"] = (after.ru_utime - usage.ru_utime) + (after.ru_stime - usage.ru_stime)
    record["command"] = " ".join(shlex.quote(a) for a in [".venv/bin/python", *sys.argv])
    return record


def _code_version() -> str:
    """The commit of the checkout this script measures (``git describe``; an exported tree has none)."""
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 and (ROOT / ".git").exists() else f"exported tree at {ROOT}"


def summary(out: Path) -> str:
    runs = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("*.json"))}
    order = [label for label in ("before", "after") if label in runs] + [
        k for k in runs if k not in ("before", "after")
    ]
    lines = ["# Data preparation benchmark", "", "Produced by (repository root; see the docstring of "
             "`bench/data_prep.py` for how the `before` tree is exported):", "", "```"]  # fmt: skip
    lines += [runs[label]["command"] for label in order] + [".venv/bin/python bench/data_prep.py --summary", "```", ""]
    first = runs[order[0]]
    lines += [f"{first['machine']} · torch {first['versions']['torch']} · transformers "
              f"{first['versions']['transformers']} · trl {first['versions']['trl']} · datasets "
              f"{first['versions']['datasets']} · {first['threads']} torch thread(s)", ""]  # fmt: skip
    lines += [f"## One task of {first['rows_per_second']['rows']:,} rows, each step on its own", "",
              "| run | code | formatting rows/s | fitting rows/s | tokenizing rows/s |",
              "|---|---|---:|---:|---:|"]  # fmt: skip
    for label in order:
        r = runs[label]["rows_per_second"]
        lines.append(f"| {label} | {runs[label]['code']} | {r['formatting_rows_per_s']:,.0f} | "
                     f"{r['fitting_rows_per_s']:,.0f} | {r['tokenizing_rows_per_s']:,.0f} |")  # fmt: skip
    stages = first["sequence"]["stages"]
    lines += ["", f"## {stages} stages of {first['sequence']['rows_per_task']:,} rows through ContinualRunner "
              "(1 optimizer step per stage)", "",
              "| run | total s | inside train() s | outside train() s | outside train(), per stage s |",
              "|---|---:|---:|---:|---|"]  # fmt: skip
    for label in order:
        s = runs[label]["sequence"]
        outside = s["total_s"] - s["inside_train_s"]
        per_stage = " ".join(f"{v:.1f}" for v in s["outside_train_s_per_stage"])
        lines.append(f"| {label} | {s['total_s']:.1f} | {s['inside_train_s']:.1f} | {outside:.1f} | {per_stage} |")
    lines += ["", "Outside train() is each stage's preparation (formatting, fitting, tokenizing, building the replay "
              "bank) plus the previous stage's evaluation (2 rows per task), saving and plots. Load average at the "
              "start and end of each run (other processes share the machine): " + "; ".join(
                  f"{label} {runs[label]['load_average_start'][0]:.1f} / {runs[label]['load_average_end'][0]:.1f}"
                  for label in order) + "."]  # fmt: skip
    text = "\n".join(lines) + "\n"
    (out.parent / "data_prep.md").write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after", help="name of this run's results file")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder of the results files")
    parser.add_argument("--workdir", default="/tmp/mssr_data_prep", help="scratch folder (model, run folders)")
    parser.add_argument("--stages", type=int, default=11)
    parser.add_argument("--rows", type=int, default=10_000, help="rows per task")
    parser.add_argument("--num-proc", type=int, default=None, help="dataset_num_proc (None: one process)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--summary", action="store_true", help="only render data_prep.md from the results files")
    ns = parser.parse_args()
    if not ns.summary:
        import shutil

        shutil.rmtree(Path(ns.workdir) / "sequence", ignore_errors=True)
        record = measure(ns)
        ns.out.mkdir(parents=True, exist_ok=True)
        (ns.out / f"{ns.label}.json").write_text(json.dumps(record, indent=1))
    print(summary(ns.out))


if __name__ == "__main__":
    main()
