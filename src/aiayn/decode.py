"""Beam search as in the paper (section 6.1): beam 4, length penalty alpha 0.6, max length
source + 50, early termination.

The search is written against a small step-model interface (start, log_probs, keep), so it runs
on the Transformer with cached keys/values (IncrementalDecoder), on the same Transformer
recomputing the whole prefix every step (RecomputingDecoder: the naive baseline and the check
that caching changes nothing), or on a hand-written table of probabilities in the tests.

Conventions (those of tensor2tensor and fairseq):
- A hypothesis' length counts its tokens including EOS; its score is
  log P(y | x) / lp(length) with lp(length) = ((5 + length) / 6) ** alpha (Wu et al., 2016).
- At most `source length + max_length_offset` tokens come before EOS; then EOS is forced.
- Each step ranks the 2 x beam best extensions of the live hypotheses; an EOS among the first
  `beam` of them finishes a hypothesis, and the first `beam` others stay alive.
- A sentence stops as soon as no live hypothesis can beat its best finished one: log
  probabilities only fall as tokens are added, so a live hypothesis' best possible score is its
  log probability over the largest length penalty it could still reach. Finished sentences leave
  the batch, so the remaining ones decode faster.
- Equal scores are ranked by lower beam index, then lower token id; among equally scored
  finished hypotheses the first found wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F

from aiayn.batching import round_up
from aiayn.decode_settings import DecodeSettings
from aiayn.incremental import decode_step, start_cache
from aiayn.subword import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    log_prob: float  # log P(tokens + EOS | source)
    score: float  # log_prob / lp(len(tokens) + 1)


def length_penalty(length, alpha: float):
    """lp(Y) = ((5 + |Y|) / 6) ** alpha, |Y| counting EOS (a number or a tensor of them)."""
    return ((5.0 + length) / 6.0) ** alpha


class StepModel(Protocol):
    def start(self, source: torch.Tensor, beam: int) -> None:
        """Prepare for source (B, S); the rows of later calls are B x beam, sentence-major."""

    def log_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        """prefix (R, t) starting with BOS -> log-probabilities (R, V) of the next token."""

    def keep(self, rows: torch.Tensor) -> None:
        """Keep (and reorder) these rows of the state: beams chosen, finished sentences gone."""


def ranked_candidates(scores: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `count` best entries of each row of scores (n, k*V), best first, ties by lower index."""
    top_scores, top_index = scores.topk(count, dim=1)
    top_index, by_index = top_index.sort(dim=1)
    top_scores = top_scores.gather(1, by_index)
    top_scores, by_score = top_scores.sort(dim=1, descending=True, stable=True)
    return top_scores, top_index.gather(1, by_score)


@torch.no_grad()
def beam_search(
    model: StepModel,
    source: torch.Tensor,
    source_lengths: torch.Tensor,
    settings: DecodeSettings,
    position_limit: int | None = None,
) -> list[Hypothesis]:
    """Best hypothesis of every sentence of source (B, S); source_lengths (B,) exclude EOS.

    With a `position_limit` (learned positions), BOS and the tokens after it must fit in it, as
    in training: at most position_limit - 1 tokens come before EOS, whatever the offset allows.
    """
    k, alpha = settings.beam_size, settings.alpha
    device, batch = source.device, source.size(0)
    max_length = source_lengths.to(device) + settings.max_length_offset  # (B,)
    if position_limit is not None:
        max_length = max_length.clamp(max=position_limit - 1)  # last input at max_length
    model.start(source, k)
    prefix = torch.full((batch * k, 1), BOS_ID, dtype=torch.long, device=device)
    alive = torch.full((batch, k), -math.inf, device=device)
    alive[:, 0] = 0.0  # all beams start as the same empty hypothesis: expand only one
    active = torch.arange(batch, device=device)  # the sentence of each block of k rows
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    best_finished = torch.full((batch,), -math.inf, device=device)
    for t in range(int(max_length.max()) + 1):
        n = active.numel()
        log_probs = model.log_probs(prefix).float()  # (n*k, V)
        vocab = log_probs.size(-1)
        log_probs[:, PAD_ID] = log_probs[:, BOS_ID] = -math.inf
        at_limit = max_length[active] <= t  # (n,)
        if at_limit.any():  # the longest allowed: only EOS may follow
            rows = at_limit.repeat_interleave(k)
            eos = log_probs[rows, EOS_ID].clamp(min=-1e9)  # forced, even if improbable
            log_probs[rows] = -math.inf
            log_probs[rows, EOS_ID] = eos
        candidates = (alive.unsqueeze(2) + log_probs.view(n, k, vocab)).view(n, k * vocab)
        scores, index = ranked_candidates(candidates, min(2 * k, k * vocab))
        beam_of, token_of = index // vocab, index % vocab
        is_eos = token_of == EOS_ID
        ends = is_eos[:, :k] & torch.isfinite(scores[:, :k])
        if ends.any():
            i, j = ends.nonzero(as_tuple=True)
            log_prob = scores[i, j]
            score = log_prob / length_penalty(t + 1, alpha)
            best_finished.scatter_reduce_(0, active[i], score, reduce="amax")
            ended = zip(
                active[i].tolist(),
                prefix[i * k + beam_of[i, j], 1:].tolist(),
                log_prob.tolist(),
                score.tolist(),
                strict=True,
            )
            for sentence, tokens, log_p, normalized in ended:
                finished[sentence].append(Hypothesis(tokens, log_p, normalized))
        stay = is_eos.long().argsort(dim=1, stable=True)[:, :k]  # first k non-EOS, in rank order
        alive = scores.gather(1, stay)  # (n, k)
        rows = torch.arange(n, device=device).unsqueeze(1) * k + beam_of.gather(1, stay)
        done = at_limit | ~torch.isfinite(alive).any(dim=1)
        if settings.search == "greedy":
            done |= torch.isfinite(best_finished[active])
        else:
            done |= best_finished[active] >= best_possible(alive, t, max_length[active], alpha)
        if done.all():
            break
        keep = ~done
        active, alive, rows = active[keep], alive[keep], rows[keep].view(-1)
        model.keep(rows)
        prefix = torch.cat([prefix[rows], token_of.gather(1, stay)[keep].view(-1, 1)], dim=1)
    return [max(hypotheses, key=lambda h: h.score) for hypotheses in finished]


