"""The command line's help and the sample columns of ``evaluate`` (issue 11)."""

import pytest
from _tiny import SMALL  # noqa: E402

from convs2s_edu.cli import build_parser, main

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-help") / "run"
    assert main(["train", "--model", "gru", "--out", str(out), *SMALL]) == 0
    return out


def _sample_header(printed: str) -> list[str]:
    """The column names of the sample table: the line that starts with ``#``."""
    header = next(line for line in printed.splitlines() if line.startswith("#  source"))
    return header.split("  ")


def test_greedy_evaluate_prints_no_beam_column(checkpoint, capsys):
    capsys.readouterr()
    assert main(["evaluate", str(checkpoint), "--samples", "3"]) == 0
    printed = capsys.readouterr().out
    assert "(greedy)" in printed
    assert "gru greedy" in printed
    assert "beam=" not in printed, printed
    # three sample rows below the header, numbered 0..2
    rows = [line for line in printed.splitlines() if line[:1].isdigit()]
    assert [r.split()[0] for r in rows] == ["0", "1", "2"]


@pytest.mark.parametrize("beam", [2, 3])
def test_beam_evaluate_prints_the_asked_beam_column(checkpoint, capsys, beam):
    capsys.readouterr()
    assert main(["evaluate", str(checkpoint), "--beam", str(beam), "--samples", "2"]) == 0
    printed = capsys.readouterr().out
    assert f"gru beam={beam}" in printed
    assert "gru greedy" in printed
    others = {f"beam={k}" for k in range(1, 6) if k != beam}
    assert not any(o in printed for o in others), printed


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices, action._choices_actions


def test_every_subcommand_says_what_it_does_and_how_long():
    choices, summaries = _subparsers()
    assert set(choices) == {"train", "evaluate", "compare", "experiment", "bench"}
    summary = {a.dest: a.help for a in summaries}
    for name, sub in choices.items():
        text = sub.format_help()
        assert summary[name], f"{name} has no one-line help"
        assert sub.description, f"{name} --help has no description"
        assert any(word in text for word in ("minute", "second")), f"{name}: no duration"
        assert "default" in text, f"{name}: no defaults"


def test_every_option_has_help():
    choices, _ = _subparsers()
    for name, sub in choices.items():
        for action in sub._actions:
            if action.dest == "help":
                continue
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
