"""Evaluation by batched greedy generation: left padding, split across processes, gathered, with a progress bar
(``progress=False``: none, e.g. under a runner's own stage bar, :mod:`mssr_hf.progress`).

Prompts are fitted to the length the model was trained on, as training rows are
(:func:`~mssr_hf.tasks.spec.truncate_keeping_answer`): with ``max_length`` given, a prompt longer than
``max_length`` minus the tokens that follow it (the generated tokens, or the longest option) loses its middle and
keeps its start (instructions, context) and its end (the question). It keeps at least half of ``max_length``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from accelerate import PartialState
from accelerate.utils import gather_object
from datasets import Dataset
from tqdm.auto import tqdm

from .tasks.spec import TaskSpec, cut_middle


def fit_prompt(ids: list[int], max_length: int | None, room: int) -> list[int]:
    """A prompt's token ids fitted into ``max_length`` with ``room`` tokens after it: its start and end kept, its
    middle dropped (at least ``max_length // 2`` tokens kept). Unchanged when ``max_length`` is None or it fits."""
    if max_length is None:
        return ids
    return cut_middle(ids, max(max_length - room, max_length // 2))


def prompt_texts(examples: Dataset, tokenizer) -> list[str]:
    """The generation prompt of each example: the chat template with a generation prompt for ``messages`` rows,
    otherwise the ``prompt`` text as SFT training saw it."""
    if "messages" in examples.column_names:
        return [
            tokenizer.apply_chat_template(m[:-1], tokenize=False, add_generation_prompt=True)
            for m in examples["messages"][:]
        ]
    return examples["prompt"][:]


@torch.no_grad()
def generate(
    model,
    tokenizer,
    prompts: Sequence[str],
    max_new_tokens: int,
    batch_size: int = 16,
    desc: str = "generate",
    max_length: int | None = None,
    progress: bool = True,
) -> list[str]:
    """Greedy continuations of ``prompts`` (this process's share when several run; results gathered in order), each
    prompt fitted into ``max_length`` with room for ``max_new_tokens`` (:func:`fit_prompt`; None: not fitted)."""
    state = PartialState()
    mine = list(range(state.process_index, len(prompts), state.num_processes))
    was_training, padding_side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"  # generation continues from the right end of every row
    device = next(model.parameters()).device
    outputs: list[tuple[int, str]] = []
    try:
        shown = progress and state.is_main_process
        bar = tqdm(range(0, len(mine), batch_size), desc=desc, disable=not shown, leave=False)
        for start in bar:
            idx = mine[start : start + batch_size]
            ids = [tokenizer(prompts[i], add_special_tokens=False)["input_ids"] for i in idx]
            ids = [fit_prompt(row, max_length, max_new_tokens) for row in ids]
            batch = tokenizer.pad({"input_ids": ids}, return_tensors="pt", padding=True)
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


@torch.no_grad()
def choice_loglikelihoods(
    model,
    tokenizer,
    prompts: Sequence[str],
    continuations: Sequence[Sequence[str]],
    normalize: bool = True,
    max_length: int | None = None,
    batch_size: int = 16,
) -> list[list[float]]:
    """Log-likelihood of each of ``continuations[i]`` after ``prompts[i]``, divided by its token count when
    ``normalize``; each prompt fitted into ``max_length`` with room for its longest continuation (:func:`fit_prompt`).

    One forward per ``batch_size`` prompts of similar lengths, over all their continuations: the rows are left-padded,
    with the position ids an unpadded row would have, and only the logits of the last positions (those that predict
    a continuation) are computed. The scores equal one forward per row up to float rounding
    (``tests/test_evaluation.py`` checks 1e-5 on the tiny model).

    Returns:
        `list[list[float]]`: row i has one score per continuation of prompt i.
    """
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    questions = []  # per prompt: (fitted prompt ids, continuation ids)
    for prompt, options in zip(prompts, continuations):
        conts = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in options]
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        questions.append((fit_prompt(prompt_ids, max_length, max(len(c) for c in conts)), conts))
    # Prompts of similar lengths share a forward, so that little of it is padding; scores go back to their prompts.
    order = sorted(range(len(questions)), key=lambda i: len(questions[i][0]))
    scores: list[list[float]] = [[] for _ in questions]
    for start in range(0, len(order), batch_size):
        rows, spans = [], []  # spans: (prompt index, continuation ids), one per row
        for i in order[start : start + batch_size]:
            prompt_ids, conts = questions[i]
            rows += [prompt_ids + c for c in conts]
            spans += [(i, c) for c in conts]
        width = max(len(r) for r in rows)
        keep = max(len(c) for _, c in spans) + 1  # the last positions: each predicts a continuation token
        input_ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)  # (R, T), left-padded
        attention = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)  # an unpadded row's positions
        logits = model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                       logits_to_keep=keep).logits  # (R, keep, V)  # fmt: skip
        logprobs = torch.log_softmax(logits.float(), -1)
        for r, (i, cont) in enumerate(spans):
            # Token j of the continuation sits at position width - len(cont) + j, predicted by the position before.
            at = torch.arange(keep - 1 - len(cont), keep - 1, device=device)
            total = logprobs[r, at, torch.tensor(cont, device=device)].sum().item()
            scores[i].append(total / max(len(cont), 1) if normalize else total)
    return scores


