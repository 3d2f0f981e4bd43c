"""The training objective of section 5.4: cross-entropy against label-smoothed targets."""

from __future__ import annotations

import torch.nn.functional as F

from aiayn.vocab import PAD_ID


def label_smoothed_loss(logits, target, epsilon: float, pad_id: int = PAD_ID):
    """Sums over non-pad tokens of the smoothed loss and of the plain NLL (for perplexity).

    The smoothed target puts 1 - epsilon on the reference token and epsilon spread evenly over the
    vocabulary (as torch's cross_entropy(label_smoothing=epsilon)).
    """
    lprobs = F.log_softmax(logits.float(), dim=-1).view(-1, logits.size(-1))  # (B*T, V)
    target = target.reshape(-1)
    keep = target != pad_id
    nll = -lprobs.gather(1, target.unsqueeze(1)).squeeze(1)[keep]
    uniform = -lprobs.mean(dim=-1)[keep]
    return ((1.0 - epsilon) * nll + epsilon * uniform).sum(), nll.sum()
