"""Tests of ``convs2s_edu.training.parallel`` (with ``launch.spawn_train``), data-parallel
training (issue 10): 2 gloo processes take the step of 1 process, resume included, and only
rank 0 reports.

Every test that trains spawns local processes (``torch.multiprocessing.spawn``, 127.0.0.1, a
free port), each running :func:`convs2s_edu.train` as ``torchrun`` would start it.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from _tiny import TINY_OPTIONS, tiny_config

from convs2s_edu import SortingDataset, TrainConfig, load_checkpoint, train
from convs2s_edu.training import build_model, spawn_train
from convs2s_edu.training import loop as loop_mod
from convs2s_edu.training.parallel import DataParallelContext, free_port
from convs2s_edu.training.step import RunContext

#: 192 examples, batch 32: 6 steps per epoch, every batch split 16 + 16; random lengths
#: 3..9, so the two halves of a batch hold different numbers of target tokens. Both models
#: get the same options: two layers each, no dropout.
SPLIT = {
    "max_len": 9,
    "n_train": 192,
    "n_valid": 32,
    "n_test": 32,
    "batch_size": 32,
    "epochs": 2,
    "model_options": dict(TINY_OPTIONS["convs2s"], dropout=0.0),
}


def weights(path):
    return load_checkpoint(path, device="cpu").model.state_dict()


def test_two_processes_take_the_one_process_step_and_resume(tmp_path):
    cfg = tiny_config("convs2s", **SPLIT)
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
    cfg = tiny_config("gru", **SPLIT)
    capfd.readouterr()
    # progress=None: one line per epoch on a stderr that is not a terminal (the children's
    # stderr is this test's captured file descriptor 2)
    spawn_train([(cfg, {"out_dir": tmp_path / "run", "progress": None})], nprocs=2)
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ": epoch " in ln]
    assert [ln.split(":")[1].split(",")[0].strip() for ln in lines] == ["epoch 1/2", "epoch 2/2"]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint.pt"]


def test_the_job_file_carries_every_value_exactly(tmp_path):
    from convs2s_edu.training.launch import _read_jobs, _write_jobs

    cfg = tiny_config("convs2s", model_options={"attention_layers": (1, 2)})  # a tuple
    kwargs = {"out_dir": tmp_path / "run", "stop_after": 1, "progress": None}
    _write_jobs(tmp_path / "jobs", [1234], [(cfg.to_dict(), kwargs)], 1)
    ports, [(cfg_dict, back)], threads = _read_jobs(tmp_path / "jobs")
    assert (ports, threads, back) == ([1234], 1, kwargs)
    assert TrainConfig.from_dict(cfg_dict) == cfg  # resumable in the parent: the same config


def test_batch_must_split_evenly():
    ctx = DataParallelContext(torch.device("cpu"), 0, 3)
    with pytest.raises(ValueError, match="divisible by the number of processes"):
        ctx.local_batch_size(32)
    assert ctx.local_batch_size(33) == 11


# --------------------------------------------------------------------------
# The sampler: a new permutation every epoch; who writes
# --------------------------------------------------------------------------


def _orders(ctx, dataset, epochs):
    """The sources ``ctx``'s loader gives, epoch by epoch."""
    loader = ctx.loader(dataset, 4, torch.Generator().manual_seed(0))
    out = []
    for epoch in epochs:
        ctx.start_epoch(loader, epoch)
        out.append([tuple(row.tolist()) for b in loader for row in b.src])
    return out


def test_the_sampler_deals_a_new_permutation_every_epoch_to_the_ranks():
    ds = SortingDataset.generate(16, 3, 5, 10, seed=0)
    ranks = [DataParallelContext(torch.device("cpu"), r, 2) for r in (0, 1)]
    (a1, a2), (b1, b2) = (_orders(ctx, ds, (1, 2)) for ctx in ranks)
    assert a1 != a2 and b1 != b2  # reshuffled every epoch (set_epoch)
    for mine, theirs in ((a1, b1), (a2, b2)):  # in one epoch the ranks share out the set
        assert len(mine) == len(theirs) == 8
        unpadded = {tuple(t for t in row if t) for row in mine + theirs}
        assert unpadded == {tuple(x) for x, _ in ds.examples}
    assert _orders(ranks[0], ds, (1, 2)) == [a1, a2]  # seeded: the same again


@pytest.fixture
def one_rank_group():
    """A real gloo process group of one rank in this process: ``train`` runs data-parallel."""
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_a_data_parallel_run_draws_a_new_order_every_epoch(one_rank_group, monkeypatch):
    seen = []
    real_step = loop_mod.make_train_step

    def recording(*args, **kwargs):
        step = real_step(*args, **kwargs)

        def run(batch):
            seen.append(tuple(tuple(row.tolist()) for row in batch.src))
            return step(batch)

        return run

    monkeypatch.setattr(loop_mod, "make_train_step", recording)
    train(tiny_config("gru", epochs=2), progress=False)
    first, second = seen[: len(seen) // 2], seen[len(seen) // 2 :]
    assert sorted(r for b in first for r in b) == sorted(r for b in second for r in b)
    assert first != second  # the loop starts every epoch: the sampler was reshuffled


class _Rank1(RunContext):
    """Rank 1 of a run, as the loop sees it (its sums span one rank: no process group)."""

    def __init__(self):
        super().__init__(torch.device("cpu"), rank=1, world_size=1)


def test_only_rank_0_writes_the_checkpoint(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(loop_mod, "setup", lambda device: _Rank1())
    result = train(tiny_config("gru", epochs=2), out_dir=tmp_path / "run", progress=None)
    assert len(result.history.epochs) == 2  # it trained ...
    assert list((tmp_path / "run").iterdir()) == []  # ... and wrote nothing
    assert capsys.readouterr().err == ""  # and printed nothing
