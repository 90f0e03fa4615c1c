"""Attention itself: Listing 3.5 and the general module, the attention step, masks, the book's wrappers, circuits."""
