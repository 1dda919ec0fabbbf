"""Tests of ``convs2s_edu.training.cache``: ``train_or_load`` trains a config once and then loads
it (resuming an interrupted run, on the asked device, a damaged entry named with what to do),
``cache_key`` tells apart every config, execution path, device kind and package version,
``cache_dir`` follows the environment, and the entry's lock makes two processes train it once
and is released when its holder is killed."""

from __future__ import annotations

import pytest
import torch
from _reference import state_equal
from _tiny import SIX_STEPS, tiny_config

from convs2s_edu import training as train_mod
from convs2s_edu.training import CheckpointError, TrainConfig, cache_key, train, train_or_load
from convs2s_edu.training import cache as cache_mod

pytestmark = pytest.mark.usefixtures("single_thread")


# --------------------------------------------------------------------------
# train_or_load
# --------------------------------------------------------------------------


def test_train_or_load_trains_once_then_reuses(tmp_path, monkeypatch):
    cfg = tiny_config(**SIX_STEPS, epochs=2)
    first = train_or_load(cfg, progress=False, directory=tmp_path)

    def must_not_train(*args, **kwargs):
        raise AssertionError("train() called although the cache holds the run")

    monkeypatch.setattr(cache_mod, "train", must_not_train)
    again = train_or_load(cfg, progress=False, directory=tmp_path)
    state_equal(first.model, again.model)
    assert again.history.epochs == first.history.epochs


def test_cache_resumes_an_interrupted_run_and_loads_on_the_asked_device(tmp_path, capsys):
    cfg = tiny_config(epochs=2)
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
    cfg = tiny_config()
    entry = tmp_path / f"convs2s-{train_mod.cache_key(cfg)}"
    entry.mkdir()
    (entry / "checkpoint.pt").write_bytes(b"garbage")
    with pytest.raises(CheckpointError) as info:
        train_or_load(cfg, directory=tmp_path)
    assert str(info.value).endswith(f"(a damaged cache entry: delete {entry} to train again)")


# --------------------------------------------------------------------------
# cache_key
# --------------------------------------------------------------------------


def test_cache_key_depends_on_config():
    tiny = tiny_config("convs2s", **SIX_STEPS, epochs=2)
    gru = tiny_config("gru", **SIX_STEPS, epochs=2)
    assert cache_key(tiny) == cache_key(tiny.replace())
    assert cache_key(tiny) != cache_key(tiny.replace(epochs=3))
    assert cache_key(tiny) != cache_key(gru)
    assert cache_key(tiny.replace(model_options={"embed_dim": 8})) != cache_key(tiny)
    assert cache_key(tiny.replace(paper_normalisation=False)) != cache_key(tiny)
    # the GRU ignores the ConvS2S switch, so both spellings share one cached run
    assert cache_key(gru.replace(paper_normalisation=False)) == cache_key(gru)


