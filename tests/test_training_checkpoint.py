"""Tests of ``convs2s_edu.training.checkpoint``: one validating reader behind
``load_checkpoint``, resume and the cache (one clear error for every kind of damage, no code
run from the file), weights-only atomic writes that keep the last good checkpoint on a full
disk, the output directory checked before training, and what a loaded run holds."""

from __future__ import annotations

import re
import shutil

import pytest
import torch
from _reference import state_equal
from _tiny import SIX_STEPS, THREE_STEPS, copy_run, tiny_config

from convs2s_edu import greedy_decode
from convs2s_edu import training as train_mod
from convs2s_edu.training import (
    CheckpointError,
    load_checkpoint,
    read_checkpoint,
    train,
    train_or_load,
)
from convs2s_edu.training import loop as loop_mod

pytestmark = pytest.mark.usefixtures("single_thread")


def tamper(path, change):
    state = torch.load(path / "checkpoint.pt", weights_only=True)
    change(state)
    torch.save(state, path / "checkpoint.pt")


def _nan_weights(state):
    name = next(k for k, v in state["model"].items() if v.is_floating_point())
    state["model"][name] = torch.full_like(state["model"][name], float("nan"))


def _narrow_weight(state):
    """The token table with its last rows cut: same names, another shape."""
    name = "encoder.embed.token.weight"
    state["model"][name] = state["model"][name][:9].clone()


def _swap_weights(other_model):
    def change(state):
        other = torch.load(
            _swap_weights.tiny_runs / other_model / "checkpoint.pt", weights_only=True
        )
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
    "config value of the wrong type": (
        lambda s: s["train_config"].update(epochs="1"),
        "bad train_config: epochs must be an integer in 1..10000, got '1'",
    ),
    "epoch not an integer": (
        lambda s: s.update(epoch="1"),
        "epoch must be an integer >= 1, got '1'",
    ),
    "history not a history": (
        lambda s: s.update(history={"runs": []}),
        "bad history: ",
    ),
    "NaN weights": (_nan_weights, "NaN or infinite"),
    "format from the future": (
        lambda s: s.update(format=2),
        "checkpoint format 2 is not supported (only 1)",
    ),
    "history out of step": (lambda s: s.update(epoch=3), "history holds 1 epoch record"),
    "weights not a state dict": (  # load_state_dict(strict=True)'s words
        lambda s: s.update(model=[1.0]),
        "its weights do not fit the 'convs2s' model its train_config describes "
        "(Expected state_dict to be dict-like, got <class 'list'>.)",
    ),
    "gru weights under a convs2s config": (
        _swap_weights("gru"),
        "its weights do not fit the 'convs2s' model",
    ),
    "history ahead of the checkpoint": (
        lambda s: s["history"]["epochs"].append(dict(s["history"]["epochs"][-1], epoch=2)),
        "history holds 2 epoch record(s) but the checkpoint says epoch 1",
    ),
    "weights of another size": (
        _narrow_weight,
        "size mismatch for encoder.embed.token.weight: copying a param with shape "
        "torch.Size([9, 16]) from checkpoint, the shape in current model is torch.Size([13, 16])",
    ),
    "no shuffle state": (
        lambda s: s["rng"].pop("shuffle"),
        "rng must hold the 'torch' and 'shuffle' generator states",
    ),
    "rng not a dict": (
        lambda s: s.update(rng=[1]),
        "rng must hold the 'torch' and 'shuffle' generator states",
    ),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_every_reader_refuses_a_bad_checkpoint_with_one_clear_error(
    name, tiny_runs, tmp_path, monkeypatch
):
    _swap_weights.tiny_runs = tiny_runs
    change, message = CORRUPTIONS[name]
    run = copy_run(tiny_runs, "convs2s", tmp_path)
    tamper(run, change)
    ckpt = run / "checkpoint.pt"
    readers = {
        "read_checkpoint": lambda: read_checkpoint(run),
        "load_checkpoint": lambda: load_checkpoint(run),
        "resume": lambda: train(tiny_config(epochs=2), out_dir=run, resume=True, progress=False),
    }
    for reader, call in readers.items():
        with pytest.raises(CheckpointError) as info:
            call()
        text = str(info.value)
        assert str(ckpt) in text and message in text, (reader, text)
        assert "\n" not in text
    # the cache: a damaged entry is named, with what to do
    cfg = tiny_config(epochs=2)
    entry = tmp_path / "cache" / f"convs2s-{train_mod.cache_key(cfg)}"
    entry.mkdir(parents=True)
    shutil.copy(ckpt, entry / "checkpoint.pt")
    with pytest.raises(CheckpointError, match=re.escape(message) + ".*delete"):
        train_or_load(cfg, progress=False, directory=tmp_path / "cache")


def test_convs2s_weights_under_a_gru_config_are_refused(tiny_runs, tmp_path):
    _swap_weights.tiny_runs = tiny_runs
    run = copy_run(tiny_runs, "gru", tmp_path)
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


def test_unreadable_checkpoint_is_a_value_error(tmp_path):
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable convs2s_edu checkpoint"):
        load_checkpoint(tmp_path)


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


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda s: s["model"].update({"encoder.embed.token.weight": [1.0]}),
            'the parameter named "encoder.embed.token.weight", expected torch.Tensor or '
            "Tensor-like object from checkpoint but received <class 'list'>)",
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
def test_weight_check_messages(change, message, tiny_runs, tmp_path):
    run = copy_run(tiny_runs, "convs2s", tmp_path)
    tamper(run, change)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(run)
    text = str(info.value)
    assert text.startswith(f"{run / 'checkpoint.pt'}: ")
    if message == "bad model_options":  # followed by the model's own error
        assert "(bad model_options for 'convs2s': " in text
    else:  # the message ends the line
        assert text.endswith(message)


