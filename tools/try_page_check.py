#!/usr/bin/env python
"""Test the "Try the models" page of a built site in a real browser, against PyTorch.

``tox -e docs-quick`` (so ``tox`` and ``.ci/run``) runs it on the quick site::

    python tools/try_page_check.py docs/_build/html-quick --out docs/_build/screenshots
    python tools/try_page_check.py docs/_build/html-quick --seed 7   # the same inputs again

It serves the site on ``127.0.0.1`` (a :mod:`http.server` that logs every request), drives
Debian's Chromium with Playwright for Python (one browser, each page in a fresh context),
and checks:

* inputs drawn now (the seed is printed; ``--seed`` repeats them): one with duplicates, one
  at the longest length the position table allows, one with every token equal, and the
  page's own "Reversed" button. For each, both models' outputs read from the page (the
  tokens it shows and the numbers it exposes as ``window.tryModels``) equal PyTorch's greedy
  decoding of the same input (:func:`~convs2s_edu.greedy_decode`), with the log-probabilities
  of the page's top three tokens and every attention weight within the tolerance of
  ``tools/export_onnx.py``; where the two part at a near-tie (PyTorch's log-probabilities of
  the two tokens closer than the tolerance: the quick models have such ties), the test stops
  comparing that model there and says so;
* bad input, in the address (``?src=``) and typed into the box: empty, not a number, outside
  ``1..V``, longer than the position table: a message in the page that names the value and
  the range or the limit, and nothing decoded;
* a browser without WebAssembly (the page's window has no ``WebAssembly`` object: Chromium
  ignores V8's ``--noexpose-wasm``), and the page opened from ``file://``: a message that
  says why and what to do, and no runtime fetched;
* the ``.onnx`` files and the ``.wasm`` runtime were really fetched from the server
  (status 200), no console message of type error, no page error, no failed request, and the
  page never wider than a 390 px phone.

It prints the bytes the page fetched (graphs + runtime + scripts) and the time from the start
of navigation to the first output token, and saves screenshots of the finished page
(``try-page-light.png``, ``-dark.png``, ``-phone.png``) in ``--out``. Exit status 0 when every
check passes, 1 when one fails, 2 when Chromium or Playwright is missing or Chromium does
not start.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))

import export_onnx  # noqa: E402  (tools/export_onnx.py: the tolerance, the greedy reference)
from screenshot_site import FINAL, TOOLS, browser_or_missing, drive, new_page  # noqa: E402

PAGE = "try.html"
MODELS = export_onnx.SITE_MODELS
# What the Try page exposes (window.tryModels) and the tokens it shows: run inside the page.
READ_PAGE = (TOOLS / "js/read_try_page.js").read_text(encoding="utf-8")
# The Try page has settled: a final state, and a different run than `previous` (null: any).
SETTLED = (TOOLS / "js/try_page_settled.js").read_text(encoding="utf-8")
SOURCE = "() => (window.tryModels.result ? window.tryModels.result.src.join(',') : '')"
SET_THEME = "(theme) => Object.assign(document.documentElement.dataset, { theme, mode: theme })"
WIDTHS = "() => [document.documentElement.scrollWidth, window.innerWidth]"


def draw_cases(rng: random.Random, manifest: dict) -> dict:
    """The inputs of this run: token lists drawn with ``rng``."""
    V, P = manifest["vocab_size"], manifest["max_positions"]
    lo, hi = manifest["train_lengths"]
    n = rng.randint(lo, hi)
    values = [rng.randint(1, V) for _ in range(max(2, n // 3))]
    duplicates = [rng.choice(values) for _ in range(n)]
    duplicates[rng.randrange(n)] = duplicates[0]  # at least one value twice
    if len(set(duplicates)) == len(duplicates):
        duplicates[1] = duplicates[0]
    return {
        "duplicates": duplicates,
        "longest": [rng.randint(1, V) for _ in range(P)],
        "all-equal": [rng.randint(1, V)] * rng.randint(lo, hi),
    }


def bad_inputs(rng: random.Random, manifest: dict) -> list[tuple[str, str, list[str]]]:
    """(name, text, phrases the message must hold) for every kind of bad input."""
    V, P = manifest["vocab_size"], manifest["max_positions"]
    word = rng.choice(["x", "seven", "3.5", "1e3", "4-"])
    high = rng.randint(V + 1, V + 100)
    too_long = ",".join(str(rng.randint(1, V)) for _ in range(P + 1))
    return [
        ("empty", "", ["empty", f"1 to {V}"]),
        ("not-a-number", f"3, {word}, 5", [f"“{word}”", "not a whole number", f"1 to {V}"]),
        ("zero", "0, 4", ["0 (item 1)", f"1 to {V}"]),
        ("too-high", f"4 {high}", [f"{high} (item 2)", f"1 to {V}"]),
        ("too-long", too_long, [f"{P + 1} numbers", f"at most {P}"]),
    ]


def run_cases(site: Path, cases: dict, bad, out: Path, timeout: float, browser, base: str):
    """Open the Try page of the site served at ``base`` in ``browser`` for the drawn inputs
    (the first one then presses "Reversed" and is screenshotted; the last one then gets a bad
    input typed into its box), every bad input in the address, the page opened from
    ``file://`` and without WebAssembly; returns what :func:`run_case` recorded of each."""

    def case(name: str, src: str | None = None, **more) -> dict:
        src = text[name] if src is None else src
        return {"name": name, "url": f"{base}/{PAGE}?src={quote(src, safe=',')}", **more}

    def shot(name: str, width: int, theme: str) -> dict:
        return {"path": str(out / f"try-page-{name}.png"), "width": width, "theme": theme}

    text = {name: ",".join(map(str, tokens)) for name, tokens in cases.items()}
    shots = [shot("light", 1280, "light"), shot("dark", 1280, "dark"), shot("phone", 390, "light")]
    specs = [
        case("duplicates", actions=[{"press": "reversed"}], screenshots=shots),
        case("longest"),
        # a bad input typed into the box after a successful run
        case("all-equal", width=390, theme="dark", actions=[{"type": bad[1][1]}]),
        *(case(f"bad-{name}", txt) for name, txt, _ in bad),
        {"name": "file-url", "url": (site / PAGE).as_uri() + "?src=3,1,2"},
        case("no-webassembly", "3,1,2", wasm=False),
    ]
    return [run_case(browser, spec, timeout) for spec in specs]


