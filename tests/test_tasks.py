"""Task specs: every built-in Hub task on a fixture in its Hub schema, the extractors, every source kind, the offline
tasks and the sequences."""

import dataclasses
import json
import math
import random
from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict

from mssr_hf.errors import InputError
from mssr_hf.tasks import BUILTIN_TASKS, SEQUENCE_PROBES, SEQUENCES, TaskSpec, get_sequence, get_task, task_from_dict
from mssr_hf.tasks.builtin import HUB_TASKS, alpaca_gpt4, shuffled
from mssr_hf.tasks.extract import boxed, final_answer, gsm8k_answer, yes_no
from mssr_hf.tasks.offline import REASONING_GYM, make_offline_task
from mssr_hf.tasks.synthetic import ALPHABET, TRANSFORMS, synthetic_task

FIXTURES = Path(__file__).parent / "fixtures" / "hub"
FIXTURE_OF = {
    "alpaca_gpt4": "alpaca_gpt4", "gsm8k": "gsm8k", "gsm8k_rft": "gsm8k", "math": "math",
    **{f"math_l{k}": "math" for k in range(1, 6)}, "ag_news": "ag_news", "squad": "squad", "sciq": "sciq",
    "boolq": "boolq", "arc_challenge": "arc_challenge", "mmlu": "mmlu",
}  # fmt: skip
# Rows of each fixture that the task keeps (hand-counted: the SQuAD row without answers, the MATH row without
# \boxed{} and, for one level, the rows of the other levels are dropped).
USABLE_ROWS = {
    "alpaca_gpt4": 8, "gsm8k": 10, "gsm8k_rft": 10, "math": 12, "math_l1": 3, "math_l2": 2, "math_l3": 2,
    "math_l4": 2, "math_l5": 2, "ag_news": 8, "squad": 7, "sciq": 8, "boolq": 8, "arc_challenge": 8, "mmlu": 8,
}  # fmt: skip


def on_fixture(name: str) -> TaskSpec:
    """The built-in spec with its Hub source replaced by the local fixture (the Hub is unreachable here). A local
    JSON file has one split, `train` (MMLU's train split on the Hub is `dev`)."""
    fixture = str(FIXTURES / f"{FIXTURE_OF[name]}.jsonl")
    return dataclasses.replace(get_task(name), source=fixture, train_split="train", eval_split=None)


