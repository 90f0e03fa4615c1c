"""The tiny model a task trains: embeddings, 1-2 residual layers of the real ``MultiHeadAttention``, a read-out.

There is no MLP and no LayerNorm: what a layer writes into the residual stream is exactly its attention
output, so the weights shown are what does the work.

Axis letters: b batch, T tokens, h heads, d d_model, v vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from mha_core.attention.modules import MultiHeadAttention, trace_forward


class TinyAttentionModel(nn.Module):
    """Embeddings, 1-2 residual layers of the real ``MultiHeadAttention``, a linear read-out.

    ``forward``: tokens (b, T) -> logits (b, T, vocab_size).
    """

    def __init__(self, vocab_size: int, context_length: int, d_model: int, num_heads: int, num_layers: int):
        super().__init__()
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(context_length, d_model)
        self.layers = nn.ModuleList(
            MultiHeadAttention(d_model, d_model, context_length, dropout=0.0, num_heads=num_heads)
            for _ in range(num_layers)
        )
        self.readout = nn.Linear(d_model, vocab_size)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """(b, T) -> (b, T, d): token plus position embedding, the first layer's input."""
        positions = torch.arange(tokens.shape[-1], device=tokens.device)  # (T,)
        return self.token_embedding(tokens) + self.position_embedding(positions)  # (b, T, d)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)  # (b, T, d)
        for layer in self.layers:
            x = x + layer(x)  # (b, T, d): each layer adds its attention output to the residual stream
        return self.readout(x)  # (b, T, v)

    @torch.no_grad()
    def layer_inputs(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """What each layer's attention module receives, (b, T, d) per layer."""
        inputs = [self.embed(tokens)]
        for layer in self.layers[:-1]:
            inputs.append(inputs[-1] + layer(inputs[-1]))
        return inputs

    @torch.no_grad()
    def attention_weights(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """Softmax weights (b, h, T, T) per layer, traced from each real module on its actual input."""
        weights = []
        x = self.embed(tokens)  # (b, T, d)
        for layer in self.layers:
            trace = trace_forward(layer, x)
            weights.append(trace.steps["attn_weights"])  # (b, h, T, T)
            x = x + trace.output  # (b, T, d)
        return weights
