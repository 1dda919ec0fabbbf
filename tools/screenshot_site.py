#!/usr/bin/env python
"""Open pages of the built site in headless Chromium, screenshot them, and fail on broken images.

Usage::

    python tools/screenshot_site.py docs/_build/html --out docs/_build/screenshots
    python tools/screenshot_site.py docs/_build/html --out shots --pages index.html api.html

The site is served from ``127.0.0.1`` by a local :mod:`http.server`; Chromium may
reach no other host. One browser (``tools/screenshot_browser.mjs``: puppeteer-core,
installed by ``npm ci``, driving Debian's Chromium) opens every view, each in a fresh
context. For each page (by default the landing page, the paper map, the "Try the
models" page, the first two gallery pages, one more gallery page with figures and math,
and the first page of every chapter), in each theme (``--themes``, default light and
dark) and at each width (``--width`` for a desktop, ``--phone-width`` for a phone), the
script

1. saves a screenshot ``<page>-<theme>[-phone].png`` and checks that it is a
   non-blank PNG of the requested size. The theme is chosen the way the
   pydata theme remembers a reader's choice: ``localStorage["theme"]``, set
   before the page's own scripts run;
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
page passes, 1 when one fails, 2 when Chromium, Node.js or puppeteer-core is missing
or Chromium does not start.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import zlib
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--disable-dev-shm-usage",
    "--mute-audio",
    # the site must render offline: no host but the local server resolves
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
# code cells and listings: a line wider than its box scrolls sideways
CODE_SELECTOR = "article div.highlight pre"
IGNORED_PATHS = {"/favicon.ico"}
ROOT = Path(__file__).resolve().parent.parent
DRIVER = ROOT / "tools" / "screenshot_browser.mjs"


# --------------------------------------------------------------------------
# Local server that records every request
# --------------------------------------------------------------------------


class RequestLog:
    def __init__(self):
        self.lock = threading.Lock()
        self.entries: list[tuple[str, int]] = []

    def add(self, path: str, status: int) -> None:
        with self.lock:
            self.entries.append((path, status))

    def take(self) -> list[tuple[str, int]]:
        with self.lock:
            entries, self.entries = self.entries, []
        return entries


class Handler(SimpleHTTPRequestHandler):
    log: RequestLog | None = None

    def log_request(self, code="-", size="-"):
        try:
            status = int(code)
        except (TypeError, ValueError):
            status = int(getattr(code, "value", 0) or 0)
        if self.log is not None:
            self.log.add(unquote(urlsplit(self.path).path), status)

    def log_message(self, format, *args):  # noqa: A002 - keep the console quiet
        pass


def start_server(root: Path, log: RequestLog | None = None):
    """Serve ``root`` on a free port of 127.0.0.1 (in a thread); ``log`` records every
    request and its status (``tools/try_page_check.py`` reads it)."""
    handler = functools.partial(
        type("BoundHandler", (Handler,), {"log": log}), directory=str(root)
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


# --------------------------------------------------------------------------
# Chromium
# --------------------------------------------------------------------------


def find_chromium(explicit: str | None) -> str | None:
    for candidate in ([explicit] if explicit else []) + list(CHROMIUM_CANDIDATES):
        path = candidate if os.path.isabs(candidate) else shutil.which(candidate)
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def png_problems(path: Path, width: int, height: int) -> list[str]:
    """Empty list when ``path`` is a non-blank PNG of ``width`` x ``height``."""
    if not path.is_file() or path.stat().st_size == 0:
        return ["no screenshot was written"]
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return ["the screenshot is not a PNG file"]
    w, h = struct.unpack(">II", data[16:24])
    problems = []
    if (w, h) != (width, height):
        problems.append(f"screenshot is {w}x{h}, expected {width}x{height}")
    idat, pos = b"", 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    try:
        pixels = zlib.decompress(idat)
    except zlib.error:
        return problems + ["the screenshot's image data does not decompress"]
    if len(set(pixels[:: max(1, len(pixels) // 200_000)])) < 16:
        problems.append("the screenshot is blank (almost a single colour)")
    return problems


def img_sources(page_file: Path) -> list[str]:
    """``src`` of every <img> in the HTML file (raw, before any script runs)."""
    text = page_file.read_text(encoding="utf-8")
    return re.findall(r"<img\b[^>]*?\ssrc=\"([^\"]+)\"", text)


# --------------------------------------------------------------------------
# One page
# --------------------------------------------------------------------------


def judge_view(view: dict, record: dict, site: Path) -> dict:
    """The report of one view: what the browser recorded (``record``, from
    ``tools/screenshot_browser.mjs``) against what the view asked for."""
    rel, theme, width, phone = view["page"], view["theme"], view["width"], view["phone"]
    report: dict = {"page": rel, "theme": theme, "width": width, "problems": []}
    problems = report["problems"]
    if record.get("driver_error"):
        problems.append(f"the browser could not show the page: {record['driver_error'][:500]}")
    if record.get("screenshot_error"):
        problems.append(f"the screenshot failed: {record['screenshot_error'][:500]}")
    shot = Path(view["shot"])
    report["screenshot"] = str(shot)
    problems += png_problems(shot, width, view["height"])

    # 1. the page as the browser left it: images, MathJax, theme, overflow
    result = record.get("browser")
    report["browser"] = result
    if result is None:
        problems.append("the page did not finish loading in the browser (raise --timeout?)")
    else:
        if result.get("error"):
            problems.append(f"the check script failed: {result['error']}")
        for what in result.get("late", []):
            if not what.startswith("image "):  # a late image is reported as not loaded
                problems.append(f"{what}: not ready within --timeout")
        for src in result["broken"]:
            problems.append(f"image did not load: {src}")
        if result["math"] and result["mathjax"] != "typeset":
            problems.append(
                f"page has {result['math']} formulas but MathJax is {result['mathjax']}"
            )
        if result["math"] and result["rendered"] == 0:
            problems.append("MathJax rendered none of the page's formulas")
        if result["merror"]:
            problems.append(f"MathJax reported {result['merror']} formula error(s)")
        if result.get("theme") != theme:
            problems.append(f"the page is in theme {result.get('theme')!r}, not {theme!r}")
        if not phone:
            for cell in result.get("overflow", []):
                problems.append(
                    f"code cell {cell['excess']} px wider than the page's column: {cell['line']!r}"
                )
        elif result.get("page_width", 0) > result.get("window_width", 0) + 2:
            problems.append(
                f"the page is {result['page_width']} px wide in a "
                f"{result['window_width']} px window: it scrolls sideways"
            )

    # 2. the requests: only this server, every one answered, every <img> fetched
    base = urlsplit(view["base"])
    report["requests"] = len(record.get("requests", []))
    for url in record.get("requests", []):
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc != base.netloc:
            problems.append(f"request to another host: {url}")
    fetched = set()
    for url, status in record.get("responses", []):
        path = unquote(urlsplit(url).path)
        if status >= 400 and path not in IGNORED_PATHS:
            problems.append(f"request {path} answered {status}")
        if status in (200, 304):
            fetched.add(path)
    answered = {url for url, _ in record.get("responses", [])}
    for url, error in record.get("failed", []):
        path = unquote(urlsplit(url).path)
        if url in answered:  # a 4xx answer is aborted too: reported above
            continue
        if path not in IGNORED_PATHS and urlsplit(url).netloc == base.netloc:
            problems.append(f"request {path} failed: {error}")
    page_dir = (site / rel).parent
    for src in img_sources(site / rel):
        if src.startswith("data:") or urlsplit(src).scheme:
            continue
        target = (page_dir / unquote(urlsplit(src).path)).resolve()
        try:
            path = "/" + target.relative_to(site).as_posix()
        except ValueError:
            problems.append(f"image outside the site: {src}")
            continue
        if path not in fetched:
            problems.append(f"image never fetched with status 200: {src}")
    return report


def is_redirect_stub(page_file: Path) -> bool:
    """A page left at an old address that sends the reader to the new one."""
    text = page_file.read_text(encoding="utf-8")
    return re.search(r'<meta\s+http-equiv="refresh"', text, flags=re.I) is not None


def default_pages(site: Path) -> list[str]:
    """The landing page, the paper map, the "Try the models" page (when the site has it),
    the first two gallery pages (where a reader starts), the next gallery page with both
    figures and math, and the first page of every chapter in a subfolder (the speed
    chapter, the appendix, ...)."""
    pages = ["index.html", "paper_map.html"]
    if (site / "try.html").is_file():
        pages.append("try.html")
    auto = site / "auto_examples"
    if not auto.is_dir():
        return pages
    gallery = [p for p in sorted(auto.glob("plot_*.html")) if not is_redirect_stub(p)]
    chosen = gallery[:2]
    # prefer a gallery page with both figures and math
    rich = [
        p
        for p in gallery[2:]
        if "<img" in (text := p.read_text(encoding="utf-8")) and 'class="math' in text
    ]
    chosen += (rich or gallery[2:])[:1]
    for chapter in sorted(d for d in auto.iterdir() if d.is_dir()):
        first = [p for p in sorted(chapter.glob("plot_*.html")) if not is_redirect_stub(p)]
        chosen += first[:1]
    return pages + [p.relative_to(site).as_posix() for p in chosen]


def _at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (math.isfinite(value) and 0 < value <= 3600):
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds, got {text}")
    return value


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
    parser.add_argument("--width", type=_at_least(1), default=1400, help="default: 1400")
    parser.add_argument("--height", type=_at_least(1), default=2000, help="default: 2000")
    parser.add_argument(
        "--themes",
        nargs="+",
        default=["light", "dark"],
        choices=["light", "dark"],
        help="default: light dark",
    )
    parser.add_argument(
        "--phone-width",
        type=_at_least(0),
        default=390,
        help="also screenshot each page this wide, in the first theme, and "
        "fail if it scrolls sideways (0: no phone run; default 390)",
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=60.0,
        help="seconds one page may take to load and typeset (default: %(default)s)",
    )
    args = parser.parse_args(argv)

    chromium, node = find_chromium(args.chromium), shutil.which("node")
    missing = [
        what
        for what, ok in (
            (
                f"Chromium (looked for {', '.join(CHROMIUM_CANDIDATES)}; "
                "apt-get install chromium)",
                chromium,
            ),
            ("Node.js", node),
            ("puppeteer-core (npm ci)", (ROOT / "node_modules" / "puppeteer-core").is_dir()),
        )
        if not ok
    ]
    if missing:
        print(f"screenshot_site: missing: {'; '.join(missing)}", file=sys.stderr)
        return 2
    site = args.html_dir.resolve()
    if not (site / "index.html").is_file():
        print(
            f"screenshot_site: {site} holds no index.html; build the site first", file=sys.stderr
        )
        return 1
    pages = args.pages or default_pages(site)
    missing = [p for p in pages if not (site / p).is_file()]
    if missing:
        print(f"screenshot_site: pages not in the site: {', '.join(missing)}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)

    runs = [(rel, theme, args.width, False) for rel in pages for theme in args.themes]
    if args.phone_width:
        runs += [(rel, args.themes[0], args.phone_width, True) for rel in pages]
    server = start_server(site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    views = [
        {
            "page": rel,
            "url": "/" + quote(rel),
            "theme": theme,
            "width": width,
            "height": args.height,
            "phone": phone,
            "base": base,
            "shot": str(
                (
                    args.out
                    / (
                        rel.replace("/", "__").removesuffix(".html")
                        + f"-{theme}"
                        + ("-phone" if phone else "")
                        + ".png"
                    )
                ).resolve()
            ),
        }
        for rel, theme, width, phone in runs
    ]
    job = {
        "base": base,
        "chromium": chromium,
        # puppeteer sets headless itself
        "chromium_flags": [f for f in FLAGS if f != "--headless"],
        "code_selector": CODE_SELECTOR,
        "timeout_ms": int(args.timeout * 1000),
        "views": views,
    }
    stopped = None
    try:
        with tempfile.TemporaryDirectory(prefix="screenshot-site-job-") as tmp:
            job_file, result_file = Path(tmp) / "job.json", Path(tmp) / "result.json"
            job_file.write_text(json.dumps(job), encoding="utf-8")
            limit = args.timeout * (len(views) + 2)
            proc = subprocess.Popen([node, str(DRIVER), str(job_file), str(result_file)], cwd=ROOT)
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                # SIGTERM: the driver stops after the current view and closes Chromium
                stopped = (
                    f"the browser was stopped after {limit:.0f} s "
                    f"(--timeout {args.timeout:g} s a view)"
                )
                proc.terminate()
                try:
                    proc.wait(timeout=args.timeout + 15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.returncode == 3:
                return 2  # Chromium did not start: the driver said why
            if not result_file.is_file():
                print(
                    f"screenshot_site: the browser driver exited with {proc.returncode} "
                    "before any view finished" + (f"; {stopped}" if stopped else ""),
                    file=sys.stderr,
                )
                return 1
            browser = json.loads(result_file.read_text(encoding="utf-8"))
            if proc.returncode != 0 and not stopped:
                stopped = f"the browser driver exited with {proc.returncode}"
    finally:
        server.shutdown()
        server.server_close()
    done = browser["views"]
    reports = [judge_view(v, r, site) for v, r in zip(views, done)]
    for view in views[len(done) :]:
        reports.append(
            {
                "page": view["page"],
                "theme": view["theme"],
                "width": view["width"],
                "problems": [f"not shown: {stopped or 'the driver returned fewer views'}"],
                "requests": 0,
                "screenshot": "-",
            }
        )
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

    def view(r):
        return f"{r['page']} ({r.get('theme', '?')}, {r.get('width', '?')} px)"

    failures = list(dict.fromkeys((view(r), p) for r in reports for p in r["problems"]))
    if stopped and not failures:
        failures.append(("the browser driver", stopped))
    if failures:
        print(f"\nscreenshot_site: {len(failures)} problem(s):", file=sys.stderr)
        for page, problem in failures:
            print(f"  - {page}: {problem}", file=sys.stderr)
        return 1
    print(
        f"screenshot_site: OK ({len(pages)} pages x {len(runs) // max(1, len(pages))} "
        f"views in {browser['chromium']}, screenshots in {args.out})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
