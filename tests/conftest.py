import pytest
import streamlit as st
import torch


@pytest.fixture(autouse=True)
def _seed_torch():
    """Every test starts from the same RNG state, as continuiti's tests do."""
    torch.manual_seed(0)


@pytest.fixture
def fresh_caches():
    """Cached views and modules would answer without calling what a test patches: empty them, before and after."""
    from explorer.glue import byte_cache

    st.cache_data.clear()
    st.cache_resource.clear()
    byte_cache.clear_all()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()
    byte_cache.clear_all()
