r"""The training loop: :func:`train` runs a :class:`~convs2s_edu.TrainConfig` for any model.

What is timed
-------------
An epoch's wall-clock time (:func:`time.perf_counter`) covers the training
steps only: batching, forward, backward and the optimiser. On a GPU the clock
is read after :func:`torch.cuda.synchronize`, otherwise it would stop while
kernels are still queued. The held-out loss is computed after the clock stops.

One process or many
-------------------
The loop asks a :class:`~convs2s_edu.training.step.RunContext` for everything
that differs under data parallelism (the loader, the sums over ranks, who
writes); :func:`~convs2s_edu.training.parallel.setup` gives the single-process
one unless ``torchrun`` started this process.
"""

from __future__ import annotations

import time
from dataclasses import fields

import torch
from torch.utils.data import DataLoader

from ..loss import sequence_loss
from .checkpoint import (
    History,
    TrainResult,
    prepare_out_dir,
    read_checkpoint,
    save_checkpoint,
)
from .config import TrainConfig, build_model, make_datasets
from .device import device_label, synchronize
from .parallel import setup
from .paths import apply_compile, check_compile_mode, check_precision
from .progress import Progress
from .step import RunContext, make_train_step

__all__ = ["VALID_BATCH_SIZE", "TrainingDivergedError", "train"]

#: Batch size of the held-out loss (evaluation only: no activations kept for backward).
VALID_BATCH_SIZE = 512


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the message names the epoch and step."""


@torch.no_grad()
def _mean_loss(model, loader, device) -> float:
    """The token-mean loss of ``loader``'s batches (the held-out loss of an epoch)."""
    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    for batch in loader:
        batch = batch.to(device)
        total += float(sequence_loss(model(batch.src, batch.tgt_in), batch.tgt_out, "sum"))
        n += batch.n_target_tokens
    model.train(was_training)
    return total / n


def train(
    cfg: TrainConfig | None = None,
    out_dir=None,
    resume: bool = False,
    progress: bool | None = None,
    stop_after: int | None = None,
) -> TrainResult:
    """Train ``cfg.model`` on the sorting task.

    Parameters
    ----------
    cfg : TrainConfig, optional
        The seed's configuration when omitted.
    out_dir : str or Path, optional
        Where to write ``checkpoint.pt`` after every epoch (atomically). Without
        it nothing is written.
    resume : bool
        Continue from ``out_dir/checkpoint.pt`` if it exists. On the CPU the
        result is bit-for-bit the one of an uninterrupted run.
    progress : bool, optional
        Show a progress bar; by default only when stderr is a terminal (else
        one line per epoch).
    stop_after : int, optional
        Stop after this epoch (as if interrupted), checkpoint included.

    Returns
    -------
    TrainResult
        The model (in eval mode), the config and the :class:`History`.

    Raises
    ------
    TrainingDivergedError
        When a loss is NaN or infinite; the last good checkpoint is kept.
    CheckpointWriteError
        When a checkpoint cannot be written (a full disk); the last good one is kept.

    Notes
    -----
    Started by ``torchrun`` (or with its environment variables set), every process
    trains one share of each batch with DistributedDataParallel
    (:mod:`convs2s_edu.training.parallel`): ``cfg.batch_size`` is then the global batch;
    only rank 0 writes the checkpoint and the progress output.
    """
    cfg = cfg if cfg is not None else TrainConfig()
    context = setup(cfg.device)  # one process, unless started by torchrun
    try:
        return _train(cfg, out_dir, resume, progress, stop_after, context)
    finally:
        context.close()


def _resume(ckpt_path, cfg, model, optimizer, shuffle, context: RunContext, dev):
    """Load the checkpoint's model, optimiser and random states; return its history and
    epoch. A checkpoint of another configuration, or of more epochs, is a ``ValueError``."""
    state = read_checkpoint(ckpt_path)
    saved = state["config"].replace(device=cfg.device, epochs=cfg.epochs)
    if saved != cfg:
        changed = [
            f"{f.name} ({getattr(saved, f.name)!r} -> {getattr(cfg, f.name)!r})"
            for f in fields(cfg)
            if getattr(saved, f.name) != getattr(cfg, f.name)
        ]
        raise ValueError(
            f"cannot resume: {ckpt_path} was written with a different config: {', '.join(changed)}"
        )
    if state["epoch"] > cfg.epochs:
        raise ValueError(
            f"cannot resume: {ckpt_path} holds {state['epoch']} epochs, more than "
            f"the {cfg.epochs} asked for"
        )
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"]["torch"])
    if dev.type == "cuda" and state["rng"]["cuda"]:
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    shuffle.set_state(state["rng"]["shuffle"])
    context.seed_ranks(cfg.seed, resumed_epoch=state["epoch"])
    return History.from_dict(state["history"]), state["epoch"]


