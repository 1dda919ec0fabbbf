"""Tests of ``convs2s_edu.training.progress``: training reports one line per epoch in logs, a
tqdm bar on a terminal (no warnings), nothing when switched off, and its lines go to the build
log under sphinx-gallery."""

import io
import re
import sys
import warnings

import pytest
from _tiny import tiny_config

from convs2s_edu.training import train
from convs2s_edu.training.progress import Progress

pytestmark = pytest.mark.usefixtures("single_thread")


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_one_line_per_epoch_when_stderr_is_not_a_terminal(model, capsys):
    result = train(
        tiny_config(model, n_train=64, epochs=3), progress=None
    )  # pytest's stderr is not a tty
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 3, captured.err
    for k, (line, record) in enumerate(zip(lines, result.history.epochs), start=1):
        m = re.fullmatch(
            rf"{model}: epoch (\d+)/3, train loss ([0-9.]+), ([0-9.]+) s "
            r"\(([0-9,]+) tokens/s\)",
            line,
        )
        assert m, line
        assert int(m[1]) == k
        assert float(m[2]) == pytest.approx(record["train_loss"], abs=1e-4)
        assert float(m[3]) == pytest.approx(record["seconds"], abs=0.051)


def test_the_epoch_line_names_the_held_out_exact_match_with_eval_every(capsys):
    result = train(tiny_config("gru", n_train=64, epochs=2, eval_every=2), progress=None)
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines
    m = re.fullmatch(
        r"gru: epoch 2/2, train loss [0-9.]+, held-out exact match ([0-9.]+)%, [0-9.]+ s "
        r"\([0-9,]+ tokens/s\)",
        lines[-1],
    )
    assert m, lines[-1]
    assert float(m[1]) == pytest.approx(100 * result.history.evals[-1]["exact_match"], abs=0.051)


def test_nothing_when_progress_is_off(capsys):
    train(tiny_config("gru", n_train=64, epochs=1), progress=False)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_a_bar_without_warnings_on_a_terminal(monkeypatch):
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning from the progress reporting fails
        train(tiny_config("convs2s", n_train=64, epochs=2), progress=None)
    out = term.getvalue()
    assert "convs2s" in out and "\r" in out  # tqdm redraws its line
    assert "epoch 1/2, train loss" not in out  # no log lines on a terminal


def test_the_bar_closes_when_its_block_ends(monkeypatch):
    monkeypatch.setattr(sys, "stderr", Terminal())
    with Progress(3, "jobs") as progress:
        assert progress.bar is not None and not progress.bar.disable
    assert progress.bar.disable  # tqdm's close() switches the bar off


def test_lines_go_to_the_build_log_under_sphinx_gallery(monkeypatch, capfd):
    # sphinx-gallery swaps stderr for a tee that puts it into the page; the lines belong
    # in the build's own log (the process's real stderr) instead
    tee_class = type("_LoggingTee", (io.StringIO,), {"__module__": "sphinx_gallery.gen_rst"})
    tee = tee_class()
    monkeypatch.setattr(sys, "stderr", tee)
    train(tiny_config("gru", n_train=64, epochs=2), progress=None)
    monkeypatch.undo()
    assert tee.getvalue() == ""
    err = capfd.readouterr().err
    assert "gru: epoch 1/2, train loss" in err and "gru: epoch 2/2, train loss" in err
