"""The one label-width estimate (``text_width``) is an upper bound of what Chromium draws, and the only one.

``ADVANCE`` is each character's advance in thousandths of an em, read from the font Streamlit ships
(``streamlit/static/static/media/SourceSansVF-Upright*.woff2``, instanced at wght 400 with fontTools): the widths
Chromium draws, as its measured words below confirm.
"""

from __future__ import annotations

import pathlib
import string

import pytest

from explorer.views.figures import text_width
from explorer.views.figures.text_width import char_em, text_px, widest_px

_ROWS = {
    "0123456789": [497] * 10,
    "abcdefghijklm": [504, 553, 456, 555, 496, 292, 504, 544, 246, 247, 495, 255, 829],
    "nopqrstuvwxyz": [547, 542, 555, 555, 347, 419, 338, 544, 467, 719, 446, 467, 425],
    "ABCDEFGHIJKLM": [543, 588, 571, 615, 527, 494, 617, 652, 263, 479, 579, 486, 727],
    "NOPQRSTUVWXYZ": [647, 664, 566, 664, 569, 534, 536, 645, 515, 786, 513, 476, 539],
    " !\"#$%&'()*+,-./": [200, 289, 426, 497, 497, 824, 609, 249, 303, 303, 418, 497, 249, 311, 249, 350],
    ":;<=>?@[\\]^_`{|}~": [249, 249, 497, 497, 497, 425, 847, 303, 350, 303, 497, 500, 542, 303, 241, 303, 497],
    "…·≥≤×−–—éü": [948, 249, 497, 497, 497, 497, 480, 800, 496, 544],
}
ADVANCE = {
    char: per_mille / 1000 for chars, widths in _ROWS.items() for char, per_mille in zip(chars, widths, strict=True)
}

# Chromium, Source Sans at 15 px (issue 20's measurements): kerning narrows "may attend" below its summed advances
CHROMIUM_15PX = {"0": 7.5, "-0.268": 38.2, "journey": 47.9, "may attend": 71.0}


def test_the_advance_table_covers_printable_ascii_and_agrees_with_chromium():
    assert set(string.printable[:95]) <= set(ADVANCE)
    for text, drawn in CHROMIUM_15PX.items():
        assert sum(ADVANCE[c] for c in text) * 15 == pytest.approx(drawn, abs=0.7), text


@pytest.mark.parametrize("char", sorted(ADVANCE))
def test_every_character_is_estimated_from_above_and_at_most_0_07_em_over(char):
    assert ADVANCE[char] <= char_em(char) <= ADVANCE[char] + 0.07


def test_measured_words_are_estimated_from_above_and_within_8_percent():
    for text, drawn in CHROMIUM_15PX.items():
        assert drawn <= text_px(text, 15) <= drawn * 1.08, text


def test_a_labels_markup_draws_nothing_and_an_entity_one_character():
    assert text_px("<b>journey</b>", 15) == text_px("journey", 15)
    assert text_px("&lt;|endoftext|&gt;", 24) == pytest.approx(sum(char_em(c) for c in "<|endoftext|>") * 24)
    assert text_width.plain("a<br>b &amp; c") == "ab & c"
    assert widest_px(["ab", "<b>mm</b>", "i"], 10) == pytest.approx(2 * 0.83 * 10)
    assert widest_px([], 10) == 0.0


def test_a_character_the_table_lacks_counts_as_its_letter_or_one_em():
    assert char_em("ñ") == char_em("n") and char_em("Ä") == char_em("A")
    assert char_em("注") == char_em("ﬁ") == char_em("\u200b") == text_width.OTHER_EM == 1.0  # "ﬁ" is wider than "f"


def test_no_other_module_keeps_its_own_widths_or_markup_pattern():
    """The figures once estimated label widths two ways (0.55 em a character, and a per-character table in the
    margins); which labels turned and what margin held them disagreed."""
    figures = pathlib.Path(text_width.__file__).parent
    for path in figures.rglob("*.py"):
        source = path.read_text()
        if path.name != "text_width.py":
            assert "<[^>]*>" not in source and "CHAR_WIDTH" not in source and "_EM_OF" not in source, path.name
