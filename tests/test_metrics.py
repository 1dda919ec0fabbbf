"""Tests of ``convs2s_edu.metrics``: exact match and token accuracy by hand, padding and
``<eos>`` handling, bad predictions and references refused with a message that names the row,
and ``evaluate`` against decoding and the metrics, its defaults and arguments."""

import numpy as np
import pytest
import torch
from _tiny import DECODING_VOCAB, decoding_model

import convs2s_edu.decode as decode_mod
import convs2s_edu.metrics as metrics_mod
from convs2s_edu.data import SortingDataset, eos_index, generate_dataset
from convs2s_edu.decode import beam_search, greedy_decode
from convs2s_edu.metrics import evaluate, exact_match, token_accuracy

pytestmark = pytest.mark.usefixtures("single_thread")

VOCAB = DECODING_VOCAB
REF = [1, 2, 3, 4]
KIND = {"conv": "convs2s", "rnn": "gru"}
#: The GRU of the argument tests: 8 features, positions for 16 tokens.
GRU_8 = {"embed_dim": 8, "hidden_dim": 8, "attention_dim": 8, "max_positions": 16}


# (prediction, reference, exact match, correct reference positions)
CASES = {
    "perfect": ([1, 2, 3, 4], REF, 1, 4),
    "empty": ([], REF, 0, 0),
    "short": ([1, 2], REF, 0, 2),  # missing positions count as wrong
    "long": ([1, 2, 3, 4, 4], REF, 0, 4),  # the extra token: no credit, no penalty
    "wrong_order": ([4, 3, 2, 1], REF, 0, 0),
    "one_swap": ([1, 3, 2, 4], REF, 0, 2),
    "shifted": ([2, 3, 4], REF, 0, 0),  # no alignment: a missing first token spoils the rest
    "long_and_wrong": ([9, 9, 9, 9, 9, 9], REF, 0, 0),
}


@pytest.mark.parametrize("case", CASES)
def test_single_hand_made_cases(case):
    pred, ref, em, correct = CASES[case]
    assert exact_match([pred], [ref]) == em
    assert token_accuracy([pred], [ref]) == pytest.approx(correct / len(ref))


def test_averages_over_examples_and_tokens():
    preds = [c[0] for c in CASES.values()]
    refs = [c[1] for c in CASES.values()]
    assert exact_match(preds, refs) == pytest.approx(1 / len(CASES))
    # micro-average: total correct positions / total reference positions
    total_correct = sum(c[3] for c in CASES.values())
    assert token_accuracy(preds, refs) == pytest.approx(total_correct / (4 * len(CASES)))
    # references of different lengths weigh by their length
    assert token_accuracy([[1], [1, 2, 3]], [[1], [1, 2, 9]]) == pytest.approx(3 / 4)


def test_eos_cutting_and_input_types():
    eos = eos_index(VOCAB)
    # without eos the raw output is compared as it stands
    assert exact_match([[1, 2, eos, 7]], [[1, 2]]) == 0.0
    assert exact_match([[1, 2, eos, 7]], [[1, 2]], eos=eos) == 1.0
    assert token_accuracy([[1, eos, 2]], [[1, 2]], eos=eos) == 0.5
    # tuples and tensors work too
    assert exact_match((torch.tensor([1, 2]),), [(1, 2)]) == 1.0
    assert token_accuracy(torch.tensor([[1, 5]]), torch.tensor([[1, 2]])) == 0.5


def test_bad_inputs():
    with pytest.raises(ValueError, match="same length"):
        exact_match([[1]], [[1], [2]])
    with pytest.raises(ValueError, match="at least one"):
        token_accuracy([], [])
    with pytest.raises(ValueError, match="no tokens"):
        token_accuracy([[1]], [[]])
    with pytest.raises(ValueError, match="eos"):
        exact_match([[1]], [[1]], eos="<eos>")
    with pytest.raises(ValueError, match="sequence"):
        exact_match([1, 2], [1, 2])


# --------------------------------------------------------------------------
# Padding and <eos>
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


def test_eos_cuts_references_too():
    eos = 12
    # the reference's tokens after <eos> are not part of it: 2 of 2 right, not 2 of 3
    assert token_accuracy([[1, 2]], [[1, 2, eos, 5]], eos=eos) == 1.0
    assert exact_match([[1, 2]], [[1, 2, eos, 5]], eos=eos) == 1.0


# --------------------------------------------------------------------------
# Bad predictions and references: refused, not truncated; the message names the row
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# evaluate()
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["conv", "rnn"])
def test_evaluate_matches_decoding_and_metrics(name):
    model = decoding_model(KIND[name], eos_bias=2.0, max_positions=16).train()
    examples = generate_dataset(13, 1, 6, VOCAB, seed=3)
    src = [x for x, _ in examples]
    refs = [y for _, y in examples]
    greedy = greedy_decode(model, src)
    result = evaluate(model, examples, batch_size=5)
    assert result == {
        "exact_match": exact_match(greedy, refs),
        "token_accuracy": token_accuracy(greedy, refs),
        "n_examples": 13,
    }
    assert model.training  # restored
    # batch size does not matter; a SortingDataset works as well as a list
    assert evaluate(model, SortingDataset(examples, VOCAB), batch_size=256) == result
    beam = beam_search(model, src, beam_size=3)
    assert evaluate(model, examples, batch_size=4, beam_size=3, device="cpu") == {
        "exact_match": exact_match(beam, refs),
        "token_accuracy": token_accuracy(beam, refs),
        "n_examples": 13,
    }


