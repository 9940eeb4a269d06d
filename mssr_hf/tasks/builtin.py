"""The paper's tasks as Hub datasets (App. C), each with a formatter for its Hub schema, an answer extractor and a
metric. They load from the Hub for real users; the tests load each from a small local fixture in the same schema.

Choices made where the paper is silent (documented per task): prompts are plain prompt/completion text; the
multiple-choice tasks are answered with an option letter; GSM8K's "reasoning-formatted" variant is built from
``openai/gsm8k`` (calculator annotations removed, the rationale kept, "The answer is N." at the end).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable

from ..metrics import last_boxed
from .offline import answer_after_hashes, first_line
from .spec import TaskSpec

LETTERS = "ABCDE"
AG_NEWS_LABELS = ("World", "Sports", "Business", "Sci/Tech")


def lettered(question: str, options: list[str]) -> str:
    lines = [question.strip()] + [f"{LETTERS[k]}. {o}" for k, o in enumerate(options)]
    return "\n".join(lines) + "\nAnswer:"


def final_answer(text: str) -> str:
    """The answer of a reasoning-formatted solution: ``The answer is N``, ``#### N``, ``\\boxed{N}``, else the last
    number or line."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    match = re.findall(r"[Tt]he answer is:?\s*([^\n]+?)\.?\s*(?:\n|$)", text)
    if match:
        return match[-1].strip()
    return answer_after_hashes(text)


# ----------------------------------------------------------------------------------------------------------------


def alpaca_gpt4() -> TaskSpec:
    """vicgalle/alpaca-gpt4 (instruction, input, output): instruction following, ROUGE-L."""

    def to_example(r):
        prompt = f"Instruction: {r['instruction'].strip()}\n" + (
            f"Input: {r['input'].strip()}\n" if r["input"] else ""
        )
        return {
            "prompt": prompt + "Response:",
            "completion": " " + r["output"].strip(),
            "reference": r["output"].strip(),
        }

    return TaskSpec("alpaca_gpt4", "vicgalle/alpaca-gpt4", to_example, metric="rouge_l", extract_answer=str.strip,
                    max_new_tokens=256, description="instruction following (Alpaca-GPT4)")  # fmt: skip


def gsm8k() -> TaskSpec:
    """openai/gsm8k, config `main` (question, answer ending in ``#### N``): the worked solution as completion."""

    def to_example(r):
        return {"prompt": f"Question: {r['question'].strip()}\nAnswer:", "completion": " " + r["answer"].strip(),
                "reference": answer_after_hashes(r["answer"])}  # fmt: skip

    return TaskSpec("gsm8k", "openai/gsm8k", to_example, subset="main", eval_split="test",
                    extract_answer=answer_after_hashes, max_new_tokens=256,
                    description="grade-school math word problems (GSM8K)")  # fmt: skip


def gsm8k_rft() -> TaskSpec:
    """GSM8K, reasoning-formatted (App. C): from openai/gsm8k, calculator annotations ``<<...>>`` removed, the step-
    by-step rationale kept, and "The answer is N." appended."""

    def to_example(r):
        rationale, answer = r["answer"].rsplit("####", 1)
        steps = re.sub(r"<<[^>]*>>", "", rationale).strip()
        steps = " ".join(line.strip() for line in steps.splitlines() if line.strip())
        answer = answer.strip()
        return {"prompt": f"Question: {r['question'].strip()}\nLet's think step by step.",
                "completion": f" {steps} The answer is {answer}.", "reference": answer}  # fmt: skip

    return TaskSpec("gsm8k_rft", "openai/gsm8k", to_example, subset="main", eval_split="test",
                    extract_answer=final_answer, max_new_tokens=256,
                    description="GSM8K with step-by-step rationales (reasoning-formatted)")  # fmt: skip


def competition_math(level: int | None = None) -> TaskSpec:
    """Competition MATH (problem, level, type, solution with ``\\boxed{}``), all levels or one; the answer is the last
    ``\\boxed{...}`` of the solution. Hub id: qwedsacf/competition_math, a mirror of hendrycks/competition_math (the
    original was taken down) with one train split, so 5% is held out."""

    def to_example(r):
        if level is not None and r["level"] != f"Level {level}":
            return None
        answer = last_boxed(r["solution"])
        if answer is None:
            return None
        return {"prompt": f"Problem: {r['problem'].strip()}\nSolution:", "completion": " " + r["solution"].strip(),
                "reference": answer}  # fmt: skip

    name = "math" if level is None else f"math_l{level}"
    return TaskSpec(name, "qwedsacf/competition_math", to_example, extract_answer=final_answer, max_new_tokens=384,
                    description=f"competition mathematics{'' if level is None else f', level {level}'} (MATH)",
                    metadata={"level": level})  # fmt: skip


