"""aiayn export: our model in stock CTranslate2 and stock transformers scores what ours scores.

Unit level, on small random models (a trained toy model's outputs are compared in
tests/test_workflow_train.py): teacher-forced log-probabilities through each toolkit's own
loading path, the models they cannot hold refused with the reason, and the export folder
written whole or not at all."""

from __future__ import annotations

import fcntl
import json
import os
import re
import stat
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.data.toy import generate
from aiayn.decode.settings import DecodeSettings
from aiayn.errors import InputError
from aiayn.export import bundle, ct2, hf
from aiayn.model import Transformer
from aiayn.model_config import TransformerConfig
from aiayn.prepare.pieces import load as load_subword
from aiayn.prepare.subword import SubwordSettings, train_bpe
from aiayn.textio import file_sha256
from aiayn.train.checkpoint import save_weights
from aiayn.vocab import BOS_ID, EOS_ID
from tests.conftest import PROJECT

ctranslate2 = pytest.importorskip("ctranslate2", reason="pip install -e '.[export]'")
SOURCES = [[5, 6, 7, 8, 9], [10, 11, 12]]
TARGETS = [[13, 14, 15], [16, 17, 18, 19]]
PIECES = ["<pad>", "<unk>", "<s>", "</s>"] + [f"p{i}" for i in range(60)]


def random_model(**changes) -> Transformer:
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=len(PIECES), n_layers=2, d_model=32, d_ff=64,
                               n_heads=4, dropout=0.1, max_positions=64, **changes)  # fmt: skip
    return Transformer(config).eval()


@torch.no_grad()
def our_log_probs(model: Transformer, source: list[int], target: list[int]) -> np.ndarray:
    """Teacher-forced log-probabilities of target + EOS, the source ending in EOS."""
    logits = model(torch.tensor([[*source, EOS_ID]]), torch.tensor([[BOS_ID, *target]]))
    log_probs = torch.log_softmax(logits[0].float(), dim=-1)
    return log_probs.gather(1, torch.tensor([*target, EOS_ID])[:, None])[:, 0].numpy()


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_ctranslate2_scores_what_our_model_scores(tmp_path, positions):
    model = random_model(positions=positions)
    ct2.write(model, PIECES, tmp_path / "ct2", quantization=None)
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    scored = translator.score_batch(
        [[PIECES[i] for i in s] for s in SOURCES], [[PIECES[i] for i in t] for t in TARGETS]
    )
    for source, target, theirs in zip(SOURCES, TARGETS, scored, strict=True):
        assert len(theirs.log_probs) == len(target) + 1  # EOS scored too
        np.testing.assert_allclose(
            theirs.log_probs, our_log_probs(model, source, target), atol=1e-4
        )


def test_a_quantized_export_leaves_the_callers_model_as_it_was(tmp_path):
    """CTranslate2 quantizes the spec's arrays in place; the benchmark exports the model it
    then times, so an int8 export that rounded our embeddings made ours translate badly."""
    model = random_model()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    ct2.write(model, PIECES, tmp_path / "int8", quantization="int8")
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, before[name]), name


def test_a_stock_marian_model_scores_what_ours_scores_after_save_and_load(tmp_path):
    """The model dimension permuted maps our interleaved sinusoids onto Marian's halves: the
    table MarianMTModel rebuilds at load is ours, so the loaded model scores as ours."""
    from transformers import MarianMTModel

    model = random_model()
    hf.marian_model(model).save_pretrained(tmp_path / "hf")
    marian = MarianMTModel.from_pretrained(tmp_path / "hf").eval()
    for source, target in zip(SOURCES, TARGETS, strict=True):
        with torch.no_grad():
            logits = marian(input_ids=torch.tensor([[*source, EOS_ID]]),
                            decoder_input_ids=torch.tensor([[BOS_ID, *target]])).logits  # fmt: skip
        log_probs = torch.log_softmax(logits[0], dim=-1)
        theirs = log_probs.gather(1, torch.tensor([*target, EOS_ID])[:, None])[:, 0].numpy()
        np.testing.assert_allclose(theirs, our_log_probs(model, source, target), atol=1e-4)
    # without the permutation Marian's positions would not be ours: the test can fail
    assert not torch.equal(hf.marian_permutation(32), torch.arange(32))


