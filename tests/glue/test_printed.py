"""boundary.printed: a printed tensor in st.code's box without st.code, whose syntax highlighter (every Prism
language) cost a new visitor's browser 0.4–0.8 s before the Explorer's first chart could draw (issue 20)."""

import tomllib
from pathlib import Path

from streamlit.testing.v1 import AppTest

from ..apptest_helpers import printed


def _print_markup():
    from explorer.glue.frame import boundary

    boundary.printed("tensor([[<b>1.0</b>, nan]]) & more", wrap=True)


def test_the_text_is_escaped_shown_as_printed_and_wraps_on_request():
    at = AppTest.from_function(_print_markup, default_timeout=60).run()
    assert not at.exception and not at.code
    (box,) = at.get("html")
    assert "<b>" not in box.proto.body and "&lt;b&gt;1.0&lt;/b&gt;" in box.proto.body  # markup shows as text
    assert 'class="mha-printed mha-wrap"' in box.proto.body and "pre-wrap" in box.proto.body
    assert printed(at) == ["tensor([[<b>1.0</b>, nan]]) & more"]  # what the NaN check in apptest_helpers reads
    theme = tomllib.loads((Path(__file__).parents[2] / ".streamlit" / "config.toml").read_text())["theme"]
    assert f"background: {theme['light']['codeBackgroundColor']};" in box.proto.body  # the app's one code colour
