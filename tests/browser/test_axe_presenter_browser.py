"""axe-core finds no WCAG 2.1 A/AA violation, of any impact, on any page or tab in presenter mode, and every chart
has a name a screen reader reads (tests/browser/a11y.py)."""

from __future__ import annotations

import pytest

from .a11y import check_page
from .page_checks import PAGES

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("slug", [slug for slug, _, _ in PAGES])
def test_axe_finds_no_violation_in_presenter_mode(browser, app_url, slug):
    check_page(browser, app_url, slug, "presenter")