def test_cache_key_keeps_cpu_and_gpu_runs_apart(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert train_mod.cache_key(tiny_config(device="auto")) == train_mod.cache_key(
        tiny_config(device="cpu")
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert train_mod.cache_key(tiny_config(device="auto")) == train_mod.cache_key(
        tiny_config(device="cuda")
    )
    assert train_mod.cache_key(tiny_config(device="cuda")) == train_mod.cache_key(
        tiny_config(device="cuda:1")
    )
    assert train_mod.cache_key(tiny_config(device="cuda")) != train_mod.cache_key(
        tiny_config(device="cpu")
    )


def test_config_fields_validated_and_every_path_cached_apart(monkeypatch):
    with pytest.raises(ValueError, match="precision must be one of"):
        TrainConfig(precision="fp8")
    with pytest.raises(ValueError, match="compile_mode must be one of"):
        TrainConfig(compile_mode="fastest")
    with pytest.raises(TypeError, match="compile must be True or False"):
        TrainConfig(compile="yes")
    base = TrainConfig(device="cpu", fast=True)
    # the reference path, a compiled run, another mode, another precision: each is cached
    # apart (the same function, but other roundings and dropout masks: other weights)
    keys = {
        cache_key(base),
        cache_key(base.replace(fast=False)),
        cache_key(base.replace(compile=True, fast=False)),
        cache_key(base.replace(compile=True, fast=False, compile_mode="max-autotune")),
        cache_key(base.replace(precision="bf16")),
    }
    assert len(keys) == 5
    # other training code trains again instead of reusing an old entry
    monkeypatch.setattr(cache_mod, "fingerprint", lambda files: "other code")
    assert cache_key(base) not in keys


# --------------------------------------------------------------------------
# cache_dir
# --------------------------------------------------------------------------


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "c"))
    assert train_mod.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("CONVS2S_EDU_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert train_mod.cache_dir() == tmp_path / "xdg" / "convs2s_edu"


def test_cache_dir_falls_back_to_home_dot_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("CONVS2S_EDU_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert train_mod.cache_dir() == tmp_path / ".cache" / "convs2s_edu"


# --------------------------------------------------------------------------
# Two processes, one entry
# --------------------------------------------------------------------------

_CHILD = r"""
import pickle, sys, time
from pathlib import Path
import torch
import convs2s_edu
from convs2s_edu.training import cache as cache_mod

tmp = Path(sys.argv[1]); me = sys.argv[2]
cfg = pickle.loads((tmp / "cfg.pkl").read_bytes())
real_train = cache_mod.train

def train(*args, **kwargs):
    (tmp / f"trained-{me}").write_text("")
    return real_train(*args, **kwargs)

cache_mod.train = train
(tmp / f"ready-{me}").write_text("")
while not (tmp / "go").exists():
    time.sleep(0.01)
result = cache_mod.train_or_load(cfg, progress=False, directory=tmp / "cache")
torch.save(result.model.state_dict(), tmp / f"state-{me}.pt")
"""


def test_two_processes_asking_for_one_entry_train_it_once(tmp_path):
    import pickle
    import subprocess
    import sys
    import time

    cfg = tiny_config(**SIX_STEPS, epochs=6)  # long enough for the two to overlap
    (tmp_path / "cfg.pkl").write_bytes(pickle.dumps(cfg))
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", _CHILD, str(tmp_path), name], env=env)
        for name in ("a", "b")
    ]
    deadline = time.time() + 120
    while not all((tmp_path / f"ready-{n}").exists() for n in "ab"):
        assert time.time() < deadline, "the child processes did not start"
        time.sleep(0.05)
    (tmp_path / "go").write_text("")  # both ask for the entry at the same moment
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    trained = sorted(p.name for p in tmp_path.glob("trained-*"))
    assert len(trained) == 1, f"the entry was trained by {trained}"
    a, b = (torch.load(tmp_path / f"state-{n}.pt") for n in "ab")
    assert a.keys() == b.keys()
    for k in a:  # the waiting process loaded what the other trained
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0, msg=k)
    assert train_mod.cache.is_cached(cfg, tmp_path / "cache")


_HOLDER = r"""
import sys, time
from convs2s_edu.training.cache import entry_lock

with entry_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_the_lock_of_a_process_killed_while_holding_it_is_released(tmp_path):
    import signal
    import subprocess
    import sys

    from filelock import Timeout

    entry = tmp_path / "entry"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(entry)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(Timeout):  # the other process holds the entry
            cache_mod.entry_lock(entry).acquire(timeout=0.5)
        holder.send_signal(signal.SIGKILL)  # no clean-up runs: only the OS can release it
        holder.wait(timeout=10)
        with cache_mod.entry_lock(entry).acquire(timeout=5):  # the next process gets it
            assert (entry / ".lock").is_file()
    finally:
        holder.kill()
        holder.wait()


def test_is_cached_only_for_a_finished_run(tmp_path):
    cfg = tiny_config(epochs=2)
    assert not cache_mod.is_cached(cfg, tmp_path)
    entry = cache_mod.run_dir(cfg, tmp_path)
    train(cfg, out_dir=entry, progress=False, stop_after=1)
    assert not cache_mod.is_cached(cfg, tmp_path)  # interrupted: one epoch of two
    train_or_load(cfg, progress=False, directory=tmp_path)
    assert cache_mod.is_cached(cfg, tmp_path)


def test_a_field_the_model_ignores_resumes_the_same_entry(tmp_path, single_thread):
    # a GRU has no convolutional parts: paper_normalisation is not part of its run, so the
    # cache gives both values one entry, and resuming that entry must not refuse either
    first = tiny_config("gru", epochs=2, paper_normalisation=True)
    train(first, out_dir=cache_mod.run_dir(first, tmp_path), stop_after=1)  # interrupted
    other = first.replace(paper_normalisation=False)
    assert cache_mod.run_dir(other, tmp_path) == cache_mod.run_dir(first, tmp_path)
    result = train_or_load(other, directory=tmp_path)  # "cannot resume" before the fix
    assert [e["epoch"] for e in result.history.epochs] == [1, 2]