def fixture_rows(name: str) -> list[dict]:
    with open(FIXTURES / f"{FIXTURE_OF[name]}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def formatted(name: str) -> list[dict]:
    spec = get_task(name)
    return [e for e in map(spec.to_example, fixture_rows(name)) if e is not None]


def as_eval_row(example: dict) -> dict:
    reference = example["reference"]
    return {**example, "reference": [reference] if isinstance(reference, str) else reference}


# ----------------------------------------------------------------------------------------------------------------
# Hub tasks on their fixtures
# ----------------------------------------------------------------------------------------------------------------


def test_hub_tasks_point_at_the_hub():
    assert set(USABLE_ROWS) == set(HUB_TASKS) == set(FIXTURE_OF)
    ids = {name: (get_task(name).source, get_task(name).subset) for name in HUB_TASKS}
    assert ids["gsm8k"] == ids["gsm8k_rft"] == ("openai/gsm8k", "main")
    assert ids["arc_challenge"] == ("allenai/ai2_arc", "ARC-Challenge") and ids["mmlu"] == ("cais/mmlu", "all")
    assert {ids[f"math_l{k}"] for k in range(1, 6)} == {ids["math"]}
    splits = {name: (get_task(name).train_split, get_task(name).eval_split) for name in HUB_TASKS}
    assert splits["squad"] == splits["boolq"] == ("train", "validation") and splits["mmlu"] == ("dev", "test")
    assert splits["alpaca_gpt4"] == ("train", None)  # one split on the Hub: 5% held out


@pytest.mark.parametrize("name", sorted(USABLE_ROWS))
def test_hub_task_loads_splits_and_scores(name):
    spec = on_fixture(name)
    train, evaluation = spec.load()
    usable = USABLE_ROWS[name]
    n_eval = math.ceil(0.05 * usable)  # datasets' train_test_split rounds the test share up
    assert (len(train), len(evaluation)) == (usable - n_eval, n_eval)
    again_train, again_eval = spec.load()  # seed 42: the same split every time
    assert list(again_train["prompt"]) == list(train["prompt"])
    assert list(again_eval["prompt"]) == list(evaluation["prompt"])
    assert sorted([*train["prompt"], *evaluation["prompt"]]) == sorted(e["prompt"] for e in formatted(name))
    assert all(isinstance(r, list) and r for r in train["reference"])

    rows = [as_eval_row(e) for e in formatted(name)]
    # The gold completion and the bare reference both score 1.
    assert spec.score([r["completion"] for r in rows], rows) == pytest.approx(1.0)
    assert spec.score([r["reference"][0] for r in rows], rows) == pytest.approx(1.0)
    # Wrong answers score 0: another option's letter for multiple choice, an unrelated answer otherwise.
    if spec.metric == "choice":
        wrong = [" " + next(c for c in "ABCDE" if c != r["reference"][0]) for r in rows]
    else:
        wrong = ["zzz qqq"] * len(rows)
    assert spec.score(wrong, rows) == pytest.approx(0.0)


HAND_CHECKED = {
    "alpaca_gpt4": (1, "Instruction: Translate the sentence into French.\nInput: The cat is sleeping on the sofa.\n"
                       "Response:", " Le chat dort sur le canapé.", "Le chat dort sur le canapé."),
    "gsm8k": (1, "Question: A farm has 250 cows and buys three times as many more. How many cows does the farm have "
                 "now?\nAnswer:", " The farm buys 250 * 3 = <<250*3=750>>750 cows.\nIt now has 250 + 750 = "
                 "<<250+750=1000>>1,000 cows.\n#### 1,000", "1,000"),
    "gsm8k_rft": (0, "Question: Natalia sold clips to 48 of her friends in April, and then she sold half as many "
                     "clips in May. How many clips did Natalia sell altogether in April and May?\nAnswer: Let's "
                     "think step by step.", " Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips "
                     "altogether in April and May.\nThe answer is 72.", "72"),
    "math": (0, "Problem: What is $\\frac{1}{4} + \\frac{1}{4}$?\nSolution:", " We add the fractions: "
                "$\\frac{1}{4}+\\frac{1}{4} = \\frac{2}{4} = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
    "ag_news": (0, "Classify the topic of the news article as World, Sports, Business or Sci/Tech.\nArticle: Wall St. "
                   "Bears Claw Back Into the Black (Reuters) Reuters - Short-sellers, Wall Street's dwindling band of "
                   "ultra-cynics, are seeing green again.\nTopic:", " Business", "Business"),
    "squad": (1, "Context: Architecturally, the school has a Catholic character. Atop the Main Building's gold dome "
                 "is a golden statue of the Virgin Mary.\nQuestion: What sits on top of the Main Building at Notre "
                 "Dame?\nAnswer:", " a golden statue of the Virgin Mary",
              ["a golden statue of the Virgin Mary", "golden statue of the Virgin Mary", "statue of the Virgin Mary"]),
    "sciq": (1, "Question: What is the si unit of force?\nA. joule\nB. watt\nC. newton\nD. pascal\nAnswer:", " C",
             "C"),
    "boolq": (1, "Passage: At the Liberation of France in the summer of 1944, Metropolitan France kept GMT+2 as its "
                 "standard time zone, while the United Kingdom uses GMT in winter.\nQuestion: is france the same "
                 "timezone as the uk?\nAnswer (yes or no):", " no", "no"),
    "arc_challenge": (1, "Question: Which of the following is a renewable resource?\nA. coal\nB. wind\nC. oil\n"
                         "D. natural gas\nAnswer:", " B", "B"),  # labels "1"-"4" relettered A-D
    "mmlu": (0, "Subject: abstract algebra\nQuestion: Find the degree for the given field extension Q(sqrt(2), "
                "sqrt(3), sqrt(18)) over Q.\nA. 0\nB. 4\nC. 2\nD. 6\nAnswer:", " B", "B"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HAND_CHECKED))
def test_to_example_on_a_hand_checked_row(name):
    index, prompt, completion, reference = HAND_CHECKED[name]
    example = get_task(name).to_example(fixture_rows(name)[index])
    assert (example["prompt"], example["completion"], example["reference"]) == (prompt, completion, reference)


def test_formatter_details():
    # Multiple choice keeps its options; ARC's five-option row gets A-E, SciQ's correct answer is where the letter is.
    arc = formatted("arc_challenge")
    assert arc[3]["choices"] == ["leaves", "stem", "roots", "flowers", "seeds"] and arc[3]["reference"] == "C"
    sciq = formatted("sciq")
    assert [e["choices"]["ABCD".index(e["reference"])] for e in sciq][:3] == [
        "mesophilic organisms", "newton", "carbon dioxide"]  # fmt: skip
    assert {e["reference"] for e in sciq} != {"A"}  # the correct option is not always first
    # MATH: the answer is the last \boxed{}, nested braces kept; one row per level survives the level filter.
    assert [e["reference"] for e in formatted("math_l3")] == ["9\\pi", "(5,6)"]
    assert [e["reference"] for e in formatted("math_l4")] == ["\\dfrac{\\sqrt{3}}{2}", "49"]
    assert "10" in [e["reference"] for e in formatted("math")]  # the "Level ?" row is in MATH, in no level
    assert [e["reference"] for e in formatted("boolq")] == ["yes", "no", "yes", "no", "yes", "no", "no", "yes"]
    assert [e["reference"] for e in formatted("ag_news")][:4] == ["Business", "Sports", "World", "Sci/Tech"]
    # GSM8K-RFT: no calculator annotations, one step per line, the answer last.
    assert all("<<" not in e["completion"] and "####" not in e["completion"] for e in formatted("gsm8k_rft"))
    assert formatted("gsm8k_rft")[9]["completion"].endswith("2,050 stamps left.\nThe answer is 2,050.")


def test_alpaca_gpt4_with_bleu():
    spec = alpaca_gpt4(metric="bleu")
    rows = [as_eval_row(e) for e in map(spec.to_example, fixture_rows("alpaca_gpt4"))]
    # TaskSpec.score brings sacreBLEU's 0-100 to 0-1: the gold responses score 1, unrelated text 0.
    assert spec.score([r["completion"] for r in rows], rows) == pytest.approx(1.0)
    assert spec.score(["zzz"] * len(rows), rows) == 0


def test_sciq_option_order_is_fixed_by_the_row():
    row = fixture_rows("sciq")[0]
    first = get_task("sciq").to_example(row)["choices"]
    random.seed(0)  # the global RNG plays no part
    assert get_task("sciq").to_example(dict(row))["choices"] == first
    assert shuffled(["a", "b", "c", "d"], "key") == shuffled(["a", "b", "c", "d"], "key")
    assert len({tuple(shuffled(["a", "b", "c", "d"], f"key {i}")) for i in range(20)}) > 1


# ----------------------------------------------------------------------------------------------------------------
# Answer extractors on hand-written generations
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, answer",
    [
        (" She has 250 + 750 = 1,000 cows.\n#### 1,000", "1,000"),
        (" 5 - 2 = 3 apples.\n#### 3 apples", "3"),
        (" #### $15.", "15"),
        (" She had 20 and spent 5.\nThe answer is 15.", "15"),
        (" The answer is 18 dollars.", "18"),
        (" First 12 * 3 = 36, then 36 + 4 = 40", "40"),
        (" 72\nQuestion: Tom has 5 apples. #### 9", "72"),  # the run-on next example is not the answer
        (" -7", "-7"),
    ],
)
def test_gsm8k_answer(text, answer):
    assert gsm8k_answer(text) == answer


@pytest.mark.parametrize(
    "text, answer",
    [
        ("so $x = \\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),
        ("First \\boxed{5}, finally $\\boxed{\\dfrac{\\sqrt{3}}{2}}$", "\\dfrac{\\sqrt{3}}{2}"),
        ("the set is $\\boxed{\\{1, 2\\}}$", "\\{1, 2\\}"),  # escaped braces do not close the box
        ("$\\fbox{7}$", "7"),
        ("$x = \\boxed 5$", "5"),
        ("So it is 3.\nThe answer is The limit exists and is 3.", "The limit exists and is 3"),
        ("The answer is 1.5. Next we check.", "1.5"),
        ("2^(n-1)", "2^(n-1)"),  # a bare one-line answer is the answer
        ("x = 2\ny = 7\nso 9 in all", "9"),
        ("We get 3 + 4 = 7,\nso $\\boxed{7", "7"),  # an unclosed box is no answer: the last number is
    ],
)
def test_final_answer(text, answer):
    assert final_answer(text) == answer


def test_small_extractors():
    assert boxed("no box here") is None
    assert [yes_no(t) for t in (" Yes, because ...", " no.", "False", " maybe")] == ["yes", "no", "no", "maybe"]
    assert get_task("ag_news").extract_answer(" Sports\nArticle: next one") == "Sports"
    assert get_task("alpaca_gpt4").extract_answer(" Paris.\nInstruction: next") == "Paris."
    assert get_task("sciq").extract_answer(" B\nQuestion: Which ...\nAnswer: C") == "B"
    assert get_task("rg_basic_arithmetic").extract_answer(" 5 - 3 - 6 = -4\nCalculate 1 + 1.") == "-4"
    assert get_task("rg_letter_counting").extract_answer(' The letter "h" appears 3 times.') == "3"
    assert get_task("rg_spell_backward").extract_answer(" nacua\nSpell this") == "nacua"


# ----------------------------------------------------------------------------------------------------------------
# TaskSpec: every source kind, errors
# ----------------------------------------------------------------------------------------------------------------


def question_rows(n: int = 40) -> Dataset:
    return Dataset.from_list([{"q": f"question {i}", "a": str(i)} for i in range(n)])


def question_example(row: dict) -> dict:
    return {"prompt": row["q"], "completion": f" {row['a']}", "reference": str(row["a"])}  # CSV reads "7" as 7


def test_every_source_kind(tmp_path):
    ds = question_rows()
    ds.save_to_disk(str(tmp_path / "saved"))
    ds.to_csv(str(tmp_path / "rows.csv"), index=False)
    ds.to_parquet(str(tmp_path / "rows.parquet"))
    ds.to_json(str(tmp_path / "rows.jsonl"))
    sources = [ds, lambda: ds, str(tmp_path / "saved"), str(tmp_path / "rows.csv"), tmp_path / "rows.parquet",
               str(tmp_path / "rows.jsonl")]  # fmt: skip
    splits = []
    for source in sources:
        train, evaluation = TaskSpec("t", source, question_example).load()
        assert (len(train), len(evaluation)) == (38, 2)
        splits.append(sorted(evaluation["prompt"]))
    assert all(s == splits[0] for s in splits)  # the same rows held out, whatever the source kind

    with_eval = DatasetDict({"train": ds.select(range(30)), "validation": ds.select(range(30, 40))})
    with_eval.save_to_disk(str(tmp_path / "saved_dict"))
    for source in (with_eval, lambda: with_eval, str(tmp_path / "saved_dict")):
        train, evaluation = TaskSpec("t", source, question_example, eval_split="validation").load()
        assert (len(train), len(evaluation)) == (30, 10) and evaluation[0]["prompt"] == "question 30"
    train, evaluation = TaskSpec("t", with_eval, question_example).load(max_train=5, max_eval=3)
    assert (len(train), len(evaluation)) == (5, 2)  # no eval split named: 5% of train (2 of 30) held out
    assert TaskSpec("t", ds, question_example).load(max_train=0)[0] is None  # a probe: evaluation rows only


def test_chat_rows_have_messages():
    train, evaluation = TaskSpec("t", question_rows(), question_example, chat=True).load(max_train=3)
    assert set(train.column_names) == set(evaluation.column_names) == {"messages", "reference"}
    assert train[0]["messages"][0]["role"] == "user" and train[0]["messages"][1]["role"] == "assistant"
    assert train[0]["messages"][1]["content"] == " " + train[0]["reference"][0]


def test_bad_task_specs(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        TaskSpec("t", str(tmp_path / "missing.jsonl"), question_example).load()
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        TaskSpec("t", tmp_path / "missing.csv", question_example).load()
    with pytest.raises(ValueError, match="metric"):
        TaskSpec("t", question_rows(), question_example, metric="accuracy@5")
    with pytest.raises(ValueError, match="choice_scoring"):
        TaskSpec("t", question_rows(), question_example, choice_scoring="vote")
    with pytest.raises(ValueError, match="no split 'train'"):
        TaskSpec("t", DatasetDict({"test": question_rows()}), question_example).load()
    with pytest.raises(ValueError, match="no usable rows"):
        TaskSpec("t", question_rows(), lambda row: None).load()
    with pytest.raises(ValueError, match="2 predictions for 1 examples"):
        get_task("gsm8k").score(["1", "2"], [{"reference": ["1"]}])


def test_rows_without_the_needed_fields_are_one_line_errors_and_empty_completions_a_warning():
    """A to_example that reads a column the rows lack, or that gives no completion, is named in a ValueError (not a
    bare KeyError); rows whose completion is empty are left out with a warning."""
    rows = question_rows()
    with pytest.raises(ValueError, match=r"task 't': its rows have no column 'answer_text', which its to_example"):
        TaskSpec("t", rows, lambda row: {**question_example(row), "x": row["answer_text"]}).load()
    with pytest.raises(ValueError, match=r"task 't': to_example gave a row without \['completion'\]"):
        TaskSpec("t", rows, lambda row: {"prompt": row["q"], "reference": row["a"]}).load()

    def half_empty(row):
        example = question_example(row)
        return {**example, "completion": "" if int(example["reference"]) % 2 else example["completion"]}

    with pytest.warns(UserWarning, match=r"task 't': \d+ of \d+ rows have an empty completion and are left out"):
        train, _ = TaskSpec("t", rows, half_empty).load()
    assert all(row["completion"].strip() for row in train)


# ----------------------------------------------------------------------------------------------------------------
# Declared tasks (a YAML entry of `tasks:`)
# ----------------------------------------------------------------------------------------------------------------

CAPITALS = [
    {"country": c, "capital": k, "meta": {"continent": m}}
    for c, k, m in [("France", "Paris", "Europe"), ("Japan", "Tokyo", "Asia"), ("Peru", "Lima", "America")] * 10
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_declared_task_from_templates_fields_and_a_split_mapping(tmp_path):
    """A row becomes prompt/completion through format strings over its columns (nested ones indexed), or through
    columns used as they are; the reference defaults to the completion; a mapping gives one local file per split."""
    data = write_jsonl(tmp_path / "capitals.jsonl", CAPITALS)
    spec = task_from_dict({"name": "capitals", "dataset": str(data), "prompt_template": "{meta[continent]}: capital "
                           "of {country}?", "completion_template": " {capital}.", "max_new_tokens": 4})  # fmt: skip
    train, evaluation = spec.load()
    assert (len(train), len(evaluation)) == (28, 2)  # no eval split: 5% held out
    row = next(r for r in train if r["prompt"].endswith("France?"))
    assert row == {"prompt": "Europe: capital of France?", "completion": " Paris.", "reference": ["Paris."]}
    assert (spec.metric, spec.max_new_tokens, spec.extract_answer("Paris.\nQuestion: x")) == ("exact_match", 4,
                                                                                             "Paris.")  # fmt: skip

    by_field = task_from_dict({"name": "c", "dataset": {"train": str(data), "test": str(data)}, "eval_split": "test",
                               "prompt_field": "country", "completion_field": "capital", "reference_field": "capital",
                               "metric": "squad_f1"})  # fmt: skip
    train, evaluation = by_field.load()
    assert (len(train), len(evaluation)) == (30, 30)  # the two files are the two splits
    assert train[0] == {"prompt": "France", "completion": "Paris", "reference": ["Paris"]}  # as they are
    assert by_field.score(["Paris"], [train[0]]) == 1.0


def test_declared_chat_task_and_answer_regex(tmp_path):
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"How many minutes in {n} hours?"},
                {"role": "assistant", "content": f"{60 * n} minutes"},
            ],
            "value": 60 * n,
        }
        for n in range(40)
    ]
    spec = task_from_dict(
        {
            "name": "units",
            "dataset": str(write_jsonl(tmp_path / "u.jsonl", rows)),
            "messages_field": "messages",
            "reference_field": "value",
            "answer_regex": r"(\d+)",
        }
    )
    train, evaluation = spec.load()
    assert set(train.column_names) == {"messages", "reference"} and len(evaluation) == 2
    assert train[0]["messages"][-1]["role"] == "assistant" and train[0]["reference"] == [
        train[0]["messages"][-1]["content"].split()[0]]  # fmt: skip
    assert spec.extract_answer("It is 120 minutes, or 7200 seconds") == "120"
    assert spec.extract_answer("no number") == ""
    assert spec.score(["180 minutes"], [{"reference": ["180"]}]) == 1.0


