"""Train everything the docs site needs into the cache, one process per usable core.

``tox -e docs`` and ``tox -e docs-quick`` run this before ``sphinx-build``::

    python tools/prepare_site.py            # CONVS2S_EDU_QUICK decides full or quick
    python tools/prepare_site.py --workers 1   # one run at a time, in this process

sphinx-gallery runs the pages one after another; this trains their models and the
Experiments section's runs concurrently first (:func:`convs2s_edu.lab.prepare.prepare_site`),
so that the pages load them from the cache. It prints one line per run and, at the end,
its wall-clock time with the CPU and how busy each core was (from ``/proc/stat``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# before anything loads torch: the package's OpenMP settings (convs2s_edu._threads)
import convs2s_edu  # noqa: F401

# the experiment record the pages read (as docs/conf.py sets it): its runs are not trained
RECORD = Path(__file__).resolve().parent.parent / "docs" / "experiment_record"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, help="concurrent runs (default: cores / threads)")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch threads per run (1)")
    args = parser.parse_args(argv)
    os.environ.setdefault("CONVS2S_EDU_RECORD", str(RECORD))

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from timed import cpu_times, machine_line

    from convs2s_edu.lab.prepare import prepare_site
    from convs2s_edu.lab.site import is_quick_mode

    before, t0 = cpu_times(), time.perf_counter()
    try:
        results = prepare_site(workers=args.workers, threads=args.threads)
    except (RuntimeError, ValueError) as err:
        print(f"prepare_site: error: {err}", file=sys.stderr)
        return 1
    seconds, mode = time.perf_counter() - t0, "quick" if is_quick_mode() else "full"
    ready = f"{len(results)} runs ready in {seconds:.0f} s"
    print(f"prepare_site ({mode} site): {ready} on {machine_line(before)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
