"""Beam search against hand-written per-step probabilities (as fairseq tests its generator), and
the Transformer's cached decoding against full recomputation."""

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from aiayn.decode.incremental import appended, decode_step, start_cache
from aiayn.decode.search import (
    IncrementalDecoder,
    RecomputingDecoder,
    beam_search,
    length_penalty,
    length_sorted_batches,
    source_batch,
)
from aiayn.decode.settings import DecodeSettings
from aiayn.decode.translate import cut_to_limit, translate
from aiayn.errors import InputError
from aiayn.model import Transformer
from aiayn.model_config import build_config
from aiayn.report.attention import encoder_attention
from aiayn.vocab import EOS_ID

W1, W2 = 4, 5  # two "words" after pad 0, unk 1, bos 2, eos 3
VOCAB = 6


class TableModel:
    """Next-token probabilities looked up by (first source token, generated prefix)."""

    def __init__(self, table, default=None):
        self.table, self.default, self.calls, self.rows_seen = table, default, 0, []

    def start(self, source, beam):
        self.keys = source[:, 0].repeat_interleave(beam).tolist()

    def log_probs(self, prefix):
        self.calls += 1
        self.rows_seen.append(prefix.size(0))
        rows = []
        for key, row in zip(self.keys, prefix.tolist(), strict=True):
            if any(token < W1 for token in row[1:]):  # a dead beam (score -inf) extended
                rows.append([1 / VOCAB] * VOCAB)
                continue
            probs = self.table.get((key, tuple(row[1:])), self.default)
            assert probs is not None, f"the search asked for an unexpected prefix {row}"
            rows.append(probs)
        return torch.tensor(rows, dtype=torch.float64).log()

    def keep(self, rows):
        self.keys = [self.keys[r] for r in rows.tolist()]


def dist(eos=0.0, w1=0.0, w2=0.0):
    return [0.0, 0.0, 0.0, eos, w1, w2]


def search_inputs(source_lengths, first_tokens=None):
    first_tokens = first_tokens or [7] * len(source_lengths)
    source = torch.full((len(source_lengths), 2), EOS_ID)
    source[:, 0] = torch.tensor(first_tokens)
    return source, torch.tensor(source_lengths)


def search(model, source_lengths=(1,), first_tokens=None, **settings):
    options = {"beam": 2, "max_length_offset": 2, **settings}
    inputs = search_inputs(source_lengths, first_tokens)
    return beam_search(model, *inputs, DecodeSettings(**options))


# Step 0: EOS 0.5 or W1 0.5; after W1: EOS 0.9. The empty output has log(0.5) at length 1 (lp 1);
# [W1] has log(0.45) at length 2, lp (7/6)^alpha.
TWO_PATHS = {(7, ()): dist(eos=0.5, w1=0.5), (7, (W1,)): dist(eos=0.9, w1=0.1)}


def test_length_penalty_formula():
    assert length_penalty(1, 0.6) == 1.0
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(10, 0.0) == 1.0


def test_every_alpha_the_settings_take_gives_the_longest_output_a_finite_penalty():
    """At the schema's largest alpha and the longest output its settings allow, both rules'
    penalties are floats, in Python and in float32 tensors (alpha 1e308 was an OverflowError
    traceback mid-search, and 36 a torch overflow in `aiayn lengths`); past it, the settings
    refuse the alpha."""
    from aiayn.config.schema import section_properties
    from aiayn.decode.settings import DEFAULTS, MAX_ALPHA, MAX_LENGTH_OFFSET

    longest = section_properties("decode")["max_source_tokens"]["maximum"] + MAX_LENGTH_OFFSET
    for finalize in ("t2t", "fairseq"):
        assert math.isfinite(length_penalty(longest + 1, MAX_ALPHA, finalize))
        lengths = torch.tensor([1.0, longest + 1])
        assert torch.isfinite(length_penalty(lengths, MAX_ALPHA, finalize)).all()
    DecodeSettings(alpha=MAX_ALPHA)
    for alpha in (math.nextafter(MAX_ALPHA, math.inf), 1e308):
        with pytest.raises(ValueError, match="decode.alpha must be a number from 0 to 5, not"):
            DecodeSettings(alpha=alpha)
    assert 0 <= DEFAULTS["alpha"] <= MAX_ALPHA


def test_without_length_penalty_the_shorter_output_wins_and_search_stops_early():
    model = TableModel(TWO_PATHS)
    (best,) = search(model, alpha=0.0)
    assert best.tokens == []
    assert best.score == pytest.approx(math.log(0.5))
    # EOS and W1 tie at step 0; EOS (lower id) ranks first and finishes. The live [W1] can at
    # best reach log(0.5) / lp = log(0.5) with alpha 0: it cannot beat the finished one.
    assert model.calls == 1


