"""Stages subword and binarize: one sentencepiece BPE shared by both languages, and the
token ids in memmaps that training and decoding read."""
