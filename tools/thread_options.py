"""Measure PyTorch's OpenMP options on this machine, idle and next to a competing busy process.

For every option (``OMP_WAIT_POLICY`` unset or ``PASSIVE``, a few
``GOMP_SPINCOUNT`` values, 1 or 2 intra-op threads) a fresh Python process
(OpenMP reads its environment once, when torch loads) times ConvS2S and the GRU
with :func:`convs2s_edu.lab.timing.measure_config` (interleaved windows of training
steps, the original notebook's configuration), first on the machine as it is, then while
``--competitors`` busy processes (pure Python loops, one core each) run next to
it. It prints target tokens per second per option and the slowdown under load
(idle / busy: 1.5x means the competing process made training 1.5 times slower);
``--json`` writes everything.

Run it on an otherwise idle machine::

    PYTHONPATH=. python tools/thread_options.py [--competitors 1] [--json out.json]

Every child run is bounded (``--timeout`` seconds); a run that takes longer is
reported as such, and every competing process is stopped when the script ends.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (label, OpenMP environment, threads). GNU OpenMP (PyTorch's on Linux) spins a waiting thread
# GOMP_SPINCOUNT times before it sleeps: 300,000 by default, 0 with OMP_WAIT_POLICY=PASSIVE.
OPTIONS = [
    ("default policy, 2 threads", {}, 2),
    ("PASSIVE, 2 threads", {"OMP_WAIT_POLICY": "PASSIVE"}, 2),
    ("GOMP_SPINCOUNT=10000, 2 thr.", {"GOMP_SPINCOUNT": "10000"}, 2),
    ("GOMP_SPINCOUNT=100000, 2 thr.", {"GOMP_SPINCOUNT": "100000"}, 2),
    ("default policy, 1 thread", {}, 1),
    ("PASSIVE, 1 thread", {"OMP_WAIT_POLICY": "PASSIVE"}, 1),
]
OPENMP_VARS = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")
BUSY = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


def child(args) -> None:
    """Measure in this process (the environment was set by the parent) and print JSON."""
    import torch

    from convs2s_edu import TrainConfig
    from convs2s_edu.lab.timing import measure_config

    torch.set_num_threads(args.threads)
    windows = {"steps_per_window": args.steps, "n_rounds": args.rounds, "warmup_steps": 1}
    m = measure_config(TrainConfig(device="cpu"), **windows)
    print(json.dumps(m.to_dict()))


def run_child(openmp, threads, args) -> dict | None:
    env = {k: v for k, v in os.environ.items() if k not in OPENMP_VARS}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["OMP_NUM_THREADS"] = str(threads)
    # what is not set stays unset: the child imports torch before convs2s_edu, whose
    # defaults then cannot apply (convs2s_edu._threads)
    env.update(openmp)
    cmd = [sys.executable, __file__, "--child", f"--threads={threads}", f"--steps={args.steps}"]
    cmd.append(f"--rounds={args.rounds}")
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=args.timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise SystemExit(f"child failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--competitors", type=int, default=1, help="busy processes (default 1)")
    p.add_argument("--steps", type=int, default=3, help="training steps per window (default 3)")
    p.add_argument("--rounds", type=int, default=4, help="windows per model (default 4)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per child run (default 300)")
    p.add_argument("--json", help="write every measurement to this file")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    if args.competitors < 0:
        p.error(f"--competitors must be >= 0, got {args.competitors}")

    results = []
    for label, openmp, threads in OPTIONS:
        row = {"option": label, "openmp": openmp, "threads": threads}
        for condition in ("idle", "busy"):
            if condition == "busy" and args.competitors == 0:
                continue
            busy = []
            if condition == "busy":
                competitor = [sys.executable, "-c", BUSY.format(seconds=args.timeout + 30)]
                busy = [subprocess.Popen(competitor) for _ in range(args.competitors)]
                time.sleep(1.0)
            try:
                row[condition] = run_child(openmp, threads, args)
            finally:
                for proc in busy:
                    proc.kill()
                    proc.wait()
        results.append(row)
        print_row(row, first=len(results) == 1)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    m = next((r["idle"] for r in results if r.get("idle")), None)
    if m:
        mach = m["machine"]
        print(
            f"\nmachine: {mach['cpu']}, {mach['cores']} cores usable, torch "
            f"{mach['torch_version']}; {args.competitors} competing busy process(es); "
            f"load average before the first idle run: {mach['load_before'] or float('nan'):.2f}"
        )


def _tps(m, model):
    return "timed out" if m is None else f"{m['throughput'][model]['median']:,.0f}"


def print_row(row, first=False):
    if first:
        print(
            f"{'option':30s} {'model':8s} {'idle tok/s':>11s} {'busy tok/s':>11s} {'slowdown':>9s}"
        )
    for model in ("convs2s", "gru"):
        idle, busy = row.get("idle"), row.get("busy")
        slow = ""
        if idle and busy:  # how many times slower with the competing process(es)
            ratio = idle["throughput"][model]["median"] / busy["throughput"][model]["median"]
            slow = f"{ratio:.2f}x"
        print(
            f"{row['option']:30s} {model:8s} {_tps(idle, model):>11s} "
            f"{_tps(busy, model) if 'busy' in row else '-':>11s} {slow:>9s}",
            flush=True,
        )


if __name__ == "__main__":
    main()
