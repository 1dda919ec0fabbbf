"""Data-parallel training (issue 10): 2 gloo processes take the step of 1 process.

Every test spawns local processes (``torch.multiprocessing.spawn``, 127.0.0.1, a free
port), each running :func:`convs2s_edu.train` as ``torchrun`` would start it.
"""

from __future__ import annotations

import pytest
import torch

from convs2s_edu import TrainConfig, load_checkpoint
from convs2s_edu.training import build_model, spawn_train
from convs2s_edu.training.parallel import DataParallelContext

TINY = {
    "embed_dim": 16,
    "hidden_dim": 16,
    "n_encoder_layers": 2,
    "n_decoder_layers": 2,
    "dropout": 0.0,
}


def tiny(model: str, **changes) -> TrainConfig:
    # 192 examples, batch 32: 6 steps per epoch, every batch split 16 + 16; random lengths
    # 3..9, so the two halves of a batch hold different numbers of target tokens
    cfg = TrainConfig(
        model=model,
        vocab_size=10,
        min_len=3,
        max_len=9,
        n_train=192,
        n_valid=32,
        n_test=32,
        batch_size=32,
        epochs=2,
        device="cpu",
        model_options=dict(TINY),
    )
    return cfg.replace(**changes)


def weights(path):
    return load_checkpoint(path, device="cpu").model.state_dict()


def test_two_processes_take_the_one_process_step_and_resume(tmp_path):
    cfg = tiny("convs2s")
    # the reference: one process (world size 1), the whole batch of 32 per step
    spawn_train([(cfg, {"out_dir": tmp_path / "one", "progress": False})], nprocs=1)
    # two processes, 16 examples each: uninterrupted, and stopped after epoch 1 then resumed
    spawn_train(
        [
            (cfg, {"out_dir": tmp_path / "two", "progress": False}),
            (cfg, {"out_dir": tmp_path / "cut", "progress": False, "stop_after": 1}),
            (cfg, {"out_dir": tmp_path / "cut", "progress": False, "resume": True}),
        ],
        nprocs=2,
    )
    one, two, cut = (weights(tmp_path / d) for d in ("one", "two", "cut"))
    assert one.keys() == two.keys()
    for k in one:
        torch.testing.assert_close(two[k], one[k], atol=1e-5, rtol=0, msg=k)
        torch.testing.assert_close(cut[k], two[k], atol=1e-5, rtol=0, msg=k)
    # the check means something: training moved the weights far more than the tolerance
    torch.manual_seed(cfg.seed)
    fresh = build_model(cfg).state_dict()
    assert max(float((one[k] - fresh[k]).abs().max()) for k in one) > 1e-3
    # the history is the global one: the losses of one process, 6 steps x 2 epochs
    h1 = load_checkpoint(tmp_path / "one").history
    h2 = load_checkpoint(tmp_path / "two").history
    assert len(h2.step_losses) == len(h1.step_losses) == 12
    torch.testing.assert_close(
        torch.tensor(h2.step_losses), torch.tensor(h1.step_losses), atol=1e-5, rtol=0
    )


def test_only_rank_0_reports_progress(tmp_path, capfd):
    cfg = tiny("gru", epochs=2)
    capfd.readouterr()
    # progress=None: one line per epoch on a stderr that is not a terminal (the children's
    # stderr is this test's captured file descriptor 2)
    spawn_train([(cfg, {"out_dir": tmp_path / "run", "progress": None})], nprocs=2)
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ": epoch " in ln]
    assert [ln.split(":")[1].split(",")[0].strip() for ln in lines] == ["epoch 1/2", "epoch 2/2"]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint.pt"]


def test_batch_must_split_evenly():
    ctx = DataParallelContext(torch.device("cpu"), 0, 3)
    with pytest.raises(ValueError, match="divisible by the number of processes"):
        ctx.local_batch_size(32)
    assert ctx.local_batch_size(33) == 11
