"""Beam search as in the paper (section 6.1): beam 4, length penalty alpha 0.6, max length
source + 50, early termination.

The search is written against a small step-model interface (start, log_probs, keep), so it runs
on the Transformer with cached keys/values (IncrementalDecoder), on the same Transformer
recomputing the whole prefix every step (RecomputingDecoder: the naive baseline and the check
that caching changes nothing), or on a hand-written table of probabilities in the tests.

Conventions:
- A hypothesis' length counts its tokens including EOS. Each step ranks the 2 x beam best
  extensions of the live hypotheses, and the first `beam` that do not end in EOS stay alive.
- The search takes at most `source length + max_length_offset + 1` steps: at most
  `source length + max_length_offset` tokens come before EOS.
- `decode.finalize` picks one of two whole rule sets, each as its system wrote it:
  - `t2t` (the paper's; tensor2tensor's utils/beam_search.py). Any EOS among the 2 x beam
    candidates finishes a hypothesis (`grow_finished`); its score is
    log P(y | x) / ((5 + length) / 6) ** alpha (Wu et al., 2016). EOS is never forced: a
    sentence whose search reaches the length limit keeps its best finished hypothesis, and only
    when none finished is its best live one returned, unfinished, scored by its log probability
    alone (as t2t's final `tf.where(finished_flags, ...)`).
  - `fairseq` (fairseq's SequenceGenerator): only an EOS among the first `beam` candidates
    finishes; its score is log P(y | x) / length ** alpha (`--lenpen`, normalize_scores); a
    sentence stops once `beam` hypotheses finished; EOS may not come first (min_len 1: no
    empty output); at the length limit only EOS may follow.
  An EOS ranked between beam and 2 x beam can be the best output under t2t and is never seen
  under fairseq, and the two penalties weigh length differently, so the two can pick different
  translations. Greedy search finishes at the single best path's first EOS under either.
- A sentence stops as soon as no live hypothesis can beat its best finished one: log
  probabilities only fall as tokens are added, so a live hypothesis' best possible score is its
  log probability over the largest length penalty it could still reach. This never changes the
  best output of either rule. Finished sentences leave the batch (every step on a CPU, every few
  on a GPU), so the remaining ones decode faster.
- The search's state (scores, the best finished hypothesis of each sentence) stays on the
  device: the host reads it only to decide which sentences leave, and once at the end.
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

from aiayn.decode.incremental import (
    FixedRowCache,
    compiled_step,
    decode_step,
    decode_step_fixed,
    start_cache,
)
from aiayn.decode.settings import DecodeSettings, check_decoder
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID, round_up


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    log_prob: float  # log P(tokens + EOS | source); unfinished: log P(tokens | source)
    score: float  # log_prob / lp(len(tokens) + 1); unfinished: log_prob
    finished: bool = True  # False: t2t reached the length limit with nothing finished


def length_penalty(length, alpha: float, finalize: str = "t2t"):
    """The score's divisor for a hypothesis of |Y| tokens counting EOS (a number or a tensor):
    t2t ((5 + |Y|) / 6) ** alpha (Wu et al., 2016), fairseq |Y| ** alpha."""
    if finalize == "fairseq":
        return length**alpha
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


class Finished:
    """The best finished hypothesis of each sentence, kept on the search's device so that
    recording one needs no round trip to the host."""

    def __init__(self, batch: int, longest: int, device: torch.device):
        self.score = torch.full((batch,), -math.inf, device=device)
        self.log_prob = torch.full((batch,), -math.inf, device=device)
        self.length = torch.zeros(batch, dtype=torch.long, device=device)
        self.tokens = torch.full((batch, longest), PAD_ID, dtype=torch.long, device=device)
        self.count = torch.zeros(batch, dtype=torch.long, device=device)  # hypotheses ended
        self.complete = torch.ones(batch, dtype=torch.bool, device=device)

    def offer(self, sentences, score, log_prob, tokens) -> None:
        """Each sentence's best hypothesis ended at this step: score, log_prob (n,), tokens
        (n, t), or score -inf for none. Only a strictly better one replaces the best so far, so
        among equal scores the first found stays."""
        better = score > self.score[sentences]  # (n,)
        self.score[sentences] = torch.where(better, score, self.score[sentences])
        self.log_prob[sentences] = torch.where(better, log_prob, self.log_prob[sentences])
        length = tokens.size(1)
        self.length[sentences] = torch.where(better, length, self.length[sentences])
        kept = self.tokens[sentences, :length]
        self.tokens[sentences, :length] = torch.where(better.unsqueeze(1), tokens, kept)

    def offer_unfinished(self, sentences, last, log_prob, tokens) -> None:
        """t2t's fallback: a sentence at its last step (`last`, (n,)) with nothing finished
        keeps its best live hypothesis, log_prob (n,) and tokens (n, t), marked unfinished."""
        missing = last & torch.isinf(self.score[sentences]) & torch.isfinite(log_prob)
        self.offer(sentences, torch.where(missing, log_prob, -math.inf), log_prob, tokens)
        self.complete[sentences] &= ~missing

    def hypotheses(self) -> list[Hypothesis]:
        rows = zip(
            self.tokens.tolist(),
            self.length.tolist(),
            self.log_prob.tolist(),
            self.score.tolist(),
            self.complete.tolist(),
            strict=True,
        )
        return [Hypothesis(t[:n], log_p, score, done) for t, n, log_p, score, done in rows]


def default_drop_every(device: torch.device) -> int:
    """Finished sentences leave the batch every step on a CPU, where each row costs its
    arithmetic; on a GPU only every few steps, since deciding which left waits for the device."""
    return 1 if device.type == "cpu" else 4


@torch.no_grad()
def beam_search(
    model: StepModel,
    source: torch.Tensor,
    source_lengths: torch.Tensor,
    settings: DecodeSettings,
    position_limit: int | None = None,
    drop_every: int | None = None,
) -> list[Hypothesis]:
    """Best hypothesis of every sentence of source (B, S); source_lengths (B,) exclude EOS.

    With a `position_limit` (learned positions), BOS and the tokens after it must fit in it, as
    in training: at most position_limit - 1 tokens come before EOS, whatever the offset allows.
    The search state stays on the device; the host looks at it once every `drop_every` steps
    (default_drop_every), to drop the finished sentences or stop. Finished sentences kept in
    the batch meanwhile change nothing: their rows are computed but never recorded.
    """
    k, alpha, rule = settings.beam_size, settings.alpha, settings.finalize
    finalize_all = rule == "t2t" and settings.search == "beam"
    fairseq = rule == "fairseq"
    device, batch = source.device, source.size(0)
    drop_every = drop_every or default_drop_every(device)
    max_length = source_lengths.cpu() + settings.max_length_offset  # (B,), on the host
    if position_limit is not None:
        max_length = max_length.clamp(max=position_limit - 1)  # last input at max_length
    limit = max_length.to(device)
    model.start(source, k)
    prefix = torch.full((batch * k, 1), BOS_ID, dtype=torch.long, device=device)
    alive = torch.full((batch, k), -math.inf, device=device)
    alive[:, 0] = 0.0  # all beams start as the same empty hypothesis: expand only one
    active = torch.arange(batch, device=device)  # the sentence of each block of k rows
    active_limits = max_length  # the host's copy of limit[active]
    finished = Finished(batch, int(max_length.max()) + 1, device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # (n,) nothing more to record
    for t in range(int(max_length.max()) + 1):
        n = active.numel()
        log_probs = model.log_probs(prefix).float()  # (n*k, V)
        vocab = log_probs.size(-1)
        log_probs[:, PAD_ID] = log_probs[:, BOS_ID] = -math.inf
        at_limit = limit[active] <= t  # (n,)
        reaching_limit = bool((active_limits <= t).any())  # the host's copy: no device wait
        if fairseq and t == 0:  # fairseq's min_len 1: the output is never empty
            log_probs[:, EOS_ID] = -math.inf
        if fairseq and reaching_limit:  # only EOS may follow
            log_probs = only_eos_at(log_probs, at_limit.repeat_interleave(k))
        candidates = (alive.unsqueeze(2) + log_probs.view(n, k, vocab)).view(n, k * vocab)
        scores, index = ranked_candidates(candidates, min(2 * k, k * vocab))
        beam_of, token_of = index // vocab, index % vocab
        is_eos = token_of == EOS_ID
        ending = scores.size(1) if finalize_all else k  # candidates whose EOS finishes
        ends = is_eos[:, :ending] & torch.isfinite(scores[:, :ending]) & ~done.unsqueeze(1)
        penalty = length_penalty(t + 1, alpha, rule)
        ended = torch.where(ends, scores[:, :ending] / penalty, -math.inf)
        best_score, best = ended.max(dim=1)  # the first of equal scores
        rows = torch.arange(n, device=device) * k + beam_of.gather(1, best.unsqueeze(1))[:, 0]
        log_prob = scores.gather(1, best.unsqueeze(1))[:, 0]
        finished.offer(active, best_score, log_prob, prefix[rows, 1:])
        stay = is_eos.long().argsort(dim=1, stable=True)[:, :k]  # first k non-EOS, in rank order
        alive = scores.gather(1, stay)  # (n, k)
        rows = torch.arange(n, device=device).unsqueeze(1) * k + beam_of.gather(1, stay)
        tokens = token_of.gather(1, stay)  # (n, k)
        if not fairseq and reaching_limit:  # t2t: the best live one, if nothing finished
            grown = torch.cat([prefix[rows[:, 0], 1:], tokens[:, :1]], dim=1)  # (n, t + 1)
            finished.offer_unfinished(active, at_limit & ~done, alive[:, 0], grown)
        done = done | at_limit | ~torch.isfinite(alive).any(dim=1)
        if settings.search == "greedy":
            done |= torch.isfinite(finished.score[active])
        else:
            bound = best_possible(alive, t, limit[active], alpha, rule)
            done |= finished.score[active] >= bound
        if fairseq:  # a sentence stops once beam hypotheses finished
            finished.count[active] += ends.sum(dim=1)
            done |= finished.count[active] >= k
        if (t + 1) % drop_every == 0:
            # One device wait per check: `done` comes to the host once, and the sentences that
            # stay are picked by an index made there (a boolean mask on the device would make
            # every tensor it picks from wait to learn its size).
            stays = (~done).cpu().nonzero().squeeze(1)  # (n',) on the host
            if stays.numel() == 0:
                break
            if stays.numel() < n:  # the finished sentences leave the batch
                keep = stays.to(device, non_blocking=True)
                active, alive, rows, tokens, done = (
                    active[keep],
                    alive[keep],
                    rows[keep],
                    tokens[keep],
                    done[keep],
                )
                active_limits = active_limits[stays]
        rows = rows.view(-1)
        model.keep(rows)
        prefix = torch.cat([prefix[rows], tokens.view(-1, 1)], dim=1)
    return finished.hypotheses()


def only_eos_at(log_probs: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """At these rows (R,) only EOS may follow, even if improbable; the others are untouched."""
    forced = torch.full_like(log_probs, -math.inf)
    forced[:, EOS_ID] = log_probs[:, EOS_ID].clamp(min=-1e9)
    return torch.where(rows.unsqueeze(1), forced, log_probs)


def best_possible(
    alive: torch.Tensor, t: int, max_length: torch.Tensor, alpha: float, finalize: str
):
    """The best score a live hypothesis (t + 1 tokens, no EOS yet) could still finish with.

    Its log probability (<= 0) can only fall; it ends with t + 2 to max_length + 1 tokens, so it
    is divided by at most the larger of those lengths' penalties.
    """
    largest_penalty = torch.maximum(
        torch.full_like(alive[:, 0], length_penalty(t + 2, alpha, finalize)),
        length_penalty(max_length.float() + 1, alpha, finalize),
    )
    return alive.max(dim=1).values / largest_penalty  # (n,)


class IncrementalDecoder:
    """The Transformer one position per step: cached self-attention keys/values, the encoder
    output's keys/values projected once per sentence and shared by its beams (never copied per
    beam, and only re-indexed when sentences leave the batch)."""

    def __init__(self, model, cache: str = "gather", compiled: bool = False):
        check_decoder(cache, compiled)
        self.model, self.layout = model, cache
        self.decode_step = compiled_step() if compiled else decode_step

    def start(self, source: torch.Tensor, beam: int) -> None:
        self.beam = beam
        self.memory_mask = self.model.source_mask(source)  # (B, 1, 1, S)
        self.cache = start_cache(self.model, self.model.encode(source))
        self.reorder = None
        self.rows = None
        if self.layout == "ancestry":
            self.rows = FixedRowCache(len(self.model.decoder), source.size(0), beam, source.device)

    def log_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        position, last = prefix.size(1) - 1, prefix[:, -1:].contiguous()
        if self.rows is not None:
            logits = decode_step_fixed(
                self.model, last, position, self.cache, self.rows, self.memory_mask
            )
        else:
            logits = self.decode_step(
                self.model, last, position, self.cache, self.memory_mask, self.reorder
            )
        self.reorder = None
        return F.log_softmax(logits.float(), dim=-1)

    def keep(self, rows: torch.Tensor) -> None:
        """Sentences that left drop their memory now; the kept hypotheses' cached keys/values
        are gathered at the next step, in the same pass that appends the new position (or,
        with the ancestry cache, stay where they are while the ancestry table is reordered)."""
        sentences = rows[:: self.beam] // self.beam  # each block of beam rows is one sentence
        dropped = sentences.numel() != self.memory_mask.size(0)
        if dropped:
            self.memory_mask = self.memory_mask[sentences]
            for layer in self.cache:
                layer["memory_k"], layer["memory_v"] = (
                    layer["memory_k"][sentences],
                    layer["memory_v"][sentences],
                )
        if self.rows is not None:
            self.rows.reorder(
                sentences if dropped else None, (rows % self.beam).view(-1, self.beam)
            )
            return
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