def test_declared_multiple_choice_task_scores_by_loglikelihood(tmp_path):
    rows = [{"q": f"{n} + 1 =", "options": [str(n + 1), str(n + 2)], "letter": "A"} for n in range(20)]
    spec = task_from_dict({"name": "mc", "dataset": str(write_jsonl(tmp_path / "mc.jsonl", rows)),
                           "prompt_template": "{q}\nA. {options[0]}\nB. {options[1]}\nAnswer:",
                           "completion_template": " {letter}", "metric": "choice", "choices_field": "options",
                           "choice_scoring": "loglikelihood"})  # fmt: skip
    train, _ = spec.load()
    for row in train:
        n = int(row["prompt"].split(" + ")[0])
        assert row["choices"] == [str(n + 1), str(n + 2)] and row["completion"] == " A" and row["reference"] == ["A"]
    assert (spec.metric, spec.choice_scoring) == ("choice", "loglikelihood")


@pytest.mark.parametrize(
    "declaration, message",
    [
        (
            {"name": "t", "dataset": "d.jsonl", "prompt_tempalte": "{q}"},
            r"tasks\[1\] \('t'\): 'prompt_tempalte' is not a "
            r"task key \(did you mean 'prompt_template'\?",
        ),
        ({"name": "t"}, r"tasks\[1\] \('t'\): 'dataset' is missing"),
        ({"dataset": "org/data", "prompt_field": "q", "completion_field": "a"}, r"tasks\[1\]: 'name' is missing"),
        (
            {"name": "t", "dataset": "org/data", "completion_field": "a"},
            r"'prompt_field' or prompt_template .*neither",
        ),
        (
            {
                "name": "t",
                "dataset": "org/data",
                "prompt_field": "q",
                "prompt_template": "{q}",
                "completion_field": "a",
            },
            r"give one of them, not both",
        ),
        (
            {"name": "t", "dataset": "org/data", "messages_field": "m", "prompt_field": "q"},
            r"'messages_field' makes chat",
        ),
        (
            {"name": "t", "dataset": "org/data", "prompt_template": "{q", "completion_field": "a"},
            r"'prompt_template' is not a format string",
        ),
        ({"name": "t", "dataset": "org/data", "prompt_template": "{} =", "completion_field": "a"}, r"positional"),
        (
            {"name": "t", "dataset": "org/data", "prompt_field": "q", "completion_field": "a", "metric": "accuracy"},
            r"'metric' must be one of exact_match",
        ),
        (
            {"name": "t", "dataset": "org/data", "prompt_field": "q", "completion_field": "a", "answer_regex": "(\\d"},
            r"'answer_regex' is not a regular expression",
        ),
        (
            {"name": "t", "dataset": "org/data", "prompt_field": "q", "completion_field": "a", "max_new_tokens": 0},
            r"'max_new_tokens' must be an integer >= 1",
        ),
        (
            {"name": "t", "dataset": "org/data", "prompt_field": "q", "completion_field": "a", "choices_field": "o"},
            r"'choices_field' applies to metric 'choice'",
        ),
        (
            {
                "name": "t",
                "dataset": "org/data",
                "prompt_field": "q",
                "completion_field": "a",
                "metric": "choice",
                "choice_scoring": "loglikelihood",
            },
            r"'choices_field' is missing",
        ),
        (
            {"name": "t", "dataset": "missing.jsonl", "prompt_field": "q", "completion_field": "a"},
            r"'dataset' names the file missing.jsonl, which does not exist",
        ),
        (
            {"name": "a/b", "dataset": "org/data", "prompt_field": "q", "completion_field": "a"},
            r"must not contain '/'",
        ),
    ],
)
def test_bad_declarations_name_the_task_and_the_key(declaration, message):
    with pytest.raises(InputError, match=message):
        get_sequence(["rg_addition", declaration])


