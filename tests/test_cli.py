"""Tests of ``convs2s_edu.cli``, the command line: train, evaluate, compare, experiment and
bench as a user runs them, their help, the options that reach the config, and one line on
stderr with status 2 (before any training) for every expected error."""

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from _tiny import SMALL

from convs2s_edu.cli import _config, build_parser, main
from convs2s_edu.fast.paths import cpu_bf16_support
from convs2s_edu.lab.experiments import registry as registry_mod
from convs2s_edu.training.config import TrainConfig

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
        (["evaluate", "{tmp}", "--beam", "0"], "argument --beam: must be in 1..100, got 0"),
        (["evaluate", "{tmp}/garbage.pt"], "not a readable convs2s_edu checkpoint"),
    ],
)
def test_bad_values_get_one_line_and_status_2(argv, expected, tmp_path, capsys):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    (tmp_path / "garbage.pt").write_bytes(b"\x00 not a checkpoint")
    assert _status(argv) == 2
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


@pytest.fixture
def good_run(tiny_runs):
    """A one-epoch GRU checkpoint (``tiny_runs``) to damage in copies."""
    return tiny_runs / "gru" / "checkpoint.pt"


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


def _status(argv) -> int:
    """``main``'s exit status: returned (a bad value found by a command), or argparse's
    ``SystemExit`` (a value outside an option's range)."""
    try:
        return main(argv)
    except SystemExit as done:
        return done.code


def _one_line_status_2(argv, expected, capsys):
    assert _status(argv) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("convs2s-edu ")


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["train", "--model", "gru", "--out", "{tmp}/f.txt"], "is an existing file"),
        (["train", "--model", "gru", "--out", "{tmp}/f.txt/sub"], "cannot create output"),
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
        (["compare", "--json", "{tmp}"], "argument --json: {tmp} is a directory"),
        (["compare", "--json", "{tmp}/missing/rows.json"], "does not exist"),
        (["compare", "--max-len", "100000"], "max_len must be an integer in 1..512"),
        (["evaluate", "{run}", "--beam", "1000"], "argument --beam: must be in 1..100, got 1000"),
        (["evaluate", "{run}", "--samples", "-1"], "argument --samples: must be >= 0, got -1"),
        (["experiment", "--verify", "--claim", "0"], "argument --claim: must be in 1.."),
        (["experiment", "x", "--workers", "0"], "argument --workers: must be >= 1, got 0"),
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
    _one_line_status_2(argv, expected.replace("{tmp}", str(tmp_path)), capsys)


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
        *SMALL,
        "--n-train",  # tiny_config's: the checkpoint's sizes
        "32",
        "--epochs",
        "2",
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


# --------------------------------------------------------------------------
# Options that reach the run: a hybrid by name, the execution path
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["gru+conv", "conv+gru"])
def test_cli_trains_a_hybrid(kind, tmp_path, capsys):
    argv = [
        "train",
        "--model",
        kind,
        "--out",
        str(tmp_path),
        *SMALL,
        "--n-train",
        "32",
        "--max-len",
        "5",
    ]
    assert main(argv) == 0
    assert kind in capsys.readouterr().out
    assert (tmp_path / "checkpoint.pt").is_file()


def test_cli_flags_reach_the_config():
    args = build_parser().parse_args(
        [
            "train",
            "--model",
            "gru",
            "--out",
            "x",
            "--compile-mode",
            "max-autotune",
            "--precision",
            "bf16",
        ]
    )
    cfg = _config(args, "gru")
    assert (cfg.compile, cfg.compile_mode, cfg.precision) == (True, "max-autotune", "bf16")
    args = build_parser().parse_args(["train", "--model", "gru", "--out", "x"])
    cfg = _config(args, "gru")
    assert (cfg.compile, cfg.compile_mode, cfg.precision) == (False, None, "fp32")


def test_the_original_recipe_and_model_are_named_original_and_keep_their_old_names():
    parse = build_parser().parse_args
    base = ["train", "--model", "convs2s", "--out", "x"]
    assert parse(base).recipe == "original"
    assert _config(parse(base), "convs2s").paper_normalisation is True
    for flag in ("--original-convs2s", "--seed-convs2s"):  # the old name, one release
        assert _config(parse([*base, flag]), "convs2s").paper_normalisation is False
    with pytest.raises(SystemExit):
        parse([*base, "--recipe", "seed"])  # the CLI offers the new names only


