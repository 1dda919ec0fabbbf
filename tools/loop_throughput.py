"""Real target tokens per second of the package's own training loop: another checkout's against
this one's, for both models, in one process, interleaved.

Usage::

    git worktree add /tmp/before <commit>        # the code to compare with
    python tools/loop_throughput.py /tmp/before/convs2s_edu --threads 1

The other checkout's package is copied to a temporary folder as ``convs2s_edu_before`` and
both are loaded in this process. Each version trains with its own loop's parts: its
``TrainConfig`` (the original notebook's data: 10,000 examples, batches of 128; this
checkout with ``--batching``, default ``random``), its ``RunContext.loader`` (batches
collated inside the timed windows, as in the loop) and its ``make_train_step``. This
checkout trains twice: through its fast paths (``TrainConfig.fast``: "after") and
through the model files' reference code ("reference"). The windows are timed interleaved
(``convs2s_edu.lab.timing.time_interleaved``): a window of ``--steps`` steps of every
(version, model) per round, the order reversed every other round; a window's throughput
counts real target tokens (padding excluded, ``<eos>`` included). Prints, per model, the
median tokens/s of each with the window range, the ratios after / before, reference /
before and after / reference with the range of the per-round ratios, then the machine line.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import convs2s_edu  # noqa: F401  (the OpenMP defaults, before torch)


def _load_before(package: Path):
    tmp = Path(tempfile.mkdtemp(prefix="convs2s-before-"))
    shutil.copytree(package, tmp / "convs2s_edu_before")
    sys.path.insert(0, str(tmp))
    return importlib.import_module("convs2s_edu_before")


def _window(pkg, cfg, steps: int):
    """A window of ``steps`` training steps of ``pkg``'s own loop parts (cycling epochs)."""
    import torch

    training = importlib.import_module(f"{pkg.__name__}.training")
    step_mod = importlib.import_module(f"{pkg.__name__}.training.step")
    train_ds = training.make_datasets(cfg)[0]
    torch.manual_seed(cfg.seed)
    model = training.build_model(cfg)
    if getattr(cfg, "fast", False):  # a version whose fast paths are a switch of the config
        importlib.import_module(f"{pkg.__name__}.fast").use_fast_paths(model)
    model.train()
    step = step_mod.make_train_step(model, torch.optim.Adam(model.parameters(), lr=cfg.lr))
    context = step_mod.RunContext(torch.device("cpu"))
    generator = torch.Generator().manual_seed(cfg.seed)
    kwargs = {"batching": cfg.batching} if hasattr(cfg, "batching") else {}
    loader = context.loader(train_ds, cfg.batch_size, generator, **kwargs)
    state = {"it": iter(loader)}

    def next_batch():
        try:
            return next(state["it"])
        except StopIteration:
            state["it"] = iter(loader)
            return next(state["it"])

    def run() -> int:
        tokens = 0
        for _ in range(steps):
            batch = next_batch()  # collated here, as in the loop
            tokens += batch.n_target_tokens
            step(batch)
        return tokens

    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="the other checkout's convs2s_edu/ folder")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch threads (1)")
    parser.add_argument("--rounds", type=int, default=8, help="windows per (version, model)")
    parser.add_argument("--steps", type=int, default=8, help="training steps per window")
    parser.add_argument("--batching", default="random", help="this checkout's batching")
    parser.add_argument("--models", nargs="+", default=["convs2s", "gru"])
    args = parser.parse_args(argv)

    import torch

    from convs2s_edu.lab.timing import time_interleaved
    from convs2s_edu.training import TrainConfig

    torch.set_num_threads(args.threads)
    before = _load_before(Path(args.before).resolve())
    windows, warmups = {}, {}
    for name in args.models:
        old_cfg = before.training.TrainConfig(model=name, device="cpu")
        new_cfg = TrainConfig(model=name, device="cpu", batching=args.batching)
        versions = (
            ("before", before, old_cfg),
            ("after", convs2s_edu, new_cfg.replace(fast=True)),  # through the fast paths
            ("reference", convs2s_edu, new_cfg.replace(fast=False)),  # the model files as written
        )
        for version, pkg, cfg in versions:
            key = f"{name}/{version}"
            windows[key] = _window(pkg, cfg, args.steps)
            warmups[key] = _window(pkg, cfg, 2)
    m = time_interleaved(windows, args.rounds, "cpu", warmup=warmups, steps_per_window=args.steps)
    print(
        f"training loop, real target tokens/s, {args.rounds} interleaved windows of "
        f"{args.steps} steps per (model, version); after: batching={args.batching}"
    )
    for name in args.models:
        rates = ((v, m.throughput[f"{name}/{v}"]) for v in ("before", "after", "reference"))
        shown = (f"{v} {t.median:,.0f} ({t.min:,.0f}-{t.max:,.0f})" for v, t in rates)
        print(f"  {name}: {', '.join(shown)}")
        for a, b in (("after", "before"), ("reference", "before"), ("after", "reference")):
            pairs = zip(m.window_throughputs(f"{name}/{a}"), m.window_throughputs(f"{name}/{b}"))
            r = sorted(x / y for x, y in pairs)  # within each round
            print(f"    {a}/{b} {statistics.median(r):.2f} (rounds {r[0]:.2f}-{r[-1]:.2f})")
    print(f"machine: {m.machine.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
