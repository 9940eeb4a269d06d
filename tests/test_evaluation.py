"""Evaluation helpers: truncation that keeps the answer, option log-likelihoods, the CLI's eval and report."""

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from mssr_hf.evaluation import (
    choice_accuracy_by_loglikelihood,
    choice_loglikelihoods,
    generate,
    option_loglikelihoods,
)
from mssr_hf.tasks.spec import truncate_keeping_answer


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval(), AutoTokenizer.from_pretrained(tiny_model_dir)


def n_tokens(tok, text):
    return len(tok(text, add_special_tokens=False)["input_ids"])


def test_truncation_keeps_prompt_and_final_answer(tiny):
    _, tok = tiny
    steps = " ".join(f"step {i} adds {i} to the total." for i in range(60))
    rows = Dataset.from_list([
        {"prompt": "Question: what is the total?", "completion": f" {steps} #### 1770"},
        {"prompt": "Question: short?", "completion": " yes"},
        {"prompt": "Context: " + "long context words " * 80 + "Question: who won?", "completion": " #### Denver"},
    ])  # fmt: skip
    fitted = truncate_keeping_answer(rows, tok, max_length=64, answer_tokens=8)
    long, short, long_prompt = fitted[0], fitted[1], fitted[2]
    assert long["prompt"] == "Question: what is the total?"  # the prompt fits: kept whole
    assert long["completion"].endswith("#### 1770") and long["completion"].startswith(" step 0")  # head + answer
    assert n_tokens(tok, long["prompt"]) + n_tokens(tok, long["completion"]) <= 63
    assert short == rows[1]  # fits: unchanged
    # An over-long prompt loses its middle: its start and the question survive, and the answer is whole.
    assert long_prompt["prompt"].startswith("Context: long") and long_prompt["prompt"].endswith("Question: who won?")
    assert long_prompt["completion"] == " #### Denver"
    assert n_tokens(tok, long_prompt["prompt"]) + n_tokens(tok, long_prompt["completion"]) <= 63


