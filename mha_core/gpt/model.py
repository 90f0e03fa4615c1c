"""The book's GPT (chapter 4), with the project's own ``MultiHeadAttention`` in every block.

Names follow the book, so a reader of chapter 4 recognises them: ``GPTModel(cfg)`` with ``tok_emb``,
``pos_emb``, ``drop_emb``, ``trf_blocks``, ``final_norm``, ``out_head``; each ``TransformerBlock`` has
``att``, ``ff``, ``norm1``, ``norm2``. Any block's ``att`` can be traced on that block's real input
(``attention_input``), so a real model's head goes through the same code as the book's six tokens.

Weights may be stored in bfloat16 (GPT-2 is 124M parameters: 249 MB instead of 498 MB); every block then
computes in float32 on a temporary float32 copy of itself, one block at a time.

Axis letters: b batch, T tokens, E emb_dim, V vocabulary, h heads.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn

from mha_core.attention.modules import MultiHeadAttention, Trace, trace_forward

CONFIG_KEYS = ("vocab_size", "context_length", "emb_dim", "n_heads", "n_layers", "drop_rate", "qkv_bias")

GPT_CONFIG_124M = {
    "vocab_size": 50257,
    "context_length": 1024,
    "emb_dim": 768,
    "n_heads": 12,
    "n_layers": 12,
    "drop_rate": 0.1,
    "qkv_bias": False,
}

COMPUTE_DTYPE = torch.float32
HEAD_ROWS = 4096  # out_head rows cast to float32 at a time when stored smaller (12 MB at E = 768)


def check_config(cfg: dict) -> dict:
    """The config with exactly the book's keys; a ValueError names what is missing or extra."""
    missing = [key for key in CONFIG_KEYS if key not in cfg]
    extra = [key for key in cfg if key not in CONFIG_KEYS]
    if missing or extra:
        raise ValueError(f"GPT config needs exactly {CONFIG_KEYS}: missing {missing}, unknown {extra}")
    return {key: cfg[key] for key in CONFIG_KEYS}


