"""Training speed of this package's two models against the public tutorial's, the same
batches, in one process, interleaved.

Usage::

    git clone https://github.com/bentrevett/pytorch-seq2seq /tmp/tutorial
    git -C /tmp/tutorial checkout b3cd54c72cd6e4e63f672d334c795b4fe744ef92
    python tools/tutorial_bench.py /tmp/tutorial --threads 1 2

The tutorial is read at run time from the checkout given (nothing of it is copied into this
repository): the model classes of its notebooks ``legacy/5 - Convolutional Sequence to
Sequence Learning.ipynb`` (ConvS2S) and ``3 - Neural Machine Translation by Jointly Learning
to Align and Translate.ipynb`` (the GRU with Bahdanau's attention) are executed from their
code cells. Another commit than :data:`TUTORIAL_COMMIT` is refused (``--any-commit`` allows
it), because the notebooks change.

Both sides train the same work: models at the original notebook's sizes (embeddings and
hidden states of 128, 4 + 4 convolution layers of width 3; one GRU layer a side),
dropout 0.1, Adam (lr 1e-3), on the same batches of the original notebook's sorting data
(128 examples each), fp32. Each side keeps what its model has: this package's ConvS2S
its weight normalisation and gradient clipping at 1.0 (the original notebook's), the
tutorial's ConvS2S its clipping at 0.1 and no weight normalisation; the GRU clipping at
1.0 on both sides; the tutorial's GRU with teacher forcing at every step
(``teacher_forcing_ratio=1``), as this package's. This package trains on its reference
path, on its fast paths, and on the path its calibration chooses
(``convs2s_edu.training.resolve_path``); with ``--compiled``, also on its compiled path
(``TrainConfig(compile=True)``: :func:`torch.compile` through the fast paths that
compile), after a warm-up whose seconds (the compilation included) are printed: from the
on-disk inductor cache as it is, or from an empty one with ``--cold-cache``. Every round
times one window of ``--steps`` steps of each, the order reversed every other round
(``convs2s_edu.lab.timing.time_interleaved``); throughput counts real target tokens.
Prints, per thread count and model, tokens per second of each and the per-round ratios to
the tutorial with their range. With ``--bf16``, also this package's fast path with its
forward pass in bf16 under autocast (weights, gradients and optimiser in fp32; AMX or
avx512_bf16 make it fast), against the tutorial in fp32: a different arithmetic, so
beside the comparison, not in it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

import convs2s_edu  # noqa: F401  (the OpenMP defaults, before torch)

#: The tutorial's commit this benchmark was written against (its ConvS2S notebook then
#: lived under ``legacy/``).
TUTORIAL_COMMIT = "b3cd54c72cd6e4e63f672d334c795b4fe744ef92"
NOTEBOOKS = {
    "convs2s": "legacy/5 - Convolutional Sequence to Sequence Learning.ipynb",
    "gru": "3 - Neural Machine Translation by Jointly Learning to Align and Translate.ipynb",
}


def tutorial_classes(checkout: Path, model: str) -> dict:
    """The names the tutorial notebook of ``model`` defines in its ``class`` cells."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    namespace = {"torch": torch, "nn": nn, "F": F, "random": random}
    cells = json.loads((checkout / NOTEBOOKS[model]).read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.lstrip().startswith("class "):
            exec(compile(source, NOTEBOOKS[model], "exec"), namespace)  # noqa: S102
    return namespace


def tutorial_step(checkout: Path, model: str, vocab: int):
    """A training step of the tutorial's ``model`` (its loss, clipping and optimiser); the
    model is the step's ``model`` attribute."""
    import torch
    from torch import nn

    from convs2s_edu.data import PAD

    ns = tutorial_classes(checkout, model)
    torch.manual_seed(0)
    if model == "convs2s":
        enc = ns["Encoder"](vocab, 128, 128, 4, 3, 0.1, "cpu", 64)
        dec = ns["Decoder"](vocab, 128, 128, 4, 3, 0.1, PAD, "cpu", 64)
        net, clip = ns["Seq2Seq"](enc, dec), 0.1
    else:
        attention = ns["Attention"](128, 128)
        enc = ns["Encoder"](vocab, 128, 128, 128, 0.1)
        dec = ns["Decoder"](vocab, 128, 128, 128, 0.1, attention)
        net, clip = ns["Seq2Seq"](enc, dec, "cpu"), 1.0
    net.train()
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)

    def step(batch) -> None:
        optimizer.zero_grad()
        if model == "convs2s":
            logits, _ = net(batch.src, batch.tgt_in)  # (B, T, V)
            target = batch.tgt_out
        else:  # (length, batch) tensors; the tutorial's output 0 is left empty
            trg = torch.cat([batch.tgt_in[:, :1], batch.tgt_out], dim=1).T
            logits = net(batch.src.T, trg, 1.0)[1:].transpose(0, 1)
            target = batch.tgt_out
        loss = criterion(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), clip)
        optimizer.step()

    step.model = net
    return step


