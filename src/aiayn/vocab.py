"""The special token ids every stage agrees on, without asking the BPE model, and how far PAD
pads a sequence.

The subword trainer reserves these ids; binarized arrays, the batches, the loss and the decoder
use them. They live apart from subword.py so that only the code that trains or applies BPE
imports sentencepiece, and so that editing the BPE trainer reruns BPE, not training or decoding.
"""

import math

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


def round_up(length: int, multiple: int) -> int:
    """`length` padded with PAD_ID to a multiple of `multiple`: training's and decoding's
    batches pad their sequences alike (multiples of 8 suit tensor cores)."""
    return int(math.ceil(length / multiple) * multiple)
