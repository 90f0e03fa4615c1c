"""Every parser of outside values reads ASCII digits only: other scripts' digits (``١``, ``１``), superscripts (``²``),
Unicode signs (``−``, ``＋``) and spaces (no-break, ideographic) are refused in the parser's own words, never read
as a number and never answered with Python's exception text (``str.isdigit`` takes ``²``; ``int`` then says
"invalid literal for int() with base 10", or reads ``١`` as 1).
"""

from __future__ import annotations

import pytest

from explorer.glue.frame import boundary
from explorer.glue.memory import budget
from explorer.glue.state import strict, trained_link
from mha_core.gpt import download as gpt2_download
from mha_core.gpt import knockout

# Each is a number to a reader of some script, none is ASCII digits with ASCII signs and spaces.
UNICODE_DIGITS = ("²", "١", "１", "٣", "߂", "𝟐", "½", "Ⅻ")
UNICODE_SIGNS = ("−5", "＋5", "﹣5", "‐5")
UNICODE_SPACES = ("\u00a05", "5\u3000", "\u20075", "5\u202f", "\u200b5")
NOT_ASCII = UNICODE_DIGITS + UNICODE_SIGNS + UNICODE_SPACES
PYTHON_WORDS = ("invalid literal", "base 10", "could not convert", "Traceback")


def _ours(notice: str | None) -> str:
    assert notice is not None
    assert not any(words in notice for words in PYTHON_WORDS), notice
    return notice


@pytest.mark.parametrize("raw", NOT_ASCII)
def test_parse_int_refuses_what_is_not_ascii_digits(raw):
    value, notice = strict.parse_int("seed", raw, 7, 0, 100)
    assert value == 7
    assert "is not a whole number; using 7." in _ours(notice)


@pytest.mark.parametrize("raw", NOT_ASCII + ("１.５", "1٫5", "0.５"))
def test_parse_float_refuses_what_is_not_ascii_digits(raw):
    value, notice = strict.parse_float("dropout", raw, 0.25, 0.0, 0.9)
    assert value == 0.25
    assert "is not a number; using 0.25." in _ours(notice)


@pytest.mark.parametrize("raw", ["１", "٣", "\u00a01"])
def test_parse_choice_refuses_a_lookalike_of_a_choice(raw):
    value, notice = strict.parse_choice("layer", raw, "0", ["0", "1", "3"])
    assert value == "0"
    assert "is not one of 0, 1, 3" in _ours(notice)


def test_ascii_spaces_around_a_number_are_still_trimmed():
    assert strict.parse_int("seed", " 5\t", 7, 0, 100) == (5, None)
    assert strict.parse_float("dropout", " 0.5 ", 0.25, 0.0, 0.9) == (0.5, None)


@pytest.mark.parametrize("digit", UNICODE_DIGITS)
@pytest.mark.parametrize("where", ["{}.1", "1.{}", "{}.{}"])
def test_parse_heads_refuses_unicode_digits_in_its_own_words(where, digit):
    with pytest.raises(ValueError, match=r"is not layer\.head") as caught:
        knockout.parse_heads(where.format(digit, digit))
    _ours(str(caught.value))


@pytest.mark.parametrize("raw", ["−1.1", "1.＋1", "\u00a00.1", "0.1\u3000", "0.1,\u200b1.1"])
def test_parse_heads_refuses_unicode_signs_and_spaces(raw):
    with pytest.raises(ValueError, match=r"is not layer\.head"):
        knockout.parse_heads(raw)


def test_parse_heads_still_reads_ascii():
    assert knockout.parse_heads(" 0.1 ,1.3\t") == [(0, 1), (1, 3)]


@pytest.mark.parametrize("digit", UNICODE_DIGITS[:4])
def test_a_trained_spec_refuses_unicode_digits(digit):
    spec = trained_link.previous_token_spec()
    forged = spec.replace("seed0", f"seed{digit}").replace("layer0", f"layer{digit}")
    assert forged != spec
    with pytest.raises(ValueError, match="trained spec") as caught:
        trained_link.parse_trained_spec(forged)
    _ours(str(caught.value))


@pytest.mark.parametrize("raw", NOT_ASCII)
def test_the_server_budget_ignores_a_non_ascii_mha_server_mb(monkeypatch, raw):
    """``MHA_SERVER_MB=²`` crashed the server at start-up (isdigit, then int); now it is not a number of MB."""
    monkeypatch.setenv("MHA_SERVER_MB", raw)
    _, source = budget.server_memory()
    assert source != "MHA_SERVER_MB"


@pytest.mark.parametrize("raw", NOT_ASCII)
def test_a_cgroup_limit_file_of_non_ascii_digits_is_no_limit(tmp_path, raw):
    path = tmp_path / "memory.max"
    path.write_text(raw + "\n", encoding="utf-8")
    assert budget._read_limit(path) is None
    path.write_text("734003200\n")
    assert budget._read_limit(path) == 734003200


class _Response:
    def __init__(self, length: str):
        self.headers = {"Content-Length": length}


@pytest.mark.parametrize("raw", NOT_ASCII)
def test_a_download_length_of_non_ascii_digits_is_unknown(raw):
    assert gpt2_download._length(_Response(raw)) is None
    assert gpt2_download._length(_Response("1234")) == 1234


def _raised(make) -> BaseException:
    try:
        make()
    except ValueError as error:
        return error
    raise AssertionError("nothing raised")


def _ours_raises():
    raise ValueError("num_heads=3 does not divide d_out=8")


def test_the_page_boundary_shows_only_the_apps_own_words():
    """A ValueError from a ``raise`` in the project names a setting; one from Python (``int("²")``) is Python's
    words, which the page never shows (it says something went wrong and logs the text)."""
    assert boundary.in_our_words(_raised(_ours_raises))
    assert not boundary.in_our_words(_raised(lambda: int("²")))
    assert not boundary.in_our_words(_raised(lambda: float("nan") and int(float("nan"))))
    assert not boundary.in_our_words(ValueError("never raised"))
