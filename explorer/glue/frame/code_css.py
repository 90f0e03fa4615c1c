"""CSS for the book's code in st.code boxes: wrapped lines that keep Python's shape, lit lines, and a box that
wraps one long token. Split from boundary: it is about listings, not figures or errors."""

from __future__ import annotations

# A code box holding one long token that is no name (a ?trained= spec): it wraps anywhere rather than scroll.
BREAK_ANYWHERE_CSS = (
    ".st-key-{key} pre code, .st-key-{key} pre code span {{ overflow-wrap: anywhere !important; "
    "word-break: break-all !important; }}"
)
HANGING = 4  # a wrapped line continues this many characters right of where its own text starts,
MOST_HANGING = 12  # but never further right than this: in a narrow column deep lines keep room for their words
HANGING_SHARE = 20  # nor than this share of the box (%): a presenter column 287 px wide kept 167 px and cut a name


def hanging_indent_css(key: str, code: str, *, line_numbers: bool, marker: int = 0) -> str:
    """CSS for st.code(..., wrap_lines=True) inside the container ``key``: each line's continuation starts under its
    own indentation plus HANGING (at most MOST_HANGING), so wrapped Python keeps its shape (pre-wrap alone restarts it
    at column 0). A line breaks at spaces and after punctuation (a zero-width space after each of Python's
    punctuation tokens, drawn by CSS, so nothing is added to the text that is copied): never inside a name or a
    number, and a projector need not scroll (breaking at spaces only made 8 of 12 presenter steps at 1280 × 720
    scroll; breaking inside words cut `cont|iguous()`). The code must be highlighted as Python, which makes the tokens.

    ``marker``: characters before the indentation (1 for a diff's +/- column). One rule per line, by position: the
    code is the book's listing, a constant.
    """
    line = f".st-key-{key} code > span:nth-child({{}})" + (" > span:last-child" if line_numbers else "")
    rules = [
        f".st-key-{key} code > span"
        + (" > span:last-child" if line_numbers else "")
        + f" {{ display: block; padding-left: {HANGING}ch; text-indent: -{HANGING}ch; overflow-wrap: normal; }}",
        f'.st-key-{key} code .token.punctuation::after {{ content: "\\200b"; }}',
    ]
    for number, text in enumerate(code.splitlines(), start=1):
        indent = marker + len(text[marker:]) - len(text[marker:].lstrip(" "))
        if indent and text.strip():
            width = f"min({min(indent + HANGING, MOST_HANGING)}ch, {HANGING_SHARE}%)"  # a narrow box keeps room
            rules.append(f"{line.format(number)} {{ padding-left: {width}; text-indent: calc(-1 * {width}); }}")
    return "<style>" + "\n".join(rules) + "</style>"


LIT_LINE = "background: rgba(66, 133, 244, 0.18); box-shadow: inset 3px 0 0 rgba(66, 133, 244, 0.9);"


def lit_lines_css(key: str, listing: str, mark: str = "+") -> str:
    """CSS that tints the lines of ``listing`` (in st.code(..., line_numbers=True) inside ``key``) that start with
    ``mark``: the listing is highlighted as Python, whose tokens let a line break between names, so the diff
    highlighting that coloured the marked lines is done here instead."""
    lines = [n for n, text in enumerate(listing.splitlines(), start=1) if text.startswith(mark)]
    rules = [f".st-key-{key} code > span:nth-child({n}) {{ {LIT_LINE} }}" for n in lines]
    return "<style>" + "\n".join(rules) + "</style>"
