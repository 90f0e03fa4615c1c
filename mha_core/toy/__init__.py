"""Tiny models of the real module trained on synthetic tasks, so that heads learn patterns worth seeing."""
