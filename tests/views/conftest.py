"""The view tests' shared fixtures: a seeded random generator, and one Explorer run at 4 heads × 32 random tokens made
once per module."""

import numpy as np
import pytest

from .figure_checks import run_at


@pytest.fixture(scope="module")
def run32():
    return run_at(num_heads=4, d_in=16, d_out=16, num_tokens=32, context_length=32, input="random")


@pytest.fixture
def rng():
    return np.random.default_rng(0)
