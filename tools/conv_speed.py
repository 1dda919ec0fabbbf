"""ConvS2S's block with its convolution as one matrix product over windows
(:class:`convs2s_edu.convs2s.WindowConv1d`, the package's) against
:func:`torch.nn.functional.conv1d` (oneDNN on a CPU): forward and backward, in one
process, interleaved.

Usage::

    python tools/conv_speed.py --threads 1

Both run the whole :class:`~convs2s_edu.ConvBlock` in training mode (dropout, the
convolution, the gated linear unit, the scaled residual) with the same parameters:
the package's ``forward`` against the same arithmetic written with ``F.conv1d`` on the
channels-first layout, as the block computed it before. The two outputs and input
gradients are checked equal first. Sizes default to the seed's model and batches
(``B = 128``, ``T = 21``, ``d = 128``, ``k = 3``, a causal block). Every round times a
window of ``--steps`` forward-backward passes of each, the order reversed every other
round (``convs2s_edu.lab.timing.time_interleaved``); prints each one's median
milliseconds per pass with the window range, the ratio conv1d / windows with the range
of the per-round ratios, and the machine line (CPU, threads, load average).
"""

from __future__ import annotations

import argparse
import sys

import convs2s_edu  # noqa: F401  (the OpenMP defaults, before torch)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="PyTorch threads (1)")
    parser.add_argument("--rounds", type=int, default=10, help="windows per form (10)")
    parser.add_argument("--steps", type=int, default=10, help="passes per window (10)")
    parser.add_argument("--batch", type=int, default=128, help="B (128)")
    parser.add_argument("--length", type=int, default=21, help="T (21)")
    parser.add_argument("--d", type=int, default=128, help="d (128)")
    parser.add_argument("--kernel", type=int, default=3, help="k (3)")
    args = parser.parse_args(argv)
    for name in ("threads", "rounds", "steps", "batch", "length", "d", "kernel"):
        low = 2 if name == "rounds" else 1
        if getattr(args, name) < low:
            parser.error(f"--{name} must be >= {low}, got {getattr(args, name)}")

    import torch
    import torch.nn.functional as F

    from convs2s_edu import ConvBlock
    from convs2s_edu.convs2s import SQRT_HALF
    from convs2s_edu.lab.timing import time_interleaved

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    block = ConvBlock(args.d, args.kernel, causal=True, dropout=0.1).train()

    def with_conv1d(x):  # the block as it was computed with F.conv1d
        residual = x
        x = F.pad(block.dropout(x).transpose(1, 2), block.padding)  # (B, d, T + k - 1)
        y = F.conv1d(x, block.conv.weight, block.conv.bias)  # (B, 2d, T)
        return (F.glu(y, dim=1).transpose(1, 2) + residual) * SQRT_HALF

    forms = {"conv1d": with_conv1d, "windows": block}  # the first is the ratios' reference
    x0 = torch.randn(args.batch, args.length, args.d)
    g = torch.randn_like(x0)

    outputs = {}
    for name, form in forms.items():  # the same dropout mask for both: the same seed
        x = x0.clone().requires_grad_()
        torch.manual_seed(1)
        y = form(x)
        y.backward(g)
        outputs[name] = (y.detach(), x.grad)
    for a, b in zip(outputs["windows"], outputs["conv1d"]):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)

    def window(form, steps):
        x = x0.clone().requires_grad_()

        def run() -> int:
            for _ in range(steps):
                form(x).backward(g)
            return steps  # "tokens": passes, so throughput is passes per second

        return run

    windows = {n: window(f, args.steps) for n, f in forms.items()}
    warmups = {n: window(f, 2) for n, f in forms.items()}
    m = time_interleaved(windows, args.rounds, "cpu", warmup=warmups, steps_per_window=args.steps)
    print(
        f"ConvBlock forward + backward, B={args.batch} T={args.length} d={args.d} "
        f"k={args.kernel}, {args.rounds} interleaved windows of {args.steps} passes"
    )
    for n in forms:
        s = m.seconds_per_step(n)
        print(f"  {n:8s} {s.median * 1e3:6.1f} ms ({s.min * 1e3:.1f}-{s.max * 1e3:.1f})")
    r = m.ratios["windows"]  # passes/s of the windows over conv1d's, per round: conv1d / windows
    print(f"  conv1d / windows {r.median:.2f} (rounds {r.min:.2f}-{r.max:.2f})")
    print(f"machine: {m.machine.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
