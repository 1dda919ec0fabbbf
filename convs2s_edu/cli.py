"""Command line: ``python -m convs2s_edu`` or ``convs2s-edu``.

Its subcommands are ``train``, ``evaluate``, ``compare``, ``experiment`` and ``bench``;
``convs2s-edu COMMAND --help`` says what each does, its defaults and how long it takes.

Every expected error (a bad value, an unreadable or foreign checkpoint, an output path
that is a file where a directory is needed or the reverse, a size out of range) prints
one line on stderr and exits with status 2, with no traceback; all of them are checked
before any training starts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .data import TASKS
from .lab.bench import format_bench, run_bench
from .lab.experiments import conclusion, format_beam, format_result, run_experiment
from .lab.experiments.claims import CLAIMS
from .lab.experiments.record import claim_runs, load_record, make_record, spot_check
from .lab.samples import format_samples, predict_samples
from .lab.timing import (
    compare,
    format_convergence,
    format_table,
    speed_table,
    summarise,
)
from .metrics import evaluate
from .registry import MODELS
from .training.checkpoint import load_checkpoint, prepare_out_dir
from .training.config import BATCHINGS, RECIPES, TrainConfig, make_datasets
from .training.loop import TrainingDivergedError, train
from .training.parallel import is_launched

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not the usage block
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _int_in(low: int, high: int | None = None):
    """An argparse ``type``: an integer in ``low..high`` (``>= low`` without ``high``);
    argparse's error names the option, the value and the range."""
    allowed = f">= {low}" if high is None else f"in {low}..{high}"

    def parse(text: str) -> int:
        value = int(text)  # argparse: "invalid parse value" when not an integer
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
        return value

    return parse


def _json_path(path: str) -> str:
    """An argparse ``type``: ``--json``, a file in an existing, writable directory
    (checked before any work)."""
    p = Path(path)
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a directory; give a file name")
    parent = p.parent  # "." for a bare file name
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{path} is not writable")
    return path


#: Largest ``evaluate --beam`` (B x K hypotheses are decoded together).
MAX_BEAM = 100


#: Options that set the :class:`TrainConfig` field of their name; one not given keeps
#: the recipe's.
_CONFIG_OPTIONS = {
    "--task": {"choices": TASKS, "help": "sort (default), reverse or copy"},
    "--batching": {
        "choices": BATCHINGS,
        "help": "random (default) or bucket: batches of equal length (less padding)",
    },
    "--eval-every": {
        "type": int,
        "help": "decode the held-out set every N steps (the learning curve; default: never)",
    },
    "--epochs": {
        "type": int,
        "help": "passes over the training set (original recipe: 30; fast: 8 rounds of 12,800 new "
        "examples)",
    },
    "--device": {"help": "auto (default), cpu, cuda or cuda:N"},
    "--n-train": {"type": int, "help": "training examples (default 10000)"},
    "--batch-size": {"type": int, "help": "default 128"},
    "--lr": {"type": float, "help": "Adam learning rate (default 1e-3)"},
    "--seed": {"type": int, "help": "default 0"},
    "--max-len": {"type": int, "help": "longest sequence (default 20)"},
    "--min-len": {"type": int, "help": "shortest sequence (default 8)"},
    "--compile-mode": {
        "choices": ("default", "reduce-overhead", "max-autotune"),
        "help": "torch.compile mode (reduce-overhead: CUDA graphs); implies --compile",
    },
    "--precision": {
        "choices": ("fp32", "bf16"),
        "help": "fp32 (default) or bf16 autocast (CUDA, or a CPU with bf16 instructions)",
    },
}


def _add_config_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--recipe",
        choices=tuple(RECIPES),
        default="original",
        help="original (default): the original notebook's 30 epochs over 10,000 fixed "
        "examples, Adam 1e-3, dropout 0.1; fast: a fresh batch every step, 5%% warm-up to "
        "3e-3 and linear decay, Adam beta2 0.98, no dropout, 800 steps. Options below "
        "change its fields",
    )
    for flag, kwargs in _CONFIG_OPTIONS.items():
        p.add_argument(flag, **kwargs)
    p.add_argument(
        "--original-convs2s",
        "--seed-convs2s",  # its name until 0.4
        dest="original_convs2s",
        action="store_true",
        help="train the original notebook's simplified ConvS2S (no weight norm, default init, "
        "no gradient or context scaling) instead of the paper's",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the encoder and decoder (see `convs2s-edu bench`); implies --no-fast",
    )


#: The fields they set (argparse's names: ``--n-train`` -> ``n_train``), and
#: ``train --fast``'s.
_CONFIG_FIELDS = [flag[2:].replace("-", "_") for flag in _CONFIG_OPTIONS] + ["fast"]


