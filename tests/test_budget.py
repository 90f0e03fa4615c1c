"""Pages that run several copies of the module at once fit the largest settings into the heavy-run budget."""

import pytest

from explorer.glue.caches import HEAVY_CELLS
from explorer.glue.settings import parse_query

from .apptest_helpers import run_page

LARGEST = dict(num_heads="16", d_out="1024", num_tokens="1024", input="random", batch_size="1", d_in="64")


@pytest.mark.parametrize("page", ["pages/2_Heads_and_references.py", "pages/4_Knobs_that_teach.py"])
def test_largest_settings_are_fitted_with_a_notice_and_the_url_keeps_the_users_own(page):
    at = run_page(page, **LARGEST)
    assert not at.exception
    notices = [w.value for w in at.warning]
    assert any("uses batch_size=1 and num_tokens=256" in n for n in notices), notices
    assert 16 * 256**2 <= HEAVY_CELLS < 16 * 257**2  # 256 is the nearest number of tokens that fits
    assert at.session_state.settings == parse_query(LARGEST)[0]  # the sidebar keeps 1024 tokens for other pages
    assert at.query_params["num_tokens"] in ("1024", ["1024"])
