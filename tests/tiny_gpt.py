"""A tiny random GPT and a byte-level tokenizer made in memory: the Real heads tests run without the shipped model."""

from __future__ import annotations

import functools

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from mha_core.gpt.model import GPTModel
from mha_core.gpt.text_tokenizer import TextTokenizer

TINY_CONFIG = {
    "vocab_size": 300,
    "context_length": 96,
    "emb_dim": 32,
    "n_heads": 4,
    "n_layers": 2,
    "drop_rate": 0.1,
    "qkv_bias": False,
}
CORPUS = [
    "The for statement in Python iterates over the items of any sequence, such as a list or a string.",
    "A function is defined with def; return gives its value back to the caller.",
    "Your journey starts with one step.",
]


@functools.cache
def tiny_tokenizer() -> TextTokenizer:
    """A byte-level BPE tokenizer with TINY_CONFIG's vocabulary size, trained on three sentences."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TINY_CONFIG["vocab_size"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    return TextTokenizer(tokenizer)


@functools.cache
def tiny_model() -> tuple[GPTModel, TextTokenizer]:
    """(model in eval mode, tokenizer): seeded, so every test sees the same weights."""
    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    config = dict(TINY_CONFIG, vocab_size=tokenizer.vocab_size)
    return GPTModel(config).eval(), tokenizer
