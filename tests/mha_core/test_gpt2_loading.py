"""Issue 18, item 3: Hugging Face GPT-2 weights in the book's GPTModel, the download and the disk loader, offline.

A tiny random GPT-2 is made with ``transformers`` here (its logits are the reference); the download is served by a
local ``http.server`` in a thread, with a tiny model.safetensors and a byte-level BPE tokenizer trained here.
"""

from __future__ import annotations

import functools
import http.server
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel

from mha_core.attention.modules import trace_forward
from mha_core.gpt import download as gpt2_download
from mha_core.gpt import model as gpt
from mha_core.gpt.download import (
    DownloadStoppedError,
    GPT2Unavailable,
    download_gpt2,
    gpt2_bytes,
    gpt2_cached,
    load_gpt2,
)
from mha_core.gpt.model import GPT2_CONFIG, GPTModel, count_parameters
from mha_core.gpt.pretrained import load_hf_gpt2

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = ["Your journey starts with one step.", "Every effort moves you forward.", "The cat sat on the mat."] * 4


def tiny_cfg(vocab_size: int = 100) -> dict:
    return dict(
        vocab_size=vocab_size, context_length=64, emb_dim=32, n_heads=4, n_layers=2, drop_rate=0.0, qkv_bias=True
    )


def tiny_hf(vocab_size: int = 100) -> GPT2LMHeadModel:
    """Seeded, eval, eager attention (so it can return its attention weights)."""
    torch.manual_seed(1)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=4, n_positions=64, vocab_size=vocab_size, bos_token_id=0)
    config.eos_token_id = 0
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # biases and LayerNorms start at 0 and 1: randomise them so a wrong mapping shows
        for name, parameter in model.named_parameters():
            if parameter.ndim == 1:
                parameter.normal_(0.0 if name.endswith("bias") else 1.0, 0.1)
    return model


@pytest.fixture(scope="module")
def hf():
    return tiny_hf()


@pytest.fixture(scope="module")
def ids():
    return torch.randint(0, 100, (2, 20), generator=torch.Generator().manual_seed(5))


def hf_logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def test_float32_logits_match_transformers(hf, ids):
    model = load_hf_gpt2(hf.state_dict(), tiny_cfg())
    with torch.no_grad():
        torch.testing.assert_close(model(ids), hf_logits(hf, ids), atol=1e-5, rtol=0)
    assert model.tok_emb.weight.dtype == torch.float32 and not model.training


def test_keys_with_and_without_the_transformer_prefix(hf, ids):
    state = hf.state_dict()
    bare = {key.removeprefix("transformer."): value for key, value in state.items() if key != "lm_head.weight"}
    bare["h.0.attn.bias"] = torch.ones(1, 1, 64, 64)  # buffers older checkpoints (GPT-2's own file) carry
    bare["h.1.attn.masked_bias"] = torch.tensor(-1e4)
    assert "wte.weight" in bare and "transformer.wte.weight" in state
    with torch.no_grad():
        torch.testing.assert_close(load_hf_gpt2(bare, tiny_cfg())(ids), hf_logits(hf, ids), atol=1e-5, rtol=0)