def ag_news() -> TaskSpec:
    """fancyzhx/ag_news (text, label 0-3): topic classification, exact match on the label name."""

    def to_example(r):
        label = AG_NEWS_LABELS[int(r["label"])]
        prompt = (
            f"Classify the news article as World, Sports, Business or Sci/Tech.\nArticle: {r['text'].strip()}\nTopic:"
        )
        return {"prompt": prompt, "completion": f" {label}", "reference": label}

    return TaskSpec("ag_news", "fancyzhx/ag_news", to_example, eval_split="test", extract_answer=first_line,
                    max_new_tokens=4, description="news topic classification (AG News)")  # fmt: skip


def squad() -> TaskSpec:
    """rajpurkar/squad (context, question, answers{text, answer_start}): extractive QA, SQuAD token F1 against every
    gold answer. Contexts are kept whole (truncation is the trainer's `max_length`)."""

    def to_example(r):
        answers = [a for a in r["answers"]["text"] if a.strip()]
        if not answers:
            return None
        prompt = f"Context: {r['context'].strip()}\nQuestion: {r['question'].strip()}\nAnswer:"
        return {"prompt": prompt, "completion": f" {answers[0].strip()}", "reference": answers}

    return TaskSpec("squad", "rajpurkar/squad", to_example, metric="squad_f1", eval_split="validation",
                    extract_answer=first_line, max_new_tokens=32,
                    description="reading comprehension (SQuAD)")  # fmt: skip


def sciq() -> TaskSpec:
    """allenai/sciq (question, distractor1-3, correct_answer, support): four options in an order fixed by the
    question's hash (the same on every machine), answered with a letter."""

    def to_example(r):
        options = [r["correct_answer"], r["distractor1"], r["distractor2"], r["distractor3"]]
        random.Random(int(hashlib.sha256(r["question"].encode()).hexdigest()[:12], 16)).shuffle(options)
        letter = LETTERS[options.index(r["correct_answer"])]
        return {"prompt": lettered(f"Question: {r['question']}", options), "completion": f" {letter}",
                "reference": letter, "choices": options}  # fmt: skip

    return TaskSpec("sciq", "allenai/sciq", to_example, metric="choice", eval_split="test", max_new_tokens=4,
                    description="science multiple choice (SciQ)")  # fmt: skip


def boolq() -> TaskSpec:
    """google/boolq (question, answer: bool, passage): yes/no, exact match."""

    def to_example(r):
        answer = "yes" if r["answer"] else "no"
        prompt = f"Passage: {r['passage'].strip()}\nQuestion: {r['question'].strip()}?\nAnswer yes or no:"
        return {"prompt": prompt, "completion": f" {answer}", "reference": answer}

    return TaskSpec("boolq", "google/boolq", to_example, eval_split="validation", extract_answer=first_line,
                    max_new_tokens=3, description="yes/no questions about a passage (BoolQ)")  # fmt: skip


def arc_challenge() -> TaskSpec:
    """allenai/ai2_arc, config ARC-Challenge (question, choices{text, label}, answerKey): options relettered A-E by
    position (some rows label them 1-4), answered with a letter."""

    def to_example(r):
        labels, options = list(r["choices"]["label"]), list(r["choices"]["text"])
        if r["answerKey"] not in labels:
            return None
        letter = LETTERS[labels.index(r["answerKey"])]
        return {"prompt": lettered(f"Question: {r['question']}", options), "completion": f" {letter}",
                "reference": letter, "choices": options}  # fmt: skip

    return TaskSpec("arc_challenge", "allenai/ai2_arc", to_example, subset="ARC-Challenge", metric="choice",
                    eval_split="test", max_new_tokens=4,
                    description="grade-school science (ARC-Challenge)")  # fmt: skip


def mmlu() -> TaskSpec:
    """cais/mmlu, config `all` (question, subject, choices, answer: int): the general-knowledge probe, evaluated on
    `test` after every stage and never trained (its `dev` split stands in as the train split)."""

    def to_example(r):
        letter = LETTERS[int(r["answer"])]
        subject = r["subject"].replace("_", " ")
        return {"prompt": lettered(f"({subject}) {r['question']}", list(r["choices"])), "completion": f" {letter}",
                "reference": letter, "choices": list(r["choices"])}  # fmt: skip

    return TaskSpec("mmlu", "cais/mmlu", to_example, subset="all", train_split="dev", eval_split="test",
                    metric="choice", max_new_tokens=4, description="general knowledge probe (MMLU)")  # fmt: skip


HUB_TASKS: dict[str, Callable[[], TaskSpec]] = {
    "alpaca_gpt4": alpaca_gpt4, "gsm8k": gsm8k, "gsm8k_rft": gsm8k_rft, "math": competition_math,
    **{f"math_l{k}": (lambda k=k: competition_math(k)) for k in range(1, 6)},
    "ag_news": ag_news, "squad": squad, "sciq": sciq, "boolq": boolq, "arc_challenge": arc_challenge, "mmlu": mmlu,
}  # fmt: skip