def test_models_the_toolkits_cannot_hold_are_refused_with_the_reason(tmp_path):
    with pytest.raises(InputError, match="Marian rebuilds its sinusoidal table.*--format ct2"):
        hf.marian_model(random_model(positions="learned"))
    row_b = random_model(d_k=16, d_v=16)  # Table 3 row B: d_k apart from d_model / h
    with pytest.raises(InputError, match="needs d_k = d_v = d_model / h"):
        ct2.write(row_b, PIECES, tmp_path / "ct2", quantization=None)
    with pytest.raises(InputError, match="needs d_k = d_v = d_model / h"):
        hf.marian_model(row_b)
    assert not (tmp_path / "ct2").exists()


@pytest.fixture(scope="module")
def toy_bundle(tmp_path_factory):
    """A toy BPE model and random weights saved as the workflow saves them."""
    folder = tmp_path_factory.mktemp("toy")
    text = folder / "train.txt"
    pairs = list(generate(2000, seed=1, partition="train"))
    text.write_text("".join(f"{en}\n{de}\n" for en, de in pairs), encoding="utf-8")
    subword = folder / "bpe.model"
    train_bpe([str(text)], str(subword), SubwordSettings(vocab_size=600))
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=600, n_layers=1, d_model=32, d_ff=64, n_heads=4,
                               dropout=0.1)  # fmt: skip
    weights = folder / "averaged.safetensors"
    save_weights(weights, {"state_dict": Transformer(config).state_dict(),
                           "model_config": vars(config), "experiment": "toy",
                           "subword_sha256": file_sha256(subword)})  # fmt: skip
    return weights, subword, [en for en, _ in pairs[:3]]


def test_the_hf_export_loads_with_auto_classes_and_cuts_text_as_our_bpe(tmp_path, toy_bundle):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, GenerationConfig

    weights, subword, lines = toy_bundle
    output = tmp_path / "hf"
    settings = DecodeSettings(beam=5, alpha=1.0)
    bundle.export(weights, subword, settings, output, "hf", experiment="toy")
    generation = GenerationConfig.from_pretrained(output)  # what a plain generate() uses
    assert (generation.num_beams, generation.length_penalty, generation.early_stopping) == (
        5, 1.0, True)  # fmt: skip
    assert generation.max_length == 1024 and generation.forced_eos_token_id == EOS_ID
    assert generation.suppress_tokens == [0, BOS_ID] and not generation.do_sample
    tokenizer = AutoTokenizer.from_pretrained(output)
    processor = load_subword(subword)
    for line in lines:
        assert tokenizer(line).input_ids == [*processor.encode(line), EOS_ID]
    assert AutoModelForSeq2SeqLM.from_pretrained(output).config.decoder_start_token_id == BOS_ID
    record = json.loads((output / bundle.RECORD).read_text())
    assert record["format"] == "hf" and record["decode"]["alpha"] == settings.alpha
    assert (
        record["decode"]["never_emitted"] == ["<pad>", "<s>"] and "fairseq" in record["engine_rule"]
    )
    assert (output / bundle.SUBWORD).read_bytes() == subword.read_bytes()


