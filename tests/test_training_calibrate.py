"""The machine's choice of path (``TrainConfig.fast=None``): the decision rule, a real
calibration that must refuse a "fast" path planted with extra cost, the cached choice and
where it is written (the config a run returns, its checkpoint, the cache's key)."""

from __future__ import annotations

import pytest
import torch
from _tiny import tiny_config

from convs2s_edu import ConvBlock
from convs2s_edu.fast import paths
from convs2s_edu.training import cache as cache_mod
from convs2s_edu.training import cache_key, read_checkpoint, train, train_or_load
from convs2s_edu.training import calibrate as calibrate_mod
from convs2s_edu.training.calibrate import FAST_MARGIN, prefers_fast, resolve_path


@pytest.fixture
def choices(tmp_path, monkeypatch):
    """A fresh training cache (where the choices are written); its ``paths.json``."""
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "paths.json"


@pytest.fixture
def timed(monkeypatch):
    """Replace the timing by a fixed choice; the configs it was asked to time."""
    asked = []

    def fake(cfg):
        asked.append(cfg)
        return {"speedups": [1.2, 1.3], "fast": True, "margin": FAST_MARGIN}

    monkeypatch.setattr(calibrate_mod, "calibrate", fake)
    return asked


def test_the_slowest_round_must_clear_the_margin():
    assert prefers_fast([1 + FAST_MARGIN, 2.0])
    assert not prefers_fast([1 + FAST_MARGIN - 1e-9, 2.0, 2.0])
    assert not prefers_fast([0.9])
    with pytest.raises(ValueError, match="empty"):  # min()'s own words: no round timed
        prefers_fast([])


class SlowConvBlock(ConvBlock):
    """A "fast" path that computes the block's convolution the reference way, and again
    six times more: the same function at about seven times the convolution's cost."""

    def convolve(self, x):
        for _ in range(6):
            super().convolve(x)
        return super().convolve(x)


def test_a_slower_fast_path_is_not_chosen(choices, monkeypatch, single_thread):
    monkeypatch.setitem(paths.FAST_CLASSES, ConvBlock, SlowConvBlock)
    cfg = tiny_config("convs2s", fast=None, batch_size=32)
    result = calibrate_mod.calibrate(cfg)  # the real timing
    assert result["fast"] is False
    assert min(result["speedups"]) < 1 + FAST_MARGIN  # the round that decided it
    assert resolve_path(cfg).fast is False  # and what the config resolves to
    assert choices.is_file()


def test_the_choice_is_timed_once_per_machine_and_configuration(choices, timed, single_thread):
    cfg = tiny_config("convs2s", fast=None)
    assert resolve_path(cfg) == cfg.replace(fast=True)
    assert resolve_path(cfg).fast is True
    assert len(timed) == 1  # read from paths.json the second time
    resolve_path(cfg.replace(batch_size=8))  # other shapes: timed again
    torch.set_num_threads(2)
    resolve_path(cfg)  # other threads: timed again
    assert len(timed) == 3


def test_a_decided_path_is_never_timed(choices, timed, monkeypatch):
    for fast in (True, False):
        cfg = tiny_config("convs2s", fast=fast)
        assert resolve_path(cfg) is cfg
    assert resolve_path(tiny_config(fast=None, compile=True)).fast is False
    monkeypatch.setattr(paths, "FAST_CLASSES", {})  # a model without a fast path
    assert resolve_path(tiny_config("gru", fast=None)).fast is False
    assert timed == [] and not choices.exists()


def test_train_writes_the_choice_into_its_config_and_checkpoint(
    tmp_path, choices, timed, single_thread
):
    cfg = tiny_config("convs2s", fast=None)
    result = train(cfg, out_dir=tmp_path / "run")
    assert result.config.fast is True
    assert read_checkpoint(tmp_path / "run")["config"].fast is True
    assert result.history.provenance["path"] == "fast-fp32"


def test_the_cache_keeps_the_machines_choice_under_the_request(
    tmp_path, choices, monkeypatch, single_thread
):
    # the entry of fast=None is "the path this machine chose": a process whose choice
    # differs (other threads) loads it instead of training it again on the other path
    choose = {"fast": True}
    fake = lambda cfg: {"speedups": [1.3], "fast": choose["fast"], "margin": FAST_MARGIN}
    monkeypatch.setattr(calibrate_mod, "calibrate", fake)
    cfg = tiny_config("convs2s", fast=None)
    first = train_or_load(cfg, directory=tmp_path)
    assert first.config.fast is True
    choose["fast"] = False
    choices.unlink()  # the machine now chooses the reference
    monkeypatch.setattr(cache_mod, "train", lambda *a, **k: pytest.fail("trained again"))
    again = train_or_load(cfg, directory=tmp_path)
    assert again.config.fast is True  # the path it trained on
    assert cache_key(cfg) not in (cache_key(cfg.replace(fast=f)) for f in (True, False))


def test_a_resumed_run_goes_on_on_the_path_it_began(tmp_path, choices, monkeypatch):
    choose = {"fast": True}
    fake = lambda cfg: {"speedups": [1.3], "fast": choose["fast"], "margin": FAST_MARGIN}
    monkeypatch.setattr(calibrate_mod, "calibrate", fake)
    cfg = tiny_config("convs2s", fast=None, epochs=2)
    train(cfg, out_dir=tmp_path / "run", stop_after=1)
    choose["fast"] = False
    choices.unlink()
    result = train(cfg, out_dir=tmp_path / "run", resume=True)  # not "cannot resume"
    assert result.config.fast is True
