"""Task specs: every built-in Hub task on a fixture in its Hub schema, every source kind, offline tasks, sequences."""

import dataclasses
from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict

from mssr_hf.tasks import BUILTIN_TASKS, SEQUENCES, TaskSpec, get_sequence, get_task

FIXTURES = Path(__file__).parent / "fixtures" / "hub"
FIXTURE_OF = {
    "alpaca_gpt4": "alpaca_gpt4", "gsm8k": "gsm8k", "gsm8k_rft": "gsm8k", "math": "competition_math",
    **{f"math_l{k}": "competition_math" for k in range(1, 6)}, "ag_news": "ag_news", "squad": "squad",
    "sciq": "sciq", "boolq": "boolq", "arc_challenge": "arc_challenge", "mmlu": "mmlu",
}  # fmt: skip


def on_fixture(name: str) -> TaskSpec:
    """The built-in spec with its Hub source replaced by the local fixture (the Hub is unreachable here)."""
    return dataclasses.replace(get_task(name), source=str(FIXTURES / f"{FIXTURE_OF[name]}.jsonl"), subset=None,
                               train_split="train", eval_split=None)  # fmt: skip


def formatted(name: str) -> list[dict]:
    spec = on_fixture(name)
    return [e for e in (spec.to_example(r) for r in Dataset.from_json(spec.source)) if e is not None]


@pytest.mark.parametrize("name", sorted(set(FIXTURE_OF) - {"math_l3", "math_l4", "math_l5"}))  # >= 2 rows each
def test_hub_task_loads_formats_and_scores(name):
    spec = on_fixture(name)
    assert spec.source and get_task(name).source != spec.source  # the real spec points at the Hub
    train, evaluation = spec.load()
    rows = formatted(name)
    assert len(train) + len(evaluation) == len(rows)  # 95/5 split of the usable rows
    again = spec.load()
    assert again[0]["prompt"] == train["prompt"] and again[1]["prompt"] == evaluation["prompt"]  # seed 42
    everything = Dataset.from_list([{**r, "reference": [r["reference"]] if isinstance(r["reference"], str)
                                     else r["reference"]} for r in rows])  # fmt: skip
    # Scoring the gold completion scores 1; an unrelated answer scores 0.
    assert spec.score([r["completion"] for r in rows], list(everything)) == pytest.approx(1.0)
    assert spec.score(["zzz unrelated"] * len(rows), list(everything)) == pytest.approx(0.0)


def test_formatters_on_hand_checked_rows():
    gsm = formatted("gsm8k")
    assert gsm[0]["prompt"].startswith("Question: Natalia sold clips") and gsm[0]["prompt"].endswith("\nAnswer:")
    assert gsm[0]["completion"].endswith("#### 72") and gsm[0]["reference"] == "72"
    assert formatted("gsm8k")[1]["reference"] == "1,000"
    rft = formatted("gsm8k_rft")[0]
    assert "<<" not in rft["completion"] and rft["completion"].endswith("The answer is 72.")
    assert get_task("gsm8k_rft").extract_answer(" ... so the answer is 1,000.") == "1,000"

    math = formatted("math")
    assert math[0]["reference"] == "\\frac{1}{2}" and len(math) == 7  # the row without \boxed{} is dropped
    assert [e["reference"] for e in formatted("math_l5")] == ["5\\sqrt{2}"]
    assert get_task("math").extract_answer("so $x = \\boxed{\\frac{1}{2}}$") == "\\frac{1}{2}"

    assert [e["reference"] for e in formatted("ag_news")][:4] == ["Business", "Sports", "World", "Sci/Tech"]
    squad = formatted("squad")
    assert squad[0]["reference"] == ["Denver Broncos", "The Denver Broncos", "Broncos"] and len(squad) == 5
    assert [e["reference"] for e in formatted("boolq")][:2] == ["no", "yes"]
    arc = formatted("arc_challenge")
    assert arc[1]["reference"] == "B" and "B. wind" in arc[1]["prompt"]  # labels 1-4 relettered A-D
    sciq = formatted("sciq")
    assert sciq[1]["choices"][ord(sciq[1]["reference"]) - ord("A")] == "newton"
    assert formatted("sciq")[1]["choices"] == sciq[1]["choices"]  # the option order is fixed per question
    mmlu = formatted("mmlu")[0]
    assert mmlu["reference"] == "B" and mmlu["prompt"].startswith("(abstract algebra) Find the degree")


