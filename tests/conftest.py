import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_torch():
    """Every test starts from the same RNG state, as continuiti's tests do."""
    torch.manual_seed(0)