def _config(args, model: str):
    # a compiled model is not on the eager fast paths (an explicit --fast is refused):
    # apply_compile picks the fast paths that compile
    changes = (
        {"compile": True, "fast": False} if args.compile or args.compile_mode else {}
    )
    given = {k: getattr(args, k, None) for k in _CONFIG_FIELDS}  # compare has no --fast
    changes |= {k: v for k, v in given.items() if v is not None}
    # the paper's normalisation, or the original notebook's simplified ConvS2S
    paper = not args.original_convs2s
    return TrainConfig.recipe(
        args.recipe, model=model, paper_normalisation=paper, **changes
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="convs2s-edu",
        description="Train, evaluate and compare ConvS2S and the GRU + Bahdanau baseline on the "
        "sorting task. `convs2s-edu COMMAND --help` says what each command does, its defaults "
        "and how long it takes.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser(
        "train",
        help="train one model and save a checkpoint (minutes: see --help)",
        description="Train one model on the sorting task and save DIR/checkpoint.pt. At the "
        "defaults (10,000 examples, 30 epochs, batch 128) this takes several minutes per model "
        "on a 2-core CPU (roughly 5 to 15; each epoch's time is printed as it trains) and well "
        "under a minute on a GPU; --epochs 2 --n-train 2000 finishes in seconds.",
    )
    p.add_argument(
        "--model",
        required=True,
        choices=list(MODELS),
        help="convs2s: the paper's convolutional model; gru: the bidirectional GRU "
        "encoder-decoder with Bahdanau attention (the baseline); gru+conv and "
        "conv+gru: hybrids <encoder>+<decoder> built from the same parts",
    )
    p.add_argument(
        "--out", required=True, help="directory for checkpoint.pt (created if missing)"
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from --out's checkpoint"
    )
    _add_config_options(p)
    p.add_argument(
        "--fast",
        action=argparse.BooleanOptionalAction,
        help="run the training step through the package's fast paths (convs2s_edu.fast); "
        "--no-fast trains the model files' code as written. Default: whichever a short "
        "timing on this machine finds faster (convs2s_edu.training.calibrate)",
    )

    p = sub.add_parser(
        "evaluate",
        help="score a checkpoint on its test set (seconds)",
        description="Load a checkpoint written by `train`, rebuild its test set (1,000 examples "
        "at the defaults) and print exact match, token accuracy and a few sample predictions. "
        "Greedy decoding takes seconds on a CPU; beam search grows with --beam.",
    )
    p.add_argument("dir", help="directory (or file) of a checkpoint written by `train`")
    p.add_argument(
        "--beam",
        type=_int_in(1, MAX_BEAM),
        default=1,
        help="beam size (default 1: greedy); > 1 adds a beam column",
    )
    p.add_argument("--device", help="where to run (default: the checkpoint's)")
    p.add_argument(
        "--samples",
        type=_int_in(0),
        default=5,
        help="sample predictions to print (default 5; 0: none)",
    )

    p = sub.add_parser(
        "compare",
        help="train both models on the same data; print the speed table (minutes)",
        description="Train ConvS2S and the GRU baseline on the same data with the same settings "
        "(or load them from the cache), score both, then time both interleaved (alternating "
        "windows of training steps on the same batches) and print tokens per second with their "
        "range, loss and accuracy side by side, the speed ratio and a verdict. At the defaults "
        "this trains two models: roughly 10 to 30 minutes on a 2-core CPU the first time; once "
        "both are cached, only the timing runs (seconds).",
    )
    p.add_argument(
        "--no-cache",
        action="store_true",
        help="always train afresh (default: reuse models cached under "
        "$CONVS2S_EDU_CACHE, else ~/.cache/convs2s_edu)",
    )
    p.add_argument(
        "--json",
        type=_json_path,
        help="also write the rows and the speed measurement to this file",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=6,
        help="timed windows per model in the interleaved speed measurement (default 6)",
    )
    p.add_argument(
        "--window-steps",
        type=int,
        default=4,
        help="training steps per timed window (default 4)",
    )
    p.add_argument(
        "--threads",
        type=int,
        nargs="+",
        help="PyTorch thread counts to time both models at, interleaved (CPU only; default "
        "every count from 1 to the usable cores)",
    )
    _add_config_options(p)

    p = sub.add_parser(
        "experiment",
        help="run one of the site's experiments over several seeds (cached) and print its table "
        "(minutes)",
        description="Run one experiment of the site's Experiments section: every arm over several "
        "seeds, each run trained with the fast recipe through the cache (800 steps at width 64 by "
        "default), one run per usable core at a time, and print one row per arm with the mean and "
        "the spread over seeds, then a conclusion computed from them. The first time this takes "
        "minutes on a 2-core CPU (1.5 to 2 minutes a run, arms x seeds runs); once cached, "
        "seconds. --quick uses the quick build's tiny budget and 2 seeds.",
    )
    p.add_argument(
        "name",
        nargs="?",
        help="encoder_decoder, positions, attention_layers, depth, generation or beam",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="every run of every experiment at the budget (full, or --quick), written as the "
        "experiment record the claims page reads (--record)",
    )
    p.add_argument(
        "--record",
        help="the record's folder with --all or --verify (default: $CONVS2S_EDU_RECORD/full "
        "or /quick)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="retrain runs of the experiment record and compare their scores with the "
        "recorded ones: every run of --claim N (a row of the claims page), else --spot N "
        "runs drawn at random",
    )
    p.add_argument(
        "--address",
        help="with --all: a Dask scheduler's address, whose workers train the runs (each "
        "started with --nthreads 1, sharing $CONVS2S_EDU_CACHE)",
    )
    p.add_argument(
        "--claim",
        type=_int_in(1, len(CLAIMS)),
        help="with --verify: the claim's row number, from 1",
    )
    p.add_argument(
        "--spot", type=int, default=2, help="with --verify: runs to draw (2)"
    )
    p.add_argument(
        "--seeds",
        type=int,
        help="seeds per arm, >= 2, from seed 0 (default: the full build's 5 to 20 per "
        "arm from seed 5, planned from the pilot; quick mode 2)",
    )
    p.add_argument("--steps", type=int, help="optimiser steps per run (default 800)")
    p.add_argument(
        "--task", choices=TASKS, help="run every arm on this task instead of its own"
    )
    p.add_argument(
        "--workers", type=_int_in(1), help="runs at a time (default: the usable cores)"
    )
    p.add_argument("--arms", nargs="+", help="run only these arms (default: all)")
    p.add_argument("--quick", action="store_true", help="the quick build's tiny budget")
    p.add_argument(
        "--json", type=_json_path, help="also write the runs and rows to this file"
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")

    p = sub.add_parser(
        "bench",
        help="training and decoding throughput on every execution path (minutes)",
        description="Measure on this machine, in one process: training tokens/s of ConvS2S and "
        "the GRU on every execution path (eager/compiled, fp32/bf16, CUDA graphs), timed "
        "interleaved; FLOPs per token and the fraction of this machine's measured matmul peak; "
        "greedy and beam-5 sentences/s; ConvS2S incremental against full-recompute decoding; "
        "profiler tables. Under 5 minutes on a 2-core CPU; --quick takes seconds (eager paths "
        "only on a CPU).",
    )
    p.add_argument(
        "--device", default="auto", help="auto (default), cpu, cuda or cuda:N"
    )
    p.add_argument("--quick", action="store_true", help="small budgets (seconds)")
    p.add_argument(
        "--paths",
        nargs="+",
        help="execution paths to time (default: all this device can run), e.g. "
        "eager-fp32 compile-fp32 eager-bf16 compile-reduce-overhead-bf16",
    )
    p.add_argument(
        "--models",
        nargs="+",
        default=["convs2s", "gru"],
        choices=list(MODELS),
        help="models to measure (default: convs2s gru)",
    )
    p.add_argument(
        "--json", type=_json_path, help="also write the measurement to this file"
    )
    p.add_argument(
        "--no-profile", action="store_true", help="leave out the profiler tables"
    )
    return parser


def _cmd_train(args) -> None:
    cfg = _config(args, args.model)
    prepare_out_dir(args.out)  # created and checked before any training
    result = train(
        cfg,
        out_dir=args.out,
        resume=args.resume,
        progress=False if args.quiet else None,
    )
    if is_launched() and int(os.environ.get("RANK", "0")) != 0:
        return  # torchrun: rank 0 prints
    print(format_table([summarise(result)]))
    print(f"checkpoint: {result.path}")


def _cmd_evaluate(args) -> None:
    result = load_checkpoint(args.dir, device=args.device)
    test_set = make_datasets(result.config)[2]
    scores = evaluate(result.model, test_set, beam_size=args.beam)
    how = "greedy" if args.beam == 1 else f"beam {args.beam}"
    print(
        f"{result.config.model} on {scores['n_examples']} test examples ({how}): "
        f"exact match {scores['exact_match']:.1%}, token accuracy {scores['token_accuracy']:.1%}"
    )
    if args.samples > 0:
        examples = test_set.examples[: args.samples]
        rows = predict_samples(
            {result.config.model: result.model}, examples, beam_size=args.beam
        )
        if args.beam == 1:  # greedy: the beam=1 column would only repeat the greedy one
            rows = [
                {k: v for k, v in row.items() if not k.endswith(" beam=1")}
                for row in rows
            ]
        print(format_samples(rows))


#: ``compare``'s steps between held-out scorings when ``--eval-every`` is not given, per
#: recipe: about 50 points on each learning curve.
COMPARE_EVAL_EVERY = {"original": 50, "fast": 20}


def _cmd_compare(args):
    if args.eval_every is None:
        args.eval_every = COMPARE_EVAL_EVERY[args.recipe]
    cfg = _config(args, "convs2s")
    timing = dict(
        n_rounds=args.rounds, steps_per_window=args.window_steps, threads=args.threads
    )
    progress = False if args.quiet else None
    result = compare(cfg, use_cache=not args.no_cache, progress=progress, **timing)
    print(format_table(result.rows))
    if result.speed is not None:
        print(
            "\n" + speed_table(result.threads or result.speed, verdict=result.verdict)
        )
    if result.convergence is not None:
        print(
            "\nconvergence speed (seconds: steps x median s/step of the interleaved windows):"
        )
        print(format_convergence(result.convergence))
    return result


def _cmd_experiment(args):
    # options of one mode given to another would be ignored: say so instead
    for option, needs in (("address", "all"), ("claim", "verify"), ("record", None)):
        given = getattr(args, option) is not None
        if given and not (getattr(args, needs) if needs else args.all or args.verify):
            where = f"--{needs}" if needs else "--all or --verify"
            raise ValueError(f"--{option} goes with {where}")
    if args.all and args.verify:
        raise ValueError("--all records, --verify checks a record: one at a time")
    if args.all:
        return _cmd_record(args)
    if args.verify:
        return _cmd_verify(args)
    if args.name is None:
        raise ValueError("name an experiment, or --all for every one")
    runs = {k: getattr(args, k) for k in ("seeds", "steps", "arms", "task", "workers")}
    shown = dict(
        quick=True if args.quick else None, progress=False if args.quiet else None
    )
    result = run_experiment(args.name, **runs, **shown)
    print(result.budget.describe())
    print(format_beam(result) if args.name == "beam" else format_result(result))
    print(conclusion(result))
    return result


def _cmd_record(args) -> None:
    """``experiment --all``: the experiment record (its own budget: no other option)."""
    if args.name or any(
        getattr(args, k) for k in ("seeds", "steps", "arms", "task", "json")
    ):
        raise ValueError(
            "--all records every experiment at the registry's budget: it takes no experiment "
            "name, --seeds, --steps, --arms, --task or --json"
        )
    command = "convs2s-edu experiment --all" + (" --quick" if args.quick else "")
    where = make_record(
        args.record,
        quick=True if args.quick else None,
        workers=args.workers,
        progress=False if args.quiet else None,
        command=command,
        address=args.address,
    )
    made = load_record(where).header["made"]
    print(f"{made['runs']} runs recorded in {where} ({made['wall_seconds']:,.0f} s)")


def _cmd_verify(args) -> None:
    """``experiment --verify``: retrain runs of the record and compare (exit 2 on a mismatch)."""
    record = load_record(args.record, quick=True if args.quick else None)
    if record is None:
        raise ValueError(
            "no experiment record: pass --record, or set $CONVS2S_EDU_RECORD"
        )
    if stale := record.stale():
        raise ValueError(stale)
    runs = None
    if args.claim is not None:
        runs = claim_runs(record, CLAIMS[args.claim - 1])
    for c in spot_check(record, n=args.spot, runs=runs, strict=True):
        how = "equal" if c["exact"] else "within tolerance (another machine)"
        print(f"{c['arm']} seed {c['seed']} (run {c['run']}): {how}")


def _cmd_bench(args) -> None:
    what = dict(
        models=args.models, paths=args.paths, device=args.device, quick=args.quick
    )
    print(format_bench(run_bench(**what, out=args.json, profile=not args.no_profile)))


def main(argv=None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    command = {
        "train": _cmd_train,
        "evaluate": _cmd_evaluate,
        "compare": _cmd_compare,
        "experiment": _cmd_experiment,
        "bench": _cmd_bench,
    }
    try:
        result = command[args.command](args)
        if result is not None and args.json:  # compare's, experiment's (checked first)
            Path(args.json).write_text(json.dumps(result.to_dict(), indent=2))
        return 0
    except (ValueError, OSError, TrainingDivergedError) as err:
        # OSError: a file that vanished, a full disk, a permission refused mid-run
        message = " ".join(str(err).split()) or type(err).__name__
        print(f"convs2s-edu {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
