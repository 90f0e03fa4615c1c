"""Step through's script: Listing 3.5's forward pass as 12 steps, with the lines each lights up and the sentences
that say why. Plain data and text helpers; the figures are in ``step_through``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from mha_core.attention.listing import LISTING_LINES, STEP_LINES, statement_lines

# =====================================================================================================================
# Step through: Listing 3.5, one step per screen
# =====================================================================================================================

# The gutter marker of the highlighted listing lines. Shown with language="diff", "+" lines are drawn in colour
# and every other line is muted: a spotlight on the step, readable from the back of a room.
MARK = "+"


def _line_of(fragment: str) -> int:
    return next(n for n, line in enumerate(LISTING_LINES, start=1) if fragment in line)


def marked_listing(lines: Sequence[int]) -> str:
    """Listing 3.5 with a "+" gutter on the given lines (plain text for st.code(language="diff"), not HTML)."""
    marked = set(lines)
    return "\n".join(f"{MARK} {text}" if n in marked else f"  {text}" for n, text in enumerate(LISTING_LINES, start=1))


@dataclass(frozen=True)
class Step:
    key: str
    title: str
    listing_steps: tuple[str, ...]  # trace steps whose Listing 3.5 statements are highlighted
    before: tuple[str, str] | None  # (trace step, axes) of the tensor going in
    after: tuple[str, str]  # (trace step, axes) of the tensor coming out
    sentences: tuple[str, ...]
    extra_fragments: tuple[str, ...] = ()  # more listing lines to highlight, found by their text

    @property
    def lines(self) -> tuple[int, ...]:
        starts = [STEP_LINES[name] for name in self.listing_steps] + [_line_of(f) for f in self.extra_fragments]
        return tuple(sorted({n for start in starts for n in statement_lines(start)}))


STEPS: tuple[Step, ...] = (
    Step(
        "x",
        "The input x",
        ("x",),
        None,
        ("x", "(b, T, d_in)"),
        (
            "Each row is one token's embedding: b sequences of T tokens, d_in numbers per token.",
            "Everything that follows is computed from these numbers, the module's parameters (W_query, W_key and "
            "W_value, with biases only when qkv_bias=True, and out_proj's weight and bias) and its mask buffer (the "
            "causal mask, built in `__init__`) and, in train mode with p > 0, dropout's random draw.",
        ),
        extra_fragments=("b, num_tokens, d_in = x.shape",),
    ),
    Step(
        "projections",
        "Projections: queries, keys, values",
        ("keys", "queries", "values"),
        ("x", "(b, T, d_in)"),
        ("queries", "(b, T, d_out)"),
        (
            "Three linear layers turn every token into a query (what it looks for), a key (what it offers) and a "
            "value (what it passes on).",
            "Each is one d_in → d_out matrix multiply for all heads at once: the heads sit side by side in the d_out "
            "columns. The three layers are built once, in `__init__` (lines 11–13, also lit).",
            "An intuition: a library search. The query is your question, the keys are the labels on the shelves and "
            "the values are what the books say: each score compares the question with a label, and what you take "
            "away is a mix of the books' contents, weighted by how well their labels matched.",
        ),
        extra_fragments=("self.W_query = nn.Linear(", "self.W_key = nn.Linear(", "self.W_value = nn.Linear("),
    ),
    Step(
        "view",
        "view: split d_out into heads",
        ("keys_split", "values_split", "queries_split"),
        ("queries", "(b, T, d_out)"),
        ("queries_split", "(b, T, h, head_dim)"),
        (
            "view(b, T, h, head_dim) cuts each token's d_out numbers into h blocks of head_dim.",
            "No number moves in memory: column c simply belongs to head c // head_dim from now on.",
            "head_dim = d_out // num_heads was set in `__init__` (line 10, also lit), after checking that d_out is "
            "divisible by num_heads.",
        ),
        extra_fragments=("self.head_dim = d_out // num_heads",),
    ),
    Step(
        "transpose",
        "transpose(1, 2): heads before tokens",
        ("keys_heads", "queries_heads", "values_heads"),
        ("queries_split", "(b, T, h, head_dim)"),
        ("queries_heads", "(b, h, T, head_dim)"),
        (
            "Why transpose? A matrix multiply works on the last two axes and treats the axes in front as a batch.",
            "With heads in front of tokens, each head's (T, head_dim) matrix becomes one batch entry, so a single "
            "matmul computes every head's scores at once.",
        ),
    ),
    Step(
        "scores",
        "Scores: queries @ keysᵀ",
        ("attn_scores",),
        ("queries_heads", "(b, h, T, head_dim)"),
        ("attn_scores", "(b, h, T, T)"),
        (
            "Each head gets its own T × T matrix: entry (i, j) is the dot product of query i with key j, how well "
            "token j offers what token i looks for.",
            "keys.transpose(2, 3) turns each head's keys into (head_dim, T), so (T, head_dim) @ (head_dim, T) = "
            "(T, T).",
        ),
    ),
    Step(
        "mask",
        "Causal mask: −∞ on future keys",
        ("mask", "masked_scores"),
        ("attn_scores", "(b, h, T, T)"),
        ("masked_scores", "(b, h, T, T)"),
        (
            "Token i must not see the tokens after it: the book's buffer, built in `__init__` (lines 16–20, also lit), "
            "is 1 above the diagonal, and `masked_fill_` writes −∞ there.",
            "Why a buffer and not a tensor attribute or a parameter? register_buffer makes the mask part of the "
            "module without training it (it is not in parameters(), so no optimizer touches it), moves it with the "
            "weights on .to(device), and saves it in state_dict.",
            "Why −∞ and not 0? The softmax takes exp of every score, and exp(0) = 1: a blocked key with score 0 would "
            "still get weight. exp(−∞) = 0 gives it exactly zero, and each row is normalised over the keys it may see.",
            "The book's first way (section 3.5.1), softmax, then zero the future weights, then divide each row by its "
            "sum, gives the same weights; −∞ before the softmax does it in one step.",
        ),
        extra_fragments=("self.register_buffer(",),
    ),
    Step(
        "softmax",
        "Scale by 1/√head_dim, then softmax",
        ("attn_weights",),
        ("masked_scores", "(b, h, T, T)"),
        ("attn_weights", "(b, h, T, T)"),
        (
            "Why divide by √head_dim? If the head_dim terms of a dot product are independent with unit variance, the "
            "sum's standard deviation is √head_dim; large scores push the softmax towards one-hot, where its gradients "
            "vanish. Dividing keeps the scores' spread near 1 for any head size.",
            "Masking then scaling equals scaling then masking: −∞ / √head_dim is still −∞, and the other scores are "
            "divided either way.",
            "The softmax then turns each row into weights that are at least 0 and sum to 1.",
        ),
    ),
    Step(
        "dropout",
        "Dropout on the weights",
        ("attn_weights_dropped",),
        ("attn_weights", "(b, h, T, T)"),
        ("attn_weights_dropped", "(b, h, T, T)"),
        (
            "In training, dropout zeroes each weight with probability p and multiplies the survivors by 1/(1−p), "
            "so every weight keeps its expected value.",
            "With p = 0, or in eval mode (module.eval()), it does nothing: the weights pass through unchanged.",
            "Train vs eval: module.eval() only turns dropout off here (nn.Dropout is built on line 15, also lit); the "
            "causal mask applies in both modes. torch.no_grad() is separate: it stops recording gradients and "
            "changes no number.",
        ),
        extra_fragments=("self.dropout = nn.Dropout(dropout)",),
    ),
    Step(
        "context",
        "Context: weights @ values",
        ("context_heads",),
        ("attn_weights_dropped", "(b, h, T, T)"),
        ("context_heads", "(b, h, T, head_dim)"),
        (
            "Each token's context vector is the weighted sum of the value vectors of the tokens it attends to, in "
            "every head separately. Without dropout each weight row sums to 1, so it is a weighted average; after "
            "dropout in train mode the rows sum to 1 only on average.",
            "(T, T) @ (T, head_dim) = (T, head_dim) per head.",
        ),
    ),
    Step(
        "transpose_back",
        "transpose(1, 2) back: tokens before heads",
        ("context_transposed",),
        ("context_heads", "(b, h, T, head_dim)"),
        ("context_transposed", "(b, T, h, head_dim)"),
        (
            "The same transpose again moves tokens back in front of heads.",
            "Each token's row now holds its h head outputs one after another, ready to be joined.",
        ),
    ),
    Step(
        "concatenate",
        "contiguous().view: concatenate the heads",
        ("context",),
        ("context_transposed", "(b, T, h, head_dim)"),
        ("context", "(b, T, d_out)"),
        (
            "view(b, T, d_out) joins the h heads side by side: the concatenation of the book's "
            "MultiHeadAttentionWrapper, without a loop over heads.",
            "Why contiguous() before view? The transpose only changed strides, so the numbers are no longer in row "
            "order in memory. view can merge two axes only when one step along the first equals a whole run of the "
            "second: here a step along h jumps T·head_dim numbers, a run of head_dim is head_dim numbers long, so "
            "view raises an error whenever T, h and head_dim are all above 1. contiguous() copies the numbers into "
            "row order first.",
            "An axis of length 1 sets no condition: at the book's head_dim = 1 (and whenever h = 1 or T = 1) view "
            "happens to work without the copy; at head_dim = 3 it raises.",
        ),
    ),
    Step(
        "out_proj",
        "out_proj: mix the heads",
        ("output",),
        ("context", "(b, T, d_out)"),
        ("output", "(b, T, d_out)"),
        (
            "A last linear layer (d_out → d_out) lets every output feature combine all heads' results.",
            "The book notes it is not strictly necessary, but it is standard in LLM architectures. It is built in "
            "`__init__` (line 14, also lit) with a bias, unlike W_query, W_key and W_value by default.",
            "Why it exists: in a GPT, attention's output is added back to its input (x + attention(x), the residual "
            "connection), so it must be as wide as the embedding; out_proj maps the h concatenated heads back to that "
            "width (in the GPT, d_in = d_out = emb_dim).",
            "What d_out means: here it is the total width, cut into heads (head_dim = d_out // num_heads). In the "
            "book's MultiHeadAttentionWrapper d_out is each head's width and the output is num_heads · d_out wide: "
            "Wrapper(d_out=1, num_heads=2) matches MultiHeadAttention(d_out=2, num_heads=2).",
        ),
        extra_fragments=("return context_vec", "self.out_proj = nn.Linear("),
    ),
)
STEP_COUNT = len(STEPS)


def code_of(lines: Sequence[int]) -> str:
    """The highlighted lines alone, a "..." line where lines are skipped (an __init__ line, then forward's)."""
    out: list[str] = []
    for previous, number in zip((None, *lines), lines, strict=False):
        if previous is not None and number > previous + 1:
            out.append("        ...")
        out.append(LISTING_LINES[number - 1])
    return textwrap.dedent("\n".join(out))


def line_ranges(lines: Sequence[int]) -> str:
    """ "line 38", "lines 44–45" or "lines 10, 28–31": the highlighted lines, runs joined."""
    runs: list[list[int]] = []
    for number in lines:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs)
    return f"line {text}" if len(lines) == 1 else f"lines {text}"
