"""Stage decode: the settings, the cached decoder step, beam search, and translating a
binarized split or raw lines."""
