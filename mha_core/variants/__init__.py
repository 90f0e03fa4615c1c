"""Attention as today's models build it: the KV cache, GQA and MQA, latent attention, sliding windows, their bytes."""