def run_case(browser, spec: dict, timeout: float) -> dict:
    """Open the page of ``spec`` in a fresh context (:func:`screenshot_site.new_page`), read
    it once it settled; then each of its actions (type into the box, or press a case button),
    the page read when it settled again; then its screenshots. Every wait within ``timeout``
    seconds."""
    from playwright.sync_api import Error

    record, t0 = {"name": spec["name"]}, time.perf_counter()
    width, theme, wasm = spec.get("width", 1280), spec.get("theme"), spec.get("wasm", True)
    context, page = new_page(browser, record, width, 900, theme, wasm)
    context.set_default_timeout(timeout * 1000)
    try:
        page.goto(spec["url"], wait_until="load")
        page.wait_for_function(SETTLED, arg=[FINAL, None], polling=50)
        record["first"] = page.evaluate(READ_PAGE)
        for action in spec.get("actions", []):
            before = page.evaluate(SOURCE)
            if "type" in action:
                page.fill("#try-input", action["type"])
                page.click("#try-run")
            else:
                page.click(f'button[data-case="{action["press"]}"]')
            page.wait_for_function(SETTLED, arg=[FINAL, before], polling=50)
            record.setdefault("actions", []).append(page.evaluate(READ_PAGE))
        for shot in spec.get("screenshots", []):
            page.set_viewport_size({"width": shot["width"], "height": 900})
            page.evaluate(SET_THEME, shot["theme"])
            page.wait_for_timeout(200)
            page.screenshot(path=shot["path"], full_page=True)
            page_width, window_width = page.evaluate(WIDTHS)
            shown = {"path": shot["path"], "pageWidth": page_width, "windowWidth": window_width}
            record.setdefault("screenshots", []).append(shown)
    except Error as err:
        record["driverError"] = err.message[:500]
        with contextlib.suppress(Error):
            record.setdefault("first", page.evaluate(READ_PAGE))
    with contextlib.suppress(Error):
        context.close()
    print(f"  {time.perf_counter() - t0:4.1f} s  {spec['name']}", flush=True)
    return record


class Checker:
    def __init__(self):
        self.problems: list[str] = []
        self.notes: list[str] = []

    def fail(self, case: str, message: str) -> None:
        self.problems.append(f"{case}: {message}")


