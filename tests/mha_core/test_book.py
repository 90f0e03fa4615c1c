"""The book's printed numbers (chapter 3, section 3.6.2), reproduced exactly as printed."""

import torch

from mha_core.attention.book import (
    CausalAttention,
    MultiHeadAttentionWrapper,
    from_wrapper,
    matches_printed_output,
    printed,
)
from mha_core.attention.inputs import batch_of, book_tokens
from mha_core.attention.modules import MultiHeadAttention
from mha_core.runs.forward import separate_heads

MHA_PRINTED = [
    [0.3190, 0.4858],
    [0.2943, 0.3897],
    [0.2856, 0.3593],
    [0.2693, 0.3873],
    [0.2639, 0.3928],
    [0.2575, 0.4028],
]
CAUSAL_PRINTED = [
    [-0.4519, 0.2216],
    [-0.5874, 0.0058],
    [-0.6300, -0.0632],
    [-0.5675, -0.0843],
    [-0.5526, -0.0981],
    [-0.5299, -0.1081],
]
WRAPPER_FIRST_ROWS = [[-0.4519, 0.2216, 0.4772, 0.1063], [-0.5874, 0.0058, 0.5891, 0.3257]]


def book_batch():
    x, labels = book_tokens()
    return batch_of(x, 2), labels


def test_book_input_is_the_six_words():
    x, labels = book_batch()
    assert labels == ["Your", "journey", "starts", "with", "one", "step"]
    assert x.shape == (2, 6, 3)
    assert x[0, 0].tolist() == torch.tensor([0.43, 0.15, 0.89]).tolist()


def test_listing_3_5_prints_the_books_output():
    x, _ = book_batch()
    torch.manual_seed(123)
    module = MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    output = module(x)
    assert output.shape == (2, 6, 2)
    assert printed(output[0]) == printed(MHA_PRINTED)
    assert printed(output[1]) == printed(MHA_PRINTED)
    assert matches_printed_output(output[0])
    assert not matches_printed_output(output[0] + 1e-4)


def test_causal_attention_prints_the_books_output():
    x, _ = book_batch()
    torch.manual_seed(123)
    output = CausalAttention(3, 2, 6, 0.0)(x)
    assert printed(output[0]) == printed(CAUSAL_PRINTED)


def test_wrapper_through_the_separate_heads_path():
    x, _ = book_batch()
    torch.manual_seed(123)
    wrapper = MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    wrapper_output = wrapper(x)
    assert wrapper_output.shape == (2, 6, 4)
    assert printed(wrapper_output[0, :2]) == printed(WRAPPER_FIRST_ROWS)

    batched = from_wrapper(wrapper, context_length=6).eval()
    heads = separate_heads(batched, x)
    assert printed(heads.concatenated[0, :2]) == printed(WRAPPER_FIRST_ROWS)
    assert torch.allclose(heads.concatenated, wrapper_output, atol=1e-7, rtol=0)
    assert torch.allclose(batched(x), wrapper_output, atol=1e-7, rtol=0)


def test_gpt2_sized_module_has_2360064_parameters():
    module = MultiHeadAttention(768, 768, 1024, 0.0, num_heads=12)
    assert sum(p.numel() for p in module.parameters()) == 2_360_064


def test_section_3_6_2_separate_head_scores_equal_batched_scores():
    """The book's (1, 2, 3, 4) example: per-head Q Kᵀ by hand equals the batched matmul."""
    a = torch.tensor(
        [
            [
                [[0.2745, 0.6584, 0.2775, 0.8573], [0.8993, 0.0390, 0.9268, 0.7388], [0.7179, 0.7058, 0.9156, 0.4340]],
                [[0.0772, 0.3565, 0.1479, 0.5331], [0.4066, 0.2318, 0.4545, 0.9737], [0.4606, 0.5159, 0.4220, 0.5786]],
            ]
        ]
    )  # (b=1, h=2, T=3, d=4)
    batched = a @ a.transpose(2, 3)  # (1, 2, 3, 3)
    # Two matmul routes (one 3×3 product, one batched): the maths is the same, the summation order and FMA use may
    # not be (MKL on AVX-512 differs by 2.4e-7 here). Each score sums d = 4 products, so it may move by d·eps.
    within_rounding = 4 * torch.finfo(torch.float32).eps
    for head in range(2):
        alone = a[0, head] @ a[0, head].T  # (3, 3)
        torch.testing.assert_close(alone, batched[0, head], rtol=within_rounding, atol=0)
    assert printed(batched[0, 0, 0]) == printed([1.3208, 1.1631, 1.2879])
