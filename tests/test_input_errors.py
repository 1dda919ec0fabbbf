"""Bad input gets a clear ``ValueError`` that names the bad value and the allowed range."""

from __future__ import annotations

import re

import pytest
import torch

from convs2s_edu import (
    ConvBlock,
    ConvS2S,
    ConvS2SConfig,
    RNNSeq2Seq,
    RNNSeq2SeqConfig,
    SortingDataset,
    collate_batch,
    generate_dataset,
    sos_index,
)
from convs2s_edu.data import generate_sorting_example, n_token_ids

pytestmark = pytest.mark.usefixtures("single_thread")

VOCAB = 10
MAX_POS = 8
N_IDS = n_token_ids(VOCAB)  # 13: ids 0..12


def _convs2s():
    return ConvS2S(
        ConvS2SConfig(
            vocab_size=VOCAB,
            embed_dim=8,
            hidden_dim=8,
            n_encoder_layers=1,
            n_decoder_layers=1,
            max_positions=MAX_POS,
        )
    ).eval()


def _rnn():
    return RNNSeq2Seq(
        RNNSeq2SeqConfig(
            vocab_size=VOCAB, embed_dim=8, hidden_dim=8, attention_dim=8, max_positions=MAX_POS
        )
    ).eval()


MODELS = {"convs2s": _convs2s, "rnn": _rnn}
model_kinds = pytest.mark.parametrize("make_model", list(MODELS.values()), ids=list(MODELS))


def _ok_src(B=2, S=4):
    return torch.randint(1, VOCAB + 1, (B, S))


def _ok_tgt(B=2, T=5):
    tgt = torch.randint(1, VOCAB + 1, (B, T))
    tgt[:, 0] = sos_index(VOCAB)
    return tgt


# --------------------------------------------------------------------------
# Model inputs
# --------------------------------------------------------------------------


@model_kinds
def test_valid_inputs_pass_the_checks(make_model):
    model = make_model()
    # the longest accepted input is exactly max_positions, ids 0..N_IDS-1
    src = _ok_src(S=MAX_POS)
    src[0, 0] = N_IDS - 1
    logits = model(src, _ok_tgt(T=MAX_POS))
    assert logits.shape == (2, MAX_POS, N_IDS)


@model_kinds
@pytest.mark.parametrize("which", ["src", "tgt_in"])
def test_sequence_longer_than_max_positions_is_rejected(make_model, which):
    model = make_model()
    src, tgt = _ok_src(), _ok_tgt()
    if which == "src":
        src = _ok_src(S=MAX_POS + 1)
    else:
        tgt = _ok_tgt(T=MAX_POS + 3)
    bad = MAX_POS + 1 if which == "src" else MAX_POS + 3
    with pytest.raises(ValueError, match=rf"{which} has length {bad}\b.*1\.\.{MAX_POS}\b"):
        model(src, tgt)


@model_kinds
@pytest.mark.parametrize("which", ["src", "tgt_in"])
@pytest.mark.parametrize("bad_id", [-1, N_IDS, 1000])
def test_token_ids_outside_vocabulary_are_rejected(make_model, which, bad_id):
    model = make_model()
    src, tgt = _ok_src(), _ok_tgt()
    (src if which == "src" else tgt)[1, 2] = bad_id
    with pytest.raises(
        ValueError,
        match=rf"{which} holds token id {re.escape(str(bad_id))}\b"
        rf".*0\.\.{N_IDS - 1}\b",
    ):
        model(src, tgt)


@model_kinds
def test_mismatched_batch_sizes_are_rejected(make_model):
    model = make_model()
    with pytest.raises(ValueError, match=r"same batch size, got 2 and 3"):
        model(_ok_src(B=2), _ok_tgt(B=3))


@model_kinds
def test_float_and_one_dimensional_token_tensors_are_rejected(make_model):
    model = make_model()
    with pytest.raises(
        ValueError, match=r"src must hold integer token ids, got dtype torch.float32"
    ):
        model(_ok_src().float(), _ok_tgt())
    with pytest.raises(ValueError, match=r"tgt_in must be a 2-D .* got a tensor of shape \(5,\)"):
        model(_ok_src(), _ok_tgt()[0])


def test_decoder_step_past_the_position_table_is_rejected():
    model = _convs2s()
    state = model.decoder.start(model.encode(_ok_src()))
    y = torch.full((2,), sos_index(VOCAB))
    with torch.no_grad():
        for _ in range(MAX_POS):
            _, _, state = model.decoder.step(y, state)
        with pytest.raises(ValueError, match=rf"position {MAX_POS}\b.*0\.\.{MAX_POS - 1}\b"):
            model.decoder.step(y, state)


# --------------------------------------------------------------------------
# Configurations and building blocks
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kernel_size", [2, 4])
def test_even_kernel_with_centred_padding_is_rejected(kernel_size):
    with pytest.raises(ValueError, match=rf"odd kernel_size.*got {kernel_size}\b"):
        ConvBlock(8, kernel_size, causal=False)
    with pytest.raises(ValueError, match=rf"kernel_size must be odd.*got {kernel_size}\b"):
        ConvS2SConfig(kernel_size=kernel_size)
    # a causal block pads k-1 on the left only, so an even width is fine there
    block = ConvBlock(8, kernel_size, causal=True)
    assert block(torch.randn(1, 5, 8)).shape == (1, 5, 8)


