#!/usr/bin/env python
"""Open pages of the built site in headless Chromium, screenshot them, and fail on broken images.

Usage::

    python tools/screenshot_site.py docs/_build/html --out docs/_build/screenshots
    python tools/screenshot_site.py docs/_build/html --out shots --pages index.html api.html

The site is served from ``127.0.0.1`` by a local :mod:`http.server` that logs
every request and its status; Chromium may reach no other host. For each page
(by default the landing page, the paper map, the "Try the models" page, the first two
gallery pages, one more gallery page with figures and math, and the first page of every
chapter), in each theme (``--themes``, default light and dark) and at each width
(``--width`` for a desktop, ``--phone-width`` for a phone), the script

1. saves a screenshot ``<page>-<theme>[-phone].png`` and checks that it is a
   non-blank PNG of the requested size. The theme is chosen the way the
   pydata theme remembers a reader's choice: ``localStorage["theme"]``, set by
   a small same-origin page that then opens the page;
2. loads the page again inside a small harness page (same origin) that sets
   the theme, waits for MathJax to finish, then tries to load every ``<img>``
   of the page and reports the ones that fail, the number of rendered formulas
   (``mjx-container``), MathJax errors, any resource fetched from another
   host, the theme the page ended up in, the code cells whose lines are wider
   than the cell (``pre.scrollWidth > pre.clientWidth``) and whether the page
   itself is wider than the window;
3. fails when an image did not load, a request got a 4xx/5xx status, math was
   left unrendered, a resource came from another host, the page is not in the
   requested theme, a code cell overflows horizontally at the desktop width,
   or the page scrolls sideways at the phone width.

A JSON report is written to ``<out>/report.json``. Exit status 0 when every
page passes, 1 when one fails, 2 when Chromium is missing.
"""

from __future__ import annotations

import argparse
import functools
import html
import json
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
from urllib.parse import parse_qs, quote, unquote, urlsplit

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
HARNESS_PATH = "/__screenshot_site_check__.html"
THEME_PATH = "/__screenshot_site_theme__.html"
# code cells and listings: a line wider than its box scrolls sideways
CODE_SELECTOR = "article div.highlight pre"