def test_declared_task_reading_a_missing_column_fails_when_its_rows_load(tmp_path):
    data = write_jsonl(tmp_path / "capitals.jsonl", CAPITALS)
    spec = task_from_dict({"name": "c", "dataset": str(data), "prompt_template": "Capital of {contry}?",
                           "completion_field": "capital"})  # fmt: skip
    with pytest.raises(InputError, match=r"task 'c': prompt_template reads the column 'contry', which its rows do not "
                                         r"have \(they have \['country', 'capital', 'meta'\]\)"):  # fmt: skip
        spec.load()


def test_formatting_is_cached_for_data_read_from_files(tmp_path):
    """datasets.map caches what it formats from a file: loading the task again formats nothing (the declared task's
    formatter hashes the same in every run)."""
    from datasets import enable_caching, is_caching_enabled

    assert is_caching_enabled()
    data = write_jsonl(tmp_path / "capitals.jsonl", CAPITALS * 10)
    declaration = {"name": "c", "dataset": str(data), "prompt_field": "country", "completion_template": " {capital}"}
    first, _ = task_from_dict(declaration).load()
    again, _ = task_from_dict(dict(declaration)).load()
    assert first.cache_files and again.cache_files[0]["filename"] in {f["filename"] for f in first.cache_files}
    enable_caching()


