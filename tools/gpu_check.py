"""The GPU check: one script for a 10-minute slot on one GPU machine.

Usage, from the repository's root, with the machine's own PyTorch (nothing to install: the
package runs from the source tree; the tests need pytest, pytest-xdist, numpy, tqdm,
matplotlib, onnx and onnxruntime)::

    PYTHONPATH=. python3 tools/gpu_check.py OUT_DIR               # the real check (CUDA)
    PYTHONPATH=. python3 tools/gpu_check.py OUT_DIR --device cpu  # dry run, tiny budgets

``tox -e gpu-dry`` runs the dry run the same way. Time counts from the process's start: no
step starts after ``--deadline`` seconds (default 420; the steps left are recorded as
skipped), and the step still running at ``--stop`` (default 560) is stopped and recorded as
failed, so that the check ends inside the machine's time limit with what it measured. The
summary is written after every step (whole or not at all). Before the steps, a one-line
:func:`torch.compile` on the device: when it fails, the compiled paths are left out of
steps 5 and 6, with the reason.

Steps, in this order (each timed; a failing step is recorded and the next one still runs):

1. ``tests``: ``pytest`` on the device-parametrised tests (``device`` fixture of
   ``tests/conftest.py``), whose CUDA case runs here (skipped on the CPU), and the tests
   of the execution paths, the bench and data parallelism, in up to 4 workers, in a
   process group killed after 240 s; the rest of the suite runs in CI;
2. ``convergence``: both models trained with the fast recipe on the device
   (:func:`convs2s_edu.lab.timing.compare`), the steps, examples and seconds to 50, 90 and
   95% held-out exact match, the seconds from interleaved windows on the GPU (the dry run:
   2 epochs of 512 examples on the CPU);
3. ``generation``: the two models of step 2 decoding the test set greedily and with beam 5
   in batches of equal length, interleaved
   (:func:`convs2s_edu.lab.timing.measure_generation`): the paper's generation-speed claim
   (Table 3) on a GPU (trained here when step 2 failed);
4. ``threads``: training tokens/s of both models at 1, 2, 4, 8 and 16 threads of the
   host's CPU (those it has), interleaved (:func:`convs2s_edu.lab.timing.measure_threads`),
   and on the GPU, with the verdict at every count: the original notebook's
   training-speed question on more parallel hardware;
5. ``bench``: ``convs2s-edu bench`` on the paths of ``BENCH_PATHS`` (the dry run:
   ``--quick``);
6. ``train``: both models trained for the original notebook's 30 epochs on the device,
   on every execution path the device can run (:func:`convs2s_edu.fast.paths.available_paths`),
   in the order of ``ORDER``, until ``--train-budget`` seconds (default 120, less when the
   deadline is nearer) have passed: runs not started by then are listed as skipped; per
   run: seconds, tokens/s of the last epoch, final losses, greedy exact match on the test
   set (the dry run: 1 epoch on 256 examples, and only the GRU compiled).

``OUT_DIR/gpu_check.json`` holds the summary, with the machine described. Exit status 0
when every step ran and passed, 1 otherwise, 2 without a CUDA device.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

#: When the process started (before torch loads): the deadline and the hard stop count from here.
T_START = time.perf_counter()

# before anything loads torch: the package's OpenMP settings (convs2s_edu._threads)
import convs2s_edu  # noqa: E402

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


#: The tests of the ``tests`` step: the device-parametrised tests' CUDA cases (their ids
#: hold ``cuda``; skipped without a GPU) and the tests of what runs differently on a GPU.
TEST_SELECTION = "cuda or bench or paths or parallel"


def run_tests(device: str, timeout: float = 240.0) -> dict:
    """Step 1: pytest on :data:`TEST_SELECTION` in a process group of its own, killed with its
    workers after ``timeout`` seconds or when the check is stopped."""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests")]
    args += ["-k", TEST_SELECTION]
    if importlib.util.find_spec("xdist") is not None:  # compiling dominates: workers share it
        from convs2s_edu._machine import usable_cores

        args += ["-n", str(min(4, usable_cores()))]
    env = dict(os.environ)
    if Path(convs2s_edu.__file__).resolve().parents[1] == ROOT:  # run from the source tree
        # pytest runs in tests/, where a relative PYTHONPATH=. no longer names the root
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        args,
        cwd=ROOT / "tests",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as stop:  # the timeout, or the check's hard stop: no worker outlives it
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(stop, subprocess.TimeoutExpired):
            raise RuntimeError(f"the tests did not end within {timeout:.0f} s") from None
        raise
    tail = out.strip().splitlines()[-3:]
    print("\n".join(tail))
    if proc.returncode != 0:
        print(out[-4000:], err[-2000:])
        why = tail[-1] if tail else " ".join(err.strip().splitlines()[-2:])
        raise RuntimeError(f"pytest exited with {proc.returncode}: {why}")
    return {"summary": tail[-1] if tail else ""}


def compile_check(device: str) -> str | None:
    """``None`` when :func:`torch.compile` builds and runs a kernel on ``device``, else why
    not: the compiled paths are then left out of the bench and the runs, with the reason, so
    that a compiler missing on the machine costs those paths and not the eager ones."""
    import torch

    try:
        x = torch.randn(64, device=device)
        f = torch.compile(lambda t: torch.relu(t) * 2 + 1)
        torch.testing.assert_close(f(x), torch.relu(x) * 2 + 1)
    except Exception as err:
        return f"torch.compile failed on {device}: {type(err).__name__}: {err}"[:500]
    return None


#: Training runs in this order, so that the paths that matter most run first when the time
#: budget (``--train-budget``) ends the step early: the default path, then the expected fastest.
ORDER = (
    "fast-fp32",
    "compile-reduce-overhead-bf16",
    "fast-bf16",
    "compile-fp32",
    "eager-fp32",
    "compile-reduce-overhead-fp32",
    "compile-bf16",
)

#: Paths the GPU bench times (the full set would not fit in the check's minutes with compiling).
BENCH_PATHS = (
    "eager-fp32",
    "fast-fp32",
    "fast-bf16",
    "compile-reduce-overhead-fp32",
    "compile-reduce-overhead-bf16",
)


def train_all(device: str, dry: bool, budget_s: float = 120.0, no_compile=None) -> dict:
    import torch

    from convs2s_edu import TrainConfig, evaluate, make_datasets, train
    from convs2s_edu.fast import paths as fast

    paths, skipped = fast.available_paths(device)
    if no_compile:
        skipped.update({p.name: no_compile for p in paths if p.compile})
        paths = [p for p in paths if not p.compile]
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
            except TimeoutError:  # the check's hard stop ends the step, not just this run
                raise
            except Exception as err:
                traceback.print_exc()
                runs[key] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
            print(f"   {key}: {runs[key]}", flush=True)
            if device != "cpu":
                torch.cuda.empty_cache()
    if not all(r["ok"] for r in runs.values()):
        raise RuntimeError(f"failed runs: {[k for k, r in runs.items() if not r['ok']]}")
    return {"runs": runs, "skipped_paths": skipped}


def bench(device: str, dry: bool, out: Path, no_compile=None) -> dict:
    from convs2s_edu.fast.paths import available_paths
    from convs2s_edu.lab.bench import format_bench, run_bench

    runnable = {p.name for p in available_paths(device)[0] if not (no_compile and p.compile)}
    paths = None if dry else [p for p in BENCH_PATHS if p in runnable]
    result = run_bench(device=device, quick=dry, paths=paths, out=out / "bench.json")
    text = format_bench(result)
    (out / "bench.txt").write_text(text + "\n")
    print(text)
    return {"table": format_bench(result, profile=False), "json": str(out / "bench.json")}


def fast_config(device: str, dry: bool):
    """The fast recipe of the convergence and generation steps (the dry run: a small one)."""
    from convs2s_edu.training import TrainConfig

    cfg = TrainConfig.recipe("fast", device=device, eval_every=20)
    if dry:
        cfg = cfg.replace(n_train=512, n_valid=64, n_test=64, epochs=2, eval_every=4)
    return cfg


def convergence(device: str, dry: bool, trained: dict) -> dict:
    """Step 2; leaves the two trained models in ``trained`` for the generation step."""
    from convs2s_edu.lab.timing import compare, format_convergence, format_table

    cfg = fast_config(device, dry)
    result = compare(cfg, use_cache=False, progress=False, n_rounds=4, steps_per_window=4)
    trained.update({name: r.model for name, r in result.results.items()})
    text = format_table(result.rows) + "\n" + format_convergence(result.convergence)
    print(text)
    return {"table": text, "convergence": result.convergence, "rows": result.rows}


def threads(device: str, dry: bool) -> dict:
    from convs2s_edu._machine import usable_cores
    from convs2s_edu.lab.timing import measure_config, measure_threads, speed_table, speed_verdict
    from convs2s_edu.training import TrainConfig

    cfg = TrainConfig.recipe("fast", device="cpu")
    if dry:
        cfg = cfg.replace(n_train=512)
    counts = [t for t in (1, 2, 4, 8, 16) if t <= usable_cores()]
    rounds = 2 if dry else 4
    scaling = measure_threads(cfg, thread_counts=counts, steps_per_window=2, n_rounds=rounds)
    verdict = speed_verdict(scaling)
    out = {"cpu": scaling.to_dict(), "cpu_verdict": verdict.text}
    print(speed_table(scaling, verdict=verdict))
    if device != "cpu":
        m = measure_config(cfg.replace(device=device), steps_per_window=4, n_rounds=6)
        out["gpu"] = m.to_dict()
        print(
            f"on {m.machine.device}: "
            + ", ".join(f"{n} {m.throughput[n].median:,.0f} tokens/s" for n in m.models)
        )
    return out


def generation(device: str, dry: bool, trained: dict) -> dict:
    """Step 3, with the models of step 2 (``trained``), or two trained here without them."""
    from convs2s_edu import make_datasets, train
    from convs2s_edu.lab.timing import measure_generation, speed_verdict

    cfg = fast_config(device, dry)
    reused = sorted(trained) == ["convs2s", "gru"]
    if reused:
        models = dict(trained)
    else:
        models = {m: train(cfg.replace(model=m), progress=False).model for m in ("convs2s", "gru")}
    sources = [x for x, _ in make_datasets(cfg)[2].examples]
    measured = measure_generation(models, sources, beam_sizes=(1, 5), n_rounds=2 if dry else 4)
    out = {"models": "from the convergence step" if reused else "trained here"}
    for k, m in measured.items():
        v = speed_verdict(m)
        out[f"beam{k}"] = {
            "sentences_per_second": {n: m.throughput[n].median for n in m.models},
            "verdict": v.text,
        }
        print(f"beam {k}: {out[f'beam{k}']}")
    return out


#: The steps in the order they run: the measurements the site still lacks (issue 18) right
#: after the tests, so that a check stopped by its deadline has them; the 30-epoch runs last,
#: as the step whose length is least known (its budget is checked before each run only).
STEPS = ("tests", "convergence", "generation", "threads", "bench", "train")


def _skipped(why: str) -> dict:
    """A step's summary when it never started."""
    return {"ok": False, "skipped": why, "seconds": 0.0}