def _train(cfg, out_dir, resume, progress, stop_after, context: RunContext) -> TrainResult:
    dev = context.device
    check_precision(cfg.precision, dev)
    check_compile_mode(cfg.compile_mode, dev)
    ckpt_path = prepare_out_dir(out_dir)
    writes = ckpt_path is not None and context.is_main  # only rank 0 writes files

    train_ds, valid_ds, _ = make_datasets(cfg)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg).to(dev)
    if cfg.compile:
        apply_compile(model, cfg.compile_mode)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    shuffle = torch.Generator().manual_seed(cfg.seed)
    context.seed_ranks(cfg.seed)
    loader = context.loader(train_ds, cfg.batch_size, shuffle)
    train_step = make_train_step(
        context.wrap(model), optimizer, cfg.clip_norm, cfg.precision, context
    )
    valid_loader = DataLoader(valid_ds, batch_size=VALID_BATCH_SIZE, collate_fn=valid_ds.collate)
    history = History(
        device=device_label(dev),
        n_parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
    )
    start_epoch = 0
    if resume and ckpt_path is not None and ckpt_path.is_file():
        history, start_epoch = _resume(ckpt_path, cfg, model, optimizer, shuffle, context, dev)

    last = cfg.epochs if stop_after is None else min(cfg.epochs, stop_after)
    shown = progress if context.is_main else False
    with Progress((last - start_epoch) * len(loader), cfg.model, shown) as bar:
        for epoch in range(start_epoch + 1, last + 1):
            model.train()
            context.start_epoch(loader, epoch)
            step_losses, n_tokens = [], 0
            synchronize(dev)
            t0 = time.perf_counter()
            for batch in loader:
                n_tokens += batch.n_target_tokens  # on the CPU: no device sync in the loop
                step_losses.append(train_step(batch.to(dev)))
                bar.update()
            synchronize(dev)
            seconds = time.perf_counter() - t0

            # every rank: the global losses and tokens, so that all agree on stopping
            losses = context.all_sum(torch.stack(step_losses).float()).cpu()  # one transfer
            n_tokens = int(context.all_sum(torch.tensor([n_tokens], device=dev)))
            _check_finite(losses, cfg, epoch, ckpt_path)
            history.step_losses.extend(losses.tolist())
            elapsed = (history.epochs[-1]["elapsed"] if history.epochs else 0.0) + seconds
            history.epochs.append(
                {
                    "epoch": epoch,
                    "train_loss": float(losses.mean()),
                    "valid_loss": _mean_loss(model, valid_loader, dev),
                    "seconds": seconds,
                    "tokens_per_second": n_tokens / seconds,
                    "elapsed": elapsed,
                }
            )
            loss, speed = history.epochs[-1]["train_loss"], n_tokens / seconds
            bar.note(
                f"{cfg.model}: epoch {epoch}/{last}, train loss {loss:.4f}, {seconds:.1f} s "
                f"({speed:,.0f} tokens/s)",
                epoch=epoch,
                loss=f"{loss:.3f}",
                tok_s=f"{speed:,.0f}",
            )
            if writes:
                save_checkpoint(ckpt_path, model, optimizer, cfg, history, shuffle, epoch)
    model.eval()
    return TrainResult(model, cfg, history, ckpt_path)


def _check_finite(losses: torch.Tensor, cfg: TrainConfig, epoch: int, ckpt_path) -> None:
    """Raise :class:`TrainingDivergedError` at the first NaN or infinite step loss."""
    bad = (~torch.isfinite(losses)).nonzero()
    if len(bad):
        step = int(bad[0]) + 1
        kept = (
            f"; the last good checkpoint (epoch {epoch - 1}) is kept in {ckpt_path}"
            if ckpt_path is not None and epoch > 1
            else ""
        )
        raise TrainingDivergedError(
            f"{cfg.model}: non-finite loss ({float(losses[step - 1])}) at epoch {epoch}, "
            f"step {step} of {len(losses)}{kept}. Try a smaller lr (now {cfg.lr}) "
            f"or gradient clipping (clip_norm={cfg.clip_norm})."
        )