def test_evaluate_extremes_and_errors():
    examples = generate_dataset(6, 2, 5, VOCAB, seed=1)
    # a model that always says <eos> first gets nothing right
    assert evaluate(decoding_model("convs2s", eos_bias=1e4, max_positions=16), examples) == {
        "exact_match": 0.0,
        "token_accuracy": 0.0,
        "n_examples": 6,
    }
    model = decoding_model("gru", max_positions=16)
    with pytest.raises(ValueError, match="batch_size"):
        evaluate(model, examples, batch_size=0)
    with pytest.raises(ValueError, match="beam_size"):
        evaluate(model, examples, beam_size=0)
    with pytest.raises(ValueError, match="at least one"):
        evaluate(model, [])


def test_evaluate_argument_errors_name_the_argument():
    model, examples = decoding_model("gru", **GRU_8), [([3, 1], [1, 3])]
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
    model = decoding_model("gru", **GRU_8)
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


def _record_keywords(monkeypatch, name: str) -> dict:
    """Wrap ``convs2s_edu.decode.<name>`` (where ``evaluate`` looks it up) so that the keyword
    arguments of its calls land in the returned dict."""
    seen = {}
    real = getattr(decode_mod, name)

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(decode_mod, name, spy)
    return seen


def test_evaluate_messages_and_pass_through(monkeypatch):
    model = decoding_model("gru", **GRU_8)
    with pytest.raises(ValueError) as info:
        metrics_mod.evaluate(model, [])
    assert str(info.value) == "need at least one example to evaluate, got 0"
    with pytest.raises(ValueError) as info:
        metrics_mod.evaluate(model, [([1], [1.5])])
    assert str(info.value).startswith("references[0] holds 1.5")
    for empty in (([3, 1, 2], []), ([], [1])):  # an empty reference or source, at index 1
        with pytest.raises(ValueError) as info:
            metrics_mod.evaluate(model, [([3, 1], [1, 3]), empty])
        assert str(info.value) == "example 1 is empty; sequences need length >= 1"
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
    seen = _record_keywords(monkeypatch, "beam_search")
    metrics_mod.evaluate(model, examples, beam_size=3, max_len=4)
    assert seen["beam_size"] == 3 and seen["max_len"] == 4
    # greedy decoding gets evaluate's max_len
    seen_greedy = _record_keywords(monkeypatch, "greedy_decode")
    metrics_mod.evaluate(model, [([3, 1], [1, 3])], max_len=2)
    assert seen_greedy["max_len"] == 2


# --------------------------------------------------------------------------
# teacher_forced_scores(): greedy decoding's exact match from one pass
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_teacher_forced_exact_match_is_greedy_decodings_row_by_row(kind, train_on_sorting):
    from _tiny import VOCAB as V
    from _tiny import output_layer, tiny_model

    from convs2s_edu.data import PAD, collate_batch, sos_index
    from convs2s_edu.loss import sequence_loss

    model = tiny_model(kind, max_positions=16, dropout=0.2)  # dropout: eval mode matters
    train_on_sorting(model, steps=200)  # half trained: some rows right, some wrong
    with torch.no_grad():  # <sos> scores highest everywhere: both searches must mask it
        output_layer(model).bias[sos_index(V)] += 100.0
    model.train()
    examples = generate_dataset(400, 2, 6, V, seed=11)
    greedy = greedy_decode(model, [x for x, _ in examples])
    by_greedy = [p == y for p, (_, y) in zip(greedy, examples)]
    got = metrics_mod.teacher_forced_scores(model, examples, batch_size=64)
    assert model.training  # restored
    assert 0.1 < got["exact_match"] < 0.9, got["exact_match"]  # both kinds of row present
    # near-ties: a row may disagree only where a step's two best scores lie within 1e-4
    batch = collate_batch(examples, V)
    with torch.no_grad():
        logits = model.eval()(batch.src, batch.tgt_in)
    loss = float(sequence_loss(logits, batch.tgt_out))  # token-mean cross-entropy
    logits[..., [PAD, sos_index(V)]] = float("-inf")
    top2 = logits.topk(2, dim=-1).values  # (B, T, 2)
    tie = ((top2[..., 0] - top2[..., 1] < 1e-4) & ~batch.tgt_padding_mask).any(dim=1)
    differ = [i for i, (a, b) in enumerate(zip(got["correct"], by_greedy)) if a != b]
    assert all(tie[i] for i in differ), differ
    assert len(differ) <= 2, differ
    assert got["exact_match"] == pytest.approx(sum(got["correct"]) / 400)
    assert got["loss"] == pytest.approx(loss, rel=1e-5)  # the same pass's loss; batches agree
    again = metrics_mod.teacher_forced_scores(model, SortingDataset(examples, V), batch_size=400)
    assert again["correct"] == got["correct"] and again["loss"] == pytest.approx(got["loss"])
    assert got["n_examples"] == 400 and got["n_tokens"] == batch.n_target_tokens
