"""Tests of convs2s_edu.metrics: exact match, token accuracy and evaluate()."""

import pytest
import torch

from convs2s_edu.convs2s import ConvS2S, ConvS2SConfig
from convs2s_edu.data import SortingDataset, eos_index, generate_dataset
from convs2s_edu.decode import beam_search, greedy_decode
from convs2s_edu.metrics import evaluate, exact_match, token_accuracy
from convs2s_edu.rnn import RNNSeq2Seq, RNNSeq2SeqConfig

VOCAB = 9
REF = [1, 2, 3, 4]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


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


def tiny_models(eos_bias=0.0):
    torch.manual_seed(0)
    conv = ConvS2S(
        ConvS2SConfig(
            vocab_size=VOCAB,
            embed_dim=16,
            hidden_dim=16,
            n_encoder_layers=2,
            n_decoder_layers=2,
            max_positions=16,
        )
    )
    rnn = RNNSeq2Seq(
        RNNSeq2SeqConfig(
            vocab_size=VOCAB, embed_dim=16, hidden_dim=16, attention_dim=16, max_positions=16
        )
    )
    with torch.no_grad():
        conv.decoder.W_o.bias[eos_index(VOCAB)] += eos_bias
        rnn.decoder.W_s.bias[eos_index(VOCAB)] += eos_bias
    return {"conv": conv, "rnn": rnn}


@pytest.mark.parametrize("name", ["conv", "rnn"])
def test_evaluate_matches_decoding_and_metrics(name):
    model = tiny_models(eos_bias=2.0)[name].train()
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
    assert evaluate(tiny_models(eos_bias=1e4)["conv"], examples) == {
        "exact_match": 0.0,
        "token_accuracy": 0.0,
        "n_examples": 6,
    }
    model = tiny_models()["rnn"]
    with pytest.raises(ValueError, match="batch_size"):
        evaluate(model, examples, batch_size=0)
    with pytest.raises(ValueError, match="beam_size"):
        evaluate(model, examples, beam_size=0)
    with pytest.raises(ValueError, match="at least one"):
        evaluate(model, [])