def option_loglikelihoods(
    model,
    tokenizer,
    prompt: str,
    continuations: Sequence[str],
    normalize: bool = True,
    max_length: int | None = None,
) -> list[float]:
    """Log-likelihood of each continuation after ``prompt`` (:func:`choice_loglikelihoods` for one prompt). Shape
    ``(k,)``."""
    return choice_loglikelihoods(model, tokenizer, [prompt], [continuations], normalize, max_length)[0]


def choice_accuracy_by_loglikelihood(
    model,
    tokenizer,
    examples: Dataset,
    desc: str = "choices",
    max_length: int | None = None,
    batch_size: int = 16,
    progress: bool = True,
) -> float:
    """Multiple choice by log-likelihood: the option letter (" A", " B", ...) the model finds most likely after the
    prompt is its answer (the prompt fitted into ``max_length``); ``batch_size`` questions per forward
    (:func:`choice_loglikelihoods`), split across processes and gathered."""
    from .scoring import loglikelihood_choice

    state = PartialState()
    mine = list(range(state.process_index, len(examples), state.num_processes))
    was_training = model.training
    model.eval()
    picked: list[tuple[int, list[float], int]] = []
    try:
        shown = progress and state.is_main_process
        for start in tqdm(range(0, len(mine), batch_size), desc=desc, disable=not shown, leave=False):
            rows = [examples[i] for i in mine[start : start + batch_size]]
            letters = [[f" {'ABCDE'[k]}" for k in range(len(row["choices"]))] for row in rows]
            scores = choice_loglikelihoods(model, tokenizer, [row["prompt"] for row in rows], letters,
                                           max_length=max_length, batch_size=batch_size)  # fmt: skip
            for i, row, row_scores in zip(mine[start : start + batch_size], rows, scores):
                picked.append((i, row_scores, "ABCDE".index(row["reference"][0].strip().upper())))
    finally:
        model.train(was_training)
    if state.num_processes > 1:
        picked = gather_object(picked)
    picked.sort()
    return loglikelihood_choice([p[1] for p in picked], [p[2] for p in picked])


def evaluate_task(
    model,
    tokenizer,
    task: TaskSpec,
    examples: Dataset,
    batch_size: int = 16,
    max_length: int | None = None,
    progress: bool = True,
) -> float:
    """Score of ``model`` on ``examples`` (a formatted evaluation set of ``task``) with the task's metric; prompts are
    fitted into ``max_length`` (the training ``max_length``; None: not fitted). ``progress``: show a progress bar."""
    if task.metric == "choice" and task.choice_scoring == "loglikelihood":
        return choice_accuracy_by_loglikelihood(model, tokenizer, examples, f"eval {task.name}", max_length,
                                                batch_size, progress)  # fmt: skip
    predictions = generate(
        model, tokenizer, prompt_texts(examples, tokenizer), task.max_new_tokens, batch_size, f"eval {task.name}",
        max_length, progress,
    )  # fmt: skip
    return task.score(predictions, list(examples))
