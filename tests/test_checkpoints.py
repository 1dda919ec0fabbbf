"""Checkpoints: one validating reader behind evaluate, resume and the cache; safe writes."""

from __future__ import annotations

import re
import shutil

import pytest
import torch
from _tiny import TINY_OPTIONS, tiny_config  # noqa: E402

from convs2s_edu import training as train_mod
from convs2s_edu.training import (
    CheckpointError,
    TrainConfig,
    load_checkpoint,
    read_checkpoint,
    train,
    train_or_load,
)
from convs2s_edu.training import cache as cache_mod
from convs2s_edu.training import loop as loop_mod

pytestmark = pytest.mark.usefixtures("single_thread")


def tiny(model="convs2s", **changes):
    return tiny_config(model, **changes)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A one-epoch checkpoint of each model, trained once for the module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    base = tmp_path_factory.mktemp("runs")
    for model in ("convs2s", "gru"):
        train(tiny(model), out_dir=base / model, progress=False)
    torch.set_num_threads(before)
    return base


def copy_run(runs, model, tmp_path):
    dst = tmp_path / model
    shutil.copytree(runs / model, dst)
    return dst


def tamper(path, change):
    state = torch.load(path / "checkpoint.pt", weights_only=True)
    change(state)
    torch.save(state, path / "checkpoint.pt")


def _nan_weights(state):
    name = next(k for k, v in state["model"].items() if v.is_floating_point())
    state["model"][name] = torch.full_like(state["model"][name], float("nan"))


def _swap_weights(other_model):
    def change(state):
        other = torch.load(_swap_weights.runs / other_model / "checkpoint.pt", weights_only=True)
        state["model"] = other["model"]

    return change


