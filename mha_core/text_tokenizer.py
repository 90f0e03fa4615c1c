"""A text tokenizer with the two methods the book's GPT needs, ``encode`` and ``decode``.

It wraps a Hugging Face ``tokenizers.Tokenizer`` (a JSON file): the shipped model's byte-pair encoding, made
here from Python's own documentation, and GPT-2's tokenizer when it can be fetched. Byte-level, so any typed
text encodes.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer


class TextTokenizer:
    """``encode(str) -> list[int]``, ``decode(list[int]) -> str``, and one display label per token id."""

    def __init__(self, tokenizer: Tokenizer):
        self._tokenizer = tokenizer

    @classmethod
    def from_file(cls, path: str | Path) -> TextTokenizer:
        return cls(Tokenizer.from_file(str(path)))

    @classmethod
    def from_str(cls, json_text: str) -> TextTokenizer:
        return cls(Tokenizer.from_str(json_text))

    def to_str(self) -> str:
        return self._tokenizer.to_str()

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        bad = [i for i in ids if not 0 <= int(i) < self.vocab_size]
        if bad:
            raise ValueError(f"token ids {bad[:5]} lie outside the vocabulary [0, {self.vocab_size})")
        return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def labels(self, ids: list[int]) -> list[str]:
        """Each id decoded alone, a leading space shown as '·' (so ' the' and 'the' read apart on an axis)."""
        out = []
        for i in ids:
            text = self.decode([i])
            out.append(("·" + text[1:] if text.startswith(" ") else text).replace("\n", "⏎") or "∅")
        return out
