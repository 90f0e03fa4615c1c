"""The book's GPT (chapters 4-5): the model, GPT-2's weights, the shipped model's data, training and probes."""