# ----------------------------------------------------------------------------------------------------------------
# Registry and sequences
# ----------------------------------------------------------------------------------------------------------------


def test_get_task():
    with pytest.raises(ValueError, match="unknown task 'nope'.*gsm8k_rft"):
        get_task("nope")
    spec = get_task("boolq")
    assert get_task(spec) is spec
    for name, build in BUILTIN_TASKS.items():
        spec = build()
        assert isinstance(spec, TaskSpec) and spec.name == name and spec.description


def test_sequences_resolve():
    assert SEQUENCES["paper_3"] == ["alpaca_gpt4", "gsm8k_rft", "math"] and SEQUENCE_PROBES["paper_3"] == "mmlu"
    assert SEQUENCES["paper_11"] == ["ag_news", "squad", "sciq", "boolq", "arc_challenge", "gsm8k_rft",
                                     "math_l1", "math_l2", "math_l3", "math_l4", "math_l5"]  # fmt: skip
    for name, tasks in SEQUENCES.items():
        assert [t.name for t in get_sequence(name)] == tasks
        assert [t.name for t in get_sequence([name])] == tasks
    assert all(probe not in SEQUENCES["paper_3"] for probe in SEQUENCE_PROBES.values())  # probes are not trained
    mixed = get_sequence(["gsm8k", get_task("boolq")])
    assert [t.name for t in mixed] == ["gsm8k", "boolq"] and [t.name for t in get_sequence("squad")] == ["squad"]
    with pytest.raises(ValueError, match="unknown task"):
        get_sequence(["paper_3", "paper_11"])  # sequences are not nested