@pytest.mark.parametrize(
    ("alpha", "tokens", "score"),
    [
        (0.6, [], math.log(0.5)),  # log(0.45) / (7/6)^0.6 = -0.728 < -0.693
        (1.0, [W1], math.log(0.45) / (7 / 6)),  # -0.684 > -0.693
    ],
)
def test_length_penalty_changes_the_winner(alpha, tokens, score):
    model = TableModel(TWO_PATHS)
    (best,) = search(model, alpha=alpha)
    assert best.tokens == tokens
    assert best.score == pytest.approx(score)
    assert best.log_prob == pytest.approx(math.log(0.5) if not tokens else math.log(0.45))
    assert model.calls == 2


# Beam 2, alpha 0 (scores are log probabilities). Step 0: W1 0.5, W2 0.3, EOS 0.2: the EOS ranks
# third, inside the 2 x beam candidates but outside the first beam. Step 1: [W1 W1] and [W1 W2]
# 0.2 each, [W2 EOS] 0.15, [W1 EOS] 0.1. Step 2: [W1 W1 EOS] 0.18, [W1 W2 EOS] 0.1.
EOS_RANKED_THIRD = {
    (7, ()): dist(eos=0.2, w1=0.5, w2=0.3),
    (7, (W1,)): dist(eos=0.2, w1=0.4, w2=0.4),
    (7, (W2,)): dist(eos=0.5, w1=0.25, w2=0.25),
    (7, (W1, W1)): dist(eos=0.9, w1=0.05, w2=0.05),
    (7, (W1, W2)): dist(eos=0.5, w1=0.25, w2=0.25),
}


def test_t2t_finishes_an_eos_anywhere_among_the_2k_candidates():
    """tensor2tensor's grow_finished: the step-0 EOS (rank 3 of 4) finishes the empty output at
    log 0.2; after step 1 both live hypotheses are at log 0.2, which cannot beat it: stop."""
    model = TableModel(EOS_RANKED_THIRD)
    (best,) = search(model, alpha=0.0, finalize="t2t")
    assert best.tokens == []
    assert best.log_prob == pytest.approx(math.log(0.2)) and best.score == best.log_prob
    assert model.calls == 2


def test_fairseq_finishes_only_an_eos_among_the_first_k_candidates():
    """fairseq's rule never sees the step-0 EOS, nor [W2 EOS] (rank 3 at step 1); at step 2 both
    EOS rank in the first two: [W1 W1] wins at log 0.18, below t2t's 0.2."""
    model = TableModel(EOS_RANKED_THIRD)
    (best,) = search(model, alpha=0.0, finalize="fairseq")
    assert best.tokens == [W1, W1]
    assert best.log_prob == pytest.approx(math.log(0.5 * 0.4 * 0.9))
    assert model.calls == 3


# Step 0: W1 0.6, W2 0.4, no EOS. Step 1: [W1 EOS] and [W1 W1] 0.3 each, [W2 EOS] 0.2.
EOS_FROM_STEP_1 = {
    (7, ()): dist(w1=0.6, w2=0.4),
    (7, (W1,)): dist(eos=0.5, w1=0.5),
    (7, (W2,)): dist(eos=0.5, w2=0.5),
}


@pytest.mark.parametrize("finalize", ["t2t", "fairseq"])
def test_the_two_rules_agree_when_every_eos_ranks_in_the_first_k(finalize):
    """Alpha 0: both penalties are 1; step 1's [W1 EOS] ties [W1 W1] and ranks first (lower
    id): it finishes under both rules, and the live [W1 W1] cannot beat it."""
    model = TableModel(EOS_FROM_STEP_1)
    (best,) = search(model, alpha=0.0, finalize=finalize)
    assert best.tokens == [W1] and best.score == pytest.approx(math.log(0.3))
    assert model.calls == 2


@pytest.mark.parametrize("finalize", ["t2t", "fairseq"])
def test_greedy_stops_at_the_best_paths_first_eos_under_either_rule(finalize):
    model = TableModel(EOS_RANKED_THIRD)
    (best,) = search(model, alpha=0.0, search="greedy", finalize=finalize)
    assert best.tokens == [W1, W1]  # W1, then W1 (tie with W2, lower id), then EOS 0.9
    assert best.log_prob == pytest.approx(math.log(0.5 * 0.4 * 0.9))


def test_an_unknown_finalize_rule_is_refused():
    with pytest.raises(ValueError, match="decode.finalize must be 't2t' or 'fairseq'"):
        DecodeSettings(finalize="marian")


@pytest.mark.parametrize("finalize", ["t2t", "fairseq"])
def test_the_output_is_as_long_as_allowed_when_longer_scores_better(finalize):
    # Every step: W1 0.9, EOS 0.1. With alpha 1 longer is better under both penalties: the
    # score of n words, (n log 0.9 + log 0.1) / lp(n + 1), keeps rising.
    model = TableModel({}, default=dist(eos=0.1, w1=0.9))
    (best,) = search(model, source_lengths=(1,), alpha=1.0, finalize=finalize)
    assert best.finished
    if finalize == "t2t":
        assert best.tokens == [W1, W1, W1]  # source length 1 + max_length_offset 2
        assert best.score == pytest.approx((3 * math.log(0.9) + math.log(0.1)) / 1.5)
        assert model.calls == 4  # steps 0..3: step 3's EOS, second of the 2k, ends it
        (longer,) = search(TableModel({}, default=dist(eos=0.1, w1=0.9)), (4,), alpha=1.0)
        assert longer.tokens == [W1] * 6
    else:  # EOS may not come first; then each step's EOS ranks second, in the first beam:
        # [W1] and [W1 W1] finish, and with beam (2) hypotheses finished it stops
        assert best.tokens == [W1, W1]
        assert best.score == pytest.approx((2 * math.log(0.9) + math.log(0.1)) / 3)
        assert model.calls == 3