class LayerNorm(nn.Module):
    """LayerNorm over the last axis with a learned ``scale`` and ``shift`` (eps 1e-5), as in the book."""

    def __init__(self, emb_dim: int):
        super().__init__()
        self.eps = 1e-5
        self.scale = nn.Parameter(torch.ones(emb_dim))
        self.shift = nn.Parameter(torch.zeros(emb_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)  # (b, T, 1)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (b, T, 1)
        return self.scale * (x - mean) / torch.sqrt(var + self.eps) + self.shift


class GELU(nn.Module):
    """GELU with the tanh approximation GPT-2 was trained with."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class FeedForward(nn.Module):
    """Linear E -> 4E, GELU, Linear 4E -> E."""

    def __init__(self, cfg: dict):
        super().__init__()
        emb_dim = cfg["emb_dim"]
        self.layers = nn.Sequential(nn.Linear(emb_dim, 4 * emb_dim), GELU(), nn.Linear(4 * emb_dim, emb_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class TransformerBlock(nn.Module):
    """norm1 -> att -> dropout -> + shortcut; norm2 -> ff -> dropout -> + shortcut."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.att = MultiHeadAttention(
            d_in=cfg["emb_dim"],
            d_out=cfg["emb_dim"],
            context_length=cfg["context_length"],
            dropout=cfg["drop_rate"],
            num_heads=cfg["n_heads"],
            qkv_bias=cfg["qkv_bias"],
        )
        self.ff = FeedForward(cfg)
        self.norm1 = LayerNorm(cfg["emb_dim"])
        self.norm2 = LayerNorm(cfg["emb_dim"])
        self.drop_shortcut = nn.Dropout(cfg["drop_rate"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop_shortcut(self.att(self.norm1(x)))  # (b, T, E)
        return x + self.drop_shortcut(self.ff(self.norm2(x)))  # (b, T, E)


class GPTModel(nn.Module):
    """Token ids (b, T) -> logits (b, T, vocab_size)."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = check_config(cfg)
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["emb_dim"])
        self.pos_emb = nn.Embedding(cfg["context_length"], cfg["emb_dim"])
        self.drop_emb = nn.Dropout(cfg["drop_rate"])
        self.trf_blocks = nn.Sequential(*[TransformerBlock(cfg) for _ in range(cfg["n_layers"])])
        self.final_norm = LayerNorm(cfg["emb_dim"])
        self.out_head = nn.Linear(cfg["emb_dim"], cfg["vocab_size"], bias=False)

    def check_ids(self, in_idx: torch.Tensor) -> None:
        """A ValueError naming the numbers for ids of the wrong shape, too many tokens or ids out of the vocabulary."""
        if not isinstance(in_idx, torch.Tensor) or in_idx.ndim != 2 or in_idx.dtype not in (torch.int64, torch.int32):
            shape = tuple(in_idx.shape) if isinstance(in_idx, torch.Tensor) else type(in_idx).__name__
            raise ValueError(f"token ids must be an integer tensor of shape (batch, tokens), got {shape}")
        num_tokens = in_idx.shape[1]
        if not 1 <= num_tokens <= self.cfg["context_length"]:
            raise ValueError(f"{num_tokens} tokens: this model reads 1 to {self.cfg['context_length']}")
        if in_idx.numel() and (in_idx.min() < 0 or in_idx.max() >= self.cfg["vocab_size"]):
            raise ValueError(
                f"token ids must lie in [0, {self.cfg['vocab_size']}), got {int(in_idx.min())}..{int(in_idx.max())}"
            )

    def embed(self, in_idx: torch.Tensor) -> torch.Tensor:
        """(b, T) -> (b, T, E): token plus position embedding, then dropout; in the compute dtype."""
        positions = torch.arange(in_idx.shape[1], device=in_idx.device)  # (T,)
        x = self.tok_emb(in_idx).to(COMPUTE_DTYPE) + self.pos_emb(positions).to(COMPUTE_DTYPE)  # (b, T, E)
        return self.drop_emb(x)

    def blocks(self):
        """Each block as it computes: itself, or a float32 copy of itself when its weights are stored smaller.

        Drop each (``del block``) before asking for the next, or two float32 copies live at once (28 MB each for GPT-2).
        """
        for block in self.trf_blocks:
            yield in_compute_dtype(block)

    def forward(self, in_idx: torch.Tensor) -> torch.Tensor:
        self.check_ids(in_idx)
        x = self.embed(in_idx)  # (b, T, E)
        for block in self.blocks():
            x = block(x)  # (b, T, E)
            del block  # a float32 copy goes before the next is made
        return self.head(x)  # (b, T, V)

    def head(self, x: torch.Tensor) -> torch.Tensor:
        """final_norm then out_head: (b, T, E) -> (b, T, V), float32, the weight cast a slice at a time."""
        x = in_compute_dtype(self.final_norm)(x)  # (b, T, E)
        weight = self.out_head.weight  # (V, E), possibly bfloat16 and tied to tok_emb
        if weight.dtype == COMPUTE_DTYPE:
            return self.out_head(x)
        logits = x.new_empty(*x.shape[:-1], weight.shape[0])  # (b, T, V), filled in place: no second copy
        for i in range(0, weight.shape[0], HEAD_ROWS):
            logits[..., i : i + HEAD_ROWS] = x @ weight[i : i + HEAD_ROWS].to(COMPUTE_DTYPE).T  # (b, T, rows)
        return logits

    @torch.no_grad()
    def residual_inputs(self, in_idx: torch.Tensor, upto: int | None = None) -> list[torch.Tensor]:
        """The residual stream entering each block (b, T, E), for blocks 0..upto (all by default); eval mode."""
        self.check_ids(in_idx)
        last = self.cfg["n_layers"] - 1 if upto is None else upto
        if not 0 <= last < self.cfg["n_layers"]:
            raise ValueError(f"layer {last} does not exist: this model has layers 0..{self.cfg['n_layers'] - 1}")
        streams = [self.embed(in_idx)]
        for _, block in zip(range(last), self.blocks(), strict=False):
            streams.append(block(streams[-1]))
            del block
        return streams

    @torch.no_grad()
    def attention_input(self, in_idx: torch.Tensor, layer: int) -> torch.Tensor:
        """What block ``layer``'s ``att`` receives, norm1 of its residual stream: (b, T, E), float32."""
        stream = self.residual_inputs(in_idx, upto=layer)[-1]  # (b, T, E)
        return in_compute_dtype(self.trf_blocks[layer].norm1)(stream)

    def attention_module(self, layer: int) -> MultiHeadAttention:
        """Block ``layer``'s ``att`` as it computes (a float32 copy when stored smaller). Never mutate it."""
        if not 0 <= layer < self.cfg["n_layers"]:
            raise ValueError(f"layer {layer} does not exist: this model has layers 0..{self.cfg['n_layers'] - 1}")
        return in_compute_dtype(self.trf_blocks[layer].att)

    @torch.no_grad()
    def trace_layer(self, in_idx: torch.Tensor, layer: int) -> Trace:
        """Block ``layer``'s attention traced step by step on its real input."""
        return trace_forward(self.attention_module(layer), self.attention_input(in_idx, layer))

    @torch.no_grad()
    def attention_weights(self, in_idx: torch.Tensor) -> torch.Tensor:
        """Every layer's softmax weights, (layers, b, h, T, T), traced from each real ``att`` on its real input."""
        self.check_ids(in_idx)
        x = self.embed(in_idx)  # (b, T, E)
        weights = []
        for block in self.blocks():
            trace = trace_forward(block.att, block.norm1(x))
            weights.append(trace.steps["attn_weights"])  # (b, h, T, T)
            x = x + block.drop_shortcut(trace.output)  # (b, T, E)
            x = x + block.drop_shortcut(block.ff(block.norm2(x)))  # (b, T, E)
            del block, trace
        return torch.stack(weights)  # (L, b, h, T, T)


def in_compute_dtype(module: nn.Module) -> nn.Module:
    """``module`` itself when its parameters are float32, else a float32 copy (the shared original untouched).

    The copy is made straight from the stored weights (deepcopy's memo hands it each float32 cast), so no second
    copy in the stored dtype is made, and float32 buffers (the causal mask) are shared, not copied: never mutate it.
    """
    first = next(module.parameters(), None)
    if first is None or first.dtype == COMPUTE_DTYPE:
        return module
    memo = {id(b): b.to(COMPUTE_DTYPE) if b.is_floating_point() else b for b in module.buffers()}
    memo.update({id(p): nn.Parameter(p.detach().to(COMPUTE_DTYPE), p.requires_grad) for p in module.parameters()})
    return copy.deepcopy(module, memo)


def count_parameters(model: nn.Module) -> int:
    """Parameters counted once each (a tied out_head is not counted twice)."""
    return sum(p.numel() for p in model.parameters())


# OpenAI's GPT-2 (124M) in the book's GPTModel (chapter 5): the mapping lives in pretrained.py, the download and
# the disk loader in download.py.
GPT2_CONFIG = {
    "vocab_size": 50257,
    "context_length": 1024,
    "emb_dim": 768,
    "n_heads": 12,
    "n_layers": 12,
    "drop_rate": 0.0,
    "qkv_bias": True,
}