def test_fast_flag_reaches_the_config_and_compile_turns_it_off():
    parse = build_parser().parse_args
    base = ["train", "--model", "gru", "--out", "x"]
    assert _config(parse([*base, "--no-fast"]), "gru").fast is False
    assert _config(parse([*base, "--fast"]), "gru").fast is True
    # not given: the TrainConfig default
    original = TrainConfig.recipe("original", model="gru")
    assert _config(parse(base), "gru").fast == original.fast
    # torch.compile compiles the reference model: --compile and --compile-mode set fast=False
    cfg = _config(parse([*base, "--compile"]), "gru")
    assert (cfg.compile, cfg.fast) == (True, False)
    cfg = _config(parse([*base, "--compile-mode", "default"]), "gru")
    assert (cfg.compile, cfg.fast) == (True, False)
    assert _config(parse(["compare", "--compile"]), "convs2s").fast is False
    with pytest.raises(ValueError, match="fast"):  # both asked for: TrainConfig refuses
        _config(parse([*base, "--compile", "--fast"]), "gru")


# --------------------------------------------------------------------------
# Help, and the sample columns of evaluate (issue 11)
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A GRU trained with the CLI's ``SMALL`` options, once for the module."""
    out = tmp_path_factory.mktemp("cli-help") / "run"
    assert main(["train", "--model", "gru", "--out", str(out), *SMALL]) == 0
    return out


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


# --------------------------------------------------------------------------
# Errors of the other commands: one line, status 2
# --------------------------------------------------------------------------


def test_cli_refuses_paths_this_machine_cannot_run(tmp_path, capsys):
    base = ["train", "--model", "gru", "--out", str(tmp_path), *SMALL]
    assert main(base + ["--compile-mode", "reduce-overhead"]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA device" in err and len(err.strip().splitlines()) == 1
    if not cpu_bf16_support()[0]:
        assert main(base + ["--precision", "bf16"]) == 2
        err = capsys.readouterr().err
        assert "no bf16 matrix instructions" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "checkpoint.pt").exists()


@pytest.mark.parametrize("threads", [None, "THREADS"])
def test_compare_prints_each_table_after_a_blank_line(threads, monkeypatch, capsys):
    import convs2s_edu.cli as cli_mod

    result = SimpleNamespace(rows=[], threads=threads, speed="SPEED", verdict="V")
    result.convergence, result.to_dict = "CONVERGENCE", dict
    monkeypatch.setattr(cli_mod, "compare", lambda cfg, **kwargs: result)
    monkeypatch.setattr(cli_mod, "format_table", lambda rows: "TABLE")
    monkeypatch.setattr(cli_mod, "speed_table", lambda measured, verdict: f"{measured} {verdict}")
    monkeypatch.setattr(cli_mod, "format_convergence", lambda c: c)
    assert main(["compare", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["TABLE", "", f"{threads or 'SPEED'} V"]  # threads, else the speed
    heading = "convergence speed (seconds: steps x median s/step of the interleaved windows):"
    assert out[3:] == ["", heading, "CONVERGENCE"]


def test_bench_cli_rejects_unknown_path(capsys):
    assert main(["bench", "--quick", "--paths", "warp-speed"]) == 2
    err = capsys.readouterr().err
    assert "unknown path" in err and len(err.strip().splitlines()) == 1


def test_cli_unknown_names_one_line_exit_2(capsys):
    assert main(["experiment", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "allowed: encoder_decoder" in err[0]
    assert main(["experiment", "beam", "--arms", "lstm"]) == 2
    assert "allowed: convs2s, gru" in capsys.readouterr().err


def test_cli_experiment_prints_the_table_and_writes_json(
    tiny_experiment, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(
        registry_mod,
        "QUICK_BUDGET",
        {"steps": 4, "width": 8, "n_valid": 8, "n_test": 8, "eval_every": 2},
    )
    out = tmp_path / "rows.json"
    args = ["experiment", "tiny", "--quick", "--seeds", "2", "--arms", "gru", "--workers", "1"]
    assert main([*args, "--task", "reverse", "--json", str(out), "--quiet"]) == 0
    printed = capsys.readouterr()
    assert printed.err == ""
    assert "2 seed(s) per arm" in printed.out and "trains 4 steps of 128" in printed.out
    assert [
        line.split()[0]
        for line in printed.out.splitlines()
        if line.split() and line.split()[0] in ("gru", "conv")
    ] == ["gru"]
    saved = __import__("json").loads(out.read_text())
    assert [r["arm"] for r in saved["rows"]] == ["gru"]
    assert [(r["arm"], r["seed"]) for r in saved["runs"]] == [("gru", 0), ("gru", 1)]
    from convs2s_edu.training import cache

    arm = tiny_experiment.select(["gru"])[0]
    cfg = registry_mod.budget(quick=True, seeds=2).train_config(arm, 0)
    assert cache.is_cached(cfg.replace(task="reverse"), tmp_path / "cache")  # --task reached
    assert not cache.is_cached(cfg, tmp_path / "cache")
