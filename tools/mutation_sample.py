"""Estimate the whole package's mutation score from a seeded uniform random sample of its mutants.

``tox -e mutation`` runs every mutant mutmut makes of ``convs2s_edu/`` (many hours: each
surviving mutant re-runs every test that covers its function, training loops included).
``tox -e mutation-sample`` answers the same question, "what fraction of plausible bugs does the
suite catch?", in far less time: it generates all the mutants, draws
``--n`` of them uniformly at random with ``--seed``, runs mutmut on exactly those, and prints the
score with a 95% Wilson interval, the score per module and every survivor by name
(``mutmut show NAME`` prints a survivor's diff)::

    tox -e mutation-sample                     # 500 mutants, seed 0
    tox -e mutation-sample -- --n 200 --seed 1

A uniform sample makes the estimate unbiased for the whole package; its interval says how far the
full run's score can be from it. The summary is also written to ``mutants/sample-summary.json``.

Run it on a quiet machine: mutmut's time limits are CPU seconds (so load does not turn survivors
into timeouts), but other jobs make the run itself take longer.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

from scipy.stats import binomtest

# mutmut's exit codes -> status (mutmut.stats.status_by_exit_code, restated so that the summary
# does not depend on mutmut's internals); mutmut's own score counts killed + timeout as caught.
STATUS = {1: "killed", 3: "killed", 36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout",
          255: "timeout", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          37: "caught by type check", None: "not checked"}  # fmt: skip
CAUGHT = {"killed", "timeout", "caught by type check"}


def generate_mutants() -> None:
    """Write every mutant into ``mutants/`` (what the first step of ``mutmut run`` does)."""
    try:
        from mutmut.__main__ import create_mutants
        from mutmut.mutation.trampoline import set_mutant_under_test
        from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir, setup_source_paths
    except ImportError as exc:  # mutmut moved its internals: name the version this needs
        sys.exit(f"mutation_sample: needs mutmut 3.8 (pinned in tox.ini's mutation env): {exc}")
    set_mutant_under_test("mutant_generation")
    Path("mutants").mkdir(exist_ok=True)
    copy_src_dir()
    copy_also_copy_files()
    setup_source_paths()
    create_mutants(2)
    set_mutant_under_test(None)


def read_results() -> dict[str, int | None]:
    """Every mutant's name -> mutmut's exit code (None: not run yet), from ``mutants/**.meta``."""
    codes: dict[str, int | None] = {}
    for meta in sorted(Path("mutants").rglob("*.py.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k/n (sound near 0 and 1, unlike k/n ± z·se)."""
    if n == 0:
        return (0.0, 1.0)
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return (ci.low, ci.high)


def module_of(name: str) -> str:
    """``convs2s_edu.training.loop.x_train__mutmut_3`` -> ``convs2s_edu.training.loop``."""
    return name.split(".x_")[0].split(".xǁ")[0]


def summarise(sample: list[str], codes: dict[str, int | None], seed: int, population: int) -> dict:
    status = {name: STATUS.get(codes.get(name), "suspicious") for name in sample}
    counted = [n for n in sample if status[n] not in ("skipped", "not checked")]
    caught = [n for n in counted if status[n] in CAUGHT]
    per_module: dict[str, Counter] = defaultdict(Counter)
    for name in sample:
        per_module[module_of(name)][status[name]] += 1
    return dict(
        population=population,
        sample=len(sample),
        seed=seed,
        counted=len(counted),
        caught=len(caught),
        score=len(caught) / len(counted) if counted else float("nan"),
        wilson_95=list(wilson(len(caught), len(counted))),
        status_counts=dict(Counter(status.values())),
        per_module={m: dict(c) for m, c in sorted(per_module.items())},
        not_caught=sorted(n for n in counted if status[n] not in CAUGHT),
        not_run=sorted(n for n in sample if status[n] == "not checked"),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="mutants to draw (default 500)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    parser.add_argument("--max-children", type=int, default=None, help="mutmut's worker count")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be at least 1, got {args.n}")

    generate_mutants()
    names = sorted(read_results())
    if not names:
        sys.exit("mutation_sample: mutmut generated no mutants (is convs2s_edu/ in source_paths?)")
    n = min(args.n, len(names))
    sample = sorted(random.Random(args.seed).sample(names, n))
    print(f"mutation_sample: {n} of {len(names)} mutants drawn with seed {args.seed}", flush=True)

    cmd = ["mutmut", "run", *sample]
    if args.max_children:
        cmd[2:2] = ["--max-children", str(args.max_children)]
    # mutmut prints a line per mutant; its exit status is not the verdict (the .meta files are)
    subprocess.run(cmd, check=False)

    summary = summarise(sample, read_results(), args.seed, len(names))
    Path("mutants", "sample-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    low, high = summary["wilson_95"]
    print(f"\nmutation score (sample of {summary['counted']} of {len(names)} mutants, seed "
          f"{args.seed}): {summary['caught']}/{summary['counted']} = {summary['score']:.1%} "
          f"(95% Wilson interval {low:.1%}-{high:.1%})")  # fmt: skip
    print("status counts:", summary["status_counts"])
    for module, counts in summary["per_module"].items():
        caught = sum(v for k, v in counts.items() if k in CAUGHT)
        print(f"  {module:32s} {caught:4d}/{sum(counts.values()):<4d} caught  {dict(counts)}")
    print("not caught (mutmut show NAME prints the diff):")
    for name in summary["not_caught"]:
        print("  ", name)
    return 1 if summary["not_run"] else 0


if __name__ == "__main__":
    sys.exit(main())