def compare_model(check: Checker, case: str, name: str, page: dict, ref, ids) -> str:
    """The page's decoding of one model against PyTorch's; returns a one-line summary."""
    tol, fail = export_onnx.TOL, functools.partial(check.fail, case)
    (ref_tokens, ref_logp, ref_attn), tokens, worst = ref, page["tokens"], 0.0
    for t, step in enumerate(page["steps"]):
        if t >= len(ref_tokens):
            fail(f"{name} wrote more tokens than PyTorch: {tokens} vs {ref_tokens}")
            return ""
        for tok, lp in step["top"]:
            theirs = float(ref_logp[t][tok])
            worst = max(worst, d := abs(lp - theirs))
            if d > tol:
                ours = f"the page's log p({tok}) = {lp:.6f}, PyTorch's {theirs:.6f}"
                fail(f"{name}, step {t + 1}: {ours} (difference {d:.1e} > {tol:.0e})")
        for l, (row, ref_row) in enumerate(zip(step["attention"], ref_attn[t])):
            d = max((abs(a - float(b)) for a, b in zip(row, ref_row)), default=0.0)
            worst = max(worst, d)
            if d > tol or len(row) != len(ref_row):
                fail(f"{name}, step {t + 1}, attention {l + 1}: differs by {d:.1e}")
        if step["token"] != ref_tokens[t]:
            gap = abs(float(ref_logp[t][step["token"]]) - float(ref_logp[t][ref_tokens[t]]))
            if gap > tol:
                part = f"they part at step {t + 1}, where PyTorch's log-probabilities differ"
                fail(
                    f"{name}: the page decodes {tokens}, PyTorch {ref_tokens}: {part} by {gap:.1e}"
                )
                return ""
            return f"{name}: same as PyTorch up to a near-tie at step {t + 1} (gap {gap:.1e})"
    if tokens != ref_tokens:
        fail(f"{name}: the page decodes {tokens}, PyTorch {ref_tokens}")
        return ""
    return f"{name}: {len(tokens)} tokens as PyTorch, within {worst:.1e}"


def check_shown(check: Checker, case: str, page: dict, ids: dict) -> None:
    """The tokens the page shows are the tokens it decoded."""
    names = {ids["eos"]: "<eos>"}
    for name in MODELS:
        decoded = [names.get(t, str(t)) for t in page["result"]["models"][name]["tokens"]]
        if page["shown"].get(name) != decoded:
            shown = page["shown"].get(name)
            check.fail(case, f"{name}: the page shows {shown}, but it decoded {decoded}")