CORRUPTIONS = {
    "missing model": (lambda s: s.pop("model"), "missing key(s) model"),
    "missing history": (lambda s: s.pop("history"), "missing key(s) history"),
    "train_config not a dict": (
        lambda s: s.update(train_config=[1, 2]),
        "train_config must be a dict, got list",
    ),
    "unknown config field": (
        lambda s: s["train_config"].update(n_heads=4),
        "unknown TrainConfig field(s) n_heads",
    ),
    "bad config value": (
        lambda s: s["train_config"].update(lr="x"),
        "lr must be a positive finite number, got 'x'",
    ),
    "NaN weights": (_nan_weights, "NaN or infinite"),
    "format from the future": (
        lambda s: s.update(format=2),
        "checkpoint format 2 is not supported (only 1)",
    ),
    "history out of step": (lambda s: s.update(epoch=3), "history holds 1 epoch record"),
    "weights not a state dict": (lambda s: s.update(model=[1.0]), "model must be a state dict"),
    "gru weights under a convs2s config": (
        _swap_weights("gru"),
        "its weights do not fit the 'convs2s' model",
    ),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_every_reader_refuses_a_bad_checkpoint_with_one_clear_error(
    name, runs, tmp_path, monkeypatch
):
    _swap_weights.runs = runs
    change, message = CORRUPTIONS[name]
    run = copy_run(runs, "convs2s", tmp_path)
    tamper(run, change)
    ckpt = run / "checkpoint.pt"
    readers = {
        "read_checkpoint": lambda: read_checkpoint(run),
        "load_checkpoint": lambda: load_checkpoint(run),
        "resume": lambda: train(tiny(epochs=2), out_dir=run, resume=True, progress=False),
    }
    for reader, call in readers.items():
        with pytest.raises(CheckpointError) as info:
            call()
        text = str(info.value)
        assert str(ckpt) in text and message in text, (reader, text)
        assert "\n" not in text
    # the cache: a damaged entry is named, with what to do
    cfg = tiny(epochs=2)
    entry = tmp_path / "cache" / f"convs2s-{train_mod.cache_key(cfg)}"
    entry.mkdir(parents=True)
    shutil.copy(ckpt, entry / "checkpoint.pt")
    with pytest.raises(CheckpointError, match=re.escape(message) + ".*delete"):
        train_or_load(cfg, progress=False, directory=tmp_path / "cache")


def test_convs2s_weights_under_a_gru_config_are_refused(runs, tmp_path):
    _swap_weights.runs = runs
    run = copy_run(runs, "gru", tmp_path)
    tamper(run, _swap_weights("convs2s"))
    with pytest.raises(CheckpointError, match="its weights do not fit the 'gru' model"):
        load_checkpoint(run)


@pytest.mark.parametrize("content", [b"", b"not a checkpoint", None])
def test_unreadable_or_foreign_files_are_refused(tmp_path, content):
    path = tmp_path / "checkpoint.pt"
    if content is None:
        torch.save([1, 2, 3], path)  # a valid torch file, but not a checkpoint
        message = "not a convs2s_edu checkpoint"
    else:
        path.write_bytes(content)
        message = "not a readable convs2s_edu checkpoint"
    with pytest.raises(CheckpointError, match=message):
        read_checkpoint(tmp_path)


RAN = []  # what a malicious pickle managed to run


def _record(what):
    RAN.append(what)
    return {}


class _Malicious:
    """Unpickling this calls _record: code in the file would run if the reader allowed it."""

    def __reduce__(self):
        return (_record, ("code from the checkpoint ran",))


def test_a_checkpoint_that_carries_code_is_refused_without_running_it(tmp_path):
    # everything a checkpoint holds, plus one pickled object that runs a function when loaded
    torch.save({"format": 1, "model": _Malicious()}, tmp_path / "checkpoint.pt")
    RAN.clear()
    with pytest.raises(CheckpointError, match="not a readable convs2s_edu checkpoint"):
        read_checkpoint(tmp_path)
    assert RAN == []  # torch.load(weights_only=True) refused the object before building it


def test_a_good_checkpoint_reads_back_whole(runs):
    state = read_checkpoint(runs / "gru")
    assert state["config"] == tiny("gru")
    assert state["epoch"] == 1 and state["path"] == runs / "gru" / "checkpoint.pt"


# --------------------------------------------------------------------------
# Resume
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, named",
    [
        ({"lr": 2e-3}, "lr (0.001 -> 0.002)"),
        ({"seed": 1}, "seed (0 -> 1)"),
        ({"batch_size": 8}, "batch_size (16 -> 8)"),
        ({"clip_norm": None}, "clip_norm (1.0 -> None)"),
        ({"model_options": dict(TINY_OPTIONS["convs2s"], dropout=0.3)}, "model_options"),
    ],
)
def test_resume_with_a_changed_config_is_refused(change, named, runs, tmp_path):
    run = copy_run(runs, "convs2s", tmp_path)
    before = (run / "checkpoint.pt").read_bytes()
    with pytest.raises(ValueError, match="different config") as info:
        train(tiny(epochs=2, **change), out_dir=run, resume=True, progress=False)
    assert named in str(info.value)
    assert (run / "checkpoint.pt").read_bytes() == before
    # the same config with more epochs resumes
    resumed = train(tiny(epochs=2), out_dir=run, resume=True, progress=False)
    assert [e["epoch"] for e in resumed.history.epochs] == [1, 2]


# --------------------------------------------------------------------------
# Writes: atomic, and the output directory checked before training
# --------------------------------------------------------------------------


def test_a_failed_write_keeps_the_last_good_checkpoint(runs, tmp_path, full_disk):
    run = copy_run(runs, "convs2s", tmp_path)
    before = (run / "checkpoint.pt").read_bytes()
    with full_disk:  # the disk fills up half-way through the write of epoch 2's checkpoint
        with pytest.raises(OSError) as info:
            train(tiny(epochs=2), out_dir=run, resume=True, progress=False)
    # one line: the path, the error, what a checkpoint needs, what is kept
    message = str(info.value)
    assert "\n" not in message and str(run / "checkpoint.pt") in message
    assert "No space left on device" in message
    assert re.search(r"needs \d+\.\d MB; \d+\.\d MB free there", message)
    assert "the checkpoint of epoch 1 is kept" in message
    assert (run / "checkpoint.pt").read_bytes() == before
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.pt"]  # no half-written leftovers
    assert load_checkpoint(run).history.epochs[-1]["epoch"] == 1