CONV_SIZES = [
    "vocab_size",
    "embed_dim",
    "hidden_dim",
    "n_encoder_layers",
    "n_decoder_layers",
    "kernel_size",
    "max_positions",
]
RNN_SIZES = [
    "vocab_size",
    "embed_dim",
    "hidden_dim",
    "n_encoder_layers",
    "n_decoder_layers",
    "attention_dim",
    "max_positions",
]


@pytest.mark.parametrize("value", [0, -3])
@pytest.mark.parametrize("field", CONV_SIZES)
def test_convs2s_config_rejects_non_positive_sizes(field, value):
    with pytest.raises(ValueError, match=rf"{field} must be an integer >= 1, got {value}\b"):
        ConvS2SConfig(**{field: value})


@pytest.mark.parametrize("value", [0, -3])
@pytest.mark.parametrize("field", RNN_SIZES)
def test_rnn_config_rejects_non_positive_sizes(field, value):
    with pytest.raises(ValueError, match=rf"{field} must be an integer >= 1, got {value}\b"):
        RNNSeq2SeqConfig(**{field: value})


@pytest.mark.parametrize("config", [ConvS2SConfig, RNNSeq2SeqConfig])
@pytest.mark.parametrize("dropout", [1.0, -0.1, 1.5])
def test_configs_reject_dropout_outside_unit_interval(config, dropout):
    with pytest.raises(ValueError, match=rf"dropout must be in \[0, 1\), got {dropout}"):
        config(dropout=dropout)


@pytest.mark.parametrize("config", [ConvS2SConfig, RNNSeq2SeqConfig])
def test_config_replace_validates_again(config):
    with pytest.raises(ValueError, match=r"hidden_dim must be an integer >= 1, got 0"):
        config().replace(hidden_dim=0)


def test_conv_block_rejects_non_positive_sizes():
    with pytest.raises(ValueError, match=r"d must be an integer >= 1, got 0"):
        ConvBlock(0, 3)
    with pytest.raises(ValueError, match=r"kernel_size must be an integer >= 1, got -1"):
        ConvBlock(8, -1, causal=True)


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


def test_min_len_greater_than_max_len_is_rejected():
    with pytest.raises(ValueError, match=r"min_len=7 > max_len=3"):
        generate_dataset(10, 7, 3, VOCAB)
    with pytest.raises(ValueError, match=r"min_len=7 > max_len=3"):
        SortingDataset.generate(10, 7, 3, VOCAB)


@pytest.mark.parametrize("value", [0, -2])
@pytest.mark.parametrize("arg", ["n_samples", "min_len", "max_len", "vocab_size"])
def test_generate_dataset_rejects_non_positive_arguments(arg, value):
    kwargs = dict(n_samples=5, min_len=1, max_len=4, vocab_size=VOCAB)
    kwargs[arg] = value
    with pytest.raises(ValueError, match=rf"{arg} must be an integer >= 1, got {value}\b"):
        generate_dataset(**kwargs)


@pytest.mark.parametrize("arg", ["seq_len", "vocab_size"])
def test_generate_sorting_example_rejects_non_positive_arguments(arg):
    kwargs = dict(seq_len=3, vocab_size=VOCAB)
    kwargs[arg] = 0
    with pytest.raises(ValueError, match=rf"{arg} must be an integer >= 1, got 0"):
        generate_sorting_example(**kwargs)


def test_empty_dataset_is_rejected():
    with pytest.raises(ValueError, match=r"at least one example, got 0"):
        SortingDataset([], 10)


def test_dataset_rejects_tokens_outside_vocabulary():
    with pytest.raises(ValueError, match=r"example 1 holds token 11\b.*1\.\.10\b"):
        SortingDataset([([1, 2], [1, 2]), ([11, 3], [3, 11])], 10)
    with pytest.raises(ValueError, match=r"holds token 0\b.*1\.\.10\b"):
        SortingDataset([([0, 2], [0, 2])], 10)


def test_dataset_rejects_non_positive_vocab_size():
    with pytest.raises(ValueError, match=r"vocab_size must be an integer >= 1, got 0"):
        SortingDataset([([1], [1])], 0)


def test_collate_rejects_empty_batches_and_empty_sequences():
    with pytest.raises(ValueError, match=r"empty list of examples"):
        collate_batch([], VOCAB)
    with pytest.raises(ValueError, match=r"example 1 is empty"):
        collate_batch([([1], [1]), ([], [])], VOCAB)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ConvS2S(ConvS2SConfig(vocab_size=10, embed_dim=8, hidden_dim=8)),
        lambda: RNNSeq2Seq(
            RNNSeq2SeqConfig(vocab_size=10, embed_dim=8, hidden_dim=8, attention_dim=8)
        ),
    ],
    ids=["convs2s", "gru"],
)
def test_all_padding_and_left_padded_sources_are_rejected(make):
    model = make()
    tgt_in = torch.tensor([[11, 1], [11, 2]])
    with pytest.raises(ValueError, match="src row 1 holds only padding"):
        model(torch.tensor([[3, 1], [0, 0]]), tgt_in)
    with pytest.raises(ValueError, match="src row 0 has a real token after padding"):
        model(torch.tensor([[0, 3], [2, 1]]), tgt_in)