# ----------------------------------------------------------------------------------------------------------------
# Offline tasks (data from installed packages)
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*REASONING_GYM, "champ_math", "chatterbot_trivia", "chatterbot_ai"])
def test_offline_task_is_deterministic_and_self_consistent(name):
    spec = get_task(name)
    train, evaluation = spec.load(max_train=40, max_eval=10)
    again_train, again_eval = get_task(name).load(max_train=40, max_eval=10)
    assert list(train["prompt"]) == list(again_train["prompt"])
    assert list(evaluation["prompt"]) == list(again_eval["prompt"])
    assert len(train) == 40 and len(evaluation) > 0
    assert all(p.strip() for p in train["prompt"]) and all(c.strip() for c in train["completion"])
    assert spec.score(list(evaluation["completion"]), list(evaluation)) == pytest.approx(1.0)
    assert spec.score([r[0] for r in evaluation["reference"]], list(evaluation)) == pytest.approx(1.0)
    other, _ = make_offline_task(name, seed=7).load(max_train=40)
    assert list(other["prompt"]) != list(train["prompt"])  # another seed, other rows (or another order)


def test_offline_sizes_and_reasoning_gym_agreement():
    import reasoning_gym

    small = make_offline_task("rg_basic_arithmetic", size=60, seed=3)
    train, evaluation = small.load()
    assert len(train) + len(evaluation) <= 60 and small.metadata == {"size": 60, "seed": 3}
    assert len(set(train["prompt"]) & set(evaluation["prompt"])) == 0  # repeated questions were dropped
    # Exact match on our references agrees with reasoning-gym's own scorer of its answers.
    generator = reasoning_gym.create_dataset("basic_arithmetic", size=60, seed=3,
                                             **REASONING_GYM["rg_basic_arithmetic"].config)  # fmt: skip
    answers = {f"{e['question']}\nAnswer:": e for e in generator}
    for row in evaluation:
        entry = answers[row["prompt"]]
        assert generator.score_answer(row["reference"][0], entry) == 1.0
    train, evaluation = make_offline_task("champ_math", size=100).load()
    assert (len(train), len(evaluation)) == (95, 5)
    train, evaluation = make_offline_task("chatterbot_trivia", size=50).load()
    assert len(train) + len(evaluation) == 50
    with pytest.raises(ValueError, match="unknown offline task"):
        make_offline_task("rg_nope")


