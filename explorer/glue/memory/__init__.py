"""Memory: the byte budget, the admission gate in front of every heavy run, the byte-bounded caches, idle clean-up."""