def test_bfloat16_storage_equals_transformers_on_the_same_rounded_weights(hf, ids, monkeypatch):
    """bfloat16 keeps 8 significant bits: the only difference from float32 is rounding each weight once.

    So our bfloat16 model (computing in float32) must match transformers run on the bfloat16-rounded weights to
    1e-5, and the unrounded model within 2 % of the logits' range (a relative step of 2⁻⁸ per weight, a few
    weights per path, averaged over 32-wide sums).
    """
    monkeypatch.setattr(gpt, "HEAD_ROWS", 7)  # out_head cast in 15 slices, the last one short
    model = load_hf_gpt2(hf.state_dict(), tiny_cfg(), dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    rounded = tiny_hf()
    with torch.no_grad():
        for parameter in rounded.parameters():
            parameter.copy_(parameter.bfloat16().float())
        ours = model(ids)
        torch.testing.assert_close(ours, hf_logits(rounded, ids), atol=1e-5, rtol=0)
        reference = hf_logits(hf, ids)
        scale = float(reference.abs().max())
        assert float((ours - reference).abs().max()) < 0.02 * scale


def test_out_head_is_tok_emb_stored_once(hf):
    model = load_hf_gpt2(hf.state_dict(), tiny_cfg(), dtype=torch.bfloat16)
    assert model.out_head.weight is model.tok_emb.weight
    assert model.out_head.weight.data_ptr() == model.tok_emb.weight.data_ptr()
    assert count_parameters(model) == sum(p.numel() for p in hf.parameters())  # lm_head tied in both
    masks = {block.att.mask.data_ptr() for block in model.trf_blocks}
    assert len(masks) == 1 and not model.trf_blocks[0].att.mask.is_meta
    assert torch.equal(model.trf_blocks[0].att.mask, torch.triu(torch.ones(64, 64), diagonal=1))


def test_the_model_never_shares_the_callers_tensors(hf):
    state = hf.state_dict()
    model = load_hf_gpt2(state, tiny_cfg())
    assert model.pos_emb.weight.data_ptr() != state["transformer.wpe.weight"].data_ptr()


def test_missing_unexpected_and_misshapen_keys_are_named(hf):
    state = dict(hf.state_dict())
    del state["transformer.h.1.mlp.c_fc.bias"]
    state["transformer.h.0.attn.extra"] = torch.zeros(3)
    state["transformer.wpe.weight"] = torch.zeros(32, 32)
    with pytest.raises(ValueError, match=r"missing keys \[h\.1\.mlp\.c_fc\.bias\]") as error:
        load_hf_gpt2(state, tiny_cfg())
    assert "unexpected keys [h.0.attn.extra]" in str(error.value)
    assert "wpe.weight: (32, 32) where the config needs (64, 32)" in str(error.value)


def test_a_config_that_does_not_fit_is_refused(hf):
    with pytest.raises(ValueError, match=r"h\.2\.ln_1\.weight"):
        load_hf_gpt2(hf.state_dict(), {**tiny_cfg(), "n_layers": 3})
    with pytest.raises(ValueError, match="qkv_bias=True"):
        load_hf_gpt2(hf.state_dict(), {**tiny_cfg(), "qkv_bias": False})
    with pytest.raises(ValueError, match="dtype"):
        load_hf_gpt2(hf.state_dict(), tiny_cfg(), dtype=torch.int8)
    both = {**hf.state_dict(), "wte.weight": torch.zeros(100, 32)}
    with pytest.raises(ValueError, match="twice"):
        load_hf_gpt2(both, tiny_cfg())


def test_trace_of_any_block_gives_transformers_attention_weights(hf, ids):
    model = load_hf_gpt2(hf.state_dict(), tiny_cfg(), dtype=torch.bfloat16)
    rounded = tiny_hf()
    with torch.no_grad():
        for parameter in rounded.parameters():
            parameter.copy_(parameter.bfloat16().float())
        expected = rounded(ids, output_attentions=True).attentions  # per layer (b, h, T, T)
    for layer in range(2):
        trace = trace_forward(model.attention_module(layer), model.attention_input(ids, layer))
        torch.testing.assert_close(trace.steps["attn_weights"], expected[layer], atol=1e-5, rtol=0)
    torch.testing.assert_close(model.attention_weights(ids), torch.stack(expected), atol=1e-5, rtol=0)


def test_a_float32_copy_of_a_block_shares_the_mask_and_leaves_the_original(hf):
    model = load_hf_gpt2(hf.state_dict(), tiny_cfg(), dtype=torch.bfloat16)
    block = model.trf_blocks[1]
    copy = gpt.in_compute_dtype(block)
    assert {p.dtype for p in copy.parameters()} == {torch.float32}
    assert {p.dtype for p in block.parameters()} == {torch.bfloat16}
    assert copy.att.mask is block.att.mask
    torch.testing.assert_close(copy.ff.layers[0].weight, block.ff.layers[0].weight.float(), atol=0, rtol=0)


def test_loading_imports_no_symbolic_machinery():
    """torch's Python meta kernels (triu, normal_ on the meta device) would import sympy: 73 MB, kept for good."""
    script = (
        "import sys, torch\n"
        "from mha_core.gpt.pretrained import expected_shapes, load_hf_gpt2\n"
        "cfg = dict(vocab_size=50, context_length=16, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=True)\n"
        "state = {k: torch.randn(s) for k, s in expected_shapes(cfg).items()}\n"
        "model = load_hf_gpt2(state, cfg, dtype=torch.bfloat16)\n"
        "model(torch.tensor([[1, 2, 3]]))\n"
        "print(sorted(m for m in ('sympy', 'mpmath') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_building_on_the_meta_device_leaves_other_threads_alone():
    """Streamlit's sessions are threads: one loading GPT-2 must not make another's tensors meta or uninitialised."""
    from mha_core.gpt.pretrained import _ShapesOnly

    seen = {}

    def other_session():
        weight = torch.nn.Embedding(10, 4).weight.detach()
        seen.update(device=weight.device.type, std=float(weight.std()), triu=torch.ones(3, 3).triu(1))

    with torch.device("meta"), _ShapesOnly():
        assert torch.ones(2).is_meta
        thread = threading.Thread(target=other_session)
        thread.start()
        thread.join()
    assert seen["device"] == "cpu" and seen["std"] > 0.1
    assert torch.equal(seen["triu"], torch.tensor([[0.0, 1, 1], [0, 0, 1], [0, 0, 0]]))


def test_byte_estimate_counts_gpt2_once_tied():
    with torch.device("meta"):
        model = GPTModel(GPT2_CONFIG)
    model.out_head.weight = model.tok_emb.weight
    assert count_parameters(model) == 124_439_808
    estimate = gpt2_bytes(64)
    assert estimate.kept == 2 * 124_439_808 + 4 * 1024 * 1024 + gpt2_download.TOKENIZER_BYTES  # one float32 mask
    assert gpt2_bytes(1024).forward > estimate.forward > 0
    with pytest.raises(ValueError, match="1..1024"):
        gpt2_bytes(1025)


# The download, from a local server.


def tiny_tokenizer_json() -> str:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(SENTENCES, trainer)
    return tokenizer.to_str()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(base URL, request count, transformers model) for a folder holding both files, GPT-2's key names."""
    folder = tmp_path_factory.mktemp("served")
    (folder / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    vocab = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size()
    model = tiny_hf(vocab)
    state = {k.removeprefix("transformer."): v.contiguous() for k, v in model.state_dict().items()}
    del state["lm_head.weight"]  # tied, as in GPT-2's own file
    state["h.0.attn.bias"] = torch.ones(1, 1, 64, 64)
    save_file(state, str(folder / "model.safetensors"))
    (folder / "garbage").mkdir()  # an error page where the weights should be
    (folder / "garbage" / "model.safetensors").write_bytes(b"<html>rate limited</html>" * 50)
    (folder / "garbage" / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", requests, model
    server.shutdown()
    server.server_close()


def test_download_reports_progress_caches_and_loads_the_same_logits(served, tmp_path):
    base_url, requests, hf_model = served
    calls = []
    folder = download_gpt2(
        tmp_path / "cache", base_url=base_url, progress=lambda done, total: calls.append((done, total))
    )
    assert gpt2_cached(folder) and sorted(p.name for p in folder.iterdir()) == ["model.safetensors", "tokenizer.json"]
    sizes = sum(p.stat().st_size for p in folder.iterdir())
    assert calls and all(total == sizes for _, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls) and calls[-1][0] == sizes
    before = len(requests)
    assert download_gpt2(folder, base_url=base_url) == folder and len(requests) == before  # cached: no request
    model, tokenizer = load_gpt2(folder, tiny_cfg(hf_model.config.vocab_size))
    assert model.tok_emb.weight.dtype == torch.bfloat16 and model.out_head.weight is model.tok_emb.weight
    ids = torch.tensor([tokenizer.encode("Your journey starts with one step.")])
    assert tokenizer.decode(ids[0].tolist()) == "Your journey starts with one step."
    trace = trace_forward(model.attention_module(1), model.attention_input(ids, 1))
    assert trace.steps["attn_weights"].shape == (1, 4, ids.shape[1], ids.shape[1])
    rounded = tiny_hf(hf_model.config.vocab_size)
    with torch.no_grad():
        for parameter in rounded.parameters():
            parameter.copy_(parameter.bfloat16().float())
        torch.testing.assert_close(model(ids), rounded(ids).logits, atol=1e-5, rtol=0)


def test_stopping_mid_download_leaves_no_file(served, tmp_path, monkeypatch):
    base_url, _, _ = served
    monkeypatch.setattr(gpt2_download, "CHUNK_BYTES", 1024)
    asked = []
    with pytest.raises(DownloadStoppedError, match="after 2048 bytes of tokenizer.json"):
        download_gpt2(tmp_path, base_url=base_url, should_stop=lambda: asked.append(1) or len(asked) > 2)
    assert len(asked) == 3 and list(tmp_path.iterdir()) == [] and not gpt2_cached(tmp_path)
    asked.clear()  # and in the second file, the first one whole and kept
    with pytest.raises(DownloadStoppedError, match="of model.safetensors"):
        download_gpt2(tmp_path, base_url=base_url, should_stop=lambda: "model" in str(list(tmp_path.iterdir())))
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer.json"]


def test_unreachable_server_raises_gpt2_unavailable_in_plain_words(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(GPT2Unavailable, match="GPT-2 cannot be fetched from this machine") as error:
        download_gpt2(tmp_path, base_url=f"http://127.0.0.1:{port}", timeout=2)
    assert "offline" in str(error.value) and list(tmp_path.iterdir()) == []


def test_missing_file_or_garbage_is_refused_and_not_cached(served, tmp_path):
    base_url, _, _ = served
    with pytest.raises(GPT2Unavailable, match="404"):
        download_gpt2(tmp_path / "a", base_url=f"{base_url}/nowhere")
    with pytest.raises(GPT2Unavailable, match="model.safetensors is not a readable file"):
        download_gpt2(tmp_path / "b", base_url=f"{base_url}/garbage")
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["tokenizer.json"]  # whole and good: kept
    with pytest.raises(FileNotFoundError, match="not cached"):
        load_gpt2(tmp_path / "a")