def test_evaluation_prompts_are_fitted_as_training_rows_are(tiny):
    """With max_length, a long prompt keeps its start and its end and leaves room for the generated tokens (or the
    options); a prompt that fits is unchanged, and without max_length nothing is cut."""
    model, tok = tiny
    long_prompt = "Context: " + "long context words " * 500 + "Question: 2 + 3 ="
    ids = tok(long_prompt, add_special_tokens=False)["input_ids"]
    seen = []
    hook = model.register_forward_pre_hook(lambda m, a, kw: seen.append(kw["input_ids"].tolist()), with_kwargs=True)
    try:
        texts = generate(model, tok, [long_prompt, "2 + 3 ="], max_new_tokens=4, max_length=48)
        first_forward = seen[0]
        seen.clear()
        option_loglikelihoods(model, tok, long_prompt, [" 5", " 17"], max_length=48)
        option_rows = seen[0]
        seen.clear()
        generate(model, tok, [long_prompt], max_new_tokens=1)
    finally:
        hook.remove()
    assert len(texts) == 2
    assert first_forward[0] == ids[:22] + ids[-22:]  # 48 - 4 new tokens = 44: its first and last 22 tokens
    short = tok("2 + 3 =", add_special_tokens=False)["input_ids"]
    assert first_forward[1][-len(short) :] == short  # left-padded, whole
    options = [tok(c, add_special_tokens=False)["input_ids"] for c in (" 5", " 17")]
    kept = 48 - max(map(len, options))  # room for the longest option
    assert all(len(row) <= 48 for row in option_rows)
    for row, option in zip(option_rows, options):  # left-padded: each row ends with the fitted prompt and its option
        assert row[-len(option) - kept :] == ids[: kept // 2] + ids[len(ids) - (kept - kept // 2) :] + option
    assert len(seen[0][0]) == len(ids)  # no max_length: the whole prompt


def test_option_loglikelihoods_match_a_manual_forward(tiny):
    model, tok = tiny
    prompt, options = "2 + 3 =", [" 5", " 17", " plus"]
    scores = option_loglikelihoods(model, tok, prompt, options, normalize=False)
    for option, score in zip(options, scores):
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        c = tok(option, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([p + c])).logits[0]
        expected = sum(torch.log_softmax(logits[len(p) - 1 + j], -1)[t].item() for j, t in enumerate(c))
        assert score == pytest.approx(expected, abs=1e-4)
    normalized = option_loglikelihoods(model, tok, prompt, options)
    assert normalized[0] == pytest.approx(scores[0] / len(tok(options[0], add_special_tokens=False)["input_ids"]))


def test_batched_loglikelihoods_equal_one_forward_per_option(tiny):
    """choice_loglikelihoods scores many questions per forward (left-padded, position ids of unpadded rows, only the
    last logits): each score equals that of the option's own unpadded forward, and the picks are the same."""
    model, tok = tiny
    prompts = [f"Question {i}: {'what is ' * (i % 4)}{i} + {2 * i} ?" for i in range(10)]
    options = [[" A", " B", " C", " 17 plus"][: 2 + i % 3] for i in range(10)]  # 2-4 options, 1-3 tokens each
    batched = choice_loglikelihoods(model, tok, prompts, options, normalize=False, batch_size=4)
    alone = []
    for prompt, conts in zip(prompts, options):
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        row = []
        for option in conts:
            c = tok(option, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                logits = model(input_ids=torch.tensor([p + c])).logits[0]  # (T, V): one unpadded row
            row.append(sum(torch.log_softmax(logits[len(p) - 1 + j], -1)[t].item() for j, t in enumerate(c)))
        alone.append(row)
    assert [len(row) for row in batched] == [len(row) for row in alone]
    difference = max(abs(a - b) for x, y in zip(batched, alone) for a, b in zip(x, y))
    assert difference < 1e-5, difference
    assert [max(range(len(r)), key=r.__getitem__) for r in batched] == [max(range(len(r)), key=r.__getitem__)
                                                                         for r in alone]  # fmt: skip


def test_choice_accuracy_by_loglikelihood(tiny):
    model, tok = tiny
    prompts = [f"Question {i}: pick one.\nA. x\nB. y\nAnswer:" for i in range(6)]
    picks = []
    for p in prompts:
        scores = option_loglikelihoods(model, tok, p, [" A", " B"])
        picks.append("AB"[max(range(2), key=lambda k: scores[k])])
    # The model's own picks as references for the first four, the other letter for the last two: 4/6.
    refs = picks[:4] + ["B" if p == "A" else "A" for p in picks[4:]]
    rows = Dataset.from_list([{"prompt": p, "reference": [r], "choices": ["x", "y"]} for p, r in zip(prompts, refs)])
    assert choice_accuracy_by_loglikelihood(model, tok, rows) == pytest.approx(4 / 6)
    assert choice_accuracy_by_loglikelihood(model, tok, rows, batch_size=4) == pytest.approx(4 / 6)


def test_generate_is_greedy_with_left_padding(tiny):
    model, tok = tiny
    prompts = ["1 + 1 =", "a much longer prompt about 12 - 7 ="]
    batched = generate(model, tok, prompts, max_new_tokens=3, batch_size=2)
    alone = [generate(model, tok, [p], max_new_tokens=3, batch_size=1)[0] for p in prompts]
    assert batched == alone  # left padding: the short prompt's continuation is not disturbed by padding
    assert (
        tok.padding_side == "right" or tok.padding_side == AutoTokenizer.from_pretrained(tok.name_or_path).padding_side
    )


@pytest.mark.slow
def test_cli_eval_and_report_on_a_finished_run(tiny_model_dir, tmp_path, capsys):
    from mssr_hf.cli import main
    from mssr_hf.continual import ContinualRunner
    from mssr_hf.mssr_config import MSSRConfig

    out = tmp_path / "run"
    args = MSSRConfig(output_dir=str(out), report_to=[], bf16=False, use_cpu=True, gradient_checkpointing=False,
                      per_device_train_batch_size=4, max_steps=2, save_strategy="no", max_length=64,
                      disable_tqdm=True, replay_strategy="fixed", replay_fixed_interval=1)  # fmt: skip
    results = ContinualRunner(tiny_model_dir, ["rg_basic_arithmetic", "rg_letter_counting"], args, eval_size=4,
                              train_size=16, eval_batch_size=4).run()  # fmt: skip
    capsys.readouterr()
    assert main(["eval", str(out), "--stage", "1", "--eval_size", "4"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["rg_basic_arithmetic", "rg_letter_counting"]
    assert [float(line.split("\t")[1]) for line in lines] == pytest.approx(results["matrix"][1], abs=1e-9)
    assert main(["report", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "rg_letter_counting" in report and "plots/accuracy_matrix.png" in report
    assert main(["eval", str(out), "--stage", "5"]) == 2  # not finished: one clear error
