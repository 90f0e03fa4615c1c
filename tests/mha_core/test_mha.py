"""The book's module against torch's references, its trace, its errors and its inputs."""

import copy
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_core import devices
from mha_core.attention import inputs, masks
from mha_core.attention.kernels import ExplicitAttention
from mha_core.attention.listing import LISTING_LINES, STEP_LINES, listing_line
from mha_core.attention.modules import MultiHeadAttention, QKVMultiHeadAttention, trace_forward
from mha_core.attention.reference import compare_with_torch, sdpa_forward, torch_mha_forward
from mha_core.runs.forward import separate_heads

FLOAT32_EPS = torch.finfo(torch.float32).eps
REQUIRED_STEPS = ["queries", "keys", "values", "attn_scores", "masked_scores", "attn_weights", "context", "output"]


def make(d_in=8, d_out=8, heads=2, tokens=6, batch=2, bias=False, context_length=None, dropout=0.0):
    module = MultiHeadAttention(d_in, d_out, context_length or tokens, dropout, heads, qkv_bias=bias).eval()
    return module, torch.rand(batch, tokens, d_in)


# --- the trace ---------------------------------------------------------------------------------------------------


def test_trace_output_is_bitwise_forward_and_steps_in_data_flow_order():
    module, x = make(d_in=5, d_out=12, heads=3, tokens=7, bias=True, context_length=9)
    trace = trace_forward(module, x)
    assert torch.equal(trace.output, module(x))
    names = list(trace.steps)
    assert [n for n in names if n in REQUIRED_STEPS] == REQUIRED_STEPS
    assert names.index("queries_split") < names.index("queries_heads") < names.index("attn_scores")
    assert names.index("attn_weights") < names.index("attn_weights_dropped") < names.index("context_heads")
    assert names.index("context_heads") < names.index("context_transposed") < names.index("context")
    expected_shapes = {
        "queries": (2, 7, 12),
        "queries_split": (2, 7, 3, 4),
        "queries_heads": (2, 3, 7, 4),
        "mask": (7, 7),
        "attn_scores": (2, 3, 7, 7),
        "attn_weights": (2, 3, 7, 7),
        "context_heads": (2, 3, 7, 4),
        "context_transposed": (2, 7, 3, 4),
        "context": (2, 7, 12),
        "output": (2, 7, 12),
    }
    for name, shape in expected_shapes.items():
        assert tuple(trace.steps[name].shape) == shape, name
        assert trace.info[name].shape == shape
    assert "W_query" in trace.info["queries"].source
    assert "out_proj" in trace.info["output"].source
    assert all(trace.info[name].description for name in names)


def test_trace_invariants():
    module, x = make(tokens=9, heads=4, context_length=12)
    steps = trace_forward(module, x).steps
    weights = steps["attn_weights"]
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 9), atol=1e-6)
    above = torch.ones(9, 9, dtype=torch.bool).triu(diagonal=1)
    assert torch.all(weights[..., above] == 0)
    assert torch.equal(torch.isneginf(steps["masked_scores"]), above.expand(2, 4, 9, 9))
    assert torch.equal(steps["mask"], ~above)
    kept = ~above
    assert torch.equal(steps["masked_scores"][..., kept], steps["attn_scores"][..., kept])


def test_trace_is_not_stored_on_the_module():
    module, x = make()
    before = set(vars(module))
    trace_forward(module, x)
    assert set(vars(module)) == before
    assert not any(isinstance(v, torch.Tensor) and v.shape == (2, 2, 6, 6) for v in vars(module).values())


def test_every_step_maps_to_a_listing_line():
    module, x = make()
    for name in trace_forward(module, x).steps:
        if name == "fully_masked_rows":
            continue
        number, text = listing_line(name)
        assert LISTING_LINES[number - 1].strip() == text
    assert "masked_fill_" in listing_line("masked_scores")[1]
    assert "out_proj" in listing_line("output")[1]
    assert set(STEP_LINES) >= set(REQUIRED_STEPS)


# --- references ----------------------------------------------------------------------------------------------------


def assert_within_twice_torch_error(ours: float, torch_error: float, magnitude: float = 1.0):
    """flash-attention's rule: our float32 error at most twice torch's, plus two ulps of slack."""
    assert ours <= 2 * torch_error + 2 * FLOAT32_EPS * magnitude, (ours, torch_error)


