"""Model cards (front matter, accuracy table, missing values) and publishing a stage to a stand-in Hub client
(repo, branch, uploads, token handling)."""

import json
import logging
import math
import traceback
from pathlib import Path

import pytest
import yaml
from conftest import hub_metadata_problem

import mssr_hf.hub
from mssr_hf.hub import push_stage, stage_revision, write_model_card

NAN = math.nan
TOKEN = "hf_SECRETtoken0123456789abcdef"


def card_info(**overrides):
    info = {
        "base_model": "HuggingFaceTB/SmolLM2-135M-Instruct", "stage": 1, "task": "gsm8k",
        "task_description": "grade-school math", "tasks": ["alpaca", "gsm8k", "math"], "strategy": "mssr_full",
        "peft": True, "probe_task": "mmlu", "probe": [0.301, None],
        # Row t = scores after stage t; cells right of the diagonal are not seen yet (NaN, or None after JSON).
        "matrix": [[0.6125, NAN, None], [0.5, 0.4375, NAN]],
        "metrics": {"final_average": 0.46875, "average_forgetting": 0.1125, "backward_transfer": -0.1125,
                    "normalized_score": NAN},
        "hyperparameters": {"learning_rate": 0.0002, "max_steps": 100, "seed": 7, "warmup_ratio": NAN,
                            "weight_decay": None, "replay_lambda0": 0.3, "memory_alpha": 0.01,
                            "replay_interval_list": [1, 3, 7], "hub_token": "<HUB_TOKEN>", "output_dir": "/x",
                            "logging_steps": 5},
    }  # fmt: skip
    return {**info, **overrides}


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def table_rows(text: str) -> list[list[str]]:
    """The accuracy table's data rows, as cells (the table that starts with "| after stage")."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| after stage"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_model_card_front_matter(tmp_path):
    path = write_model_card(tmp_path / "stage-01-gsm8k", card_info())
    assert path == tmp_path / "stage-01-gsm8k" / "README.md"
    front = front_matter(path.read_text(encoding="utf-8"))
    assert front["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert front["library_name"] == "peft"
    assert front["pipeline_tag"] == "text-generation"
    assert front["tags"] == ["mssr", "continual-learning", "replay", "trl", "sft", "mssr_full"]
    assert "datasets" not in front and "model-index" in front  # no Hub dataset ids given; the scores are there
    tasks = ["alpaca", "gsm8k", "math"]
    assert front["mssr"] == {"stage": 1, "task": "gsm8k", "tasks": tasks, "strategy": "mssr_full"}

    full = front_matter(write_model_card(tmp_path / "full", card_info(peft=False, stage=0, task="alpaca")).read_text())
    assert full["library_name"] == "transformers" and full["mssr"]["stage"] == 0


def test_model_card_table_metrics_and_hyperparameters(tmp_path):
    text = write_model_card(tmp_path, card_info()).read_text(encoding="utf-8")
    assert "| after stage | alpaca | gsm8k | math | mmlu (probe) |" in text
    # Hand-constructed: 3 decimals; unseen cells (NaN or None right of the diagonal) and the missing probe are "–".
    assert table_rows(text) == [
        ["0 alpaca", "0.613", "–", "–", "0.301"],
        ["1 gsm8k", "0.500", "0.438", "–", "–"],
    ]
    assert "**final_average**: 0.469" in text and "**backward_transfer**: -0.113" in text
    assert "**normalized_score**: –" in text  # NaN
    assert "nan" not in text.lower()
    assert "<details>" in text and "</details>" in text
    hyper = text[text.index("<details>") :]
    shown = ["`learning_rate` | 0.0002", "`max_steps` | 100", "`seed` | 7", "`warmup_ratio` | –", "`weight_decay` | –",
             "`replay_lambda0` | 0.3", "`memory_alpha` | 0.01", "`replay_interval_list` | `[1, 3, 7]`"]  # fmt: skip
    for row in shown:
        assert row in hyper, row
    for hidden in ("hub_token", "HUB_TOKEN", "output_dir", "logging_steps"):
        assert hidden not in text
    # Not published: the snippet loads the stage's folder.
    assert 'base = AutoModelForCausalLM.from_pretrained("HuggingFaceTB/SmolLM2-135M-Instruct")' in text
    assert 'model = PeftModel.from_pretrained(base, "path/to/stage-01-gsm8k")' in text


def test_model_card_snippet_names_the_repo_and_the_stage_revision(tmp_path):
    text = write_model_card(tmp_path, card_info(repo_id="me/mssr-run", latest_revision="latest")).read_text()
    assert 'model = PeftModel.from_pretrained(base, "me/mssr-run", revision="stage-01-gsm8k")' in text
    assert 'tokenizer = AutoTokenizer.from_pretrained("me/mssr-run", revision="stage-01-gsm8k")' in text
    assert 'the latest stage is also at revision="latest"' in text
    full = write_model_card(tmp_path / "full", card_info(peft=False, repo_id="me/run")).read_text()
    assert 'model = AutoModelForCausalLM.from_pretrained("me/run", revision="stage-01-gsm8k")' in full


def peft_card(folder: Path, base_model: str) -> None:
    """The README PEFT writes next to an adapter it saves (its metadata, and its placeholder body)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "README.md").write_text(
        f"---\nbase_model: {base_model}\nlibrary_name: peft\ntags:\n- base_model:adapter:{base_model}\n- lora\n"
        "- sft\n- transformers\n- trl\n---\n\n# Model Card for Model ID\n\n[More Information Needed]\n"
    )


