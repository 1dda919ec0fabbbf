"""Bad inputs to the metrics, the data set and TrainConfig: a clear ValueError, never a silently
wrong answer. (Model and decoder inputs are checked in test_input_errors.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from convs2s_edu.data import SortingDataset
from convs2s_edu.metrics import exact_match, token_accuracy
from convs2s_edu.training import TrainConfig

# --------------------------------------------------------------------------
# Metrics: trailing PAD is stripped; floats, inner PAD, negative ids refused
# --------------------------------------------------------------------------


def test_padded_tensors_score_like_the_unpadded_lists():
    preds = [[3, 1, 2], [5, 9]]
    refs = [[3, 1, 4], [5, 9]]
    # by hand: 2 of 3 right in row 0, 2 of 2 in row 1 -> 4/5 tokens; 1 of 2 rows exactly right
    padded_preds = torch.tensor([[3, 1, 2, 0], [5, 9, 0, 0]])
    padded_refs = torch.tensor([[3, 1, 4, 0], [5, 9, 0, 0]])
    assert token_accuracy(padded_preds, padded_refs) == pytest.approx(4 / 5)
    assert exact_match(padded_preds, padded_refs) == pytest.approx(1 / 2)
    assert token_accuracy(padded_preds, padded_refs) == token_accuracy(preds, refs)
    # the case: PAD counted as a token gave 0.875 where the answer is 2/3
    assert token_accuracy(
        torch.tensor([[1, 2, 9, 0, 0]]), torch.tensor([[1, 2, 3, 0, 0]])
    ) == pytest.approx(2 / 3)
    # a padded prediction against an unpadded reference of the same tokens is right
    assert exact_match([[4, 5, 0, 0]], [[4, 5]]) == 1.0


def test_eos_cut_then_padding_stripped():
    eos = 12
    assert exact_match(torch.tensor([[1, 2, eos, 0]]), [[1, 2]], eos=eos) == 1.0
    assert token_accuracy([[1, 2, eos, 7, 0]], [[1, 2, 0, 0, 0]], eos=eos) == 1.0


@pytest.mark.parametrize(
    "predictions, match",
    [
        ([[1.9]], r"predictions\[0\] holds 1.9"),
        (torch.tensor([[1.0, 2.0]]), "dtype torch.float32"),
        (torch.tensor([[True]]), "dtype torch.bool"),
        ([[True]], r"holds True"),
        ([[1, 0, 2]], "PAD .0. at position 1 before a real token"),
        ([[-1]], "token id -1"),
        ([1, 2], r"predictions\[0\] is 1"),
        ("abc", "got str"),
        (torch.tensor([1, 2]), "2-D"),
    ],
)
def test_bad_predictions_are_refused_not_truncated(predictions, match):
    for metric in (exact_match, token_accuracy):
        with pytest.raises(ValueError, match=match):
            metric(predictions, [[1, 2]])


def test_numpy_integer_tokens_are_accepted():
    assert exact_match([np.array([1, 2], dtype=np.int16)], [[1, 2]]) == 1.0
    assert token_accuracy(torch.tensor([[1, 2]], dtype=torch.uint8), [[1, 3]]) == 0.5


# --------------------------------------------------------------------------
# SortingDataset
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "examples, match",
    [
        ([([3, 1, 2], [3, 1, 2])], r"target \[3, 1, 2\] is not the sorted source \[1, 2, 3\]"),
        ([([3, 1, 2], [1, 2])], "is not the sorted source"),
        ([([2, 2], [2, 2]), ([1, 5], [1, 4])], "example 1"),
        ([([1.5, 2], [1.5, 2])], "holds 1.5; tokens must be integers"),
        ([([True], [True])], "holds True"),
        ([([], [])], "example 0 is empty"),
        ([([1, 2],)], "must be a pair"),
    ],
)
def test_sorting_dataset_refuses_bad_examples(examples, match):
    with pytest.raises(ValueError, match=match):
        SortingDataset(examples, 10)


def test_sorting_dataset_accepts_numpy_integers_and_stores_ints():
    ds = SortingDataset([(np.array([3, 1]), np.array([1, 3]))], 5)
    assert ds[0] == ([3, 1], [1, 3]) and all(type(t) is int for t in ds[0][0])


# --------------------------------------------------------------------------
# TrainConfig: types and ranges, the field named
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"clip_norm": "x"}, "clip_norm must be a positive finite number or None, got 'x'"),
        ({"clip_norm": float("inf")}, "clip_norm"),
        ({"clip_norm": True}, "clip_norm"),
        ({"model_options": None}, "model_options must be a dict .* got None"),
        ({"model_options": {1: 2}}, "model_options"),
        ({"lr": True}, "lr must be a positive finite number, got True"),
        ({"lr": "0.1"}, "lr must be"),
        ({"lr": float("nan")}, "lr must be"),
        ({"epochs": 2.0}, "epochs must be an integer in 1..10000, got 2.0"),
        ({"epochs": True}, "epochs"),
        ({"max_len": 100_000}, "max_len must be an integer in 1..512, got 100000"),
        ({"min_len": 0}, "min_len must be an integer in 1..512, got 0"),
        ({"vocab_size": 10**6}, "vocab_size must be an integer in 1..10000"),
        ({"batch_size": 10**5}, "batch_size must be an integer in 1..4096"),
        ({"n_train": 10**9}, "n_train must be an integer in 1..1000000"),
        ({"seed": -1}, r"seed must be an integer in 0..4294967295, got -1"),
        ({"seed": 2**40}, "seed"),
        ({"paper_normalisation": "yes"}, "paper_normalisation must be True or False"),
        ({"device": 0}, "device must be"),
        ({"model": None}, "model must be one of"),
    ],
)
def test_train_config_names_the_bad_field_and_the_allowed_values(changes, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**changes)


def test_train_config_bounds_are_inclusive():
    cfg = TrainConfig(max_len=512, min_len=512, seed=2**32 - 1, batch_size=4096, epochs=1)
    assert (cfg.max_len, cfg.seed) == (512, 2**32 - 1)
    assert TrainConfig(epochs=np.int64(3)).epochs == 3  # numpy integers accepted, stored as int
    assert type(TrainConfig(epochs=np.int64(3)).epochs) is int


def test_from_dict_refuses_unknown_fields():
    d = TrainConfig().to_dict()
    assert TrainConfig.from_dict(d) == TrainConfig()
    with pytest.raises(ValueError, match="unknown TrainConfig field.*n_heads"):
        TrainConfig.from_dict({**d, "n_heads": 4})
    with pytest.raises(ValueError, match="from a dict, got list"):
        TrainConfig.from_dict([1])


# --------------------------------------------------------------------------
# evaluate(): its arguments (found by mutation testing)
# --------------------------------------------------------------------------


def _tiny_gru():
    from convs2s_edu.rnn import RNNSeq2Seq, RNNSeq2SeqConfig

    torch.manual_seed(0)
    return RNNSeq2Seq(
        RNNSeq2SeqConfig(
            vocab_size=9, embed_dim=8, hidden_dim=8, attention_dim=8, max_positions=16
        )
    )


def test_evaluate_argument_errors_name_the_argument():
    from convs2s_edu.metrics import evaluate

    model, examples = _tiny_gru(), [([3, 1], [1, 3])]
    with pytest.raises(ValueError, match=r"^batch_size must be an integer >= 1, got 0$"):
        evaluate(model, examples, batch_size=0)
    with pytest.raises(ValueError, match=r"^beam_size must be an integer >= 1, got 0$"):
        evaluate(model, examples, beam_size=0)
    for not_a_pair in ([3, 1, 2], 7, torch.tensor([[1, 2], [1, 2]])):
        with pytest.raises(ValueError, match=r"example 0 must be a pair"):
            evaluate(model, [not_a_pair])
    with pytest.raises(ValueError, match=r"sources\[0\] holds 1.5"):
        evaluate(model, [([1.5, 2], [1, 2])])


def test_evaluate_defaults_greedy_batch_of_one_and_moves_only_when_asked(monkeypatch):
    import convs2s_edu.decode as decode_mod
    import convs2s_edu.metrics as metrics_mod
    from convs2s_edu.data import generate_dataset

    model = _tiny_gru()
    examples = generate_dataset(7, 1, 5, 9, seed=2)
    reference = metrics_mod.evaluate(model, examples, batch_size=7)
    assert metrics_mod.evaluate(model, examples, batch_size=1) == reference  # 1 is allowed

    def no_beam(*args, **kwargs):
        raise AssertionError("beam search called although beam_size defaults to 1 (greedy)")

    monkeypatch.setattr(decode_mod, "beam_search", no_beam)
    assert metrics_mod.evaluate(model, examples) == reference
    moves = []
    real_to = model.to
    monkeypatch.setattr(model, "to", lambda *a, **k: (moves.append(a), real_to(*a, **k))[1])
    metrics_mod.evaluate(model, examples)
    assert moves == []  # no device given: the model stays where it is
    metrics_mod.evaluate(model, examples, device="cpu")
    assert moves == [("cpu",)]


# --------------------------------------------------------------------------
# Exact messages and pass-through arguments (survivors of mutation testing)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: exact_match([[1.5]], [[1]]),
            "predictions[0] holds 1.5; token ids must be integers >= 0 "
            "(floats are refused, not truncated)",
        ),
        (
            lambda: exact_match([[1]], [torch.tensor([1.0])]),
            "references[0] must hold integer token ids, got dtype torch.float32",
        ),
        (
            lambda: exact_match([[1]], [torch.tensor([True])]),
            "references[0] must hold integer token ids, got dtype torch.bool",
        ),
        (
            lambda: exact_match([[1]], [[0, 1]]),
            "references[0] holds PAD (0) at position 0 before a real token; PAD may only fill "
            "the end of a sequence",
        ),
        (
            lambda: exact_match([[1], [0, 2]], [[1], [2]]),
            "predictions[1] holds PAD (0) at position 0 before a real token; PAD may only fill "
            "the end of a sequence",
        ),
        (
            lambda: token_accuracy([[1]], [[-2]]),
            "references[0] holds token id -2; token ids must be >= 0",
        ),
        (lambda: exact_match([], []), "need at least one (prediction, reference) pair, got 0"),
        (
            lambda: token_accuracy([[1]], [[0]]),
            "references hold no tokens at all; token accuracy needs >= 1",
        ),
    ],
)
def test_metric_messages_name_the_argument_and_the_row(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


def test_eos_cuts_references_too():
    eos = 12
    # the reference's tokens after <eos> are not part of it: 2 of 2 right, not 2 of 3
    assert token_accuracy([[1, 2]], [[1, 2, eos, 5]], eos=eos) == 1.0
    assert exact_match([[1, 2]], [[1, 2, eos, 5]], eos=eos) == 1.0


def test_evaluate_messages_and_pass_through(monkeypatch):
    import convs2s_edu.decode as decode_mod
    import convs2s_edu.metrics as metrics_mod
    from convs2s_edu.data import generate_dataset

    model = _tiny_gru()
    with pytest.raises(ValueError) as info:
        metrics_mod.evaluate(model, [])
    assert str(info.value) == "need at least one example to evaluate, got 0"
    with pytest.raises(ValueError) as info:
        metrics_mod.evaluate(model, [([1], [1.5])])
    assert str(info.value).startswith("references[0] holds 1.5")
    examples = generate_dataset(5, 3, 5, 9, seed=4)
    # max_len reaches the decoders: one step means at most one token, greedy and beam alike
    for beam in (1, 2):
        cut = metrics_mod.evaluate(model, examples, beam_size=beam, max_len=1)
        refs = [y for _, y in examples]
        preds = (
            decode_mod.greedy_decode(model, [x for x, _ in examples], max_len=1)
            if beam == 1
            else decode_mod.beam_search(model, [x for x, _ in examples], beam_size=2, max_len=1)
        )
        assert all(len(p) <= 1 for p in preds)
        assert cut["token_accuracy"] == token_accuracy(preds, refs)
    seen = {}
    real_beam = decode_mod.beam_search

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real_beam(*args, **kwargs)

    monkeypatch.setattr(decode_mod, "beam_search", spy)
    metrics_mod.evaluate(model, examples, beam_size=3, max_len=4)
    assert seen["beam_size"] == 3 and seen["max_len"] == 4


def test_data_helpers_defaults_and_messages():
    from convs2s_edu.data import (
        eos_index,
        generate_dataset,
        generate_sorting_example,
        n_token_ids,
        sos_index,
    )

    for f in (sos_index, eos_index, n_token_ids):
        with pytest.raises(ValueError) as info:
            f(2.5)
        assert str(info.value) == "vocab_size must be an integer >= 1, got 2.5"
    x, y = generate_sorting_example(6, 9)  # no rng: a fresh generator
    assert len(x) == 6 and y == sorted(x)
    assert generate_dataset(20, 1, 4, 9) == generate_dataset(20, 1, 4, 9, seed=0)


def test_collate_and_dataset_messages_and_defaults(monkeypatch):
    import convs2s_edu.decode as decode_mod
    import convs2s_edu.metrics as metrics_mod
    from convs2s_edu.data import collate_batch

    with pytest.raises(ValueError) as info:
        collate_batch([], 10)
    assert str(info.value) == "cannot collate an empty list of examples (need >= 1)"
    for empty in (([], [1]), ([1], [])):  # either side empty
        with pytest.raises(ValueError, match="example 0 is empty"):
            collate_batch([empty], 10)
    with pytest.raises(ValueError) as info:
        SortingDataset([], 10)
    assert str(info.value) == "SortingDataset needs at least one example, got 0"
    assert (
        SortingDataset.generate(9, 1, 3, 5).examples
        == SortingDataset.generate(9, 1, 3, 5, seed=0).examples
    )
    # greedy decoding gets evaluate's max_len
    seen = {}
    real_greedy = decode_mod.greedy_decode

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real_greedy(*args, **kwargs)

    monkeypatch.setattr(decode_mod, "greedy_decode", spy)
    metrics_mod.evaluate(_tiny_gru(), [([3, 1], [1, 3])], max_len=2)
    assert seen["max_len"] == 2