def package_step(model: str, fast: bool, compiled: bool = False, precision: str = "fp32"):
    """A training step of this package's ``model`` on the reference or the fast paths,
    eager or compiled (:func:`~convs2s_edu.fast.paths.apply_compile`), in fp32 or with the
    forward pass in bf16 (``precision``)."""
    import torch

    from convs2s_edu import TrainConfig, build_model
    from convs2s_edu.fast import use_fast_paths
    from convs2s_edu.fast.paths import apply_compile
    from convs2s_edu.training.step import make_train_step

    cfg = TrainConfig(model=model, device="cpu", precision=precision)
    torch.manual_seed(0)
    net = use_fast_paths(build_model(cfg).train(), fast)
    if compiled:
        apply_compile(net)
    optimizer = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    return make_train_step(net, optimizer, cfg.clip_norm, cfg.precision)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tutorial", type=Path, help="a checkout of bentrevett/pytorch-seq2seq")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=4, help="training steps per window")
    parser.add_argument("--models", nargs="+", default=["convs2s", "gru"])
    parser.add_argument("--any-commit", action="store_true")
    parser.add_argument("--compiled", action="store_true", help="time the compiled levers")
    parser.add_argument(
        "--bf16",
        action="store_true",
        help="also time the fast path with its forward pass in bf16 (the tutorial stays fp32)",
    )
    parser.add_argument(
        "--cold-cache", action="store_true", help="compile into an empty inductor cache"
    )
    args = parser.parse_args(argv)

    head = subprocess.run(
        ["git", "-C", str(args.tutorial), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if head != TUTORIAL_COMMIT and not args.any_commit:
        parser.error(f"the tutorial checkout is at {head or '?'}, not {TUTORIAL_COMMIT}")

    import torch
    from torch.utils.benchmark import set_torch_threads

    from convs2s_edu import TrainConfig
    from convs2s_edu.data import n_token_ids
    from convs2s_edu.lab.timing import time_interleaved, training_batches, window_runner
    from convs2s_edu.training import resolve_path

    cfg = TrainConfig(device="cpu")
    batches = training_batches(cfg, args.steps)
    vocab = n_token_ids(cfg.vocab_size)
    print(f"tutorial {head}; batches of {cfg.batch_size}, {args.steps} steps a window")
    for threads in args.threads:
        with set_torch_threads(threads):
            for model in args.models:
                chosen = resolve_path(cfg.replace(model=model), say=False).fast
                steps = {
                    "tutorial": tutorial_step(args.tutorial, model, vocab),
                    "reference": package_step(model, False),
                    "fast": package_step(model, True),
                }
                if args.bf16:
                    steps["fast bf16"] = package_step(model, True, precision="bf16")
                compile_seconds = {}
                if args.compiled:
                    torch._dynamo.reset()  # each thread count traces afresh
                    if args.cold_cache:  # and compiles into an empty cache of its own
                        cold = tempfile.mkdtemp(prefix="inductor-cold-")
                        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cold
                    steps["compiled"] = package_step(model, False, compiled=True)
                    start = time.perf_counter()  # compiles, for every batch length
                    window_runner(steps["compiled"], batches, len(batches))()
                    compile_seconds["compiled"] = time.perf_counter() - start
                windows = {k: window_runner(s, batches, args.steps) for k, s in steps.items()}
                warm = {k: window_runner(s, batches, 2) for k, s in steps.items()}
                m = time_interleaved(windows, args.rounds, "cpu", warmup=warm)
                print(
                    f"\n{model}, {threads} thread(s); chosen path here: "
                    f"{'fast' if chosen else 'reference'}"
                )
                for name, seconds in compile_seconds.items():
                    print(f"  {name}: the first {len(batches)} steps took {seconds:.1f} s")
                for name in steps:
                    r = m.round_ratios(name, "tutorial")
                    print(
                        f"  {name:9s} {m.throughput[name].median:>8,.0f} tokens/s, x tutorial "
                        f"{r.median:.2f} (rounds {r.min:.2f}-{r.max:.2f})"
                    )
    print("\n" + m.machine.describe())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