def test_every_source_kind(tmp_path):
    rows = [{"q": f"question {i}", "a": str(i)} for i in range(40)]

    def to_example(r):
        return {"prompt": r["q"], "completion": f" {r['a']}", "reference": str(r["a"])}  # CSV reads "7" as 7

    ds = Dataset.from_list(rows)
    ds.save_to_disk(str(tmp_path / "saved"))
    ds.to_csv(str(tmp_path / "rows.csv"))
    ds.to_parquet(str(tmp_path / "rows.parquet"))
    ds.to_json(str(tmp_path / "rows.jsonl"))
    with_eval = DatasetDict({"train": ds.select(range(30)), "validation": ds.select(range(30, 40))})
    for source in (ds, lambda: ds, str(tmp_path / "saved"), str(tmp_path / "rows.csv"), tmp_path / "rows.parquet",
                   str(tmp_path / "rows.jsonl")):  # fmt: skip
        train, evaluation = TaskSpec("t", source, to_example).load()
        assert (len(train), len(evaluation)) == (38, 2)
    train, evaluation = TaskSpec("t", with_eval, to_example, eval_split="validation").load()
    assert (len(train), len(evaluation)) == (30, 10) and evaluation[0]["prompt"] == "question 30"
    chat_train, _ = TaskSpec("t", ds, to_example, chat=True).load(max_train=3)
    assert chat_train[0]["messages"][1] == {"role": "assistant", "content": chat_train[0]["messages"][1]["content"]}
    assert set(chat_train.column_names) == {"messages", "reference"}
    assert TaskSpec("t", ds, to_example).load(max_train=0)[0] is None


def test_bad_task_specs():
    def to_example(r):
        return r

    with pytest.raises(FileNotFoundError, match="missing.json"):
        TaskSpec("t", "missing.json", to_example).load()
    with pytest.raises(ValueError, match="metric"):
        TaskSpec("t", Dataset.from_list([{"x": 1}]), to_example, metric="accuracy@5")
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        get_task("nope")
    with pytest.raises(ValueError, match="no split"):
        TaskSpec("t", DatasetDict({"test": Dataset.from_list([{"x": 1}])}), to_example).load()


def test_sequences_resolve():
    for name, tasks in SEQUENCES.items():
        assert [t.name for t in get_sequence(name)] == tasks
    assert [t.name for t in get_sequence(["paper_3"])] == SEQUENCES["paper_3"]
    assert [t.name for t in get_sequence(["gsm8k", "boolq"])] == ["gsm8k", "boolq"]
    assert SEQUENCES["paper_11"][:5] == ["ag_news", "squad", "sciq", "boolq", "arc_challenge"]
    assert set(BUILTIN_TASKS) >= set(FIXTURE_OF)


@pytest.mark.parametrize("name", ["rg_spell_backward", "rg_basic_arithmetic", "rg_letter_counting", "rg_gsm_symbolic",
                                  "champ_math", "chatterbot_ai"])  # fmt: skip
def test_offline_tasks_are_deterministic_and_self_consistent(name):
    spec = get_task(name)
    train, evaluation = spec.load(max_train=30, max_eval=10)
    again_train, _ = get_task(name).load(max_train=30, max_eval=10)
    assert train["prompt"] == again_train["prompt"] and len(train) == 30 and len(evaluation) > 0
    assert all(p.strip() for p in train["prompt"]) and all(c.strip() for c in train["completion"])
    assert spec.score(list(evaluation["completion"]), list(evaluation)) == pytest.approx(1.0)


def test_reasoning_gym_seed_changes_the_rows():
    from mssr_hf.tasks.offline import reasoning_gym_task

    a, _ = reasoning_gym_task("rg_basic_arithmetic", size=50, seed=1).load()
    b, _ = reasoning_gym_task("rg_basic_arithmetic", size=50, seed=2).load()
    assert a["prompt"] != b["prompt"]