def test_model_card_builds_on_peft_metadata_and_names_only_hub_ids(tmp_path):
    """Built on the card PEFT wrote: its tags are kept, its body replaced. ``base_model`` (and PEFT's tag naming it)
    stays only when it is a Hub id; ``datasets`` lists the Hub ids of the tasks trained so far; the model-index holds
    each of their scores after this stage, and the probe's."""
    specs = [{"dataset": "vicgalle/alpaca-gpt4", "subset": None, "split": "train", "metric": "rouge_l"},
             {"dataset": "openai/gsm8k", "subset": "main", "split": "test", "metric": "exact_match"},
             {"dataset": None, "subset": None, "split": "train", "metric": "exact_match"},
             {"dataset": "cais/mmlu", "subset": "all", "split": "test", "metric": "choice"}]  # fmt: skip
    hub = tmp_path / "hub"
    peft_card(hub, "HuggingFaceTB/SmolLM2-135M-Instruct")
    front = front_matter(write_model_card(hub, card_info(task_specs=specs, repo_id="me/run")).read_text())
    assert front["base_model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert front["tags"][:5] == ["base_model:adapter:HuggingFaceTB/SmolLM2-135M-Instruct", "lora", "sft",
                                 "transformers", "trl"]  # fmt: skip
    assert {"mssr", "continual-learning", "replay", "mssr_full"} <= set(front["tags"])
    assert front["datasets"] == ["vicgalle/alpaca-gpt4", "openai/gsm8k"]  # stages 0 and 1
    index = front["model-index"][0]
    assert index["name"] == "me/run"
    results = [(r["task"]["name"], r["dataset"]["type"], r["dataset"].get("config"), r["dataset"]["split"],
                r["metrics"][0]["type"], r["metrics"][0]["value"]) for r in index["results"]]  # fmt: skip
    assert results == [
        ("alpaca", "vicgalle/alpaca-gpt4", None, "train", "rouge", 0.5),
        ("gsm8k", "openai/gsm8k", "main", "test", "exact_match", 0.4375),
    ]  # the probe's score is None
    assert "Model Card for Model ID" not in (hub / "README.md").read_text()

    local_base = tmp_path / "models" / "my-base"
    local_base.mkdir(parents=True)
    local = tmp_path / "local"
    peft_card(local, str(local_base))
    text = write_model_card(local, card_info(base_model=str(local_base), task_specs=specs)).read_text()
    front = front_matter(text)
    assert "base_model" not in front and not any(str(local_base) in tag for tag in front["tags"])
    assert str(local_base) not in text  # nor in the body: the snippet names the folder only
    assert 'AutoModelForCausalLM.from_pretrained("path/to/my-base")' in text


def test_model_card_without_probe_or_metrics(tmp_path):
    info = card_info(stage=0, task="alpaca", probe_task=None, probe=[None], matrix=[[None, None, None]], metrics={})
    text = write_model_card(tmp_path, info).read_text(encoding="utf-8")
    assert "(probe)" not in text
    assert table_rows(text) == [["0 alpaca", "–", "–", "–"]]
    assert "**final_average**: –" in text


