"""The GPU check (issues 10 and 18): one script, under 10 minutes on one H200.

Usage, on the GPU machine, from a clone of the repository, with its own PyTorch::

    pip install --no-deps .
    python tools/gpu_check.py OUT_DIR            # the real check (CUDA)
    python tools/gpu_check.py OUT_DIR --device cpu   # dry run: every step, tiny budgets

Steps (each timed; a failing step is recorded and the next one still runs):

1. ``pytest`` on the test suite: device-parametrised tests (``device`` fixture of
   ``tests/conftest.py``) run their CUDA case (with ``--device cpu``: only the
   tests of the execution paths and data parallelism, as a smoke test);
2. both models trained for the seed's 30 epochs on the device, on every execution
   path the device can run (:func:`convs2s_edu.training.paths.available_paths`), in the order
   of ``ORDER``, until ``--train-budget`` seconds (default 150) have passed: runs not
   started by then are listed as skipped in the summary; per run: seconds, tokens/s
   of the last epoch, final losses, greedy exact match on the test set (the dry run:
   1 epoch on 256 examples, and only the GRU compiled);
3. ``convs2s-edu bench`` on the paths of ``BENCH_PATHS`` (the dry run: ``--quick``);
4. **convergence**: both models trained with the fast recipe on the device
   (:func:`convs2s_edu.lab.compare.compare`), the steps, examples and seconds to 50, 90 and
   95% held-out exact match, the seconds from interleaved windows on the GPU (the dry run:
   80 steps on the CPU);
5. **threads**: training tokens/s of both models at 1, 2, 4, 8 and 16 threads of the
   host's CPU (those it has), interleaved (:func:`convs2s_edu.lab.timing.measure_threads`),
   and on the GPU, with the verdict at every count: the seed's training-speed question on
   more parallel hardware;
6. **generation**: both fast-recipe models decoding the test set greedily and with beam 5 in
   batches of equal length, interleaved (:func:`convs2s_edu.lab.timing.measure_generation`):
   the paper's generation-speed claim (Table 3) on a GPU;
7. ``OUT_DIR/gpu_check.json``: the summary, with the machine described.

Exit status 0 when every step passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

# before anything loads torch: the package's OpenMP settings (convs2s_edu._threads)
import convs2s_edu  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


def _step(summary: dict, name: str, fn):
    t0 = time.perf_counter()
    print(f"== {name}", flush=True)
    try:
        summary[name] = {"ok": True, **(fn() or {})}
    except Exception as err:  # recorded, the next step still runs
        traceback.print_exc()
        summary[name] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    summary[name]["seconds"] = time.perf_counter() - t0
    print(
        f"== {name}: {'ok' if summary[name]['ok'] else 'FAILED'} "
        f"({summary[name]['seconds']:.0f} s)",
        flush=True,
    )


def run_tests(device: str) -> dict:
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests")]
    if device == "cpu":  # the dry run: a smoke test of the new parts only
        args += ["-k", "bench or paths or parallel"]
    proc = subprocess.run(args, cwd=ROOT / "tests", capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-3:]
    print("\n".join(tail))
    if proc.returncode != 0:
        print(proc.stdout[-4000:], proc.stderr[-2000:])
        raise RuntimeError(f"pytest exited with {proc.returncode}: {tail[-1] if tail else ''}")
    return {"summary": tail[-1] if tail else ""}


#: Training runs in this order, so that the paths that matter most run first when the time
#: budget (``--train-budget``) ends the step early: today's path, then the expected fastest.
ORDER = (
    "eager-fp32",
    "compile-reduce-overhead-bf16",
    "eager-bf16",
    "compile-fp32",
    "compile-reduce-overhead-fp32",
    "compile-bf16",
)

#: Paths the GPU bench times (the full set would not fit in the 6 minutes with compiling).
BENCH_PATHS = (
    "eager-fp32",
    "eager-bf16",
    "compile-reduce-overhead-fp32",
    "compile-reduce-overhead-bf16",
)


def train_all(device: str, dry: bool, budget_s: float = 120.0) -> dict:
    import torch

    from convs2s_edu import TrainConfig, evaluate, make_datasets, train
    from convs2s_edu.training import paths as fast

    paths, skipped = fast.available_paths(device)
    paths = sorted(paths, key=lambda p: ORDER.index(p.name))
    runs = {}
    t_start = time.perf_counter()
    for p in paths:
        for model in ("convs2s", "gru"):
            if time.perf_counter() - t_start > budget_s:
                skipped[f"{model}/{p.name}"] = f"not run: the step's {budget_s:.0f} s budget ended"
                continue
            cfg = TrainConfig(model=model, device=device, **p.config_fields())
            if dry:
                cfg = cfg.replace(n_train=256, n_valid=64, n_test=64, epochs=1)
            if dry and p.compile:  # compiling takes minutes on a CPU: one model, one path
                if model != "gru":
                    continue
            key = f"{model}/{p.name}"
            t0 = time.perf_counter()
            try:
                result = train(cfg, progress=False)
                scores = evaluate(result.model, make_datasets(cfg)[2])
                last = result.history.epochs[-1]
                runs[key] = {
                    "ok": True,
                    "seconds": time.perf_counter() - t0,
                    "train_seconds": result.history.column("seconds"),
                    "tokens_per_second": last["tokens_per_second"],
                    "train_loss": last["train_loss"],
                    "valid_loss": last["valid_loss"],
                    "exact_match": scores["exact_match"],
                    "token_accuracy": scores["token_accuracy"],
                }
            except Exception as err:
                traceback.print_exc()
                runs[key] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
            print(f"   {key}: {runs[key]}", flush=True)
            if device != "cpu":
                torch.cuda.empty_cache()
    if not all(r["ok"] for r in runs.values()):
        raise RuntimeError(f"failed runs: {[k for k, r in runs.items() if not r['ok']]}")
    return {"runs": runs, "skipped_paths": skipped}


def bench(device: str, dry: bool, out: Path) -> dict:
    from convs2s_edu.lab.bench import format_bench, run_bench
    from convs2s_edu.training.paths import available_paths

    runnable = {p.name for p in available_paths(device)[0]}
    paths = None if dry else [p for p in BENCH_PATHS if p in runnable]
    result = run_bench(device=device, quick=dry, paths=paths, out=out / "bench.json")
    text = format_bench(result)
    (out / "bench.txt").write_text(text + "\n")
    print(text)
    return {"table": format_bench(result, profile=False), "json": str(out / "bench.json")}


def convergence(device: str, dry: bool) -> dict:
    from convs2s_edu.lab.compare import compare, format_table
    from convs2s_edu.lab.convergence import format_convergence
    from convs2s_edu.training import TrainConfig

    cfg = TrainConfig.recipe("fast", device=device, eval_every=20)
    if dry:
        cfg = cfg.replace(n_train=512, n_valid=64, n_test=64, epochs=2, eval_every=4)
    result = compare(cfg, use_cache=False, progress=False, n_rounds=4, steps_per_window=4)
    text = format_table(result.rows) + "\n" + format_convergence(result.convergence)
    print(text)
    return {"table": text, "convergence": result.convergence, "rows": result.rows}


def threads(device: str, dry: bool) -> dict:
    from convs2s_edu._machine import usable_cores
    from convs2s_edu.lab.compare import format_threads
    from convs2s_edu.lab.timing import measure_config, measure_threads, thread_verdict
    from convs2s_edu.training import TrainConfig

    cfg = TrainConfig.recipe("fast", device="cpu")
    if dry:
        cfg = cfg.replace(n_train=512)
    counts = [t for t in (1, 2, 4, 8, 16) if t <= usable_cores()]
    rounds = 2 if dry else 4
    scaling = measure_threads(cfg, thread_counts=counts, steps_per_window=2, n_rounds=rounds)
    verdict = thread_verdict(scaling)
    out = {"cpu": scaling.to_dict(), "cpu_verdict": verdict.text}
    print(format_threads(scaling, verdict=verdict))
    if device != "cpu":
        m = measure_config(cfg.replace(device=device), steps_per_window=4, n_rounds=6)
        out["gpu"] = m.to_dict()
        print(
            f"on {m.machine.device}: "
            + ", ".join(f"{n} {m.throughput[n].median:,.0f} tokens/s" for n in m.models)
        )
    return out


def generation(device: str, dry: bool) -> dict:
    from convs2s_edu import make_datasets, train
    from convs2s_edu.lab.timing import measure_generation, speed_verdict
    from convs2s_edu.training import TrainConfig

    cfg = TrainConfig.recipe("fast", device=device)
    if dry:
        cfg = cfg.replace(n_train=256, n_valid=32, n_test=64, epochs=1)
    models = {m: train(cfg.replace(model=m), progress=False).model for m in ("convs2s", "gru")}
    sources = [x for x, _ in make_datasets(cfg)[2].examples]
    measured = measure_generation(models, sources, beam_sizes=(1, 5), n_rounds=2 if dry else 4)
    out = {}
    for k, m in measured.items():
        v = speed_verdict(m)
        out[f"beam{k}"] = {
            "sentences_per_second": {n: m.throughput[n].median for n in m.models},
            "verdict": v.text,
        }
        print(f"beam {k}: {out[f'beam{k}']}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="directory for gpu_check.json, bench.json, bench.txt")
    parser.add_argument(
        "--train-budget",
        type=float,
        default=120.0,
        dest="train_budget",
        help="seconds for the training step; runs not started by then are "
        "recorded as skipped (default 120)",
    )
    parser.add_argument(
        "--device",
        default="cuda",
        help="cuda (default), cuda:N, or cpu for a quick dry run of every step",
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dry = args.device == "cpu"
    import torch

    if not dry and not torch.cuda.is_available():
        print("gpu_check: error: no CUDA device (use --device cpu for a dry run)", file=sys.stderr)
        return 2
    from convs2s_edu.lab.timing import machine_info

    summary = {
        "device": args.device,
        "dry_run": dry,
        "machine": machine_info(args.device).describe(),
        "started": time.ctime(),
    }
    t0 = time.perf_counter()
    _step(summary, "tests", lambda: run_tests(args.device))
    _step(summary, "train", lambda: train_all(args.device, dry, args.train_budget))
    _step(summary, "bench", lambda: bench(args.device, dry, out))
    _step(summary, "convergence", lambda: convergence(args.device, dry))
    _step(summary, "threads", lambda: threads(args.device, dry))
    _step(summary, "generation", lambda: generation(args.device, dry))
    summary["seconds"] = time.perf_counter() - t0
    steps = ("tests", "train", "bench", "convergence", "threads", "generation")
    summary["ok"] = all(summary[k]["ok"] for k in steps)
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2, default=str))
    print(
        f"gpu_check: {'ok' if summary['ok'] else 'FAILED'} in {summary['seconds']:.0f} s; "
        f"summary in {out / 'gpu_check.json'}"
    )
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