@settings(max_examples=40, deadline=None)
@given(
    heads=st.integers(1, 6),
    head_dim=st.integers(1, 8),
    d_in=st.integers(1, 20),
    tokens=st.integers(1, 10),
    batch=st.integers(1, 3),
    bias=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_agrees_with_torch_references(heads, head_dim, d_in, tokens, batch, bias, seed):
    torch.manual_seed(seed)
    module = MultiHeadAttention(d_in, heads * head_dim, tokens + 2, 0.0, heads, qkv_bias=bias).eval()
    x = torch.randn(batch, tokens, d_in)
    report = compare_with_torch(module, x)
    assert report.output_vs_torch_mha < 1e-5
    assert report.weights_vs_torch_mha < 1e-6
    assert report.output_vs_sdpa < 1e-5
    magnitude = module(x).abs().max().item()
    assert_within_twice_torch_error(report.output_vs_float64, report.torch_mha_output_vs_float64, magnitude)
    assert_within_twice_torch_error(report.weights_vs_float64, report.torch_mha_weights_vs_float64)


def test_float64_module_matches_torch_in_float64_to_machine_precision():
    module, x = make(d_in=6, d_out=12, heads=3, tokens=8, bias=True)
    module = module.double()
    x = x.double()
    report = compare_with_torch(module, x)
    assert report.dtype == "float64"
    assert report.output_vs_torch_mha < 1e-14
    assert report.weights_vs_torch_mha < 1e-14
    assert report.output_vs_float64 == 0.0


def test_compare_does_not_mutate_the_module():
    module, x = make()
    state = copy.deepcopy(module.state_dict())
    compare_with_torch(module, x)
    assert all(torch.equal(state[k], v) for k, v in module.state_dict().items())
    assert module.W_query.weight.dtype == torch.float32


def test_reference_forwards_return_per_head_weights():
    module, x = make(heads=4, tokens=5)
    output, weights = torch_mha_forward(module, x)
    assert output.shape == (2, 5, 8) and weights.shape == (2, 4, 5, 5)
    assert torch.allclose(sdpa_forward(module, x), module(x), atol=1e-6)


def test_separate_heads_equal_batched_heads():
    module, x = make(d_in=7, d_out=15, heads=5, tokens=9, bias=True)
    heads = separate_heads(module, x)
    assert heads.weights.shape == (2, 5, 9, 9)
    assert all(diff < 1e-6 for diff in heads.max_abs_diff.values()), heads.max_abs_diff
    trace = trace_forward(module, x)
    assert torch.allclose(heads.scores, trace.steps["attn_scores"], atol=1e-6)


# --- dropout and modes ----------------------------------------------------------------------------------------------


def test_dropout_in_train_mode_vs_eval_mode():
    module, x = make(tokens=12, dropout=0.5)
    module.train()
    trace = trace_forward(module, x)
    weights, dropped = trace.steps["attn_weights"], trace.steps["attn_weights_dropped"]
    kept = dropped != 0
    assert 0 < kept[weights > 0].float().mean() < 1
    assert torch.allclose(dropped[kept], 2 * weights[kept])
    assert torch.equal(trace.steps["dropout_keep"] | (weights == 0), trace.steps["dropout_keep"])
    torch.manual_seed(5)
    a = module(x)
    torch.manual_seed(5)
    assert torch.equal(module(x), a)  # the same seed drops the same weights
    module.eval()
    assert torch.equal(module(x), module(x))
    assert "dropout_keep" not in trace_forward(module, x).steps


def test_softmax_scale_can_be_swapped():
    module, x = make(d_out=8, heads=2)
    default = trace_forward(module, x)
    same = trace_forward(module, x, attention=ExplicitAttention(scale=1 / 2.0))  # head_dim 4 -> 1/√4
    assert torch.allclose(default.output, same.output, atol=1e-7)
    sharp = trace_forward(module, x, attention=ExplicitAttention(scale=10.0)).steps["attn_weights"]
    assert sharp.max() > default.steps["attn_weights"][..., 1:, :].max()


# --- errors -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(d_in=3, d_out=5, context_length=6, dropout=0.0, num_heads=2), "d_out=5 must be divisible by num_heads=2"),
        (dict(d_in=3, d_out=4, context_length=6, dropout=1.0, num_heads=2), "dropout must be in [0, 1), got 1.0"),
        (dict(d_in=3, d_out=4, context_length=6, dropout=-0.1, num_heads=2), "got -0.1"),
        (dict(d_in=0, d_out=4, context_length=6, dropout=0.0, num_heads=2), "d_in must be a positive integer, got 0"),
        (dict(d_in=3, d_out=4, context_length=6, dropout=0.0, num_heads=0), "num_heads must be a positive integer"),
    ],
)
def test_constructor_errors_name_the_numbers(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        MultiHeadAttention(**kwargs)


def test_forward_errors_name_the_numbers():
    module = MultiHeadAttention(3, 4, 6, 0.0, 2)
    with pytest.raises(ValueError, match="7 tokens, more than context_length=6"):
        module(torch.rand(1, 7, 3))
    with pytest.raises(ValueError, match=r"embedding size 5, expected 3: shape \(1, 4, 5\)"):
        module(torch.rand(1, 4, 5))
    with pytest.raises(ValueError, match=r"shape \(batch, tokens, 3\), got \(4, 3\)"):
        module(torch.rand(4, 3))


def test_qkv_errors_name_the_numbers():
    with pytest.raises(ValueError, match="hidden_dim=10 must be divisible by num_heads=4"):
        QKVMultiHeadAttention(10, 4)
    module = QKVMultiHeadAttention(8, 2)
    q = torch.rand(2, 3, 8)
    with pytest.raises(ValueError, match="batch sizes differ: query 2, key 3, value 3"):
        module(q, torch.rand(3, 5, 8), torch.rand(3, 5, 8))
    with pytest.raises(ValueError, match=r"attn_mask has shape \(2, 3, 4\); expected .* \(2, 3, 5\)"):
        module(q, torch.rand(2, 5, 8), torch.rand(2, 5, 8), torch.ones(2, 3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="attn_mask must be torch.bool .* got torch.float32"):
        module(q, q, q, torch.ones(2, 3, 3))
    with pytest.raises(ValueError, match="query has embedding size 6, expected 8"):
        module(torch.rand(2, 3, 6), q, q)


def test_validation_survives_python_dash_o():
    """No assert statements guard arguments: they would vanish under `python -O`."""
    import ast
    import pathlib

    paths = sorted((pathlib.Path(__file__).resolve().parents[2] / "mha_core").rglob("*.py"))  # not the cwd's
    assert len(paths) >= 10, paths  # the library's modules, found from wherever pytest runs
    for path in paths:
        tree = ast.parse(path.read_text())
        assert not any(isinstance(node, ast.Assert) for node in ast.walk(tree)), path


# --- masks --------------------------------------------------------------------------------------------------------


def test_mask_conventions_translate_in_one_place():
    book = masks.book_causal_buffer(4)
    allowed = masks.from_blocked(book)
    assert torch.equal(allowed, masks.causal(4))
    assert torch.equal(masks.to_blocked(allowed), book.bool())
    assert masks.padding([2, 3], 2, 4).tolist() == [[[True, True, False, False]] * 2, [[True, True, True, False]] * 2]
    assert masks.sliding_window(4, 4, 2).tolist()[3] == [False, False, True, True]
    assert masks.fully_masked_rows(torch.tensor([[True, False], [False, False]])).tolist() == [False, True]
    with pytest.raises(ValueError, match="padding length 5 is outside"):
        masks.padding([5], 2, 4)


# --- inputs and devices ---------------------------------------------------------------------------------------------


def test_inputs_are_deterministic_and_labelled():
    x, labels = inputs.sentence_embeddings("the cat saw the dog.", 4, seed=7)
    assert labels == ["the", "cat", "saw", "the", "dog", "."]
    assert x.shape == (6, 4) and torch.equal(x[0], x[3])
    again, _ = inputs.sentence_embeddings("the cat", 4, seed=7)
    assert torch.equal(again[0], x[0])
    other, _ = inputs.sentence_embeddings("the cat", 4, seed=8)
    assert not torch.equal(other[0], x[0])
    r1, l1 = inputs.random_embeddings(5, 3, seed=1)
    r2, _ = inputs.random_embeddings(5, 3, seed=1)
    assert torch.equal(r1, r2) and l1 == ["t0", "t1", "t2", "t3", "t4"]
    extended, ext_labels = inputs.extend(*inputs.book_tokens(), 8, seed=0)
    assert extended.shape == (8, 3) and ext_labels[-2:] == ["t6", "t7"]
    with pytest.raises(ValueError, match="has no tokens"):
        inputs.sentence_embeddings("   ", 4, seed=0)


def test_devices_list_cpu_and_reject_absent_ones():
    assert devices.available_devices()[0] == "cpu"
    assert devices.resolve("cpu", "float64") == (torch.device("cpu"), torch.float64)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' is not available here"):
            devices.resolve("cuda", "float32")
    with pytest.raises(ValueError, match="dtype 'float16' is not offered on cpu"):
        devices.resolve("cpu", "float16")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_cuda_matches_cpu(dtype):
    module, x = make(d_in=16, d_out=32, heads=4, tokens=33)
    expected = module.double()(x.double())
    gpu = copy.deepcopy(module).to("cuda", dtype)
    trace = trace_forward(gpu, x.to("cuda", dtype))
    tolerance = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 5e-3, torch.bfloat16: 3e-2}[dtype]
    assert torch.allclose(trace.output.double().cpu(), expected, atol=tolerance)
    qkv = QKVMultiHeadAttention(32, 4).to("cuda", dtype).eval()
    q = torch.rand(2, 5, 32, device="cuda", dtype=dtype)
    assert torch.isfinite(qkv(q, q, q, torch.ones(2, 5, 5, dtype=torch.bool, device="cuda"))).all()


def test_a_softmax_scale_of_zero_gives_uniform_weights_over_allowed_keys_not_nan():
    module, x = make(tokens=5)
    weights = trace_forward(module, x, attention=ExplicitAttention(scale=0.0)).steps["attn_weights"]
    assert torch.isfinite(weights).all()
    expected = masks.causal(5).float() / torch.arange(1, 6).unsqueeze(1)  # row i: 1/(i+1) on keys 0..i
    assert torch.allclose(weights[0, 0], expected)