def test_the_hub_stand_in_refuses_a_card_naming_a_local_base_model(tmp_path):
    """The stand-in Hub of the publishing tests refuses what the Hub refuses (a card whose base_model is a local path,
    as PEFT writes it for a local base model); the card write_model_card makes of that folder passes."""
    local_base = tmp_path / "my-base"
    local_base.mkdir()
    stage = tmp_path / "stage-01-gsm8k"
    peft_card(stage, str(local_base))
    assert f'"base_model" with value "{local_base}" is not valid' in hub_metadata_problem(stage)
    write_model_card(stage, card_info(base_model=str(local_base)))
    assert hub_metadata_problem(stage) is None
    write_model_card(stage, card_info(base_model="HuggingFaceTB/SmolLM2-135M-Instruct"))
    assert hub_metadata_problem(stage) is None and "base_model: HuggingFaceTB" in (stage / "README.md").read_text()


class RecordingClient:
    """Stand-in for `huggingface_hub.HfApi`: records the calls; optionally fails at one of them."""

    def __init__(self, fail_at: str | None = None, error: Exception | None = None):
        self.calls, self.fail_at, self.error = [], fail_at, error

    def _record(self, name, *args, **kwargs):
        self.calls.append((name, args, kwargs))
        if name == self.fail_at:
            raise self.error

    def create_repo(self, repo_id, **kwargs):
        self._record("create_repo", repo_id, **kwargs)

    def create_branch(self, repo_id, *, branch, **kwargs):
        self._record("create_branch", repo_id, branch=branch, **kwargs)

    def upload_folder(self, **kwargs):
        self._record("upload_folder", **kwargs)


def test_push_stage_creates_repo_branch_and_uploads_to_branch_and_main(tmp_path):
    client = RecordingClient()
    revision = push_stage(tmp_path, "me/mssr-run", 1, "gsm8k", api=client, private=True)
    assert revision == "stage-01-gsm8k" == stage_revision(1, "gsm8k")
    assert [c[0] for c in client.calls] == ["create_repo", "create_branch", "upload_folder", "upload_folder"]
    (_, repo_args, repo_kwargs), (_, branch_args, branch_kwargs) = client.calls[:2]
    assert repo_args == ("me/mssr-run",)
    assert repo_kwargs == {"private": True, "exist_ok": True, "repo_type": "model"}
    assert branch_args == ("me/mssr-run",) and branch_kwargs == {"branch": "stage-01-gsm8k", "exist_ok": True}
    uploads = [c[2] for c in client.calls[2:]]
    assert [u["revision"] for u in uploads] == ["stage-01-gsm8k", "main"]
    for upload in uploads:
        assert upload["repo_id"] == "me/mssr-run" and upload["folder_path"] == str(tmp_path)
        assert {"checkpoints/*", "checkpoints/**"} <= set(upload["ignore_patterns"])
        assert "gsm8k" in upload["commit_message"]


def test_push_stage_puts_the_latest_stage_on_hub_revision(tmp_path):
    client = RecordingClient()
    push_stage(tmp_path, "me/mssr-run", 1, "gsm8k", api=client, revision="latest")
    branches = [c[2]["branch"] for c in client.calls if c[0] == "create_branch"]
    assert branches == ["stage-01-gsm8k", "latest"]
    assert [c[2]["revision"] for c in client.calls if c[0] == "upload_folder"] == ["stage-01-gsm8k", "latest"]
    again = RecordingClient()
    push_stage(tmp_path, "me/mssr-run", 0, "alpaca", api=again, revision="latest", main=False)  # a later one is there
    assert [c[2]["revision"] for c in again.calls if c[0] == "upload_folder"] == ["stage-00-alpaca"]


def test_push_stage_needs_a_repo_id(tmp_path):
    client = RecordingClient()
    with pytest.raises(ValueError, match="hub_model_id"):
        push_stage(tmp_path, None, 0, "alpaca", api=client)
    assert client.calls == []


