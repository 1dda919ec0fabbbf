"""Equal-length batches against random ones: accuracy, convergence speed and tokens/s.

The measurement behind the site's choice of ``TrainConfig.batching`` (see the departures
page); with ``--field precision`` the same measurement of bf16 against fp32. Usage::

    python tools/measure_bucketing.py                 # 3 seeds, the fast recipe, both models
    python tools/measure_bucketing.py --seeds 5 --cache /tmp/bucket-cache
    python tools/measure_bucketing.py --field precision --models convs2s   # fp32, bf16

1. Both models are trained with the fast recipe (:meth:`convs2s_edu.TrainConfig.recipe`,
   a held-out scoring every 20 steps) for every seed, once with random batches and once with
   batches of equal length (or once per value of ``--field``), all runs concurrently, one
   process per usable core (:func:`convs2s_edu.training.run_jobs`), into the training cache.
2. Per run: test-set exact match and token accuracy (greedy), held-out loss, and the steps to
   50/90/95% held-out exact match; per model, the paired difference bucket - random over the
   seeds with its 90% interval (:func:`convs2s_edu.lab.experiments.inference.paired_test`).
3. Tokens/s: the four (model, batching) training steps timed interleaved in this process
   (alone, after the training), on batches drawn as each batching draws them, at this
   process's thread count; and the padding fraction of an epoch of each batching.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import convs2s_edu  # noqa: F401  (the OpenMP defaults, before torch)

#: The fields ``--field`` compares and their default values (the first: the reference).
_DEFAULT_VALUES = {"batching": ("random", "bucket", "pooled"), "precision": ("fp32", "bf16")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--cache", help="training cache (default: the package's)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument(
        "--field",
        choices=sorted(_DEFAULT_VALUES),
        default="batching",
        help="the TrainConfig field compared (batching)",
    )
    parser.add_argument(
        "--values",
        nargs="+",
        help="its values; the first is the reference of the differences "
        "(batching: random bucket pooled; precision: fp32 bf16)",
    )
    parser.add_argument("--models", nargs="+", default=["convs2s", "gru"])
    args = parser.parse_args(argv)
    values = tuple(args.values or _DEFAULT_VALUES[args.field])
    if args.seeds < 2:
        parser.error(f"--seeds must be at least 2 (a paired interval), got {args.seeds}")
    if args.rounds < 2:
        parser.error(f"--rounds must be at least 2 (interleaved windows), got {args.rounds}")

    import torch

    from convs2s_edu import evaluate, make_datasets, train_or_load
    from convs2s_edu.data import padding_fraction
    from convs2s_edu.lab import timing
    from convs2s_edu.lab.experiments.inference import paired_test
    from convs2s_edu.training import TrainConfig, build_model, make_train_step, run_jobs, train_job

    models, field = tuple(args.models), args.field
    ref = values[0]
    cfgs = {
        (m, b, s): TrainConfig.recipe("fast", model=m, seed=s, eval_every=20, **{field: b})
        for m in models
        for b in values
        for s in range(args.seeds)
    }
    run_jobs([train_job(c, args.cache) for c in cfgs.values()], name="bucketing")

    rows = {}
    for key, cfg in cfgs.items():
        r = train_or_load(cfg, progress=False, directory=args.cache)
        rows[key] = evaluate(r.model, make_datasets(cfg)[2])  # exact_match, token_accuracy, ...
        rows[key]["valid_loss"] = r.history.epochs[-1]["valid_loss"]
        for x in timing.LEVELS:
            rows[key][f"steps_{x}"] = (r.history.reached(x) or {}).get("step")
    print(f"fast recipe, {args.seeds} seeds; test set scores and held-out convergence")
    for m in models:
        for b in values:
            runs = [rows[(m, b, s)] for s in range(args.seeds)]
            em = [x["exact_match"] for x in runs]
            steps = {x: [r[f"steps_{x}"] for r in runs] for x in timing.LEVELS}
            seeds = ", ".join(f"{v:.1%}" for v in em)
            reached = "; ".join(f"{x:.0%}: {steps[x]}" for x in timing.LEVELS)
            mean = f"{statistics.mean(em):.2%}"
            print(f"  {m:8s} {b:7s} exact match {mean} (seeds {seeds}); steps to {reached}")
        for b in values[1:]:
            for key, effect in (("exact_match", 0.005), ("token_accuracy", 0.002)):
                series = [[rows[(m, v, s)][key] for s in range(args.seeds)] for v in (b, ref)]
                t = paired_test(*series, effect)
                lo, hi = t.interval(0.90)
                print(
                    f"  {m:8s} {b} - {ref} {key}: {t.mean:+.2%} (90% interval "
                    f"{lo:+.2%} to {hi:+.2%})"
                )

    windows, warm, pads = {}, {}, {}
    for m in models:
        for b in values:
            cfg = cfgs[(m, b, 0)]
            batches = timing.training_batches(cfg, 8)
            torch.manual_seed(0)
            model = build_model(cfg).train()
            step = make_train_step(
                model, torch.optim.Adam(model.parameters(), lr=cfg.lr), precision=cfg.precision
            )
            windows[f"{m}/{b}"] = timing.window_runner(step, batches, 8)
            warm[f"{m}/{b}"] = timing.window_runner(step, batches, 2)
            epoch = timing.training_batches(cfg.replace(), cfg.steps_per_epoch)
            pads[f"{field}={b}"] = padding_fraction(epoch)
    meas = timing.time_interleaved(windows, args.rounds, "cpu", warmup=warm, steps_per_window=8)
    padding = ", ".join(f"{b} {p:.1%}" for b, p in pads.items())
    print(f"padding of an epoch's target positions: {padding}")
    for m in models:
        r = meas.throughput[f"{m}/{ref}"]
        line = f"  {m:8s} real tokens/s {ref} {r.median:,.0f} ({r.min:,.0f}-{r.max:,.0f})"
        for b in values[1:]:
            t = meas.throughput[f"{m}/{b}"]
            after = meas.window_throughputs(f"{m}/{b}")
            ratio = [x / y for x, y in zip(after, meas.window_throughputs(f"{m}/{ref}"))]
            line += (
                f"; {b} {t.median:,.0f} ({t.min:,.0f}-{t.max:,.0f}), {b}/{ref} "
                f"{statistics.median(ratio):.2f} (rounds {min(ratio):.2f}-{max(ratio):.2f})"
            )
        print(line)
    # the timing's own machine line: its load average was read around the windows
    print(f"machine: {meas.machine.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