@pytest.mark.parametrize(
    "layout", ["out is a file", "checkpoint is a directory", "parent is a file"]
)
def test_bad_output_directory_is_refused_before_training(layout, tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("training started before the output path was checked")

    monkeypatch.setattr(loop_mod, "make_datasets", no_training)
    out = tmp_path / "run"
    if layout == "out is a file":
        out.write_text("x")
        match = "is an existing file"
    elif layout == "checkpoint is a directory":
        (out / "checkpoint.pt").mkdir(parents=True)
        match = "is not a file"
    else:
        out.write_text("x")
        out = out / "sub"
        match = "cannot create output directory"
    with pytest.raises(ValueError, match=match):
        train(tiny(), out_dir=out, progress=False)


def test_cache_dir_falls_back_to_home_dot_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("CONVS2S_EDU_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert train_mod.cache_dir() == tmp_path / ".cache" / "convs2s_edu"


# --------------------------------------------------------------------------
# The cache (train_or_load): what it passes on
# --------------------------------------------------------------------------


def test_cache_resumes_an_interrupted_run_and_loads_on_the_asked_device(tmp_path, capsys):
    cfg = tiny(epochs=2)
    entry = tmp_path / f"convs2s-{train_mod.cache_key(cfg)}"
    first = train(cfg, out_dir=entry, progress=False, stop_after=1)  # interrupted after 1 epoch
    resumed = train_or_load(cfg, progress=True, directory=tmp_path)
    assert [e["epoch"] for e in resumed.history.epochs] == [1, 2]
    assert resumed.history.epochs[0] == first.history.epochs[0]  # epoch 1 kept, not redone
    assert capsys.readouterr().err  # progress=True reaches the progress bar
    # on this CPU machine "auto" and "cpu" share the cached run; the result says what was asked
    loaded = train_or_load(cfg.replace(device="auto"), progress=False, directory=tmp_path)
    assert loaded.config.device == "auto"


def test_cache_default_config_is_the_seeds(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(cache_mod, "train", lambda cfg, **kwargs: seen.append(cfg))
    train_or_load(None, directory=tmp_path)
    assert seen == [TrainConfig()]


def test_damaged_cache_entry_says_how_to_recover(tmp_path):
    cfg = tiny()
    entry = tmp_path / f"convs2s-{train_mod.cache_key(cfg)}"
    entry.mkdir()
    (entry / "checkpoint.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError) as info:
        train_or_load(cfg, directory=tmp_path)
    assert str(info.value).endswith(f"(a damaged cache entry: delete {entry} to train again)")


def test_cache_key_keeps_cpu_and_gpu_runs_apart(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert train_mod.cache_key(tiny(device="auto")) == train_mod.cache_key(tiny(device="cpu"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert train_mod.cache_key(tiny(device="auto")) == train_mod.cache_key(tiny(device="cuda"))
    assert train_mod.cache_key(tiny(device="cuda")) == train_mod.cache_key(tiny(device="cuda:1"))
    assert train_mod.cache_key(tiny(device="cuda")) != train_mod.cache_key(tiny(device="cpu"))


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda s: s["model"].update({next(iter(s["model"])): [1.0]}),
            "model must be a state dict (parameter name -> tensor)",
        ),
        (
            lambda s: (
                s["model"][next(k for k, v in s["model"].items() if v.is_floating_point())]
                .view(-1)
                .__setitem__(0, float("inf"))
            ),
            "holds 1 NaN or infinite value(s); the run diverged or the file is damaged",
        ),
        (lambda s: s["train_config"]["model_options"].update(n_heads=4), "bad model_options"),
    ],
)
def test_weight_check_messages(change, message, runs, tmp_path):
    run = copy_run(runs, "convs2s", tmp_path)
    tamper(run, change)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(run)
    text = str(info.value)
    assert text.startswith(f"{run / 'checkpoint.pt'}: ")
    if message == "bad model_options":  # followed by the model's own error
        assert "(bad model_options for 'convs2s': " in text
    else:  # the message ends the line
        assert text.endswith(message)


def test_load_checkpoint_returns_its_path_and_the_asked_device(runs):
    loaded = load_checkpoint(runs / "gru", device="auto")
    assert loaded.path == runs / "gru" / "checkpoint.pt"
    assert loaded.config.device == "auto"  # saved as "cpu"; the caller's choice wins
    assert load_checkpoint(runs / "gru").config.device == "cpu"