@pytest.fixture
def hf_api_from_env(monkeypatch):
    """HF_TOKEN set; `HfApi` in mssr_hf.hub replaced by a constructor that records its token."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    made = []

    def fake_hf_api(token=None, **kwargs):
        made.append({"token": token, "kwargs": kwargs, "client": RecordingClient()})
        return made[-1]["client"]

    monkeypatch.setattr(mssr_hf.hub, "HfApi", fake_hf_api)
    return made


def assert_token_nowhere(tmp_path, capsys, caplog, *texts):
    out, err = capsys.readouterr()
    for text in (out, err, caplog.text, *texts):
        assert TOKEN not in text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_token_from_env_reaches_hf_api_and_nothing_else(tmp_path, hf_api_from_env, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    stage_dir = tmp_path / "stage-00-alpaca"
    write_model_card(stage_dir, card_info(stage=0, task="alpaca"))
    assert push_stage(stage_dir, "me/mssr-run", 0, "alpaca") == "stage-00-alpaca"
    assert [made["token"] for made in hf_api_from_env] == [TOKEN]
    client = hf_api_from_env[0]["client"]
    assert len(client.calls) == 4
    assert_token_nowhere(tmp_path, capsys, caplog, repr(client.calls))


def test_token_argument_overrides_env(tmp_path, hf_api_from_env):
    push_stage(tmp_path, "me/mssr-run", 0, "alpaca", token="hf_other")
    assert hf_api_from_env[0]["token"] == "hf_other"


@pytest.mark.parametrize("echoes_token", [False, True])
def test_client_errors_name_repo_and_stage_but_not_the_token(tmp_path, monkeypatch, capsys, caplog, echoes_token):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    # A careless client may even put the token in its own message: that message is withheld, not chained.
    error = PermissionError(f"403 Forbidden for token {TOKEN}" if echoes_token else "403 Forbidden")
    client = RecordingClient(fail_at="upload_folder", error=error)
    monkeypatch.setattr(mssr_hf.hub, "HfApi", lambda token=None, **kwargs: client)
    with pytest.raises(RuntimeError) as raised:
        push_stage(tmp_path, "me/mssr-run", 2, "math")
    message = str(raised.value)
    assert "me/mssr-run" in message and "stage 2" in message and "math" in message
    assert "upload to stage-02-math" in message
    assert (raised.value.__cause__ is error) is not echoes_token
    shown = "".join(traceback.format_exception(raised.value))  # what an uncaught error would print
    assert ("403 Forbidden" in shown) is not echoes_token
    assert_token_nowhere(tmp_path, capsys, caplog, message, shown, repr(raised.value))


@pytest.mark.slow
def test_cli_push_uses_the_token_writes_it_nowhere_and_reports_what_is_unpublished(
    tiny_model_dir, tmp_path, monkeypatch, capsys, caplog
):
    """`mssr-hf train ... --push_to_hub true --hub_token TOKEN`: the token reaches the Hub client only (not the
    checkpoints' training_args.bin, nor any other file the run writes, nor the output). While the Hub is down the run
    trains every stage, prints its results and exits 1 naming the unpublished stages; the rerun publishes them."""
    from mssr_hf.cli import main

    caplog.set_level(logging.DEBUG)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    made, hub_up = [], {"up": False}

    def fake_hf_api(token=None, **kwargs):
        client = RecordingClient() if hub_up["up"] else RecordingClient("create_repo", ConnectionError("Hub down"))
        made.append({"token": token, "client": client})
        return client

    monkeypatch.setattr(mssr_hf.hub, "HfApi", fake_hf_api)
    out = tmp_path / "run"
    config = Path(__file__).resolve().parents[1] / "examples" / "configs" / "cpu_tiny.yaml"
    argv = ["train", str(config), "--model_name_or_path", tiny_model_dir, "--output_dir", str(out), "--max_steps", "2",
            "--save_strategy", "steps", "--save_steps", "1", "--push_to_hub", "true", "--hub_model_id", "me/run",
            "--hub_token", TOKEN]  # fmt: skip
    assert main(argv) == 1
    first_out, first_err = capsys.readouterr()
    errors = [line for line in first_err.splitlines() if line.startswith("mssr-hf: error:")]
    stages = json.loads((out / "results.json").read_text())["tasks"]
    names = ", ".join(f"stage-0{k}-{task}" for k, task in enumerate(stages))
    assert len(errors) == 1 and f"3 finished stage(s) not published to the Hub repo 'me/run': {names}" in errors[0]
    assert "Rerun the same command" in errors[0] and "final_average" in first_out

    hub_up["up"] = True
    assert main(argv) == 0
    second_out, second_err = capsys.readouterr()
    published = json.loads((out / "published.json").read_text())
    assert list(published) == [f"stage-0{k}-{task}" for k, task in enumerate(stages)]
    assert all(made_one["token"] == TOKEN for made_one in made) and len(made) >= 3
    assert list((out / f"stage-00-{stages[0]}" / "checkpoints" / "checkpoint-2").glob("training_args.bin"))
    assert_token_nowhere(tmp_path, capsys, caplog, first_out, first_err, second_out, second_err)
