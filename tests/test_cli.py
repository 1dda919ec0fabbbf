"""The command line: train, evaluate, compare, and one-line errors for bad arguments."""

import json
import subprocess
import sys

import pytest
import torch
from _tiny import SMALL, tiny_config  # noqa: E402

from convs2s_edu.cli import main

pytestmark = pytest.mark.usefixtures("single_thread")


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
            "epochs must be an integer in 1..10000, got 0",
        ),
        (
            ["train", "--model", "gru", "--out", "{tmp}", "--min-len", "9", "--max-len", "4"],
            "9 > 4",
        ),
        (["train", "--model", "gru", "--out", "{tmp}", "--device", "tpu"], "'tpu'"),
        (["evaluate", "{tmp}/nothing-here"], "no checkpoint at"),
        (["evaluate", "{tmp}", "--beam", "0"], "--beam must be in 1..100, got 0"),
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


# --------------------------------------------------------------------------
# Every expected error: one line on stderr, status 2, and no training first
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_run(tmp_path_factory):
    """A one-epoch GRU checkpoint (trained once for the module) to damage in copies."""
    from convs2s_edu.training import train

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("cli-run")
    cfg = tiny_config("gru")
    train(cfg, out_dir=out, progress=False)
    torch.set_num_threads(before)
    return out / "checkpoint.pt"


@pytest.fixture
def no_training(monkeypatch):
    """Make any training attempt fail the test: errors must come before training starts."""
    import convs2s_edu.cli as cli_mod
    import convs2s_edu.lab.experiments.runner as runner_mod
    import convs2s_edu.training.cache as cache_mod

    def refuse(*args, **kwargs):
        raise AssertionError("training started before the arguments were checked")

    monkeypatch.setattr(cli_mod, "train", refuse)
    monkeypatch.setattr(cli_mod, "compare", refuse)
    monkeypatch.setattr(cache_mod, "train", refuse)
    monkeypatch.setattr(runner_mod, "train_or_load", refuse)


def _damage(good_run, tmp_path, how):
    state = torch.load(good_run, weights_only=True)
    if how == "nan":
        name = next(iter(state["model"]))
        state["model"][name] = state["model"][name] * float("nan")
    elif how == "no-history":
        del state["history"]
    elif how == "config-list":
        state["train_config"] = ["gru"]
    elif how == "convs2s-config":
        state["train_config"]["model"] = "convs2s"
        state["train_config"]["model_options"] = {}
    elif how == "foreign":
        state = {"weights": [1, 2, 3]}
    path = tmp_path / f"{how}.pt"
    torch.save(state, path)
    return path


def _one_line_status_2(argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("convs2s-edu ")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", "--model", "gru", "--out", "{tmp}/f.txt"], "is an existing file"),
        (["train", "--model", "gru", "--out", "{tmp}/f.txt/sub"], "is a file, not a directory"),
        (
            ["train", "--model", "gru", "--out", "{tmp}/r", "--max-len", "100000"],
            "max_len must be an integer in 1..512, got 100000",
        ),
        (
            ["train", "--model", "gru", "--out", "{tmp}/r", "--n-train", "1000000000"],
            "n_train must be an integer in 1..1000000, got 1000000000",
        ),
        (["train", "--model", "gru", "--out", "{tmp}/r", "--batch-size", "0"], "batch_size"),
        (["train", "--model", "gru", "--out", "{tmp}/r", "--lr", "0"], "lr must be a positive"),
        (["train", "--model", "gru", "--out", "{tmp}/r", "--lr", "nan"], "got nan"),
        (["train", "--model", "gru", "--out", "{tmp}/r", "--seed", "-1"], "seed must be"),
        (["compare", "--json", "{tmp}"], "is a directory"),
        (["compare", "--json", "{tmp}/missing/rows.json"], "does not exist"),
        (["compare", "--max-len", "100000"], "max_len must be an integer in 1..512"),
        (["evaluate", "{run}", "--beam", "1000"], "--beam must be in 1..100, got 1000"),
        (["evaluate", "{run}", "--samples", "-1"], "--samples must be >= 0, got -1"),
        (["evaluate", "{run}", "--device", "tpu"], "'tpu'"),
        (["evaluate", "{tmp}/nan.pt"], "NaN or infinite"),
        (["evaluate", "{tmp}/no-history.pt"], "missing key(s) history"),
        (["evaluate", "{tmp}/config-list.pt"], "train_config must be a dict"),
        (["evaluate", "{tmp}/convs2s-config.pt"], "its weights do not fit the 'convs2s' model"),
        (["evaluate", "{tmp}/foreign.pt"], "not a convs2s_edu checkpoint"),
    ],
)
def test_every_expected_error_is_one_line_before_any_training(
    argv, expected, good_run, tmp_path, capsys, no_training
):
    (tmp_path / "f.txt").write_text("a file")
    for how in ("nan", "no-history", "config-list", "convs2s-config", "foreign"):
        _damage(good_run, tmp_path, how)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{run}", str(good_run)) for a in argv]
    _one_line_status_2(argv, expected, capsys)


def test_resume_with_a_changed_config_is_one_line(good_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(good_run, run / "checkpoint.pt")
    argv = [
        "train",
        "--model",
        "gru",
        "--out",
        str(run),
        "--resume",
        "--n-train",
        "32",
        "--epochs",
        "2",
        "--max-len",
        "6",
        "--min-len",
        "3",
        "--device",
        "cpu",
        "--quiet",
    ]
    # the checkpoint's model_options differ from the CLI's defaults: refused, naming the field
    _one_line_status_2(argv, "different config: ", capsys)


def test_a_failed_checkpoint_write_is_one_line(tmp_path, capsys, full_disk):
    with full_disk:
        _one_line_status_2(
            ["train", "--model", "gru", "--out", str(tmp_path / "r"), *SMALL],
            "No space left on device (a checkpoint of this run needs",
            capsys,
        )


def test_out_of_range_size_in_a_real_process_is_one_line_and_status_2(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "convs2s_edu",
            "train",
            "--model",
            "gru",
            "--out",
            str(tmp_path / "r"),
            "--max-len",
            "100000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "convs2s-edu train: error: max_len must be an integer in 1..512, got 100000"
    )
    assert not (tmp_path / "r").exists()  # nothing written either
