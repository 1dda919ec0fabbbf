"""The command line: train, evaluate, compare, and one-line errors for bad arguments."""

import json
import subprocess
import sys

import pytest

from convs2s_edu.cli import main

pytestmark = pytest.mark.usefixtures("single_thread")

# the seed's models on a tiny slice of the task, so each command takes seconds
SMALL = [
    "--n-train",
    "64",
    "--epochs",
    "1",
    "--max-len",
    "6",
    "--min-len",
    "3",
    "--device",
    "cpu",
    "--quiet",
]


def test_train_then_evaluate(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", "--model", "gru", "--out", str(out), *SMALL]) == 0
    printed = capsys.readouterr().out
    assert "gru" in printed and "checkpoint:" in printed
    assert (out / "checkpoint.pt").is_file()

    assert main(["evaluate", str(out), "--beam", "2", "--samples", "2"]) == 0
    printed = capsys.readouterr().out
    assert "exact match" in printed and "token accuracy" in printed
    assert "beam 2" in printed


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


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", "--model", "lstm", "--out", "x"], "invalid choice: 'lstm'"),
        (["train", "--model", "gru"], "the following arguments are required: --out"),
        (
            ["train", "--model", "gru", "--out", "x", "--epochs", "zero"],
            "invalid int value: 'zero'",
        ),
        (["fly"], "invalid choice: 'fly'"),
    ],
)
def test_bad_arguments_get_one_line_and_status_2(argv, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert expected in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["train", "--model", "gru", "--out", "{tmp}", "--epochs", "0"],
            "epochs must be an integer >= 1, got 0",
        ),
        (
            ["train", "--model", "gru", "--out", "{tmp}", "--min-len", "9", "--max-len", "4"],
            "9 > 4",
        ),
        (["train", "--model", "gru", "--out", "{tmp}", "--device", "tpu"], "'tpu'"),
        (["evaluate", "{tmp}/nothing-here"], "no checkpoint at"),
        (["evaluate", "{tmp}", "--beam", "0"], "--beam must be >= 1, got 0"),
        (["evaluate", "{tmp}/garbage.pt"], "not a readable convs2s_edu checkpoint"),
    ],
)
def test_bad_values_get_one_line_and_status_2(argv, expected, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    (tmp_path / "garbage.pt").write_bytes(b"\x00 not a checkpoint")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_module_entry_point_runs():
    done = subprocess.run(
        [sys.executable, "-m", "convs2s_edu", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert "train" in done.stdout and "evaluate" in done.stdout and "compare" in done.stdout