def run_steps(steps: dict, summary: dict, deadline: float, write, start=None) -> None:
    """Run ``steps`` (name -> function of the seconds left) in order into ``summary``.

    A step not started before ``deadline`` seconds after ``start`` (a
    :func:`time.perf_counter` reading; default now) is recorded as skipped; ``write`` is
    called after every step, so that the summary on disk is never more than one step old.
    """
    t0 = time.perf_counter() if start is None else start
    for name, fn in steps.items():
        left = deadline - (time.perf_counter() - t0)
        if left <= 0:
            why = f"not started: the check's {deadline:g} s deadline had passed"
            print(f"== {name}: skipped ({why})", flush=True)
            summary[name] = _skipped(why)
        else:
            _step(summary, name, lambda fn=fn, left=left: fn(left))
        write()


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
        "--deadline",
        type=float,
        default=420.0,
        help="seconds from the start after which no step starts; those left are recorded "
        "as skipped (default 420)",
    )
    parser.add_argument(
        "--stop",
        type=float,
        default=560.0,
        help="seconds from the start at which the step still running is stopped and recorded "
        "as failed, and the summary written (default 560: inside a 10-minute limit)",
    )
    parser.add_argument(
        "--device",
        default="cuda",
        help="cuda (default), cuda:N, or cpu for a quick dry run of every step",
    )
    args = parser.parse_args(argv)
    for name in ("train_budget", "deadline", "stop"):
        value = getattr(args, name)
        if not value > 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0 seconds, got {value:g}")
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
        "torch": torch.__version__,
        "started": time.ctime(),
        "finished": False,
    }
    path = out / "gpu_check.json"

    def write():  # whole or not at all: a kill mid-write leaves the last summary
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary, indent=2, default=str))
        os.replace(tmp, path)

    def hard_stop(signum, frame):
        raise TimeoutError(f"stopped at the check's --stop of {args.stop:g} s")

    signal.signal(signal.SIGALRM, hard_stop)
    signal.alarm(max(1, round(args.stop - (time.perf_counter() - T_START))))
    try:
        write()
        no_compile = compile_check(args.device)  # None, or why the compiled paths are left out
        summary["compile"] = no_compile or "ok"
        print(f"== compile check: {summary['compile']}", flush=True)
        trained: dict = {}  # the convergence step's two models, for the generation step
        steps = {
            "tests": lambda left: run_tests(args.device, min(240.0, left)),
            "convergence": lambda left: convergence(args.device, dry, trained),
            "generation": lambda left: generation(args.device, dry, trained),
            "threads": lambda left: threads(args.device, dry),
            "bench": lambda left: bench(args.device, dry, out, no_compile),
            "train": lambda left: train_all(
                args.device, dry, min(args.train_budget, left), no_compile
            ),
        }
        assert tuple(steps) == STEPS
        # once stopped, nothing starts
        run_steps(steps, summary, min(args.deadline, args.stop), write, start=T_START)
    except TimeoutError as err:  # the hard stop between two steps: the rest never started
        summary["stopped"] = str(err)
        for name in STEPS:
            summary.setdefault(name, _skipped(str(err)))
    finally:
        signal.alarm(0)
    summary["seconds"] = time.perf_counter() - T_START
    summary["ok"] = all(summary[k]["ok"] for k in STEPS)
    summary["finished"] = True
    write()
    skipped = [k for k in STEPS if "skipped" in summary[k]]
    print(
        f"gpu_check: {'ok' if summary['ok'] else 'FAILED'} in {summary['seconds']:.0f} s"
        + (f" (skipped: {', '.join(skipped)})" if skipped else "")
        + f"; summary in {path}"
    )
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