def test_demo_tasks_have_short_prompts_and_answers():
    for spec in get_sequence("demo_3"):
        train, _ = spec.load(max_train=200)
        assert max(len(p.split()) for p in train["prompt"]) <= 40  # under 64 tokens: short steps on a CPU
        assert max(len(c.split()) for c in train["completion"]) <= 6 and spec.max_new_tokens <= 24


# ----------------------------------------------------------------------------------------------------------------
# Generated letter-string tasks (the synthetic benchmark tier)
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, letters, answer",
    [("syn_copy", "c a f", "c a f"), ("syn_reverse", "c a f d", "d f a c"), ("syn_sort", "c a f d", "a c d f"),
     ("syn_shift", "c a h", "d b a"), ("syn_rotate", "c a f d", "a f d c"), ("syn_mirror", "a c h", "h f a"),
     ("syn_swap", "c a f d e", "a c d f e")],
)  # fmt: skip
def test_synthetic_transforms_by_hand(name, letters, answer):
    """Each transform on a hand-worked input (alphabet a..h: shift h -> a, mirror a <-> h, c <-> f)."""
    word, transform = TRANSFORMS[name]
    assert " ".join(transform(letters.split())) == answer
    example = get_task(name).to_example({"letters": letters, "answer": answer})
    assert example == {"prompt": f"{word}: {letters} =", "completion": f" {answer}", "reference": answer}