def test_an_export_is_written_whole_and_replaces_only_an_earlier_export(tmp_path, toy_bundle):
    weights, subword, lines = toy_bundle
    output = tmp_path / "ct2"
    bundle.export(weights, subword, DecodeSettings(), output, "ct2", "int8", "toy")
    first = (output / "model.bin").read_bytes()
    bundle.export(weights, subword, DecodeSettings(), output, "ct2", None, "toy")  # replaced
    assert (output / "model.bin").read_bytes() != first  # float32 now, not int8
    translator = ctranslate2.Translator(str(output), device="cpu")
    pieces = load_subword(output / bundle.SUBWORD).encode(lines[0], out_type=str)
    assert translator.translate_batch([pieces], beam_size=1, max_decoding_length=5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]  # nothing staged left over
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="holds files that are not an earlier export"):
        bundle.export(weights, subword, DecodeSettings(), other, "ct2", experiment="toy")
    with pytest.raises(InputError, match="--quantization is CTranslate2's"):
        bundle.export(weights, subword, DecodeSettings(), tmp_path / "x", "hf", "int8", "toy")
    with pytest.raises(InputError, match="'int4' is not a CTranslate2 weight type: use one of"):
        bundle.export(weights, subword, DecodeSettings(), tmp_path / "x", "ct2", "int4", "toy")
    with pytest.raises(InputError, match="'' is not a CTranslate2 weight type"):  # was "no type"
        bundle.export(weights, subword, DecodeSettings(), tmp_path / "x", "ct2", "", "toy")
    (output / "notes.txt").write_text("mine")  # a file put beside an earlier export (#77)
    with pytest.raises(InputError, match=r"other files beside it \(notes.txt\)"):
        bundle.export(weights, subword, DecodeSettings(), output, "ct2", None, "toy")
    assert (output / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2", "mine"]


WRITTEN = ["aiayn_export.json", "model.bin", "sentencepiece.model", "shared_vocabulary.json"]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
RECORDS = st.one_of(
    st.binary(max_size=120),  # foreign, or not UTF-8
    JSON.map(lambda value: json.dumps(value).encode()),  # JSON of any shape
    JSON.map(lambda files: json.dumps({"format": "ct2", "files": files}).encode()),
    st.integers(0, 200).map(lambda n: json.dumps({"files": WRITTEN}).encode()[:n]),  # cut short
    st.just(json.dumps({"format": "ct2", "files": WRITTEN}).encode()),  # a whole one
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(record=RECORDS, beside=st.lists(st.sampled_from([*WRITTEN[1:], "notes.txt"]), max_size=3))
def test_an_earlier_exports_record_lets_an_export_replace_only_what_it_lists(record, beside):
    """What an earlier export's record says decides what replacing its folder may delete: any
    record (damaged, foreign, of any JSON shape) either lists every file there, or the export
    is refused in one line naming the folder, and nothing is touched."""
    with tempfile.TemporaryDirectory() as folder:
        output = Path(folder, "ct2")
        output.mkdir()
        (output / bundle.RECORD).write_bytes(record)
        for name in beside:
            (output / name).write_text("mine")
        before = sorted(os.listdir(output))
        try:
            bundle.check_destination(output)
        except InputError as err:
            assert str(output) in str(err) and len(str(err).splitlines()) == 1, str(err)
            reasons = ("does not list the files an export wrote", "other files beside it")
            assert any(reason in str(err) for reason in reasons), str(err)
            assert sorted(os.listdir(output)) == before
            return
        assert set(before) <= set(json.loads(record)["files"])


def test_an_export_folder_and_its_files_follow_the_umask(tmp_path, toy_bundle):
    """safetensors writes its file 0600: in a group's folder nobody else could load the model."""
    weights, subword, _ = toy_bundle
    old = os.umask(0o022)
    try:
        bundle.export(weights, subword, DecodeSettings(), tmp_path / "hf", "hf", experiment="toy")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "hf").iterdir()}
    assert modes["model.safetensors"] == 0o644 and set(modes.values()) == {0o644}
    assert stat.S_IMODE((tmp_path / "hf").stat().st_mode) == 0o755


