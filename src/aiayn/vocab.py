"""The special token ids every stage agrees on, without asking the BPE model.

The subword trainer reserves these ids; binarized arrays, the batches, the loss and the decoder
use them. They live apart from subword.py so that only the code that trains or applies BPE
imports sentencepiece, and so that editing the BPE trainer reruns BPE, not training or decoding.
"""

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
