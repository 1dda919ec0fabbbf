"""Shared fixtures: tiny model configs, a padded batch, a short training loop, tiny trained runs,
a tiny experiment, the devices to run on and a full disk.

Everything here is small (embeddings/hidden states of 16-32, vocabularies of 10) and seeded,
so the suite is fast and deterministic on a CPU; the sizes come from ``_tiny.py``.
"""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from _tiny import TINY_OPTIONS, VOCAB, tiny_config, tiny_model_config

from convs2s_edu import PAD, SortingDataset, collate_batch
from convs2s_edu.lab import experiments as ex
from convs2s_edu.lab.experiments import Arm, Experiment


@pytest.fixture
def single_thread():
    """Run a test with one intra-op thread, then restore the previous count.

    The models under test are tiny: a second thread buys nothing and, on a busy
    2-core machine, thread contention makes a 2 s training run take 30 s or more.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def tiny_convs2s_cfg():
    """Factory for a small ConvS2S config (2 + 3 layers so the decoder has several attentions)."""
    return functools.partial(
        tiny_model_config, "convs2s", hidden_dim=24, n_decoder_layers=3, max_positions=16
    )


@pytest.fixture
def tiny_rnn_cfg():
    """Factory for a small GRU + Bahdanau config."""
    return functools.partial(
        tiny_model_config,
        "gru",
        hidden_dim=20,
        n_encoder_layers=1,
        n_decoder_layers=1,
        max_positions=16,
    )


@pytest.fixture
def ragged_batch():
    """A padded batch of three sorting examples of lengths 5, 2 and 4 (rows 1 and 2 padded)."""
    examples = [
        ([5, 3, 9, 1, 3], [1, 3, 3, 5, 9]),
        ([7, 2], [2, 7]),
        ([4, 4, 10, 6], [4, 4, 6, 10]),
    ]
    return examples, collate_batch(examples, VOCAB)


@pytest.fixture
def train_on_sorting():
    """Train ``model`` with Adam on a small sorting set; return the per-step losses."""

    def train(
        model: torch.nn.Module,
        steps: int = 300,
        lr: float = 3e-3,
        seed: int = 0,
        n_samples: int = 256,
        batch_size: int = 32,
        device="cpu",
    ) -> list[float]:
        torch.manual_seed(seed)
        ds = SortingDataset.generate(n_samples, 2, 6, VOCAB, seed=seed)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=batch_size, shuffle=True, collate_fn=ds.collate, drop_last=True
        )
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        losses: list[float] = []
        while len(losses) < steps:
            for batch in loader:
                batch = batch.to(device)
                logits = model(batch.src, batch.tgt_in)
                loss = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]),
                    batch.tgt_out.reshape(-1),
                    ignore_index=PAD,
                )
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                if len(losses) == steps:
                    break
        return losses

    return train


def _devices():
    """``cpu``, and ``cuda`` skipped where there is no GPU (``tools/gpu_check.py`` runs it)."""
    cuda = pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="no CUDA device on this machine"
        ),
    )
    return ["cpu", cuda]


@pytest.fixture(params=_devices())
def device(request):
    """The device of a device-parametrised test: the CPU, and CUDA where present."""
    return torch.device(request.param)


class _FullDisk:
    """``with full_disk:``: every checkpoint write fails half-way with ``ENOSPC``, as on a
    full disk (the first half of the bytes reach the file, then the write raises)."""

    def __enter__(self):
        import builtins

        import convs2s_edu.training.checkpoint as checkpoint_mod

        real_open = builtins.open

        class HalfFile:
            def __init__(self, f):
                self.f = f

            def write(self, data):
                self.f.write(bytes(data[: len(data) // 2]))
                raise OSError(28, "No space left on device")

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

        def full_open(path, mode="r", *args, **kwargs):
            f = real_open(path, mode, *args, **kwargs)
            return HalfFile(f) if "w" in mode else f

        self.patch = pytest.MonkeyPatch()
        self.patch.setattr(checkpoint_mod, "open", full_open, raising=False)
        return self

    def __exit__(self, *exc):
        self.patch.undo()


@pytest.fixture
def full_disk():
    """A context in which checkpoint writes fail as on a full disk (see :class:`_FullDisk`)."""
    return _FullDisk()


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
    """A directory holding a one-epoch run (``checkpoint.pt``) of ``tiny_config(model)`` for
    ``convs2s/`` and ``gru/``, trained once for the session: read it, or change a copy
    (``_tiny.copy_run``)."""
    from convs2s_edu.training import train

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    base = tmp_path_factory.mktemp("runs")
    try:
        for model in ("convs2s", "gru"):
            train(tiny_config(model), out_dir=base / model, progress=False)
    finally:
        torch.set_num_threads(before)
    return base


@pytest.fixture
def tiny_experiment(monkeypatch):
    """A two-arm experiment of small models, registered as ``"tiny"``."""
    exp = Experiment(
        "tiny",
        "Tiny",
        "?",
        (
            Arm(
                "conv",
                "conv",
                "convs2s",
                {**TINY_OPTIONS["convs2s"], "n_encoder_layers": 1, "n_decoder_layers": 1},
            ),
            Arm("gru", "gru", "gru", {**TINY_OPTIONS["gru"], "attention_dim": 8}),
        ),
    )
    monkeypatch.setitem(ex.EXPERIMENTS, "tiny", exp)
    return exp
