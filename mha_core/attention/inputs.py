"""Inputs for the modules, each as (embeddings (T, d_in), token labels). No downloads.

Batches are copies of one sequence, as in the book (``torch.stack((inputs, inputs))``).
"""

from __future__ import annotations

import hashlib
import re

import torch

BOOK_WORDS = ["Your", "journey", "starts", "with", "one", "step"]
BOOK_EMBEDDINGS = [
    [0.43, 0.15, 0.89],  # Your     (x^1)
    [0.55, 0.87, 0.66],  # journey  (x^2)
    [0.57, 0.85, 0.64],  # starts   (x^3)
    [0.22, 0.58, 0.33],  # with     (x^4)
    [0.77, 0.25, 0.10],  # one      (x^5)
    [0.05, 0.80, 0.55],  # step     (x^6)
]
BOOK_TEXT = " ".join(BOOK_WORDS)
_TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")


def book_tokens() -> tuple[torch.Tensor, list[str]]:
    """The book's six 3-d embeddings of "Your journey starts with one step"."""
    return torch.tensor(BOOK_EMBEDDINGS), list(BOOK_WORDS)


def random_embeddings(num_tokens: int, d_in: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    """Seeded uniform [0, 1) embeddings (the book's range), labelled t0, t1, ..."""
    if num_tokens < 1 or d_in < 1:
        raise ValueError(f"need num_tokens >= 1 and d_in >= 1, got num_tokens={num_tokens}, d_in={d_in}")
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(num_tokens, d_in, generator=gen), [f"t{i}" for i in range(num_tokens)]


def tokenize(text: str) -> list[str]:
    """Words and single punctuation marks, in order: "Hi, you!" -> ["Hi", ",", "you", "!"]."""
    return _TOKEN_PATTERN.findall(text)


def token_embedding(token: str, d_in: int, seed: int) -> torch.Tensor:
    """(d_in,) uniform [0, 1) vector determined by the token and the seed alone."""
    digest = hashlib.blake2b(f"{seed}\x00{token}".encode(), digest_size=8).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(digest, "little") & (2**63 - 1))
    return torch.rand(d_in, generator=gen)


def sentence_embeddings(text: str, d_in: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    """Embeddings for a typed sentence: the same token gets the same vector everywhere."""
    tokens = tokenize(text)
    if not tokens:
        raise ValueError(f"text {text[:40]!r} has no tokens (words or punctuation)")
    return torch.stack([token_embedding(token, d_in, seed) for token in tokens]), tokens


def extend(x: torch.Tensor, labels: list[str], num_tokens: int, seed: int) -> tuple[torch.Tensor, list[str]]:
    """Pad (T, d) to (num_tokens, d) with seeded random embeddings labelled t{position}."""
    missing = num_tokens - x.shape[0]
    if missing <= 0:
        return x[:num_tokens], labels[:num_tokens]
    extra, _ = random_embeddings(missing, x.shape[1], seed)
    return torch.cat([x, extra]), labels + [f"t{i}" for i in range(x.shape[0], num_tokens)]


def batch_of(x: torch.Tensor, batch_size: int) -> torch.Tensor:
    """(T, d) -> (batch_size, T, d): copies, as the book batches its example."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    return x.unsqueeze(0).repeat(batch_size, 1, 1)  # (b, T, d)
