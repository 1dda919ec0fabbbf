#!/usr/bin/env python
"""Open pages of the built site in headless Chromium, screenshot them, and fail on broken images.

Usage::

    python tools/screenshot_site.py docs/_build/html --out docs/_build/screenshots
    python tools/screenshot_site.py docs/_build/html --out shots --pages index.html api.html

The site is served from ``127.0.0.1`` by a local :mod:`http.server`; Chromium may
reach no other host. One browser (Debian's Chromium, driven by Playwright for Python)
opens every view, each in a fresh context. For each page (by default the landing page, the
paper map, the "Try the models" page, the first two gallery pages, one more gallery page
with figures and math, and the first page of every chapter), in each theme (``--themes``,
default light and dark) and at each width (``--width`` for a desktop, ``--phone-width``
for a phone), the script

1. saves a screenshot ``<page>-<theme>[-phone].png`` and checks (with Pillow) that it is a
   PNG of the requested size and not blank (a single colour, or nearly). The theme is
   chosen the way the pydata theme remembers a reader's choice: ``localStorage["theme"]``,
   set before the page's own scripts run;
2. records, once the page's requests have settled and MathJax has finished (on the
   "Try the models" page: once both models have decoded; every wait within
   ``--timeout``), every ``<img>`` of the page that fails to
   load (each is loaded again by a probe), the number of rendered formulas
   (``mjx-container``), MathJax errors, every request and its status, any request
   to another host, the theme the page ended up in, the code cells whose lines
   are wider than the cell (``pre.scrollWidth > pre.clientWidth``) and whether the
   page itself is wider than the window;
3. fails when an image did not load, a request failed or got a 4xx/5xx status,
   math was left unrendered, a request went to another host, the page is not in
   the requested theme, a code cell overflows horizontally at the desktop width,
   or the page scrolls sideways at the phone width.

A JSON report is written to ``<out>/report.json``. Exit status 0 when every
page passes, 1 when one fails, 2 when Chromium or Playwright is missing or Chromium does
not start.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import math
import shutil
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import lxml.html
from PIL import Image, UnidentifiedImageError

#: This folder: the scripts the tools run inside the pages are in js/.
TOOLS = Path(__file__).resolve().parent

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
# Chromium's flags (Playwright starts it headless)
FLAGS = [
    *"--no-sandbox --disable-gpu --disable-background-networking --disable-sync "
    "--disable-component-update --no-first-run --hide-scrollbars --disable-dev-shm-usage "
    "--mute-audio".split(),
    # the site must render offline: no host but the local server resolves
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
# code cells and listings: a line wider than its box scrolls sideways
CODE_SELECTOR = "article div.highlight pre"
IGNORED_PATHS = {"/favicon.ico"}
#: The "Try the models" page's settled states (``window.tryModels.state``).
FINAL = ["done", "input-error", "unavailable"]
#: A screenshot of fewer colours than this is blank (a real page has text, anti-aliased).
BLANK_COLOURS = 16


# -- The local server, the browser and its driver (tools/try_page_check.py uses them too) --


class Handler(SimpleHTTPRequestHandler):
    log: list | None = None  # (path, status) of every request, when given a list

    def log_request(self, code="-", size="-"):
        try:
            status = int(code)
        except (TypeError, ValueError):
            status = 0
        if self.log is not None:
            self.log.append((unquote(urlsplit(self.path).path), status))

    def log_message(self, format, *args):  # noqa: A002 - keep the console quiet
        pass


def browser_or_missing(explicit: str | None) -> tuple[str | None, list[str]]:
    """The Chromium to drive (``explicit``, else the first of :data:`CHROMIUM_CANDIDATES`
    found), and what is missing to drive it (Chromium, Playwright for Python)."""
    found = (shutil.which(c) for c in ([explicit] if explicit else []) + list(CHROMIUM_CANDIDATES))
    chromium = next(filter(None, found), None)
    needs = {
        f"Chromium (looked for {', '.join(CHROMIUM_CANDIDATES)}; "
        "apt-get install chromium)": chromium,
        "Playwright for Python (pip install playwright)": importlib.util.find_spec("playwright"),
    }
    return chromium, [what for what, ok in needs.items() if not ok]


def drive(site: Path, chromium: str, run, log: list | None = None):
    """Serve ``site`` on a free port of 127.0.0.1 (``log``, when given, records every request
    and its status) while ``run(browser, base)`` drives one headless ``chromium`` (Playwright,
    no browser downloaded) against the server's address ``base``. Returns the browser's
    version and what ``run`` returned, or ``None`` when Chromium did not start (it says why).
    """
    from playwright.sync_api import Error, sync_playwright

    handler = functools.partial(type("BoundHandler", (Handler,), {"log": log}), directory=site)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with sync_playwright() as playwright:
            try:
                browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
            except Error as err:
                why = err.message.splitlines()[0]
                print(f"Chromium ({chromium}) did not start: {why}", file=sys.stderr)
                return None
            try:
                return browser.version, run(browser, base)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()


def new_page(browser, record: dict, width=1280, height=900, theme=None, wasm=True):
    """A page in a fresh context (its own cache and storage, so that every file the page
    needs is fetched again and counted) that records in ``record`` every request (and in
    ``record["pending"]`` the ones not answered yet), response, failed request, console
    message and page error. ``theme`` is chosen the way the pydata theme remembers a
    reader's choice (localStorage, before the page's scripts); without
    ``wasm`` the page has no ``WebAssembly`` as far as its scripts can tell (Chromium ignores
    V8's --noexpose-wasm: Blink installs the object itself)."""
    context = browser.new_context(viewport={"width": width, "height": height})
    record.update(requests=[], pending=set(), responses=[], failed=[], console=[], pageErrors=[])
    if not wasm:
        context.add_init_script("delete globalThis.WebAssembly")
    if theme:
        keys = "for (const key of ['theme', 'mode']) localStorage.setItem(key, "
        context.add_init_script(keys + json.dumps(theme) + ")")

    def request(req):
        record["requests"].append(req.url)
        pending.add(req)

    def response(resp):
        size = int(resp.headers.get("content-length", 0))
        record["responses"].append({"url": resp.url, "status": resp.status, "bytes": size})

    def failed(req):
        record["failed"].append({"url": req.url, "error": req.failure or ""})
        pending.discard(req)

    def console(msg):
        where = msg.location.get("url", "")
        record["console"].append({"type": msg.type, "text": msg.text, "url": where})

    page, pending = context.new_page(), record["pending"]
    page.on("request", request)
    page.on("requestfinished", lambda req: pending.discard(req))
    page.on("response", response)
    page.on("requestfailed", failed)
    page.on("console", console)
    page.on("pageerror", lambda err: record["pageErrors"].append(str(err)[:500]))
    return context, page


def png_problems(path: Path, width: int, height: int) -> list[str]:
    """Empty list when ``path`` is a non-blank PNG of ``width`` x ``height``."""
    if not path.is_file() or path.stat().st_size == 0:
        return ["no screenshot was written"]
    try:
        with Image.open(path) as image:
            if image.format != "PNG":
                return ["the screenshot is not a PNG file"]
            problems = []
            if (size := f"{image.width}x{image.height}") != f"{width}x{height}":
                problems.append(f"screenshot is {size}, expected {width}x{height}")
            if image.convert("RGB").getcolors(BLANK_COLOURS - 1) is not None:
                problems.append("the screenshot is blank (almost a single colour)")
            return problems
    except UnidentifiedImageError:
        return ["the screenshot is not a PNG file"]
    except (OSError, SyntaxError) as err:  # a PNG cut short or corrupt
        return [f"the screenshot's image data cannot be read: {err}"]


def html_of(page_file: Path):
    """The page's HTML tree (:mod:`lxml.html`)."""
    return lxml.html.document_fromstring(page_file.read_text(encoding="utf-8"))


# -- One view ------------------------------------------------------------------


# What the page shows once MathJax has typeset it (and, on the "Try the models" page, once
# both models have decoded): run inside the page. Every wait shares one deadline.
INSPECT = (TOOLS / "js/inspect_page.js").read_text(encoding="utf-8")


def show_view(browser, view: dict, timeout: float) -> dict:
    """Open ``view`` in a fresh context, record what it fetched and showed once it settled
    (:data:`INSPECT`, within ``timeout`` seconds) and screenshot it: the record
    :func:`judge_view` judges."""
    from playwright.sync_api import Error

    record, t0 = {}, time.monotonic()
    left_ms = lambda: max(1.0, (t0 + timeout - time.monotonic()) * 1000)  # every wait's
    try:
        context, page = new_page(browser, record, view["width"], view["height"], view["theme"])
    except Error as err:
        return record | {"driver_error": err.message[:500]}
    context.set_default_timeout(timeout * 1000)
    try:
        page.goto(view["base"] + view["url"], wait_until="load")
        record["browser"] = page.evaluate(INSPECT, [CODE_SELECTOR, left_ms(), FINAL])
        # what the page fetched after `load` (the Try page's models) is answered too, by then
        while record["pending"] and left_ms() > 1:
            page.wait_for_timeout(20)
    except Error as err:
        record["driver_error"] = err.message[:500]
    try:  # a screenshot even when the page did not settle: it shows how far it got
        page.screenshot(path=view["shot"])
    except Error as err:
        record["screenshot_error"] = err.message[:500]
    with contextlib.suppress(Error):
        context.close()
    how = f"{view['theme']}, {view['width']} px"
    print(f"  {time.monotonic() - t0:4.1f} s  {view['url']} ({how})", flush=True)
    return record


def judge_view(view: dict, record: dict, site: Path) -> dict:
    """The report of one view: what the browser recorded (``record``, from
    :func:`show_view`) against what the view asked for."""
    rel, theme, width, phone = view["page"], view["theme"], view["width"], view["phone"]
    report = {"page": rel, "theme": theme, "width": width, "screenshot": view["shot"]}
    problems = report["problems"] = []
    if record.get("driver_error"):
        problems.append(f"the browser could not show the page: {record['driver_error'][:500]}")
    if record.get("screenshot_error"):
        problems.append(f"the screenshot failed: {record['screenshot_error'][:500]}")
    problems += png_problems(Path(view["shot"]), width, view["height"])

    # 1. the page as the browser left it: images, MathJax, theme, overflow
    result = report["browser"] = record.get("browser")
    if result is None:
        problems.append("the page did not finish loading in the browser (raise --timeout?)")
    else:
        if result.get("error"):
            problems.append(f"the check script failed: {result['error']}")
        for what in result.get("late", []):
            if not what.startswith("image "):  # a late image is reported as not loaded
                problems.append(f"{what}: not ready within --timeout")
        problems += [f"image did not load: {src}" for src in result["broken"]]
        if (n := result["math"]) and result["mathjax"] != "typeset":
            problems.append(f"page has {n} formulas but MathJax is {result['mathjax']}")
        if n and result["rendered"] == 0:
            problems.append("MathJax rendered none of the page's formulas")
        if result["merror"]:
            problems.append(f"MathJax reported {result['merror']} formula error(s)")
        if result.get("theme") != theme:
            problems.append(f"the page is in theme {result.get('theme')!r}, not {theme!r}")
        if not phone:
            problems += [
                f"code cell {cell['excess']} px wider than the page's column: {cell['line']!r}"
                for cell in result.get("overflow", [])
            ]
        elif (wide := result.get("page_width", 0)) > (window := result["window_width"]) + 2:
            sideways = "it scrolls sideways"
            problems.append(f"the page is {wide} px wide in a {window} px window: {sideways}")

    # 2. the requests: only this server, every one answered, every <img> fetched
    host = urlsplit(view["base"]).netloc
    report["requests"] = len(record.get("requests", []))
    for url in record.get("requests", []):
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != host:
            problems.append(f"request to another host: {url}")
    fetched = set()
    for response in record.get("responses", []):
        path, status = unquote(urlsplit(response["url"]).path), response["status"]
        if status >= 400 and path not in IGNORED_PATHS:
            problems.append(f"request {path} answered {status}")
        if status in (200, 304):
            fetched.add(path)
    answered = {response["url"] for response in record.get("responses", [])}
    for failed in record.get("failed", []):  # a 4xx answer is aborted too: reported above
        parts, path = urlsplit(failed["url"]), unquote(urlsplit(failed["url"]).path)
        if failed["url"] not in answered and path not in IGNORED_PATHS and parts.netloc == host:
            problems.append(f"request {path} failed: {failed['error']}")
    for src in html_of(site / rel).xpath("//img/@src"):  # the HTML, before any script
        if src.startswith("data:") or urlsplit(src).scheme:
            continue
        target = ((site / rel).parent / unquote(urlsplit(src).path)).resolve()
        if not target.is_relative_to(site):
            problems.append(f"image outside the site: {src}")
        elif "/" + target.relative_to(site).as_posix() not in fetched:
            problems.append(f"image never fetched with status 200: {src}")
    return report


def is_redirect_stub(page) -> bool:
    """A page left at an old address that sends the reader to the new one."""
    return any((m.get("http-equiv") or "").lower() == "refresh" for m in page.iter("meta"))


def default_pages(site: Path) -> list[str]:
    """The landing page, the paper map, the "Try the models" page (when the site has it),
    the first two gallery pages (where a reader starts), the next gallery page with both
    figures and math, and the first page of every chapter in a subfolder (the speed
    chapter, the appendix, ...)."""
    has_try = (site / "try.html").is_file()
    pages = ["index.html", "paper_map.html"] + (["try.html"] if has_try else [])
    auto = site / "auto_examples"
    if not auto.is_dir():
        return pages

    def gallery(folder: Path) -> list[tuple[Path, object]]:
        found = [(p, html_of(p)) for p in sorted(folder.glob("plot_*.html"))]
        return [(p, html) for p, html in found if not is_redirect_stub(html)]

    main = gallery(auto)
    # prefer a gallery page with both figures and math
    math = '//*[contains(concat(" ", normalize-space(@class), " "), " math ")]'
    rich = [p for p, html in main[2:] if html.find(".//img") is not None and html.xpath(math)]
    chosen = [p for p, _ in main[:2]] + (rich or [p for p, _ in main[2:]])[:1]
    for chapter in sorted(d for d in auto.iterdir() if d.is_dir()):
        chosen += [p for p, _ in gallery(chapter)[:1]]
    return pages + [p.relative_to(site).as_posix() for p in chosen]


def _number(low: int, seconds: bool = False):
    """An argparse type: a whole number at least ``low``, or (``seconds``) a number of seconds
    above ``low`` and at most an hour."""

    def parse(text: str):
        try:
            value = float(text) if seconds else int(text)
        except ValueError:
            what = "seconds" if seconds else "a whole number"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if seconds and not (math.isfinite(value) and low < value <= 3600):
            raise argparse.ArgumentTypeError(f"must be between {low} and 3600 seconds, got {text}")
        if not seconds and value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="the built site, e.g. docs/_build/html")
    parser.add_argument("--out", type=Path, required=True, help="folder for the screenshots")
    parser.add_argument(
        "--pages",
        nargs="+",
        help="pages relative to html_dir (default: index.html, paper_map.html, try.html, "
        "the first two gallery pages, one more with figures and math, the first page of "
        "every chapter)",
    )
    parser.add_argument("--chromium", help="path of the browser (default: /usr/bin/chromium)")
    parser.add_argument("--width", type=_number(1), default=1400, help="default: 1400")
    parser.add_argument("--height", type=_number(1), default=2000, help="default: 2000")
    themes = ["light", "dark"]
    parser.add_argument(
        "--themes", nargs="+", default=themes, choices=themes, help="default: light dark"
    )
    parser.add_argument(
        "--phone-width",
        type=_number(0),
        default=390,
        help="also screenshot each page this wide, in the first theme, and "
        "fail if it scrolls sideways (0: no phone run; default 390)",
    )
    parser.add_argument(
        "--timeout",
        type=_number(0, seconds=True),
        default=60.0,
        help="seconds one page may take to load and typeset (default: %(default)s)",
    )
    args = parser.parse_args(argv)

    chromium, missing = browser_or_missing(args.chromium)
    if missing:
        print(f"screenshot_site: missing: {'; '.join(missing)}", file=sys.stderr)
        return 2
    site = args.html_dir.resolve()
    if not (site / "index.html").is_file():
        print(f"screenshot_site: {site} holds no index.html; build it first", file=sys.stderr)
        return 1
    pages = args.pages or default_pages(site)
    if missing := [p for p in pages if not (site / p).is_file()]:
        print(f"screenshot_site: pages not in the site: {', '.join(missing)}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)

    runs = [(rel, theme, args.width, False) for rel in pages for theme in args.themes]
    if args.phone_width:
        runs += [(rel, args.themes[0], args.phone_width, True) for rel in pages]
    views = []
    for rel, theme, width, phone in runs:
        shot = rel.replace("/", "__").removesuffix(".html") + f"-{theme}" + "-phone" * phone
        shot = str((args.out / f"{shot}.png").resolve())
        views.append(dict(page=rel, url="/" + quote(rel), theme=theme, width=width, shot=shot))
        views[-1].update(height=args.height, phone=phone)

    def show_views(browser, base: str) -> list[dict]:
        for view in views:
            view["base"] = base
        return [show_view(browser, view, args.timeout) for view in views]

    browser = drive(site, chromium, show_views)
    if browser is None:
        return 2  # Chromium did not start: drive said why
    version, records = browser
    reports = [judge_view(v, r, site) for v, r in zip(views, records)]
    for report in reports:
        result = report.get("browser") or {}
        print(
            f"  {'OK' if not report['problems'] else 'FAILED':6s} {report['page']} "
            f"({report['theme']}, {report['width']} px): "
            f"{len(result.get('images', []))} images, "
            f"{result.get('rendered', 0)}/{result.get('math', 0)} formulas rendered, "
            f"{report['requests']} requests -> {report['screenshot']}"
        )
    (args.out / "report.json").write_text(json.dumps(reports, indent=2), encoding="utf-8")
    named = [(f"{r['page']} ({r['theme']}, {r['width']} px)", r["problems"]) for r in reports]
    failures = list(dict.fromkeys((name, p) for name, problems in named for p in problems))
    if failures:
        lines = [f"\nscreenshot_site: {len(failures)} problem(s):"]
        print("\n  - ".join(lines + [f"{page}: {p}" for page, p in failures]), file=sys.stderr)
        return 1
    print(
        f"screenshot_site: OK ({len(pages)} pages x {len(runs) // max(1, len(pages))} "
        f"views in Chromium {version}, screenshots in {args.out})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
