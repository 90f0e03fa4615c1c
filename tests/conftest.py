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
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture(autouse=True, scope="session")
def _a_shipped_model():
    """Until the shipped model is in this build (branch train), ?model= links and the Real heads page serve a tiny
    random GPT (tests/tiny_gpt.py), so that every page test and fuzz run still draws them."""
    from mha_core import gpt

    if hasattr(gpt, "load_shipped_model"):
        yield
        return
    from .tiny_gpt import tiny_model

    gpt.load_shipped_model = tiny_model
    yield
    del gpt.load_shipped_model
