import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def arithmetic_rows(n: int, op: str = "+", seed: int = 0) -> list[dict]:
    """Prompt/completion rows of a small arithmetic task (distinct tasks per ``op``)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(0, 50, (n,), generator=g).tolist()
    b = torch.randint(0, 50, (n,), generator=g).tolist()
    value = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[op]
    return [{"prompt": f"{x} {op} {y} =", "completion": f" {value(x, y)}"} for x, y in zip(a, b)]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from mssr_hf.tiny_model import save_tiny_model

    corpus = [r["prompt"] + r["completion"] for op in "+-*" for r in arithmetic_rows(200, op)]
    corpus += ["plus minus times"] * 20  # the answer words of tests/test_continual.py
    return str(save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", corpus))
