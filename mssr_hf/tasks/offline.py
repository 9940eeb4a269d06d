"""Tasks whose data ships inside installed packages, so they load with no network: skills from ``reasoning-gym``
(seeded generators with exact answers), competition math from ``champ-dataset``, and categorised question/answer
pairs from ``chatterbot-corpus``. They feed the demo, the examples and the benchmarks."""

from __future__ import annotations

import re

from datasets import Dataset

from .spec import TaskSpec

REASONING_GYM = {
    # name: (reasoning-gym dataset, max new tokens, description)
    "rg_basic_arithmetic": ("basic_arithmetic", 8, "integer arithmetic expressions (reasoning-gym)"),
    "rg_chain_sum": ("chain_sum", 8, "chained additions and subtractions (reasoning-gym)"),
    "rg_spell_backward": ("spell_backward", 12, "spell a word backward (reasoning-gym)"),
    "rg_letter_counting": ("letter_counting", 4, "count a letter in a phrase (reasoning-gym)"),
    "rg_word_sorting": ("word_sorting", 48, "sort words by ASCII order (reasoning-gym)"),
    "rg_gsm_symbolic": ("gsm_symbolic", 256, "GSM8K-style word problems with worked solutions (reasoning-gym)"),
}
CHATTERBOT_CATEGORIES = ("ai", "computers", "science", "history", "literature", "sports", "food", "health")


def answer_after_hashes(text: str) -> str:
    """The answer of a GSM8K-style solution: what follows the last ``####``, else the last number in the text."""
    if "####" in text:
        return text.rsplit("####", 1)[1].strip().split("\n")[0].strip()
    numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?", text)
    return numbers[-1] if numbers else text.strip()


def first_line(text: str) -> str:
    return text.strip().split("\n")[0].strip()


def reasoning_gym_task(name: str, size: int = 1000, seed: int = 42) -> TaskSpec:
    """A reasoning-gym skill as a task: ``size`` generated examples (``seed``), scored by exact match."""
    dataset, max_new_tokens, description = REASONING_GYM[name]

    def source() -> Dataset:
        import reasoning_gym

        rows = reasoning_gym.create_dataset(dataset, size=size, seed=seed)
        return Dataset.from_list(
            [
                {"question": e["question"], "answer": str(e["answer"]), "cot": e["metadata"].get("answer_cot", "")}
                for e in rows
            ]  # fmt: skip
        )

    def to_example(row: dict) -> dict:
        if row["cot"]:  # worked solution, GSM8K-style: reasoning then "#### answer"
            completion = f" {row['cot'].strip()}\n#### {row['answer']}"
        else:
            completion = f" {row['answer']}"
        return {"prompt": f"{row['question']}\nAnswer:", "completion": completion, "reference": row["answer"]}

    extract = answer_after_hashes if dataset == "gsm_symbolic" else first_line
    return TaskSpec(name=name, source=source, to_example=to_example, extract_answer=extract,
                    max_new_tokens=max_new_tokens, description=description)  # fmt: skip


def champ_task(seed: int = 42) -> TaskSpec:
    """The 270 competition-math problems of ``champ-dataset``; the completion is the final answer (the paper's
    short-answer setting), scored by exact match."""

    def source() -> Dataset:
        import champ_dataset

        problems = champ_dataset.load("v0").problems
        return Dataset.from_list(
            [{"problem": p.text, "answer": p.answer, "category": p.category} for _, p in sorted(problems.items())]
        )

    def to_example(row: dict) -> dict:
        return {"prompt": f"{row['problem']}\nAnswer:", "completion": f" {row['answer']}", "reference": row["answer"]}

    return TaskSpec(name="champ_math", source=source, to_example=to_example, extract_answer=first_line,
                    max_new_tokens=32, description="competition math, final answers (champ-dataset)")  # fmt: skip


def chatterbot_task(category: str) -> TaskSpec:
    """Question/answer pairs of one ``chatterbot-corpus`` category, scored by ROUGE-L."""
    if category not in CHATTERBOT_CATEGORIES:
        raise ValueError(f"chatterbot category must be one of {CHATTERBOT_CATEGORIES}, got {category!r}")

    def source() -> Dataset:
        import os

        import chatterbot_corpus
        import yaml

        path = os.path.join(os.path.dirname(chatterbot_corpus.__file__), "data", "english", f"{category}.yml")
        with open(path, encoding="utf-8") as f:
            conversations = yaml.safe_load(f)["conversations"]
        pairs = [
            (c[0], c[1]) for c in conversations if len(c) >= 2 and isinstance(c[0], str) and isinstance(c[1], str)
        ]
        return Dataset.from_list([{"question": q, "answer": a} for q, a in pairs])

    def to_example(row: dict) -> dict:
        return {"prompt": f"Q: {row['question']}\nA:", "completion": f" {row['answer']}", "reference": row["answer"]}

    return TaskSpec(name=f"chatterbot_{category}", source=source, to_example=to_example, metric="rouge_l",
                    extract_answer=first_line, max_new_tokens=48,
                    description=f"{category} questions and answers (chatterbot-corpus)")  # fmt: skip
