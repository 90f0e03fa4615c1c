"""Listing 3.5 of the book, verbatim, and which of its lines produces each traced step.

The app's code views show the book's listing (what a student has in front of them),
with the line of each step highlighted. Line numbers are 1-based.
"""

from __future__ import annotations

LISTING_3_5 = """class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out,
                 context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert (d_out % num_heads == 0), \\
            "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask",
            torch.triu(torch.ones(context_length, context_length),
                       diagonal=1)
        )

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(
            b, num_tokens, self.num_heads, self.head_dim
        )

        keys = keys.transpose(1, 2)
        queries = queries.transpose(1, 2)
        values = values.transpose(1, 2)

        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]

        attn_scores.masked_fill_(mask_bool, -torch.inf)

        attn_weights = torch.softmax(
            attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2)

        context_vec = context_vec.contiguous().view(
            b, num_tokens, self.d_out
        )
        context_vec = self.out_proj(context_vec)
        return context_vec
"""

LISTING_LINES = LISTING_3_5.splitlines()


def _line_of(fragment: str) -> int:
    """1-based number of the first listing line containing `fragment` (fails loudly at import)."""
    for number, line in enumerate(LISTING_LINES, start=1):
        if fragment in line:
            return number
    raise LookupError(f"{fragment!r} is not in Listing 3.5")


# step name -> the listing line that computes it
STEP_LINES: dict[str, int] = {
    "x": _line_of("def forward(self, x)"),
    "queries": _line_of("queries = self.W_query(x)"),
    "keys": _line_of("keys = self.W_key(x)"),
    "values": _line_of("values = self.W_value(x)"),
    "queries_split": _line_of("queries = queries.view("),
    "keys_split": _line_of("keys = keys.view("),
    "values_split": _line_of("values = values.view("),
    "queries_heads": _line_of("queries = queries.transpose(1, 2)"),
    "keys_heads": _line_of("keys = keys.transpose(1, 2)"),
    "values_heads": _line_of("values = values.transpose(1, 2)"),
    "mask_buffer": _line_of("torch.triu(torch.ones(context_length"),
    "mask": _line_of("mask_bool = self.mask.bool()"),
    "attn_scores": _line_of("attn_scores = queries @ keys.transpose(2, 3)"),
    "masked_scores": _line_of("attn_scores.masked_fill_("),
    "scaled_scores": _line_of("attn_scores / keys.shape[-1]**0.5"),
    "attn_weights": _line_of("attn_weights = torch.softmax("),
    "attn_weights_dropped": _line_of("attn_weights = self.dropout(attn_weights)"),
    "dropout_keep": _line_of("attn_weights = self.dropout(attn_weights)"),
    "context_heads": _line_of("context_vec = (attn_weights @ values)"),
    "context_transposed": _line_of("context_vec = (attn_weights @ values)"),
    "context": _line_of("context_vec = context_vec.contiguous().view("),
    "output": _line_of("context_vec = self.out_proj(context_vec)"),
}


# what __init__ builds -> the line of Listing 3.5 that builds it (the constructor, not the call in forward)
INIT_LINES: dict[str, int] = {
    "head_dim": _line_of("self.head_dim = d_out // num_heads"),
    "W_query": _line_of("self.W_query = nn.Linear("),
    "W_key": _line_of("self.W_key = nn.Linear("),
    "W_value": _line_of("self.W_value = nn.Linear("),
    "out_proj": _line_of("self.out_proj = nn.Linear("),
    "dropout": _line_of("self.dropout = nn.Dropout("),
    "register_buffer": _line_of("self.register_buffer("),
    "mask_buffer": _line_of("torch.triu(torch.ones(context_length"),
}


def init_line(part: str) -> tuple[int, str]:
    """(line number, line text) of Listing 3.5 where ``__init__`` builds ``part``."""
    number = INIT_LINES[part]
    return number, LISTING_LINES[number - 1].strip()


def listing_line(step: str) -> tuple[int, str]:
    """(line number, line text) of Listing 3.5 for a traced step."""
    number = STEP_LINES[step]
    return number, LISTING_LINES[number - 1].strip()


def statement_lines(first: int) -> list[int]:
    """The 1-based lines of the statement starting at ``first``: it goes on while brackets are open."""
    depth, number, lines = 0, first, []
    while number <= len(LISTING_LINES):
        text = LISTING_LINES[number - 1]
        depth += sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
        lines.append(number)
        if depth <= 0 and not text.rstrip().endswith("\\"):
            break
        number += 1
    return lines


def _statement_starts() -> dict[int, int]:
    """Every line's number -> the first line of the statement that holds it."""
    starts, first = {}, 1
    while first <= len(LISTING_LINES):
        lines = statement_lines(first)
        starts |= dict.fromkeys(lines, first)
        first = lines[-1] + 1
    return starts


STATEMENT_STARTS = _statement_starts()


def joined_statement(first: int) -> str:
    """The statement starting at line ``first`` on one line: its lines stripped and joined, no space inside
    brackets ("torch.softmax(" + "attn_scores …, dim=-1)" -> "torch.softmax(attn_scores …, dim=-1)")."""
    text = ""
    for number in statement_lines(first):
        part = LISTING_LINES[number - 1].strip().removesuffix("\\").strip()
        glue = "" if not text or text.endswith(("(", "[", "{")) or part.startswith((")", "]", "}")) else " "
        text += glue + part
    return text


def listing_statement(step: str) -> tuple[int, str]:
    """(first line number, whole statement on one line) of Listing 3.5 for a traced step: what a caption quotes,
    never cut at an open bracket."""
    first = STATEMENT_STARTS[STEP_LINES[step]]
    return first, joined_statement(first)