def check_console(check: Checker, record: dict) -> None:
    case = record["name"]
    for msg in record["console"]:
        # the browser asks for /favicon.ico by itself, and the site has none (a 404)
        if msg["type"] in ("error", "assert") and not msg["url"].endswith("/favicon.ico"):
            check.fail(case, f"console {msg['type']}: {msg['text'][:300]}")
    for err in record["pageErrors"]:
        check.fail(case, f"page error: {err[:300]}")
    for req in record["failed"]:
        check.fail(case, f"request failed: {req['url']} ({req['error']})")
    for resp in record["responses"]:
        if resp["status"] >= 400 and not resp["url"].endswith("/favicon.ico"):
            check.fail(case, f"{resp['url']} answered {resp['status']}")
    if record.get("driverError"):
        check.fail(case, f"the browser driver failed: {record['driverError'][:500]}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="the built site, e.g. docs/_build/html-quick")
    parser.add_argument("--out", type=Path, help="folder for the screenshots (default: temp)")
    parser.add_argument("--seed", type=int, help="seed of the drawn inputs (default: the clock)")
    parser.add_argument("--chromium", help="path of the browser (default: /usr/bin/chromium)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per page")
    args = parser.parse_args(argv)

    chromium, missing = browser_or_missing(args.chromium)
    if missing:
        print(f"try_page_check: missing: {', '.join(missing)}", file=sys.stderr)
        return 2
    site = args.html_dir.resolve()
    manifest_file = site / "_static" / "try" / "models.json"
    if not (site / PAGE).is_file() or not manifest_file.is_file():
        print(f"try_page_check: {site} has no {PAGE} with its models; build it", file=sys.stderr)
        return 1
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    ids = {k: manifest[k] for k in ("pad", "sos", "eos")}
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % 2**31
    rng = random.Random(seed)
    cases, bad = draw_cases(rng, manifest), bad_inputs(rng, manifest)
    print(f"try_page_check: inputs drawn with --seed {seed}", flush=True)

    out = args.out or Path(tempfile.mkdtemp(prefix="try-page-"))
    out.mkdir(parents=True, exist_ok=True)
    requests: list = []  # (path, status) of every request the server answered
    t0 = time.perf_counter()
    run = functools.partial(run_cases, site, cases, bad, out, args.timeout)
    if (browser := drive(site, chromium, run, log=requests)) is None:
        return 2  # Chromium did not start: drive said why
    version, done = browser
    browser_seconds = time.perf_counter() - t0

    # PyTorch's decoding of every input the page decoded
    from convs2s_edu import train_or_load
    from convs2s_edu.lab.site import is_quick_mode, site_config

    models = {name: train_or_load(site_config(name), progress=False).model for name in MODELS}
    expected = "quick" if is_quick_mode() else "full"
    check = Checker()
    if manifest["mode"] != expected:
        check.fail("site", f"the page's models are the {manifest['mode']} site's, not {expected}")

    records = {r["name"]: r for r in done}
    for record in done:
        check_console(check, record)

    def seen(name: str, action: bool = False) -> dict | None:
        """What the page of case ``name`` showed when it loaded, or after its first action."""
        record = records.get(name) or {}
        return (record.get("actions") or [None])[0] if action else record.get("first")

    def check_decoded(case: str, page: dict | None, src: list[int] | None = None) -> None:
        if not page or page.get("state") != "done" or not page.get("result"):
            state, message = (page or {}).get("state"), (page or {}).get("message")
            check.fail(case, f"the page did not decode (state {state!r}: {message})")
            return
        got = page["result"]["src"]
        if src is not None and got != src:
            check.fail(case, f"the page decoded {got}, not the input {src}")
        check_shown(check, case, page, ids)
        lines = []
        for name in MODELS:
            ref = export_onnx.torch_greedy_batch(models[name], [got], ids)[0]
            decoded = page["result"]["models"][name]
            lines.append(compare_model(check, case, name, decoded, ref, ids))
        check.notes.append(f"{case} (length {len(got)}): " + "; ".join(x for x in lines if x))

    for name in ("duplicates", "longest", "all-equal"):
        check_decoded(name, seen(name), cases[name])
    check_decoded("the Reversed button", seen("duplicates", action=True))
    reversed_src = ((seen("duplicates", action=True) or {}).get("result") or {}).get("src")
    if reversed_src and reversed_src != sorted(reversed_src, reverse=True):
        check.fail("the Reversed button", f"drew {reversed_src}, not a reversed sequence")

    # bad input: from the address, and typed into the box after a successful run
    typed = (f"typed {bad[1][0]}", bad[1][1], bad[1][2])
    pages = [(b, seen(f"bad-{b[0]}")) for b in bad] + [(typed, seen("all-equal", action=True))]
    for (name, _, phrases), page in pages:
        case = f"bad input {name}"
        if not page or page["state"] != "input-error":
            check.fail(case, f"state {page and page['state']!r}, expected input-error")
            continue
        for phrase in phrases:
            if phrase not in page["error"]:
                check.fail(case, f"the message {page['error']!r} does not say {phrase!r}")
        if page["result"] is not None or any(page["shown"].values()):
            check.fail(case, "the page still shows a decoding")
        check.notes.append(f"{case}: {page['error']}")

    for name, phrase in (("no-webassembly", "WebAssembly"), ("file-url", "python -m http.server")):
        page = seen(name)
        if not page or page["state"] != "unavailable" or phrase not in page["unavailable"]:
            check.fail(name, f"expected a message naming {phrase!r}, got {page}")
            continue
        wasm = [r for r in records[name]["responses"] if r["url"].endswith(".wasm")]
        if wasm:
            check.fail(name, f"fetched the runtime anyway: {wasm[0]['url']}")
        check.notes.append(f"{name}: {page['unavailable']}")

    # the graphs and the runtime came from the server
    fetched = {path for path, status in requests if status == 200}
    needed = [f for m in manifest["models"].values() for f in m["files"].values()]
    for path in (f"/_static/try/{f}" for f in [*needed, "ort/ort-wasm-simd-threaded.wasm"]):
        if path not in fetched:
            check.fail("requests", f"{path} was never fetched with status 200")
    first = records.get("duplicates", {})
    loaded = {
        r["url"]: r["bytes"]
        for r in first.get("responses", [])
        if r["url"].endswith((".onnx", ".wasm", ".mjs", ".js")) and "/_static/try/" in r["url"]
    }
    for record in done:
        for page in [record.get("first"), *(record.get("actions") or [])]:
            if page and page.get("pageWidth", 0) > page.get("windowWidth", 0) + 2:
                check.fail(record["name"], f"the page is {page['pageWidth']} px wide")
        for shot in record.get("screenshots") or []:
            if shot["pageWidth"] > shot["windowWidth"] + 2:
                check.fail(record["name"], f"{shot['path']}: the page scrolls sideways")

    for note in check.notes:
        print(f"  {note}")
    ttfo = (first.get("first") or {}).get("timeToFirstOutputMs")
    print(
        f"try_page_check: the page fetched {sum(loaded.values()) / 1e6:.2f} MB of graphs, "
        f"runtime and scripts ({len(loaded)} files); first output token "
        f"{ttfo / 1000 if ttfo else float('nan'):.2f} s after navigation started; "
        f"Chromium {version}; browser runs {browser_seconds:.0f} s; screenshots in {out}"
    )
    if check.problems:
        header = f"\ntry_page_check: {len(check.problems)} problem(s):"
        print("\n  - ".join([header, *check.problems]), file=sys.stderr)
        return 1
    print("try_page_check: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