def test_a_second_export_into_one_folder_waits_for_the_first_and_then_replaces_it(
    tmp_path, toy_bundle
):
    """Two exports into one new folder raced on the rename (`Directory not empty`, #77): while
    one holds the lock of the folder's parent, another waits, then writes a whole export."""
    weights, subword, _ = toy_bundle
    output = tmp_path / "shared" / "ct2"
    output.parent.mkdir()
    holder = os.open(output.parent, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # a first export, busy writing
    errors = []

    def second():
        try:
            bundle.export(weights, subword, DecodeSettings(), output, "ct2", None, "toy")
        except BaseException as err:  # noqa: BLE001 - the test reports it below
            errors.append(err)

    waiting = threading.Thread(target=second)
    waiting.start()
    waiting.join(timeout=3)
    assert waiting.is_alive() and not output.exists()  # it waits, nothing half-written
    (output).mkdir()  # what the first export leaves: an export of its own
    (output / bundle.RECORD).write_text(json.dumps({"files": [bundle.RECORD]}))
    os.close(holder)
    waiting.join(timeout=120)
    assert not waiting.is_alive() and errors == []
    assert json.loads((output / bundle.RECORD).read_text())["format"] == "ct2"
    assert sorted(p.name for p in output.parent.iterdir()) == ["ct2"]


def test_a_parser_is_not_exported(tmp_path, toy_bundle):
    """The rule export took any experiment; `aiayn export` refused parsers (#77)."""
    weights, subword, _ = toy_bundle
    with pytest.raises(InputError, match=r"'wsj' parses \(decode.constrain: trees\)"):
        bundle.export(weights, subword, DecodeSettings(constrain="trees"), tmp_path / "x", "ct2",
                      experiment="wsj")  # fmt: skip
    assert not (tmp_path / "x").exists()


def export_format_pattern() -> re.Pattern:
    """The `format` wildcard's constraint, as rules/common.smk states it."""
    rules = (PROJECT / "rules" / "common.smk").read_text(encoding="utf-8")
    return re.compile(re.search(r'^    format=r"([^"]+)",', rules, re.M).group(1))


@given(st.text(alphabet=st.characters(codec="ascii"), max_size=20))
@settings(max_examples=200, derandomize=True, deadline=None)
def test_each_ct2_weight_type_is_a_target_and_any_other_is_refused_by_name(suffix):
    """The export rule's targets follow CTranslate2's own list of weight types (ct2-float32
    was refused by a list of our own): each is a target; any other suffix the pattern lets
    through is refused before the model loads, naming itself and the list."""
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    pattern = export_format_pattern()
    assert all(pattern.fullmatch(f"ct2-{kind}") for kind in ACCEPTED_MODEL_TYPES)
    if not pattern.fullmatch(f"ct2-{suffix}"):
        return
    if suffix in ACCEPTED_MODEL_TYPES:
        bundle.check_quantization(suffix)
    else:
        with pytest.raises(InputError, match=f"^{re.escape(repr(suffix))} is not a CTranslate2"):
            bundle.check_quantization(suffix)


@pytest.mark.parametrize("place", ["read-only file system", "under a file", "under /proc"])
def test_an_export_to_a_place_that_cannot_be_written_is_refused_naming_it(
    tmp_path, toy_bundle, place, request
):
    """It was an OSError traceback from the staging folder (#100); nothing is left behind."""
    weights, subword, _ = toy_bundle
    if place == "read-only file system":
        output = request.getfixturevalue("read_only_folder") / "model"
    elif place == "under a file":
        (tmp_path / "a-file").write_text("mine")
        output = tmp_path / "a-file" / "model"
    else:
        output = Path("/proc/aiayn-export/model")
    with pytest.raises(InputError, match=rf"^--output {re.escape(str(output))} cannot be written"):
        bundle.export(weights, subword, DecodeSettings(), output, "ct2", None, "toy")
    assert not output.exists()
    if place == "under a file":
        assert (tmp_path / "a-file").read_text() == "mine"