def test_fairseq_forces_eos_at_the_length_limit_even_when_eos_is_impossible():
    model = TableModel({}, default=dist(w1=1.0))
    (best,) = search(model, alpha=0.6, max_length_offset=1, finalize="fairseq")
    assert best.tokens == [W1, W1] and best.finished
    assert best.score < -1e8


def test_t2t_returns_the_best_live_hypothesis_only_when_none_finished():
    """tensor2tensor never forces EOS: at the limit (3 steps) nothing has finished, so the best
    live hypothesis comes back unfinished, one token longer than a forced EOS would leave it,
    scored by its log probability alone."""
    model = TableModel({}, default=dist(w1=0.5, w2=0.25))  # log P < 0: a divided score shows
    (best,) = search(model, alpha=0.6, max_length_offset=1, finalize="t2t")
    assert best.tokens == [W1, W1, W1] and not best.finished
    assert best.log_prob == pytest.approx(3 * math.log(0.5))
    assert best.score == best.log_prob  # not divided by a length penalty
    assert model.calls == 3


# alpha 2, limit 3 tokens before EOS. Step 0: EOS e^-1 finishes the empty output (score -1.0,
# lp(1) = 1); W1 e^-1.5 stays alive. Step 1: W1 again at e^-0.05 (log P -1.55). Step 2: EOS
# certain: [W1 W1] at -1.55 / lp(3) = -1.55 / (8/6)^2 = -0.872 beats -1.0. After step 0, the
# live [W1] could still reach -1.5 / lp(4) = -0.667 (the longest it may grow): the search must
# go on. Bounded by the next length's penalty instead (-1.5 / lp(2) = -1.102), it would stop.
LONGER_WINS_LATER = {
    (7, ()): dist(eos=math.exp(-1.0), w1=math.exp(-1.5), w2=1e-9),
    (7, (W1,)): dist(eos=1e-9, w1=math.exp(-0.05), w2=1e-9),
    (7, (W1, W1)): dist(eos=1.0),
}


def test_early_stopping_is_bounded_by_the_longest_length_still_reachable():
    model = TableModel(LONGER_WINS_LATER, default=dist(eos=1e-9, w1=1e-9, w2=1e-9))
    (best,) = search(model, alpha=2.0, max_length_offset=2, finalize="t2t")
    assert best.tokens == [W1, W1]
    assert best.score == pytest.approx(-1.55 / (8 / 6) ** 2)


def test_fairseq_never_returns_an_empty_output():
    """fairseq's min_len 1: EOS may not be the first token, however likely; t2t takes it."""
    table = {(7, ()): dist(eos=0.9, w1=0.1), (7, (W1,)): dist(eos=1.0)}
    (paper,) = search(TableModel(table), alpha=0.6, finalize="t2t")
    assert paper.tokens == []
    (best,) = search(TableModel(table), alpha=0.6, finalize="fairseq")
    assert best.tokens == [W1] and best.score == pytest.approx(math.log(0.1) / 2**0.6)


# Beam 1 (beam search, 2 candidates per step), alpha 1, limit 2 tokens before EOS. Step 0 finishes
# the empty output at log 0.1 (score -2.303). After [W1] and [W1 W1], EOS ranks third, outside
# the 2 candidates. A forced EOS after [W1 W1] would finish it at log(0.72 x 0.1) / (8/6) = -1.973,
# better than the empty output: the cut-off hypothesis would win.
CUT_OFF_WOULD_WIN = {
    (7, ()): dist(eos=0.1, w1=0.9),
    (7, (W1,)): dist(eos=0.05, w1=0.8, w2=0.15),
    (7, (W1, W1)): dist(eos=0.1, w1=0.7, w2=0.2),
}


def test_t2t_never_lets_a_cut_off_hypothesis_compete_with_finished_ones():
    model = TableModel(CUT_OFF_WOULD_WIN)
    (best,) = search(model, beam=1, alpha=1.0, max_length_offset=1, finalize="t2t")
    assert best.tokens == [] and best.finished
    assert best.score == pytest.approx(math.log(0.1))
    assert model.calls == 3


def test_fairseq_finishes_the_cut_off_hypothesis_with_a_forced_eos():
    """fairseq's rule on the same table: the step-0 EOS ranks second, outside the first beam (1),
    so nothing finishes before the limit, where EOS is forced: [W1 W1] at log 0.072 / 3."""
    model = TableModel(CUT_OFF_WOULD_WIN)
    (best,) = search(model, beam=1, alpha=1.0, max_length_offset=1, finalize="fairseq")
    assert best.tokens == [W1, W1] and best.finished
    assert best.score == pytest.approx(math.log(0.72 * 0.1) / 3)


