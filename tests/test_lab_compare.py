"""Tests of ``convs2s_edu.lab.compare``, the comparison of the seed's two models (through
``convs2s-edu compare``): the table, the interleaved speed measurement and its verdict, and the
window settings checked before anything trains."""

import json

import pytest
from _tiny import SMALL

from convs2s_edu.cli import main

pytestmark = pytest.mark.usefixtures("single_thread")


def test_compare_prints_the_speed_table_and_ratio(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    rows_file = tmp_path / "rows.json"
    assert (
        main(["compare", *SMALL, "--rounds", "2", "--window-steps", "1", "--json", str(rows_file)])
        == 0
    )
    printed = capsys.readouterr().out
    assert "tokens/s (median)" in printed and "windows min-max" in printed
    flat = " ".join(printed.split())
    assert (
        "speed, measured interleaved: 2 windows of 1 training steps per model, in the order "
        "convs2s, gru, then back"
    ) in flat
    assert "on the same batches" in printed
    assert "throughput ratio gru / convs2s" in printed
    assert "load average" in printed and "machine:" in printed
    saved = json.loads(rows_file.read_text())
    rows, speed = saved["rows"], saved["speed"]
    assert [r["model"] for r in rows] == ["convs2s", "gru"]
    assert speed["order"] == ["convs2s", "gru", "gru", "convs2s"]
    assert " ".join(saved["verdict"]["text"].split()) in " ".join(printed.split())
    for r in rows:
        assert 0.0 <= r["exact_match"] <= 1.0 and 0.0 <= r["token_accuracy"] <= 1.0
        # the table's speed is the interleaved windows' median, not the training run's clock
        assert r["tokens_per_second"] == speed["throughput"][r["model"]]["median"]
        lo, hi = r["tokens_per_second_range"]
        assert lo <= r["tokens_per_second"] <= hi


def test_compare_refuses_bad_window_settings_before_training(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    assert main(["compare", *SMALL, "--rounds", "1"]) == 2
    err = capsys.readouterr().err
    assert "n_rounds must be an integer >= 2, got 1" in err
    assert not (tmp_path / "cache").exists()  # nothing was trained
