import pytest
import streamlit as st
import torch

from .markers import markers_of


@pytest.fixture(autouse=True)
def _seed_torch():
    """Every test starts from the same RNG state, as continuiti's tests do."""
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """One torch thread for the test (as a page's run on a shared 2-CPU server); the count is restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def fresh_caches():
    """Cached views and modules would answer without calling what a test patches: empty them, before and after."""
    from explorer.glue import caches

    st.cache_data.clear()
    st.cache_resource.clear()
    caches.clear_all()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()
    caches.clear_all()


def pytest_collection_modifyitems(items):
    """Each test gets its file's part of the tree as a marker (tests/markers.py), and `fast` where that applies."""
    for item in items:
        for name in markers_of(item.path):
            item.add_marker(name)
