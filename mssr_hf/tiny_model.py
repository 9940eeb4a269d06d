"""A tiny random Llama and a locally trained tokenizer: fast, offline, for tests and ``mssr-hf demo --quick``."""

from __future__ import annotations

import string
from collections.abc import Iterable
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + eos_token }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)

_BASE_CORPUS = [
    "question: what is 3 plus 4? answer: 7",
    "the capital of france is paris. the sky is blue.",
    "sort these numbers: 5 2 9 1 -> 1 2 5 9",
    "translate cat to french: chat",
    "user assistant system " + " ".join(string.ascii_lowercase) + " " + " ".join(string.digits),
    string.punctuation,
]


def build_tiny_tokenizer(corpus: Iterable[str] = (), vocab_size: int = 512):
    """A byte-level BPE tokenizer trained on ``corpus`` (plus a small base text), with pad/eos/bos/unk tokens and a
    simple chat template. Every byte is in the vocabulary, so any text round-trips."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>", "<|system|>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(_BASE_CORPUS) + list(corpus), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(
    tokenizer,
    hidden_size: int = 32,
    layers: int = 2,
    seed: int = 0,
    *,
    intermediate_size: int | None = None,
    heads: int = 4,
    kv_heads: int = 2,
    max_positions: int = 512,
):
    """A randomly initialised ``LlamaForCausalLM`` sized for ``tokenizer`` (a few hundred thousand parameters at the
    defaults; ``intermediate_size`` defaults to ``2 * hidden_size``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def save_tiny_model(path: str | Path, corpus: Iterable[str] = (), seed: int = 0) -> Path:
    """Build the tiny model and tokenizer and save both to ``path`` (loadable with ``from_pretrained``)."""
    path = Path(path)
    tokenizer = build_tiny_tokenizer(corpus)
    model = build_tiny_model(tokenizer, seed=seed)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