def test_fairseq_divides_by_length_to_the_alpha_not_by_the_gnmt_penalty():
    """On TWO_PATHS at alpha 0.6, t2t keeps the empty output (log 0.45 / (7/6)^0.6 = -0.728 <
    log 0.5 = -0.693); fairseq's 2^0.6 makes [W1] score log 0.45 / 1.516 = -0.527 and win."""
    (paper,) = search(TableModel(TWO_PATHS), alpha=0.6, finalize="t2t")
    assert paper.tokens == []
    (best,) = search(TableModel(TWO_PATHS), alpha=0.6, finalize="fairseq")
    assert best.tokens == [W1]
    assert best.score == pytest.approx(math.log(0.45) / 2**0.6)


# Beam 2, alpha 1. Step 0: W1 0.5, W2 0.5 (no EOS: fairseq would not take it first anyway). Step
# 1: [W1 EOS] and [W2 EOS] 0.3 each rank first and second, in the first beam: both finish, and
# two hypotheses have finished. [W1 W1] (0.2) would go on to [W1 W1 EOS] at log 0.2 / 3 =
# -0.536, better than [W1 EOS]'s log 0.3 / 2 = -0.602.
TWO_FINISH_EARLY = {
    (7, ()): dist(w1=0.5, w2=0.5),
    (7, (W1,)): dist(eos=0.6, w1=0.4),
    (7, (W2,)): dist(eos=0.6, w2=0.4),
    (7, (W1, W1)): dist(eos=1.0),
    (7, (W2, W2)): dist(eos=1.0),
}


def test_fairseq_stops_a_sentence_once_beam_hypotheses_finished():
    model = TableModel(TWO_FINISH_EARLY)
    (best,) = search(model, alpha=1.0, finalize="fairseq")
    assert best.tokens == [W1]
    assert best.score == pytest.approx(math.log(0.3) / 2)
    assert model.calls == 2  # [W1 W1 EOS] is never looked at


def test_ties_go_to_the_lower_token_id():
    table = {
        (7, ()): dist(w1=0.45, w2=0.45, eos=0.1),
        (7, (W1,)): dist(eos=1.0),
        (7, (W2,)): dist(eos=1.0),
    }
    (best,) = search(TableModel(table), alpha=0.6)
    assert best.tokens == [W1]
    assert best.score == pytest.approx(math.log(0.45) / (7 / 6) ** 0.6)


# Step 0 ranks W1 0.4, W2 0.35, EOS 0.25; then EOS 0.6. The empty output (log 0.25) would beat
# every other (best: [W1], log 0.24), but with beam 2 its EOS ranks third.
EOS_THIRD = {
    (7, ()): dist(w1=0.4, w2=0.35, eos=0.25),
    (7, (W1,)): dist(eos=0.6, w1=0.4),
    (7, (W2,)): dist(eos=0.6, w2=0.4),
}


def test_eos_outside_the_first_beam_candidates_finishes_under_t2t_only():
    model = TableModel(EOS_THIRD)
    (best,) = search(model, alpha=0.0, finalize="fairseq")
    assert best.tokens == [W1]  # fairseq's rule: only EOS among the first `beam` candidates
    assert best.score == pytest.approx(math.log(0.24))
    assert model.calls == 2  # live [W1 W1] (log 0.16) cannot beat log 0.24: stop
    # beam 3 puts the step-0 EOS in the first beam, but fairseq's min_len 1 bars it all the same
    (wide,) = search(TableModel(EOS_THIRD), beam=3, alpha=0.0, finalize="fairseq")
    assert wide.tokens == [W1] and wide.score == pytest.approx(math.log(0.24))
    model = TableModel(EOS_THIRD)
    (paper,) = search(model, alpha=0.0)  # t2t, the default: the third-ranked EOS finishes
    assert paper.tokens == [] and paper.score == pytest.approx(math.log(0.25))
    assert model.calls == 2  # step 1's best, [W1 EOS] at log 0.24, does not replace it


def test_greedy_takes_the_single_best_path():
    (best,) = search(TableModel(EOS_THIRD), beam=4, search="greedy", alpha=0.0)
    assert best.tokens == [W1]
    assert best.log_prob == pytest.approx(math.log(0.24))


def test_a_batch_gives_each_sentence_its_own_result_and_drops_finished_ones():
    table = {
        **TWO_PATHS,
        (8, ()): dist(w2=0.9, eos=0.1),
        (8, (W2,)): dist(w2=0.9, eos=0.1),
        (8, (W2, W2)): dist(eos=1.0),
    }
    model = TableModel(table)
    first, second = search(model, (1, 3), first_tokens=[7, 8], alpha=0.0)
    assert first.tokens == [] and first.score == pytest.approx(math.log(0.5))
    assert second.tokens == [W2, W2] and second.score == pytest.approx(math.log(0.81))
    assert model.rows_seen == [4, 2, 2]  # sentence 1 left after step 0
    (alone,) = search(TableModel(table), (3,), first_tokens=[8], alpha=0.0)
    assert alone.tokens == second.tokens and alone.score == pytest.approx(second.score)


