"""Evaluation by batched greedy generation: left padding, split across processes, gathered, with a progress bar."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from accelerate import PartialState
from accelerate.utils import gather_object
from datasets import Dataset
from tqdm.auto import tqdm

from .tasks.spec import TaskSpec


def prompt_texts(examples: Dataset, tokenizer) -> list[str]:
    """The generation prompt of each example: the chat template with a generation prompt for ``messages`` rows,
    otherwise the ``prompt`` text as SFT training saw it."""
    if "messages" in examples.column_names:
        return [
            tokenizer.apply_chat_template(m[:-1], tokenize=False, add_generation_prompt=True)
            for m in examples["messages"]
        ]
    return list(examples["prompt"])


@torch.no_grad()
def generate(
    model, tokenizer, prompts: Sequence[str], max_new_tokens: int, batch_size: int = 16, desc: str = "generate"
) -> list[str]:
    """Greedy continuations of ``prompts`` (this process's share when several run; results gathered in order)."""
    state = PartialState()
    mine = list(range(state.process_index, len(prompts), state.num_processes))
    was_training, padding_side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"  # generation continues from the right end of every row
    device = next(model.parameters()).device
    outputs: list[tuple[int, str]] = []
    try:
        bar = tqdm(range(0, len(mine), batch_size), desc=desc, disable=not state.is_main_process, leave=False)
        for start in bar:
            idx = mine[start : start + batch_size]
            batch = tokenizer([prompts[i] for i in idx], return_tensors="pt", padding=True, add_special_tokens=False)
            batch = {k: v.to(device) for k, v in batch.items()}
            generated = model.generate(
                **batch, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )  # fmt: skip
            new_tokens = generated[:, batch["input_ids"].shape[1] :]
            texts = tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
            outputs.extend(zip(idx, texts))
    finally:
        model.train(was_training)
        tokenizer.padding_side = padding_side
    if state.num_processes > 1:
        outputs = gather_object(outputs)
    return [text for _, text in sorted(outputs)]


def evaluate_task(model, tokenizer, task: TaskSpec, examples: Dataset, batch_size: int = 16) -> float:
    """Score of ``model`` on ``examples`` (a formatted evaluation set of ``task``) with the task's metric."""
    predictions = generate(
        model, tokenizer, prompt_texts(examples, tokenizer), task.max_new_tokens, batch_size, desc=f"eval {task.name}"
    )
    return task.score(predictions, list(examples))