THEME_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>theme</title>
<script>
localStorage.setItem("theme", {theme});
localStorage.setItem("mode", {theme});
location.replace({src});
</script></head><body></body></html>
"""
IGNORED_PATHS = {"/favicon.ico"}

HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><title>check</title></head>
<body>
<pre id="result">pending</pre>
<script>
localStorage.setItem("theme", {theme});
localStorage.setItem("mode", {theme});
const frame = document.createElement("iframe");
frame.id = "frame";
frame.style.cssText = "width:{width}px;height:{height}px;border:0";
frame.addEventListener("load", async () => {{
  const out = {{images: [], broken: [], math: 0, rendered: 0, merror: 0, external: [],
               mathjax: "absent", theme: "", overflow: [], page_width: 0, window_width: 0}};
  try {{
    const doc = frame.contentDocument, win = frame.contentWindow;
    out.theme = doc.documentElement.dataset.theme || "";
    if (win.MathJax && win.MathJax.startup && win.MathJax.startup.promise) {{
      out.mathjax = "loaded";
      await win.MathJax.startup.promise;
      out.mathjax = "typeset";
    }}
    for (const img of Array.from(doc.images)) {{
      img.loading = "eager";
      const url = img.currentSrc || img.src;
      const ok = await new Promise((resolve) => {{
        const probe = new Image();
        probe.onload = () => resolve(probe.naturalWidth > 0 && probe.naturalHeight > 0);
        probe.onerror = () => resolve(false);
        probe.src = url;
      }});
      out.images.push(url);
      if (!ok) out.broken.push(url);
    }}
    out.math = doc.querySelectorAll("span.math, div.math").length;
    out.rendered = doc.querySelectorAll("mjx-container").length;
    out.merror = doc.querySelectorAll("mjx-merror").length;
    for (const pre of Array.from(doc.querySelectorAll({code_selector}))) {{
      if (pre.scrollWidth > pre.clientWidth + 2) {{
        const lines = pre.textContent.split("\\n");
        const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
        out.overflow.push({{excess: pre.scrollWidth - pre.clientWidth,
                           line: longest.slice(0, 100)}});
      }}
    }}
    out.page_width = doc.documentElement.scrollWidth;
    out.window_width = win.innerWidth;
    for (const entry of win.performance.getEntriesByType("resource")) {{
      if (new URL(entry.name).hostname !== location.hostname) out.external.push(entry.name);
    }}
  }} catch (err) {{
    out.error = String(err);
  }}
  document.getElementById("result").textContent = JSON.stringify(out);
}});
frame.src = {src};
document.body.appendChild(frame);
</script>
</body></html>
"""


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
    log: RequestLog
    harness_size: tuple[int, int]

    def do_GET(self):  # noqa: N802 (http.server API)
        parts = urlsplit(self.path)
        if parts.path in (HARNESS_PATH, THEME_PATH):
            query = parse_qs(parts.query)
            page = query.get("page", [""])[0]
            theme = json.dumps(query.get("theme", ["light"])[0])
            width = int(query.get("width", [self.harness_size[0]])[0])
            height = int(query.get("height", [self.harness_size[1]])[0])
            src = json.dumps("/" + quote(page))
            if parts.path == THEME_PATH:
                body = THEME_PAGE.format(theme=theme, src=src).encode()
            else:
                body = HARNESS.format(
                    src=src,
                    width=width,
                    height=height,
                    theme=theme,
                    code_selector=json.dumps(CODE_SELECTOR),
                ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_request(self, code="-", size="-"):
        try:
            status = int(code)
        except (TypeError, ValueError):
            status = int(getattr(code, "value", 0) or 0)
        self.log.add(unquote(urlsplit(self.path).path), status)

    def log_message(self, format, *args):  # noqa: A002 - keep the console quiet
        pass


def start_server(root: Path, log: RequestLog, harness_size: tuple[int, int]):
    handler = functools.partial(
        type("BoundHandler", (Handler,), {"log": log, "harness_size": harness_size}),
        directory=str(root),
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


def run_chromium(chromium: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="screenshot-site-") as profile:
        cmd = [chromium, *FLAGS, f"--user-data-dir={profile}", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


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


def check_page(
    chromium: str,
    base: str,
    site: Path,
    rel: str,
    out: Path,
    log: RequestLog,
    width: int,
    height: int,
    budget_ms: int,
    timeout: float,
    theme: str = "light",
    phone: bool = False,
) -> dict:
    report: dict = {"page": rel, "theme": theme, "width": width, "problems": []}
    problems = report["problems"]
    query = f"page={quote(rel)}&theme={theme}&width={width}&height={height}"
    url = f"{base}{THEME_PATH}?{query}"
    suffix = f"-{theme}" + ("-phone" if phone else "")
    shot = out / (rel.replace("/", "__").removesuffix(".html") + suffix + ".png")
    log.take()

    # 1. screenshot
    proc = run_chromium(
        chromium,
        [
            f"--window-size={width},{height}",
            f"--virtual-time-budget={budget_ms}",
            f"--screenshot={shot}",
            url,
        ],
        timeout,
    )
    report["screenshot"] = str(shot)
    if proc.returncode != 0:
        problems.append(
            f"chromium --screenshot exited with {proc.returncode}: {proc.stderr.strip()[-500:]}"
        )
    problems += png_problems(shot, width, height)
    requests = [r for r in log.take() if r[0] != THEME_PATH]

    # 2. the same page in the harness: images, MathJax, other hosts, theme, overflow
    harness = f"{base}{HARNESS_PATH}?{query}"
    proc = run_chromium(
        chromium,
        [
            f"--window-size={width},{height}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            harness,
        ],
        timeout,
    )
    requests += [r for r in log.take() if r[0] != HARNESS_PATH]
    m = re.search(r'<pre id="result">(.*?)</pre>', proc.stdout, flags=re.S)
    result = json.loads(html.unescape(m.group(1))) if m and m.group(1) != "pending" else None
    report["browser"] = result
    if result is None:
        problems.append(
            "the page did not finish loading in the browser "
            f"(chromium exit {proc.returncode}; raise --budget-ms?)"
        )
    else:
        if result.get("error"):
            problems.append(f"the check script failed: {result['error']}")
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
        for ext in result["external"]:
            problems.append(f"resource from another host: {ext}")
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

    # 3. the server's view: every request answered, every <img> fetched
    report["requests"] = len(requests)
    for path, status in requests:
        if status >= 400 and path not in IGNORED_PATHS:
            problems.append(f"request {path} answered {status}")
    fetched = {path for path, status in requests if status in (200, 304)}
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
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=2000)
    parser.add_argument(
        "--themes",
        nargs="+",
        default=["light", "dark"],
        choices=["light", "dark"],
        help="default: light dark",
    )
    parser.add_argument(
        "--phone-width",
        type=int,
        default=390,
        help="also screenshot each page this wide, in the first theme, and "
        "fail if it scrolls sideways (0: no phone run; default 390)",
    )
    parser.add_argument(
        "--budget-ms",
        type=int,
        default=20_000,
        help="virtual time the browser waits for a page (default: %(default)s)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=180.0,
        help="seconds before one browser run is killed (default: %(default)s)",
    )
    args = parser.parse_args(argv)

    chromium = find_chromium(args.chromium)
    if chromium is None:
        print(
            "screenshot_site: Chromium not found (looked for "
            f"{', '.join(CHROMIUM_CANDIDATES)}). Install it with:\n"
            "    sudo apt-get install chromium",
            file=sys.stderr,
        )
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

    log = RequestLog()
    server = start_server(site, log, (args.width, args.height))
    base = f"http://127.0.0.1:{server.server_address[1]}"
    reports = []
    runs = [(rel, theme, args.width, False) for rel in pages for theme in args.themes]
    if args.phone_width:
        runs += [(rel, args.themes[0], args.phone_width, True) for rel in pages]
    try:
        for rel, theme, width, phone in runs:
            try:
                report = check_page(
                    chromium,
                    base,
                    site,
                    rel,
                    args.out,
                    log,
                    width,
                    args.height,
                    args.budget_ms,
                    args.timeout,
                    theme,
                    phone,
                )
            except subprocess.TimeoutExpired:
                report = {"page": rel, "problems": [f"chromium took more than {args.timeout} s"]}
            reports.append(report)
            status = "OK" if not report["problems"] else "FAILED"
            browser = report.get("browser") or {}
            print(
                f"  {status:6s} {rel} ({theme}, {width} px): "
                f"{len(browser.get('images', []))} images, "
                f"{browser.get('rendered', 0)}/{browser.get('math', 0)} formulas rendered, "
                f"{report.get('requests', 0)} requests -> {report.get('screenshot', '-')}"
            )
    finally:
        server.shutdown()
        server.server_close()
    (args.out / "report.json").write_text(json.dumps(reports, indent=2), encoding="utf-8")

    def view(r):
        return f"{r['page']} ({r.get('theme', '?')}, {r.get('width', '?')} px)"

    failures = list(dict.fromkeys((view(r), p) for r in reports for p in r["problems"]))
    if failures:
        print(f"\nscreenshot_site: {len(failures)} problem(s):", file=sys.stderr)
        for page, problem in failures:
            print(f"  - {page}: {problem}", file=sys.stderr)
        return 1
    print(
        f"screenshot_site: OK ({len(pages)} pages x {len(runs) // max(1, len(pages))} "
        f"views, screenshots in {args.out})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
