"""Tests of ``convs2s_edu.lab.samples``: sample predictions of several models (greedy and beam)
next to the references, as an aligned table or as blocks, with wrong outputs marked."""

import pytest
from _tiny import decoding_model

from convs2s_edu import beam_search, greedy_decode
from convs2s_edu.lab.samples import format_samples, predict_samples

pytestmark = pytest.mark.usefixtures("single_thread")


def test_predict_samples_and_format():
    examples = [([3, 1, 2], [1, 2, 3]), ([5, 4], [4, 5])]
    models = {
        "conv": decoding_model("convs2s", 0, eos_bias=1.5),
        "gru": decoding_model("gru", 0, eos_bias=1.5),
    }
    rows = predict_samples(models, examples, beam_size=2)
    assert len(rows) == 2
    assert list(rows[0]) == [
        "source",
        "reference",
        "conv greedy",
        "conv beam=2",
        "gru greedy",
        "gru beam=2",
    ]
    src = [x for x, _ in examples]
    assert [r["conv greedy"] for r in rows] == greedy_decode(models["conv"], src)
    assert [r["gru beam=2"] for r in rows] == beam_search(models["gru"], src, beam_size=2)
    text = format_samples(rows)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["#", "source", "reference"]
    assert lines[1].startswith("0  3 1 2")
    # columns are aligned: the "reference" column starts at the same offset on every line
    col = lines[0].index("reference")
    assert lines[1][col:].startswith("1 2 3") and lines[2][col:].startswith("4 5")
    blocks = format_samples(rows, layout="blocks")
    assert "example 1" in blocks and "gru beam=2" in blocks
    hand = [
        {"source": [2, 1], "reference": [1, 2], "m": [1, 2]},
        {"source": [2, 1], "reference": [1, 2], "m": [2]},
    ]
    assert format_samples(hand).splitlines() == [
        "#  source  reference  m",
        "0  2 1     1 2        1 2",
        "1  2 1     1 2        2*",
        "* differs from the reference",
    ]
    with pytest.raises(ValueError, match="layout"):
        format_samples(rows, layout="wide")
    with pytest.raises(ValueError, match="beam_size"):
        predict_samples(models, examples, beam_size=0)
