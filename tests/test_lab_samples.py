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


def test_each_column_holds_its_own_decoder(monkeypatch):
    from convs2s_edu.lab import samples

    monkeypatch.setattr(samples, "greedy_decode", lambda m, src, max_len: [[1]] * len(src))
    monkeypatch.setattr(samples, "beam_search", lambda m, src, **options: [[2]] * len(src))
    rows = predict_samples({"m": None}, [([3, 1], [1, 3])], beam_size=4)
    assert rows == [{"source": [3, 1], "reference": [1, 3], "m greedy": [1], "m beam=4": [2]}]