def test_finished_sentences_kept_in_the_batch_for_a_few_steps_change_nothing():
    """On a GPU the search drops finished sentences every few steps (deciding which left waits
    for the device): until then their rows are computed but never recorded."""
    table = {
        **TWO_PATHS,
        (8, ()): dist(w2=0.9, eos=0.1),
        (8, (W2,)): dist(w2=0.9, eos=0.1),
        (8, (W2, W2)): dist(eos=1.0),
    }
    model = TableModel(table, default=dist(eos=1.0))  # what the kept finished rows go on to ask
    first, second = beam_search(
        model,
        *search_inputs((1, 3), first_tokens=[7, 8]),
        DecodeSettings(beam=2, max_length_offset=2, alpha=0.0),
        drop_every=2,
    )
    assert first.tokens == [] and first.score == pytest.approx(math.log(0.5))
    assert second.tokens == [W2, W2] and second.score == pytest.approx(math.log(0.81))
    # Sentence 1 finished at step 0 and left after step 1; sentence 2 finished at step 2, and the
    # search saw it after step 3 (each step: 2 hypotheses per sentence in the batch).
    assert model.rows_seen == [4, 4, 2, 2]


def test_greedy_keeps_its_first_eos_while_the_finished_sentence_stays_in_the_batch():
    """Greedy search stops at its first EOS, even where a longer output would score better."""
    table = {(7, ()): dist(eos=0.6, w1=0.4), (7, (W1,)): dist(eos=1.0)}
    model = TableModel(table, default=dist(eos=1.0))
    settings = DecodeSettings(search="greedy", alpha=5.0, max_length_offset=3)
    (best,) = beam_search(model, *search_inputs((1,)), settings, drop_every=2)
    assert model.rows_seen == [1, 1]  # the finished sentence stayed for step 1
    assert best.tokens == [] and best.score == pytest.approx(math.log(0.6))


@pytest.mark.parametrize("drop_every", [2, 3, 50])
def test_the_transformer_translates_the_same_whenever_finished_sentences_leave(drop_every):
    model = random_model()
    rng = np.random.default_rng(0)
    sentences = [rng.integers(4, 40, size=n) for n in (3, 9, 5, 1, 7, 2)]
    source, lengths = source_batch(sentences)
    settings = DecodeSettings(beam=3, max_length_offset=6)
    each_step = beam_search(IncrementalDecoder(model), source, lengths, settings, drop_every=1)
    later = beam_search(IncrementalDecoder(model), source, lengths, settings, drop_every=drop_every)
    assert [h.tokens for h in later] == [h.tokens for h in each_step]
    for a, b in zip(later, each_step, strict=True):
        assert a.score == pytest.approx(b.score, rel=1e-6, abs=1e-5)  # float32 sums
    assert len({len(h.tokens) for h in each_step}) > 1  # sentences did finish at different steps


