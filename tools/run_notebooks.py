#!/usr/bin/env python
"""Run notebooks downloaded from the built site, as a reader would (``tox -e notebooks``).

Usage::

    python tools/run_notebooks.py docs/_build/html-quick plot_00_sorting_task plot_04_glu_block

For each named page, the script copies the page's notebook, as the site offers it
for download (``_downloads/*/<page>.ipynb``), into an empty folder together with
the wheel the site offers (``convs2s_edu-*.whl`` at the site's root), then runs
it top to bottom with :mod:`nbclient` in a fresh kernel of this Python. Run it in
a virtual environment that has only ``nbclient``, ``ipykernel`` and
``matplotlib``: the notebook's first cell must find the package missing and
install it from the wheel next to it, as it would on a reader's machine or on
Colab. The notebooks run in quick mode (their first cell's default).

Exits non-zero when a notebook raises, does not install the package, or when
its markdown still holds Sphinx markup (``:func:`...```, ``<sphx_glr_...>``).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

LEFTOVER = re.compile(r":(?:func|class|meth|attr|obj|mod|ref|doc|data):`|<sphx_glr_|\.\. raw::")


def find_notebook(site: Path, page: str) -> Path:
    found = sorted((site / "_downloads").glob(f"*/{page}.ipynb"))
    if not found:
        raise SystemExit(f"run_notebooks: {site}/_downloads holds no {page}.ipynb")
    return found[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site, e.g. docs/_build/html-quick")
    parser.add_argument("pages", nargs="+", help="page names, e.g. plot_00_sorting_task")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    allow = "run even when convs2s_edu is already installed here (the notebooks' install step is "
    parser.add_argument(
        "--allow-installed", action="store_true", help=allow + "then not exercised)"
    )
    args = parser.parse_args(argv)
    if importlib.util.find_spec("convs2s_edu") is not None and not args.allow_installed:
        fix = "run in a fresh venv (or pass --allow-installed)"
        why = f"the notebooks' first cell would not install it; {fix}"
        print(f"run_notebooks: convs2s_edu is importable here, so {why}", file=sys.stderr)
        return 1

    import nbformat
    from nbclient import NotebookClient

    wheels = sorted(args.site.glob("convs2s_edu-*.whl"))
    if not wheels:
        print(f"run_notebooks: no convs2s_edu-*.whl at the root of {args.site}", file=sys.stderr)
        return 1
    problems = []
    for page in args.pages:
        source = find_notebook(args.site, page)
        with tempfile.TemporaryDirectory(prefix="notebook-") as tmp:
            work = Path(tmp)
            shutil.copy(source, work / source.name)
            shutil.copy(wheels[-1], work / wheels[-1].name)
            nb = nbformat.read(work / source.name, as_version=4)
            for cell in nb.cells:
                if cell.cell_type == "markdown" and (m := LEFTOVER.search(cell.source)):
                    problems.append(
                        f"{page}: Sphinx markup left in the markdown: "
                        f"{cell.source[max(0, m.start() - 30) : m.end() + 30]!r}"
                    )
            start = time.perf_counter()
            where = {"metadata": {"path": str(work)}}
            client = NotebookClient(
                nb, timeout=args.timeout, kernel_name="python3", resources=where
            )
            try:
                client.execute()
            except Exception as err:  # noqa: BLE001 - any failure of a cell is reported
                problems.append(f"{page}: {type(err).__name__}: {str(err)[-2000:]}")
                continue
            seconds = time.perf_counter() - start
            first = "".join(o.get("text", "") for o in nb.cells[1].get("outputs", []))
            if "convs2s_edu" not in first:
                problems.append(
                    f"{page}: the set-up cell printed no convs2s_edu version: {first!r}"
                )
            n_code = sum(c.cell_type == "code" for c in nb.cells)
            print(f"  OK {page}: {n_code} code cells in {seconds:.0f} s ({first.strip()})")
    if problems:
        print("run_notebooks: " + "\n  - ".join(["problems:", *problems]), file=sys.stderr)
        return 1
    print(f"run_notebooks: OK ({len(args.pages)} notebooks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
