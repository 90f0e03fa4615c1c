"""How wide a line of label text is drawn, estimated from above: the one estimate every figure sizes its labels by.

The figures' text is Streamlit's Source Sans at weight 400 (``.streamlit/config.toml``). Each class below is the widest
advance of its characters, in em, rounded up to the next 0.01: read from the font Streamlit ships
(``SourceSansVF-Upright``, wght 400), whose advances are the widths Chromium draws ("0" 7.5 px, "-0.268" 38.2,
"journey" 47.9 at 15 px; kerning only narrows a pair: "may attend" 71.0 drawn, 71.7 summed).
``tests/views/test_text_width.py`` holds every printable ASCII character's advance and checks each class from above.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Iterable

MARKUP = re.compile(r"<[^>]*>")  # plotly's pseudo-HTML tags (<b>, <br>, <sub>): drawn as no text

_EM_CLASSES = (
    (0.26, " .,:;'|·ijl"),
    (0.32, "!fI()[]{}-"),
    (0.36, "rt/\\"),
    (0.47, 'sczxvy*?"'),
    (0.50, "0123456789ekFJLY#$+<=>^_~–−×≤≥"),
    (0.56, "abdghnopqu`AESTVXZ"),
    (0.59, "BCKPR"),
    (0.67, "DGHNOQU&"),
    (0.73, "wM"),
    (0.80, "W—"),
    (0.83, "m%"),
    (0.85, "@"),
    (0.95, "…"),
)
_EM_OF = {char: em for em, chars in _EM_CLASSES for char in chars}  # every printable ASCII character is here
OTHER_EM = 1.0  # any other character: a CJK one is 1 em, the widest above 0.95


def plain(text: object) -> str:
    """The characters a label draws: markup dropped, entities read ("&lt;" is one "<")."""
    return html.unescape(MARKUP.sub("", str(text)))


def char_em(char: str) -> float:
    """One character's width in em, from above; an accented letter is as wide as its letter ("é" as "e")."""
    em = _EM_OF.get(char)
    if em is not None:
        return em
    base, *marks = unicodedata.normalize("NFKD", char)
    if base in _EM_OF and all(unicodedata.combining(mark) for mark in marks):
        return _EM_OF[base]
    return OTHER_EM


def text_px(text: object, font_px: float) -> float:
    """An upper estimate of the width of one line of text (markup dropped), in pixels."""
    return text_em(str(text)) * font_px


@functools.lru_cache(maxsize=8192)
def text_em(text: str) -> float:
    """``text``'s width in em. Cached: the Explorer's figures at 8 heads × 512 tokens measure about 600 labels
    16,700 times (17 ms of the 223 ms their view and JSON take)."""
    return sum(char_em(char) for char in plain(text))


def widest_px(texts: Iterable[object], font_px: float) -> float:
    """The widest of ``texts`` (``text_px``), 0 for none."""
    return max((text_px(text, font_px) for text in texts), default=0.0)
