"""The paper's tasks (App. C, ``app:training_datasets``) as Hub datasets: for each, the Hub id, configuration and
splits, a formatter for that dataset's schema (``to_example``), an answer extractor (from ``extract.py``) and a
metric.

Real users load them from the Hub by name; the tests load each from a small local fixture in the same schema
(``tests/fixtures/hub``). Choices made where the paper is silent:

- Prompts are plain text (``chat=False``); every prompt ends with a cue (``Answer:``, ``Solution:``...) and every
  completion starts with a space, so prompt + completion reads as one text.
- Evaluation split: the dataset's own held-out split (Sec. 4: "the held-out test splits"): ``test`` when its labels
  are public, else ``validation`` (SQuAD, BoolQ). Alpaca-GPT4 has only ``train``, so 5% of it is held out (seed 42,
  App. C).
- Multiple choice (SciQ, ARC, MMLU): lettered options and the completion is the letter alone (``" B"``), the same
  token that log-likelihood scoring compares (``choice_scoring="loglikelihood"``); the ``choice`` metric also
  accepts an answer written as the option's text.
- Long inputs are not cut here: the trainer fits rows into ``max_length`` keeping the prompt and the final answer
  (``spec.truncate_keeping_answer``). SQuAD contexts (at most a few hundred tokens) and BoolQ passages fit in the
  paper's 2048 tokens whole.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable

# Every extractor is re-exported: they were importable from this module before extract.py held them.
from .extract import (  # noqa: F401
    boxed,
    final_answer,
    first_line,
    gsm8k_answer,
    last_number,
    own_answer,
    response,
    yes_no,
)
from .spec import TaskSpec

LETTERS = "ABCDE"
AG_NEWS_LABELS = ("World", "Sports", "Business", "Sci/Tech")  # fancyzhx/ag_news label ids 0-3
# hendrycks/competition_math was taken down from the Hub (DMCA, January 2025). This copy keeps its schema (problem,
# level, type, solution) and its 7,500/5,000 train/test split; lighteval and lm-evaluation-harness load it too.
MATH_HUB_ID = "DigitalLearningGmbH/MATH-lighteval"

# ----------------------------------------------------------------------------------------------------------------
# Formatting helpers
# ----------------------------------------------------------------------------------------------------------------


def lettered_prompt(question: str, options: list[str]) -> str:
    """``question``, one ``A. option`` line per option, and the ``Answer:`` cue."""
    lines = [question.strip()] + [f"{LETTERS[k]}. {option.strip()}" for k, option in enumerate(options)]
    return "\n".join(lines) + "\nAnswer:"


def shuffled(options: list[str], key: str) -> list[str]:
    """``options`` in an order fixed by ``key`` (a SHA-256 seed: the same on every machine and run, independent of the
    global RNG)."""
    order = list(options)
    random.Random(int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16)).shuffle(order)
    return order


def rationale_steps(solution: str) -> list[str]:
    """The steps of a GSM8K worked solution: calculator annotations ``<<48/2=24>>`` removed, the final ``#### N``
    line dropped, whitespace collapsed (App. C: "light text normalization")."""
    rationale = solution.rsplit("####", 1)[0]
    rationale = re.sub(r"<<[^>]*>>", "", rationale)
    return [" ".join(line.split()) for line in rationale.splitlines() if line.strip()]


# ----------------------------------------------------------------------------------------------------------------
# The paper's tasks
# ----------------------------------------------------------------------------------------------------------------


def alpaca_gpt4(metric: str = "rouge_l") -> TaskSpec:
    """vicgalle/alpaca-gpt4 (instruction, input, output, text; one ``train`` split): instruction following. Scored by
    ROUGE-L (App. D), or BLEU with ``metric="bleu"``. The ``text`` column (Alpaca's long template) is not used."""

    def to_example(row: dict) -> dict:
        prompt = f"Instruction: {row['instruction'].strip()}\n"
        if row["input"].strip():
            prompt += f"Input: {row['input'].strip()}\n"
        output = row["output"].strip()
        return {"prompt": prompt + "Response:", "completion": f" {output}", "reference": output}

    return TaskSpec("alpaca_gpt4", "vicgalle/alpaca-gpt4", to_example, metric=metric, extract_answer=response,
                    max_new_tokens=256, description="instruction following (Alpaca-GPT4)")  # fmt: skip


def gsm8k() -> TaskSpec:
    """openai/gsm8k, config ``main`` (question, answer): the completion is the whole worked solution as on the Hub
    (calculator annotations included) ending in ``#### N``; the reference is N."""

    def to_example(row: dict) -> dict:
        solution = row["answer"].strip()
        return {"prompt": f"Question: {row['question'].strip()}\nAnswer:", "completion": f" {solution}",
                "reference": gsm8k_answer(solution)}  # fmt: skip

    return TaskSpec("gsm8k", "openai/gsm8k", to_example, subset="main", eval_split="test",
                    extract_answer=gsm8k_answer, max_new_tokens=256,
                    description="grade-school math word problems (GSM8K)")  # fmt: skip


def gsm8k_rft() -> TaskSpec:
    """GSM8K, reasoning-formatted (App. C: "a step-by-step solution (rationale) followed by the final answer").

    The RFT data of Yuan et al. (2023) is not on the Hub under a stable id, so the variant is built from openai/gsm8k
    (config ``main``, same schema and splits as :func:`gsm8k`): the rationale's steps one per line without the
    calculator annotations, then "The answer is N." The extractor reads "the answer is", ``####`` or the last
    number, so a model trained on either format is scored alike.
    """

    def to_example(row: dict) -> dict:
        answer = gsm8k_answer(row["answer"])
        steps = "\n".join(rationale_steps(row["answer"]))
        return {"prompt": f"Question: {row['question'].strip()}\nAnswer: Let's think step by step.",
                "completion": f" {steps}\nThe answer is {answer}.", "reference": answer}  # fmt: skip

    return TaskSpec("gsm8k_rft", "openai/gsm8k", to_example, subset="main", eval_split="test",
                    extract_answer=gsm8k_answer, max_new_tokens=256,
                    description="GSM8K with step-by-step rationales (reasoning-formatted)")  # fmt: skip


def competition_math(level: int | None = None) -> TaskSpec:
    """Competition MATH (problem, level, type, solution): all levels, or only ``"Level {level}"`` (MATH_1..MATH_5 of
    the 11-task sequence). The completion is the full solution (App. C: "reasoning-style prompt-response format when
    intermediate solutions are available"); the reference is its last ``\\boxed{...}``. Rows without one, and rows
    of another level, are dropped. Hub id: :data:`MATH_HUB_ID` (``train``/``test``)."""

    def to_example(row: dict) -> dict | None:
        if level is not None and row["level"].strip() != f"Level {level}":
            return None
        answer = boxed(row["solution"])
        if not answer:
            return None
        return {"prompt": f"Problem: {row['problem'].strip()}\nSolution:", "completion": f" {row['solution'].strip()}",
                "reference": answer}  # fmt: skip

    name = "math" if level is None else f"math_l{level}"
    description = "competition mathematics (MATH)" if level is None else f"competition mathematics, level {level}"
    return TaskSpec(name, MATH_HUB_ID, to_example, subset="default", eval_split="test", extract_answer=final_answer,
                    max_new_tokens=512, description=description, metadata={"level": level})  # fmt: skip


def ag_news() -> TaskSpec:
    """fancyzhx/ag_news (text, label 0-3; ``train``/``test``): topic classification, exact match on the label name."""

    def to_example(row: dict) -> dict:
        label = AG_NEWS_LABELS[int(row["label"])]
        prompt = "Classify the topic of the news article as World, Sports, Business or Sci/Tech.\n"
        return {"prompt": prompt + f"Article: {row['text'].strip()}\nTopic:", "completion": f" {label}",
                "reference": label}  # fmt: skip

    return TaskSpec("ag_news", "fancyzhx/ag_news", to_example, eval_split="test", extract_answer=first_line,
                    max_new_tokens=5, description="news topic classification (AG News)")  # fmt: skip


def squad() -> TaskSpec:
    """rajpurkar/squad (id, title, context, question, answers{text, answer_start}; ``train``/``validation``):
    extractive QA scored by the official token F1, the maximum over all gold answers. The completion is the first
    gold answer; rows without one are dropped. Contexts are kept whole (see the module docstring)."""

    def to_example(row: dict) -> dict | None:
        answers = [a.strip() for a in row["answers"]["text"] if a.strip()]
        if not answers:
            return None
        prompt = f"Context: {row['context'].strip()}\nQuestion: {row['question'].strip()}\nAnswer:"
        return {"prompt": prompt, "completion": f" {answers[0]}", "reference": answers}

    return TaskSpec("squad", "rajpurkar/squad", to_example, metric="squad_f1", eval_split="validation",
                    extract_answer=first_line, max_new_tokens=32,
                    description="reading comprehension (SQuAD)")  # fmt: skip


def sciq() -> TaskSpec:
    """allenai/sciq (question, distractor1-3, correct_answer, support; ``train``/``validation``/``test``): the four
    options in an order fixed by the row's content (SHA-256 of question and options, not the global RNG), answered
    with a letter. The ``support`` paragraph is not shown (App. C: question and four options)."""

    def to_example(row: dict) -> dict:
        options = [row["correct_answer"], row["distractor1"], row["distractor2"], row["distractor3"]]
        options = shuffled([o.strip() for o in options], "\x1f".join([row["question"], *options]))
        letter = LETTERS[options.index(row["correct_answer"].strip())]
        return {"prompt": lettered_prompt(f"Question: {row['question']}", options), "completion": f" {letter}",
                "reference": letter, "choices": options}  # fmt: skip

    return TaskSpec("sciq", "allenai/sciq", to_example, metric="choice", eval_split="test", extract_answer=first_line,
                    max_new_tokens=4, description="science multiple choice (SciQ)")  # fmt: skip


def boolq() -> TaskSpec:
    """google/boolq (question, answer: bool, passage; ``train``/``validation``): yes/no, exact match."""

    def to_example(row: dict) -> dict:
        answer = "yes" if row["answer"] else "no"
        question = row["question"].strip().rstrip("?")
        prompt = f"Passage: {row['passage'].strip()}\nQuestion: {question}?\nAnswer (yes or no):"
        return {"prompt": prompt, "completion": f" {answer}", "reference": answer}

    return TaskSpec("boolq", "google/boolq", to_example, eval_split="validation", extract_answer=yes_no,
                    max_new_tokens=3, description="yes/no questions about a passage (BoolQ)")  # fmt: skip


def arc_challenge() -> TaskSpec:
    """allenai/ai2_arc, config ``ARC-Challenge`` (id, question, choices{text, label}, answerKey;
    ``train``/``validation``/``test``): four or five options relettered A-E by position (a few rows label them
    1-4), answered with a letter. A row whose answerKey is not one of its labels is dropped."""

    def to_example(row: dict) -> dict | None:
        labels, options = list(row["choices"]["label"]), list(row["choices"]["text"])
        if row["answerKey"] not in labels or len(options) > len(LETTERS):
            return None
        letter = LETTERS[labels.index(row["answerKey"])]
        return {"prompt": lettered_prompt(f"Question: {row['question']}", options), "completion": f" {letter}",
                "reference": letter, "choices": [o.strip() for o in options]}  # fmt: skip

    return TaskSpec("arc_challenge", "allenai/ai2_arc", to_example, subset="ARC-Challenge", metric="choice",
                    eval_split="test", extract_answer=first_line, max_new_tokens=4,
                    description="grade-school science, challenge set (ARC)")  # fmt: skip


def mmlu() -> TaskSpec:
    """cais/mmlu, config ``all`` (question, subject, choices, answer: int): the general-knowledge probe (Sec. 4),
    evaluated on ``test`` after every stage and never trained. Its train split is ``dev`` (5 rows per subject, 285),
    which :meth:`TaskSpec.load` formats cheaply; ``auxiliary_train`` (99.8k rows) would be formatted for nothing.
    ``validation`` (1,531 rows) is left for tuning."""

    def to_example(row: dict) -> dict:
        options = [str(o).strip() for o in row["choices"]]
        letter = LETTERS[int(row["answer"])]
        subject = row["subject"].replace("_", " ")
        return {"prompt": lettered_prompt(f"Subject: {subject}\nQuestion: {row['question']}", options),
                "completion": f" {letter}", "reference": letter, "choices": options}  # fmt: skip

    return TaskSpec("mmlu", "cais/mmlu", to_example, subset="all", train_split="dev", eval_split="test",
                    metric="choice", extract_answer=first_line, max_new_tokens=4,
                    description="general knowledge probe (MMLU)")  # fmt: skip


HUB_TASKS: dict[str, Callable[[], TaskSpec]] = {
    "alpaca_gpt4": alpaca_gpt4,
    "gsm8k": gsm8k,
    "gsm8k_rft": gsm8k_rft,
    "math": competition_math,
    **{f"math_l{k}": (lambda k=k: competition_math(k)) for k in range(1, 6)},
    "ag_news": ag_news,
    "squad": squad,
    "sciq": sciq,
    "boolq": boolq,
    "arc_challenge": arc_challenge,
    "mmlu": mmlu,
}