def best_possible(alive: torch.Tensor, t: int, max_length: torch.Tensor, alpha: float):
    """The best score a live hypothesis (t + 1 tokens, no EOS yet) could still finish with.

    Its log probability (<= 0) can only fall; it ends with t + 2 to max_length + 1 tokens, so it
    is divided by at most the larger of those lengths' penalties.
    """
    largest_penalty = torch.maximum(
        torch.full_like(alive[:, 0], length_penalty(t + 2, alpha)),
        length_penalty(max_length.float() + 1, alpha),
    )
    return alive.max(dim=1).values / largest_penalty  # (n,)


class IncrementalDecoder:
    """The Transformer one position per step: cached self-attention keys/values, the encoder
    output's keys/values projected once per sentence and shared by its beams (never copied per
    beam, and only re-indexed when sentences leave the batch)."""

    def __init__(self, model):
        self.model = model

    def start(self, source: torch.Tensor, beam: int) -> None:
        self.beam = beam
        self.memory_mask = self.model.source_mask(source)  # (B, 1, 1, S)
        self.cache = start_cache(self.model, self.model.encode(source))
        self.reorder = None

    def log_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        position = prefix.size(1) - 1
        logits = decode_step(
            self.model, prefix[:, -1:], position, self.cache, self.memory_mask, self.reorder
        )
        self.reorder = None
        return F.log_softmax(logits.float(), dim=-1)

    def keep(self, rows: torch.Tensor) -> None:
        """Sentences that left drop their memory now; the kept hypotheses' cached keys/values
        are gathered at the next step, in the same pass that appends the new position."""
        sentences = rows[:: self.beam] // self.beam  # each block of beam rows is one sentence
        if sentences.numel() != self.memory_mask.size(0):
            self.memory_mask = self.memory_mask[sentences]
            for layer in self.cache:
                layer["memory_k"], layer["memory_v"] = (
                    layer["memory_k"][sentences],
                    layer["memory_v"][sentences],
                )
        self.reorder = rows if self.reorder is None else self.reorder[rows]


class RecomputingDecoder:
    """The naive way: run the whole decoder over the whole prefix at every step."""

    def __init__(self, model):
        self.model = model

    def start(self, source: torch.Tensor, beam: int) -> None:
        self.source = source.repeat_interleave(beam, dim=0)
        self.memory = self.model.encode(source).repeat_interleave(beam, dim=0)

    def log_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        logits = self.model.decode(prefix, self.memory, self.source)[:, -1]
        return F.log_softmax(logits.float(), dim=-1)

    def keep(self, rows: torch.Tensor) -> None:
        self.source, self.memory = self.source[rows], self.memory[rows]


def length_sorted_batches(
    lengths: np.ndarray, batch_tokens: int, pad_to: int = 8
) -> list[np.ndarray]:
    """Sentence indices, longest first, cut so that sentences x padded length <= batch_tokens."""
    order = np.argsort(-np.asarray(lengths), kind="stable")
    batches, current, longest = [], [], 0
    for index in order:
        padded = round_up(int(lengths[index]) + 1, pad_to)  # + EOS
        if current and (len(current) + 1) * max(longest, padded) > batch_tokens:
            batches.append(np.array(current))
            current, longest = [], 0
        current.append(index)
        longest = max(longest, padded)
    if current:
        batches.append(np.array(current))
    return batches


def source_batch(
    sentences: list[np.ndarray], pad_to: int = 8, max_width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded source ids (B, S) with EOS appended, as in training, and the lengths without EOS.

    Padding stops at `max_width` (the model's position limit), which the sentences must fit.
    """
    lengths = torch.tensor([len(s) for s in sentences])
    width = round_up(int(lengths.max()) + 1, pad_to)
    if max_width is not None:
        width = min(width, max_width)
    source = torch.full((len(sentences), width), PAD_ID, dtype=torch.long)
    for row, ids in enumerate(sentences):
        source[row, : len(ids)] = torch.as_tensor(np.asarray(ids, dtype=np.int64))
        source[row, len(ids)] = EOS_ID
    return source, lengths