class BooleanMaskIndexing(torch.utils._python_dispatch.TorchDispatchMode):
    """Records every indexing by a boolean mask: on a GPU each one makes the host wait for the
    device to learn how many rows the result has."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.index.Tensor and any(
            index is not None and index.dtype == torch.bool for index in args[1]
        ):
            self.calls += 1
        return func(*args, **(kwargs or {}))


def test_dropping_finished_sentences_picks_the_rest_by_an_index_not_a_mask():
    """The drop check brings `done` to the host once and picks the staying sentences with an
    index made there; a boolean mask per tensor made about six device waits per check."""
    model = random_model()
    rng = np.random.default_rng(0)
    sentences = [rng.integers(4, 40, size=n) for n in (3, 9, 5, 1, 7, 2)]
    source, lengths = source_batch(sentences)
    settings = DecodeSettings(beam=3, max_length_offset=6)
    with BooleanMaskIndexing() as masks:
        found = beam_search(IncrementalDecoder(model), source, lengths, settings, drop_every=2)
    assert len({len(h.tokens) for h in found}) > 1  # sentences did leave at different steps
    assert masks.calls == 0


def exhaustive_best(table, max_tokens, alpha):
    best = None
    for length in range(max_tokens + 1):
        for words in itertools.product((W1, W2), repeat=length):
            log_prob = sum(math.log(table[words[:i]][w]) for i, w in enumerate(words))
            log_prob += math.log(table[words][EOS_ID])
            score = log_prob / length_penalty(length + 1, alpha)
            if best is None or score > best[1] + 1e-12:
                best = (list(words), score)
    return best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.5])
def test_a_wide_beam_finds_the_exhaustive_best(seed, alpha):
    rng = np.random.default_rng(seed)
    prefixes = [p for n in range(4) for p in itertools.product((W1, W2), repeat=n)]
    table = {}
    for prefix in prefixes:
        eos, w1, w2 = rng.dirichlet([1.0, 1.0, 1.0])
        table[prefix] = dist(eos, w1, w2)
    model = TableModel({(7, p): probs for p, probs in table.items()})
    (best,) = search(model, (1,), beam=8, alpha=alpha, max_length_offset=2)
    tokens, score = exhaustive_best(table, 3, alpha)
    assert best.tokens == tokens
    assert best.score == pytest.approx(score)


def random_model(**overrides):
    torch.manual_seed(0)
    sizes = {"n_layers": 2, "d_model": 32, "d_ff": 64, "n_heads": 4, **overrides}
    config = build_config(40, "tiny", **sizes)
    return Transformer(config).eval()


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_cached_decoding_equals_recomputing_the_prefix(positions):
    model = random_model(positions=positions)
    rng = np.random.default_rng(1)
    sentences = [rng.integers(4, 40, size=n) for n in (3, 9, 5, 12)]
    source, lengths = source_batch(sentences)
    settings = DecodeSettings(beam=4, alpha=0.6, max_length_offset=6)
    fast = beam_search(IncrementalDecoder(model), source, lengths, settings)
    slow = beam_search(RecomputingDecoder(model), source, lengths, settings)
    for a, b in zip(fast, slow, strict=True):
        assert a.tokens == b.tokens
        assert a.score == pytest.approx(b.score, rel=1e-6, abs=1e-5)  # float32 sums


@pytest.mark.parametrize("drop_every", [1, 3])
@pytest.mark.parametrize("beam", [1, 4])
def test_the_ancestry_cache_translates_as_recomputing_the_prefix(beam, drop_every):
    """Keys and values left in their slots, attended through the ancestry table's mask, give
    the prefix's own attention: the same outputs and scores as recomputing it, also across
    the cache's growth past its first 16 positions and as sentences leave."""
    model = random_model()
    rng = np.random.default_rng(2)
    sentences = [rng.integers(4, 40, size=n) for n in (3, 9, 5, 12, 1, 20)]
    source, lengths = source_batch(sentences)
    settings = DecodeSettings(beam=beam, alpha=0.6, max_length_offset=30)
    ancestry = IncrementalDecoder(model, cache="ancestry")
    fast = beam_search(ancestry, source, lengths, settings, drop_every=drop_every)
    slow = beam_search(RecomputingDecoder(model), source, lengths, settings)
    for a, b in zip(fast, slow, strict=True):
        assert a.tokens == b.tokens
        assert a.score == pytest.approx(b.score, rel=1e-6, abs=1e-5)  # float32 sums
    assert max(len(h.tokens) for h in fast) > 16 and ancestry.rows.capacity >= 32
    assert len({len(h.tokens) for h in fast}) > 1  # sentences left at different steps


def test_the_ancestry_cache_never_moves_a_key_while_no_sentence_leaves():
    """Between growths, reordering the hypotheses rewrites only the ancestry table: the keys
    and values stay in the same storage, where the gather layout makes a new copy each step."""
    model = random_model()
    source, lengths = source_batch([np.arange(4, 14)])
    decoder = IncrementalDecoder(model, cache="ancestry")
    decoder.start(source, 4)
    prefix = torch.full((4, 1), 1)
    storages = set()
    for step in range(12):
        decoder.log_probs(prefix)
        storages.add(decoder.rows.keys_values[0][0].data_ptr())
        decoder.keep(torch.tensor([1, 1, 3, 0]))  # hypotheses swap parents every step
        prefix = torch.cat([prefix[[1, 1, 3, 0]], torch.full((4, 1), 5 + step)], dim=1)
    assert len(storages) == 1 and decoder.rows.capacity == 16
    with pytest.raises(ValueError, match="decode.cache must be one of gather, ancestry"):
        IncrementalDecoder(model, cache="paged")


def test_the_compiled_step_translates_as_the_eager_one():
    """decode.compile: the step through torch.compile (dynamic shapes, a handful of graphs for
    the first steps and the sizes of 1) gives the eager step's outputs and scores, also as
    sentences leave the batch."""
    model = random_model(n_layers=1)
    rng = np.random.default_rng(3)
    source, lengths = source_batch([rng.integers(4, 40, size=n) for n in (3, 8, 5)])
    settings = DecodeSettings(beam=2, alpha=0.6, max_length_offset=8)
    eager = beam_search(IncrementalDecoder(model), source, lengths, settings, drop_every=2)
    compiled = IncrementalDecoder(model, compiled=True)
    found = beam_search(compiled, source, lengths, settings, drop_every=2)
    for a, b in zip(found, eager, strict=True):
        assert a.tokens == b.tokens
        assert a.score == pytest.approx(b.score, rel=1e-6, abs=1e-5)  # float32 sums
    assert compiled.decode_step is not decode_step and len({len(h.tokens) for h in eager}) > 1
    with pytest.raises(ValueError, match="decode.compile works with decode.cache gather only"):
        DecodeSettings(compile=True, cache="ancestry")


