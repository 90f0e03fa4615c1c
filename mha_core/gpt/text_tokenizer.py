"""Text tokenizers with the two methods the book's GPT needs, ``encode`` and ``decode``.

* ``ByteTokenizer``: the shipped model's, one id per UTF-8 byte (256 ids). With so few output ids a 2-layer
  model grows a previous-token and an induction head within the CPU budget; with a 2048-id BPE it did not
  (docs/decisions.md, "The shipped GPT").
* ``TextTokenizer`` wraps a Hugging Face ``tokenizers.Tokenizer`` (a JSON file): GPT-2's tokenizer when it can be
  fetched. Byte-level, so any typed text encodes.
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
        _check_text(text)
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        _check_ids(ids, self.vocab_size)
        return self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)

    def labels(self, ids: list[int]) -> list[str]:
        """Each id decoded alone, a leading space shown as '·' (so ' the' and 'the' read apart on an axis)."""
        out = []
        for i in ids:
            text = self.decode([i])
            out.append(("·" + text[1:] if text.startswith(" ") else text).replace("\n", "⏎") or "∅")
        return out


class ByteTokenizer:
    """One id per UTF-8 byte: ``encode`` is ``str.encode``, ``decode`` puts U+FFFD where bytes do not form a
    character (a cut multi-byte character, or random ids), so any id list decodes."""

    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        _check_text(text)
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        _check_ids(ids, self.vocab_size)
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def labels(self, ids: list[int]) -> list[str]:
        """Printable ASCII as itself, space '·', newline '⏎', tab '⇥', any other byte as its hex code ('x9f')."""
        special = {32: "·", 10: "⏎", 9: "⇥"}
        return [special.get(int(i), chr(int(i)) if 32 < int(i) < 127 else f"x{int(i):02x}") for i in ids]


def _check_text(text) -> None:
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")


def _check_ids(ids, vocab_size: int) -> None:
    bad = [i for i in ids if not 0 <= int(i) < vocab_size]
    if bad:
        raise ValueError(f"token ids {bad[:5]} lie outside the vocabulary [0, {vocab_size})")