# --------------------------------------------------------------------------
# Good checkpoints: what they hold, where they load
# --------------------------------------------------------------------------


def test_a_good_checkpoint_reads_back_whole(tiny_runs):
    state = read_checkpoint(tiny_runs / "gru")
    assert state["config"] == tiny_config("gru")
    assert state["epoch"] == 1 and state["path"] == tiny_runs / "gru" / "checkpoint.pt"


def test_checkpoint_roundtrip_is_weights_only_and_atomic(tmp_path):
    cfg = tiny_config(**SIX_STEPS, epochs=2)
    result = train(cfg, out_dir=tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]  # no temp files left
    # loads without unpickling arbitrary objects
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["epoch"] == cfg.epochs
    loaded = load_checkpoint(tmp_path)
    state_equal(result.model, loaded.model)
    assert loaded.config == cfg
    assert loaded.history.epochs == result.history.epochs


def test_load_checkpoint_returns_its_path_and_the_asked_device(tiny_runs):
    loaded = load_checkpoint(tiny_runs / "gru", device="auto")
    assert loaded.path == tiny_runs / "gru" / "checkpoint.pt"
    assert loaded.config.device == "auto"  # saved as "cpu"; the caller's choice wins
    assert load_checkpoint(tiny_runs / "gru").config.device == "cpu"


def test_checkpoint_from_a_gpu_run_loads_on_a_cpu_only_machine(tmp_path, monkeypatch):
    train(tiny_config(**SIX_STEPS, epochs=2), out_dir=tmp_path, progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    state["train_config"]["device"] = "cuda"  # as written by a run on a GPU
    torch.save(state, tmp_path / "checkpoint.pt")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = load_checkpoint(tmp_path, device="cpu")
    assert next(loaded.model.parameters()).device.type == "cpu"
    assert load_checkpoint(tmp_path).config.device == "auto"


def test_loaded_model_is_in_eval_mode(tmp_path):
    train(tiny_config(dropout=0.3, **THREE_STEPS), out_dir=tmp_path, progress=False)
    model = load_checkpoint(tmp_path).model
    assert not any(m.training for m in model.modules())


def test_ablation_options_survive_a_checkpoint(tmp_path):
    cfg = tiny_config(
        n_train=16,
        n_valid=8,
        n_test=8,
        max_len=5,
        batch_size=128,  # TrainConfig's default: one batch of 16
        model_options={
            "embed_dim": 16,
            "hidden_dim": 16,
            "n_decoder_layers": 2,
            "attention_layers": [2],
            "target_positions": False,
        },
    )
    trained = train(cfg, out_dir=tmp_path)
    loaded = load_checkpoint(tmp_path)
    assert loaded.model.cfg.attention_layers == (2,)
    assert not any("position" in name for name in loaded.model.decoder.state_dict())
    src = torch.tensor([[3, 1, 2]])
    assert greedy_decode(loaded.model, src) == greedy_decode(trained.model, src)


# --------------------------------------------------------------------------
# Writes: atomic, and the output directory checked before training
# --------------------------------------------------------------------------


def test_a_failed_write_keeps_the_last_good_checkpoint(tiny_runs, tmp_path, full_disk):
    run = copy_run(tiny_runs, "convs2s", tmp_path)
    before = (run / "checkpoint.pt").read_bytes()
    with full_disk:  # the disk fills up half-way through the write of epoch 2's checkpoint
        with pytest.raises(OSError) as info:
            train(tiny_config(epochs=2), out_dir=run, resume=True, progress=False)
    # one line: the path, the error, what a checkpoint needs, what is kept
    message = str(info.value)
    assert "\n" not in message and str(run / "checkpoint.pt") in message
    assert "No space left on device" in message
    assert re.search(r"needs \d+\.\d MB; \d+\.\d MB free there", message)
    assert "the checkpoint of epoch 1 is kept" in message
    assert (run / "checkpoint.pt").read_bytes() == before
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.pt"]  # no half-written leftovers
    assert load_checkpoint(run).history.epochs[-1]["epoch"] == 1


def test_a_failed_first_write_keeps_an_older_runs_checkpoint_and_says_so(
    tiny_runs, tmp_path, full_disk
):
    run = copy_run(tiny_runs, "convs2s", tmp_path)
    before = (run / "checkpoint.pt").read_bytes()
    with full_disk:  # a new run (no resume) into a folder that holds an older one
        with pytest.raises(OSError) as info:
            train(tiny_config(epochs=2, seed=1), out_dir=run, progress=False)
    assert str(info.value).endswith("the checkpoint that was there before this run is kept")
    assert (run / "checkpoint.pt").read_bytes() == before


def test_a_failed_write_is_one_line_even_when_the_cleanup_fails(
    tiny_runs, tmp_path, full_disk, monkeypatch
):
    import pathlib

    real_unlink = pathlib.Path.unlink

    def read_only(self, *args, **kwargs):  # the file system went read-only after the error
        if self.name.endswith(".tmp"):
            raise OSError(30, "Read-only file system")
        return real_unlink(self, *args, **kwargs)

    run = copy_run(tiny_runs, "convs2s", tmp_path)
    monkeypatch.setattr(pathlib.Path, "unlink", read_only)
    with full_disk:
        with pytest.raises(OSError) as info:
            train(tiny_config(epochs=2), out_dir=run, resume=True, progress=False)
    assert str(info.value).startswith(f"cannot write the checkpoint {run / 'checkpoint.pt'}")
    assert str(info.value).endswith("the checkpoint of epoch 1 is kept")


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
        train(tiny_config(), out_dir=out, progress=False)