def test_learned_positions_bound_the_output_and_the_source_padding():
    """A random model rarely ends a sentence: its outputs run to the offset, here past the table.
    max_positions 12 is not a multiple of 8, so padding the source to 16 would run past it too."""
    model = random_model(positions="learned", max_positions=12)
    sentences = [np.arange(4, 14), np.arange(4, 9)]  # 10 (+ EOS = 11) and 5 tokens
    settings = DecodeSettings(beam=2, max_length_offset=50)
    hypotheses, _ = translate(model, sentences, settings)
    # BOS + 11 tokens fill the 12 positions; the token predicted at the last one ends the search
    # with 12 tokens, unfinished (t2t never forces EOS).
    longest = max(hypotheses, key=lambda h: len(h.tokens))
    assert len(longest.tokens) == 12 and not longest.finished
    recomputed = [
        beam_search(RecomputingDecoder(model), *source_batch([s], max_width=12), settings, 12)[0]
        for s in sentences
    ]
    assert [h.tokens for h in hypotheses] == [h.tokens for h in recomputed]


def test_a_source_longer_than_the_learned_positions_stops_with_the_sentence():
    model = random_model(positions="learned", max_positions=12)
    sentences = [np.arange(4, 9), np.arange(4, 16), np.arange(4, 17)]  # 5, 12 and 13 tokens
    with pytest.raises(InputError) as err:
        translate(model, sentences, DecodeSettings(), desc="tiny/averaged/test")
    message = str(err.value)
    assert message.startswith("tiny/averaged/test: sentence 2 is 12 tokens long, 13 with EOS")
    assert "max_positions 12 (too long: 2 of 3 sentences)" in message


def test_a_beam_too_wide_for_memory_is_told_with_its_settings():
    """beam 2^40 asks the allocator for petabytes (past a 64-bit machine's address space): the
    stage and `aiayn translate` say what ran out and which settings to lower, no traceback."""
    model = random_model()
    with pytest.raises(InputError) as err:
        translate(model, [np.arange(4, 9)], DecodeSettings(beam=2**40), desc="tiny/averaged/test")
    message = str(err.value)
    assert message.startswith("tiny/averaged/test: decoding ran out of memory on the cpu")
    assert f"beam {2**40} and batch_tokens 4000" in message and "lower decode.beam" in message


def test_a_source_over_max_source_tokens_is_cut_with_a_warning_counting_tokens(caplog):
    """A 1 MB line (536k tokens) decoded for hours with no end in sight: it is cut to
    decode.max_source_tokens, and the warning names it and its length in tokens."""
    model = random_model()
    sentences = [np.arange(4, 9), np.full(3000, 7), np.arange(4, 10)]  # 5, 3000 and 6 tokens
    settings = DecodeSettings(search="greedy", max_source_tokens=6, max_length_offset=2)
    with caplog.at_level("WARNING", logger="aiayn"):
        hypotheses, _ = translate(model, sentences, settings, desc="tiny/averaged/test")
    assert "tiny/averaged/test: 1 sentence(s) longer than decode.max_source_tokens 6" in (
        caplog.text
    )
    assert "(line 2: 3,000 tokens)" in caplog.text
    assert "raise decode.max_source_tokens" in caplog.text
    assert len(hypotheses[1].tokens) <= 6 + 1 + 2  # the cut source, its EOS, the offset


def test_a_parsers_sentence_is_never_cut_and_lengths_are_capped():
    """A constrained search needs every word of its sentence: cutting is an error there."""
    too_long = r"1 sentence\(s\) longer than decode.max_source_tokens 4"
    with pytest.raises(InputError, match=too_long):
        cut_to_limit([np.arange(4, 9)], 4, "ptb/averaged/test", constrained=True)
    assert cut_to_limit([np.arange(4, 8)], 4, "x", constrained=True)[0].tolist() == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="max_length_offset must be from 0 to 1024"):
        DecodeSettings(max_length_offset=1_000_000)
    with pytest.raises(ValueError, match="max_source_tokens must be >= 1, not 0"):
        DecodeSettings(max_source_tokens=0)


def test_attention_maps_refuse_a_sentence_longer_than_the_learned_positions():
    model = random_model(positions="learned", max_positions=12)
    assert encoder_attention(model, list(range(4, 15))).shape == (2, 4, 12, 12)  # 11 + EOS fit
    with pytest.raises(InputError) as err:
        encoder_attention(model, list(range(4, 16)), desc="report.attention_sentences[0]")
    assert str(err.value).startswith(
        "report.attention_sentences[0]: sentence 1 is 12 tokens long, 13 with EOS, but the "
        "model's learned positions stop at max_positions 12"
    )
    # the setting that makes it fit is named (the default 1024 cut a line to 1025 with EOS; #77)
    assert "`decode.max_source_tokens: 11` in the experiment's `decode`" in str(err.value)