def test_synthetic_tasks_are_deterministic_distinct_and_held_out():
    train, evaluation = synthetic_task("syn_reverse", size=400, seed=3, eval_size=50).load()
    again, _ = synthetic_task("syn_reverse", size=400, seed=3, eval_size=50).load()
    assert list(train["prompt"]) == list(again["prompt"])
    assert (len(train), len(evaluation)) == (350, 50)  # size distinct inputs, the last eval_size held out
    inputs = [p.removeprefix("reverse: ").removesuffix(" =") for p in [*train["prompt"], *evaluation["prompt"]]]
    assert len(set(inputs)) == len(inputs) == 400  # no input twice: no evaluation input is trained on
    assert all(3 <= len(i.split()) <= 5 and set(i.split()) <= set(ALPHABET) for i in inputs)
    for row in evaluation:
        assert row["reference"] == [" ".join(row["prompt"].split()[1:-1][::-1])]
    other, _ = synthetic_task("syn_reverse", size=400, seed=4).load()
    assert list(other["prompt"]) != list(train["prompt"])
    copy, _ = synthetic_task("syn_copy", size=400, seed=3).load()
    copy_inputs = [p.removeprefix("copy: ") for p in copy["prompt"]]
    assert copy_inputs != [p.removeprefix("reverse: ") for p in train["prompt"]]  # each task draws its own inputs


def test_synthetic_scoring_reads_the_first_line():
    spec = get_task("syn_sort")
    _, evaluation = spec.load(0, 4)
    right = [f" {row['reference'][0]}\nsort: a b =" for row in evaluation]  # a model running on: next line ignored
    assert spec.score(right, list(evaluation)) == 1.0
    assert spec.score([" h h h"] * len(evaluation), list(evaluation)) == 0.0


def test_synthetic_task_rejects_bad_settings():
    with pytest.raises(ValueError, match="unknown synthetic task 'syn_nope'"):
        synthetic_task("syn_nope")
    with pytest.raises(ValueError, match="min_len <= max_len"):
        synthetic_task("syn_copy", min_len=4, max_len=2)
    # 8 + 64 distinct inputs of 1-2 letters: 100 cannot be drawn, and the evaluation split must leave training rows
    with pytest.raises(ValueError, match="size <= 72"):
        synthetic_task("syn_copy", size=100, min_len=1, max_len=2)
    with pytest.raises(ValueError, match="eval_size < size"):
        synthetic_task("syn_copy", size=300, eval_size=300)


def test_builtin_synthetic_tasks_hold_out_200_evaluation_rows():
    train, evaluation = get_task("syn_sort").load(1600, 200)
    assert (len(train), len(evaluation)) == (1600, 200)