def test_decode_step_matches_the_full_decoder():
    model = random_model()
    source, _ = source_batch([np.array([5, 6, 7]), np.array([8, 9])])
    target = torch.tensor([[2, 10, 11, 12], [2, 13, 14, 15]])
    memory = model.encode(source)
    full = model.decode(target, memory, source)  # (B, T, V)
    cache, mask = start_cache(model, memory), model.source_mask(source)
    for position in range(target.size(1)):
        step = decode_step(model, target[:, position : position + 1], position, cache, mask)
        torch.testing.assert_close(step, full[:, position], rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_the_search_ranks_fp32_logits_under_bf16_autocast():
    """On a GPU decoding runs under bf16 autocast; the pre-softmax projection stays fp32, since
    bf16 logits round by up to 0.125 and reorder beams that close (CPU autocast stands in)."""
    model = random_model()
    source, _ = source_batch([np.array([5, 6, 7]), np.array([8, 9])])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cache, mask = start_cache(model, model.encode(source)), model.source_mask(source)
        logits = decode_step(model, torch.tensor([[2], [2]]), 0, cache, mask)
        projected = F.linear(torch.ones(1, 32), model.embeddings.tokens.weight)
    assert projected.dtype == torch.bfloat16  # what the projection gave under autocast
    assert logits.dtype == torch.float32
    assert not torch.equal(logits, logits.bfloat16().float())  # not bf16 figures widened


def test_batches_are_sorted_by_length_and_within_the_budget():
    lengths = np.array([5, 30, 12, 7, 29, 1])
    batches = length_sorted_batches(lengths, batch_tokens=64)
    assert sorted(np.concatenate(batches).tolist()) == list(range(6))
    assert batches[0].tolist() == [1, 4]  # longest first: 2 x 32 padded tokens
    for batch in batches:
        width = max(-(-(lengths[i] + 1) // 8) * 8 for i in batch)
        assert len(batch) * width <= 64


def test_bad_decode_settings_are_refused():
    with pytest.raises(ValueError, match="decode.search"):
        DecodeSettings(search="sampling")


def test_beams_share_their_sentence_memory_and_leave_with_it():
    """Each sentence's encoder keys/values are held once, not once per beam, and are dropped
    when the sentence leaves; the beams still get what a per-row copy would give them."""
    model = random_model()
    source, _ = source_batch([np.array([5, 6, 7]), np.array([8, 9]), np.array([10])])
    decoder = IncrementalDecoder(model)
    decoder.start(source, beam=4)
    prefix = torch.tensor([[2]] * 12)
    shared = decoder.log_probs(prefix)  # (12, V)
    assert decoder.cache[0]["memory_k"].size(0) == 3 and decoder.cache[0]["self_k"].size(0) == 12
    rows = source.repeat_interleave(4, dim=0)
    per_row = model.decode(prefix, model.encode(rows), rows)
    torch.testing.assert_close(shared, per_row[:, -1].log_softmax(-1), rtol=1e-5, atol=1e-5)
    memory_of_last = decoder.cache[1]["memory_v"][2].clone()
    decoder.keep(torch.tensor([1, 0, 3, 2, 8, 8, 9, 10]))  # sentences 0 and 2 stay, reordered beams
    assert decoder.cache[1]["memory_v"].size(0) == 2 and decoder.memory_mask.size(0) == 2
    assert torch.equal(decoder.cache[1]["memory_v"][1], memory_of_last)


@torch.no_grad()  # as beam_search runs it
def test_kept_hypotheses_continue_from_their_own_cached_keys_and_values():
    """keep() reorders the beams (gathered at the next step, with the new position appended);
    each row then continues the hypothesis it was given, as the full decoder on that prefix."""
    model = random_model()
    source, _ = source_batch([np.array([5, 6, 7]), np.array([8, 9]), np.array([10])])
    decoder = IncrementalDecoder(model)
    decoder.start(source, beam=4)
    prefix = torch.tensor([[2]] * 12)
    decoder.log_probs(prefix)
    prefix = torch.cat([prefix, torch.arange(20, 32).view(12, 1)], dim=1)  # a token per beam
    decoder.log_probs(prefix)
    rows = torch.tensor([1, 0, 3, 3, 8, 8, 11, 10])  # sentences 0 and 2, beams reordered
    decoder.keep(rows)
    decoder.keep(torch.tensor([4, 5, 6, 7]))  # twice before a step: sentence 2 stays
    prefix = torch.cat([prefix[rows][4:], torch.tensor([[33], [34], [35], [36]])], dim=1)
    step = decoder.log_probs(prefix)  # (4, V)
    assert decoder.cache[1]["self_v"].shape[:3] == (4, 4, 3)  # rows, heads, positions
    sources = source[[2, 2, 2, 2]]
    full = model.decode(prefix, model.encode(sources), sources)[:, -1].log_softmax(-1)
    torch.testing.assert_close(step, full, rtol=1e-5, atol=1e-5)


def test_appending_to_the_cache_is_the_same_with_and_without_gradients():
    """The one-copy gather (out=, no autograd) and the index-and-concatenate it replaced agree."""
    past, new = torch.randn(5, 2, 3, 4), torch.randn(4, 2, 1, 4)
    rows = torch.tensor([4, 0, 0, 2])
    expected = torch.cat([past[rows], new], dim=2)
    with torch.no_grad():
        assert torch.equal(appended(past, new, rows), expected)
    tracked = appended(past.requires_grad_(), new, rows)
    assert tracked.requires_grad and torch.equal(tracked.detach(), expected)
