#!/usr/bin/env python
"""Check the built HTML of the convs2s_edu site (parsed with lxml.html).

Usage::

    python tools/check_site.py docs/_build/html [--gallery-dir gallery] [--tests-dir tests]

Checks, and exits non-zero with a list of failures when one does not hold:

gallery
    every ``gallery/**/plot_*.py`` (subfolders included) has its page
    ``auto_examples/**/plot_*.html``; a page whose script draws with matplotlib
    shows at least one of its own figures; every page links its notebook
    (``.ipynb``) and script (``.py``), and the linked files exist. Every other
    ``auto_examples/**/plot_*.html`` must be a redirect stub (below).
redirects
    a page that moved keeps its old address: a stub there (a
    ``<meta http-equiv="refresh">``) must send the reader to an existing gallery
    page that is not itself a stub, and its ``<link rel="canonical">`` and its
    visible link must name the same page; every old address of the table
    ``REDIRECTS`` of ``docs/_ext/convs2s_site.py`` (read with :mod:`ast`) must
    hold a stub that sends the reader to the table's page.
images and links
    on every page, every ``<img>`` points to an existing file and every
    relative link points to an existing file, and to an existing ``#anchor`` of
    that page when it names one (but for the ``[docs]`` links of viewcode's
    ``_modules/`` source pages, whose anchors Sphinx writes itself: it points
    those of objects documented under a module to anchors that do not exist).
math
    no page loads a script or stylesheet from another host (no CDN), MathJax is
    loaded from ``_static/mathjax`` on every page with math, every math
    container holds ``\\(...\\)`` or ``\\[...\\]``, and, once the math
    containers, code and literals are removed, no text left on a page holds a
    LaTeX command (``\\sqrt``), a ``.. math::`` directive or a reST role
    (``:math:`...```): either would be math or markup that did not render.
paper map
    every row of the paper map's tables has rendered math, a link to the API
    reference and only links (with their ``#anchors``) that resolve; every
    test it cites as ``tests/test_x.py::test_name`` exists (when the tests
    directory is found).
API reference
    a page for every name in the ``__all__`` of the package and of its public
    modules (read with :mod:`ast`, nothing is imported), and at least one
    "Examples using" mini-gallery.
quick mode
    with ``CONVS2S_EDU_QUICK=1`` in the environment, the pages carry the
    quick-mode banner; without it, they do not.
try page
    ``try.html`` exists, and so do its script, the ``models.json`` that
    ``tools/export_onnx.py`` wrote, every ONNX graph it names and the
    onnxruntime-web files the page loads (``_static/try/``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import lxml.html

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "docs" / "_ext" / "convs2s_site.py"
# text inside these never counts as prose
NON_PROSE_TAGS = {"script", "style", "pre", "code", "kbd", "samp", "textarea", "svg", "math"}
NON_PROSE_CLASSES = set(
    "math highlight pre sig sig-object literal doctest sphx-glr-script-out sphx-glr-download "
    "MathJax".split()
)
NOT_LINKS = ("mailto:", "javascript:", "data:")  # an <a href> that names no file
# a <link> with one of these rels loads its URL (rel="canonical" etc. load nothing)
LOADING_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon"}
MATH_BODY = re.compile(r"\\\(.*\\\)|\\\[.*\\\]", re.S)
LATEX_COMMAND = re.compile(r"\\(?:[A-Za-z]{2,}|[,;:!{}\[\]()])")
LEFTOVER_MARKUP = re.compile(r"\.\. math::|:(?:math|class|func|meth|attr|ref|doc|obj|mod):`")
CDN_URL = re.compile(r"https?://[^\s\"'<>]*(?:cdn|jsdelivr|unpkg)[^\s\"'<>]*", re.I)
QUICK_BANNER = "Built in quick mode"
TEST_CITATION = re.compile(r"tests/(test_\w+\.py)::(test_\w+)")
REFRESH_URL = re.compile(r"^\s*\d+\s*;\s*url\s*=\s*(\S+)\s*$", re.IGNORECASE)


def assigned(path: Path, name: str):
    """The literal assigned to ``name`` at the top of the Python file ``path`` (read with
    :mod:`ast`, nothing is imported); ``None`` when the file or the assignment is not there."""
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return None


def is_external(url: str | None) -> bool:
    parts = urlsplit(url or "")
    return bool(parts.scheme in ("http", "https") or parts.netloc or (url or "").startswith("//"))


def with_class(tree, name: str, tag: str = "*") -> list:
    """The elements ``tag`` under ``tree`` whose class list holds ``name`` (CSS ``tag.name``)."""
    return tree.xpath(f'.//{tag}[contains(concat(" ", normalize-space(@class), " "), " {name} ")]')


def non_prose(tag) -> bool:
    return tag.tag in NON_PROSE_TAGS or bool(set(tag.get("class", "").split()) & NON_PROSE_CLASSES)


def prose(tag) -> str:
    """The text of ``tag`` without what is inside code, math and the like (:func:`non_prose`)
    and without comments."""
    if not isinstance(tag.tag, str) or non_prose(tag):
        return ""
    return (tag.text or "") + "".join(prose(child) + (child.tail or "") for child in tag)


class Page:
    def __init__(self, site: Path, path: Path):
        self.site, self.path = site, path
        self.rel = path.relative_to(site).as_posix()
        self.raw = path.read_text(encoding="utf-8")
        self.doc = lxml.html.document_fromstring(self.raw)
        self.ids = set(self.doc.xpath("//@id"))
        # the page's content (``<article>`` in the pydata theme), else the whole page
        self.main = next(self.doc.iter("article"), self.doc)

    def resolve(self, url: str) -> tuple[Path | None, str]:
        """Local file and fragment a relative URL points to; ``None`` for external URLs."""
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or url.startswith("//"):
            return None, ""
        if not parts.path:  # "#anchor": this page
            return self.path, parts.fragment
        # normpath, not resolve(): a built site has no symbolic links, and 70,000 links
        # resolved through the file system took 5 s
        target = os.path.normpath(os.path.join(self.path.parent, unquote(parts.path)))
        return Path(target, "index.html" if os.path.isdir(target) else ""), parts.fragment

    def is_file(self, url: str) -> bool:
        target, _ = self.resolve(url)
        return target is not None and os.path.isfile(target)

    def hrefs(self, tag=None) -> list[str]:
        """The ``href`` of every ``<a>`` in ``tag`` (default: the whole page)."""
        return [str(href) for href in (self.doc if tag is None else tag).xpath(".//a/@href")]


class Checker:
    """The checks of the module doc on the site in ``site`` (every argument a :class:`Path`)."""

    def __init__(self, site, gallery_dir, tests_dir, package_dir, extension=EXTENSION):
        self.site, self.gallery_dir, self.tests_dir = site, gallery_dir, tests_dir
        self.package_dir, self.extension = package_dir, extension
        self.failures, self.notes, self._pages = [], [], {}

    def fail(self, where: str, message: str) -> None:
        self.failures.append(f"{where}: {message}")

    def page(self, path: Path) -> Page:
        if (path := path.resolve()) not in self._pages:
            self._pages[path] = Page(self.site, path)
        return self._pages[path]

    def all_pages(self) -> list[Page]:
        skip = {"search.html", "genindex.html", "py-modindex.html"}
        return [
            self.page(p)
            for p in sorted(self.site.rglob("*.html"))
            if p.name not in skip and "_static" not in p.parts and "_sources" not in p.parts
        ]

    def check_link(self, page: Page, where: str, href: str) -> None:
        """A relative link must reach an existing file, and its ``#anchor`` an element's id."""
        target, fragment = page.resolve(href)
        if target is None or not os.path.isfile(target):
            self.fail(where, f"link to a missing page: {href}")
        elif fragment and fragment not in self.page(target).ids:
            self.fail(where, f"link to a missing anchor: {href}")

    # -- gallery -----------------------------------------------------------

    def check_gallery(self) -> None:
        scripts = sorted(self.gallery_dir.rglob("plot_*.py"))
        if not scripts:
            self.fail(str(self.gallery_dir), "no gallery/**/plot_*.py scripts found")
        expected = set()
        for script in scripts:
            rel = script.relative_to(self.gallery_dir).with_suffix(".html").as_posix()
            html = self.site / "auto_examples" / rel
            expected.add(html.resolve())
            where = f"auto_examples/{rel}"
            if not html.is_file():
                self.fail(where, f"missing: no page for {script.name}")
                continue
            page = self.page(html)
            draws = re.search(r"\bplt\.|matplotlib", script.read_text(encoding="utf-8"))
            figures = page.main.xpath(".//img[contains(@src, $s)]", s=f"sphx_glr_{script.stem}_")
            if draws and not [img for img in figures if "_thumb" not in img.get("src")]:
                none = f"none of its figures (no <img> of sphx_glr_{script.stem}_NNN.png)"
                self.fail(where, f"{script.name} draws with matplotlib but the page shows {none}")
            for ext in (".ipynb", ".py"):
                links = [h for h in page.hrefs() if h.split("#")[0].endswith(ext)]
                if not (links := [h for h in links if not is_external(h)]):
                    self.fail(where, f"no download link to the {ext} file")
                for href in links:
                    if not page.is_file(href):
                        self.fail(where, f"download link {href!r} points to a missing file")
        stubs = self.check_redirects(expected)
        self.notes.append(f"gallery: {len(scripts)} pages, {stubs} redirect stubs")

    def check_redirects(self, pages: set[Path]) -> int:
        """Every ``auto_examples/**/plot_*.html`` that no script made is a redirect stub to
        one of ``pages``, and every old address of the site's table holds one."""
        gallery = self.site / "auto_examples"
        stubs: dict[str, Path] = {}
        for html in sorted(gallery.rglob("plot_*.html")):
            if html.resolve() in pages:
                continue
            page = self.page(html)
            refresh = lambda meta: (meta.get("http-equiv") or "").lower() == "refresh"
            meta = next(filter(refresh, page.doc.iter("meta")), None)
            if meta is None:
                stale = "not a redirect stub (a stale page of an older build?)"
                self.fail(page.rel, f"a gallery page without a script in the gallery and {stale}")
                continue
            # the URL a stub's <meta http-equiv="refresh"> sends to
            url = m.group(1) if (m := REFRESH_URL.match(meta.get("content", ""))) else ""
            target = page.resolve(url)[0] if url else None
            if target is None or not os.path.isfile(target):
                self.fail(page.rel, f"redirect stub points to a missing page: {url!r}")
                continue
            if target.resolve() not in pages:
                self.fail(page.rel, f"redirect stub points to {url!r}, not to a gallery page")
            links = page.doc.iter("link")
            canonical = [link.get("href", "") for link in links if link.get("rel") == "canonical"]
            if not canonical:
                self.fail(page.rel, 'redirect stub without <link rel="canonical">')
            at = "/" + target.relative_to(self.site).as_posix()  # where an absolute one ends
            for href in canonical:
                same = href.endswith(at) if is_external(href) else page.resolve(href)[0] == target
                if not same:
                    self.fail(page.rel, f"canonical link {href!r} is not {url!r}")
            if not any(page.resolve(href)[0] == target for href in page.hrefs() if href):
                self.fail(page.rel, f"redirect stub has no visible link to {url!r}")
            stubs[html.relative_to(gallery).with_suffix("").as_posix()] = target.resolve()
        table = assigned(self.extension, "REDIRECTS")
        if table is None:
            self.notes.append(f"redirect table: not checked ({self.extension} has none)")
        for old, new in (table or {}).items():
            where = f"auto_examples/{old}.html"
            if old not in stubs:
                self.fail(where, f"no redirect stub (to {new[0]})")
            elif stubs[old] != (gallery / f"{new[0]}.html").resolve():
                self.fail(where, f"redirects elsewhere than {new[0]}")
        return len(stubs)

    # -- images and links on every page -------------------------------------

    def check_images_and_links(self, pages: list[Page]) -> None:
        n_img = n_links = n_anchors = 0
        for page in pages:
            for img in page.doc.iter("img"):
                src = img.get("src", "")
                n_img += 1
                if not src:
                    self.fail(page.rel, "<img> without src")
                elif is_external(src):
                    self.fail(page.rel, f"<img> loads from another host: {src}")
                elif not src.startswith("data:") and not page.is_file(src):
                    self.fail(page.rel, f"<img> points to a missing file: {src}")
            for href in page.hrefs():
                if not href or is_external(href) or href.startswith(NOT_LINKS):
                    continue
                target, fragment = page.resolve(href)
                n_links += 1
                if target is None or not os.path.exists(target):
                    self.fail(page.rel, f"link points to a missing file: {href}")
                elif (
                    fragment
                    and target.suffix == ".html"
                    # viewcode's source pages: Sphinx writes their "[docs]" anchors itself
                    and not page.rel.startswith("_modules/")
                ):
                    n_anchors += 1
                    if fragment not in self.page(target).ids:
                        self.fail(page.rel, f"link points to a missing anchor: {href}")
        links = f"relative links: {n_links} checked, {n_anchors} of them to an anchor"
        self.notes.append(f"images: {n_img} checked; {links}")

    # -- math, MathJax and CDNs ----------------------------------------------

    def check_math(self, pages: list[Page]) -> None:
        n_math = 0
        if not (self.site / "_static" / "mathjax" / "tex-chtml.js").is_file():
            self.fail("_static/mathjax", "the offline MathJax (tex-chtml.js) was not copied")
        for page in pages:
            for tag, attr in (("script", "src"), ("link", "href"), ("iframe", "src")):
                for node in (n for n in page.doc.iter(tag) if is_external(n.get(attr))):
                    if tag != "link" or LOADING_RELS & set((node.get("rel") or "").split()):
                        self.fail(page.rel, f"<{tag}> loads from another host: {node.get(attr)}")
            for m in CDN_URL.finditer(page.raw):
                self.fail(page.rel, f"CDN URL in the page: {m.group(0)}")
            containers = with_class(page.doc, "math", "span") + with_class(page.doc, "math", "div")
            n_math += len(containers)
            for body in (node.text_content().strip() for node in containers):
                if not MATH_BODY.fullmatch(body):  # inline \(...\) or display \[...\]
                    self.fail(
                        page.rel, f"math container without \\( \\) or \\[ \\]: {body[:60]!r}"
                    )
            srcs = [str(src) for src in page.doc.xpath("//script/@src")]
            local = [s for s in srcs if s.split("?")[0].endswith("_static/mathjax/tex-chtml.js")]
            if containers and not local:
                self.fail(page.rel, "page has math but does not load _static/mathjax/tex-chtml.js")
            for src in local if containers else []:
                if not page.is_file(src):
                    self.fail(page.rel, f"MathJax script points to a missing file: {src}")
            text = prose(page.main)
            for pattern, what in ((LATEX_COMMAND, "LaTeX"), (LEFTOVER_MARKUP, "reST markup")):
                for m in pattern.finditer(text):
                    context = text[max(0, m.start() - 40) : m.end() + 40].replace("\n", " ")
                    found = f"{m.group(0)!r} in the text: ...{context}..."
                    self.fail(page.rel, f"unrendered {what} {found}")
        self.notes.append(f"math: {n_math} containers checked")

    # -- paper map --------------------------------------------------------------

    def check_paper_map(self) -> None:
        path = self.site / "paper_map.html"
        if not path.is_file():
            self.fail("paper_map.html", "missing")
            return
        page = self.page(path)
        tables = with_class(page.doc, "paper-map", "table")
        if not tables:
            self.fail(page.rel, "no table with class 'paper-map'")
            return
        rows = [row for table in tables for row in table.xpath(".//tbody//tr")]
        for row in rows:
            cells = row.xpath("./td")
            label = " ".join(cells[0].text_content().split()) if cells else "?"
            where = f"{page.rel} row {label!r}"
            if len(cells) < 5:
                self.fail(where, f"{len(cells)} cells, expected 5")
                continue
            if not with_class(cells[1], "math"):
                self.fail(where, "the equation cell holds no rendered math")
            if not cells[2].xpath('.//a[contains(@href, "api/generated/")]'):
                self.fail(where, "the 'computed by' cell links to no API page")
            if cells[4].find(".//a") is None and "none yet" not in cells[4].text_content():
                self.fail(where, "the 'shown in' cell has no link (write 'none yet' if none)")
            for href in page.hrefs(row):
                if not is_external(href):
                    self.check_link(page, where, href)
            cited = cells[3].text_content()
            if "none yet" not in cited and not TEST_CITATION.search(cited):
                self.fail(where, "the 'checked by' cell cites no tests/test_x.py::test_name")
        if not rows:
            self.fail(page.rel, "the paper map tables have no rows")
        self.notes.append(f"paper map: {len(rows)} rows")
        departures = [self.page(p) for p in [self.site / "departures.html"] if p.is_file()]
        self.check_test_citations([page, *departures])

    def check_test_citations(self, pages: list[Page]) -> None:
        if not self.tests_dir.is_dir():
            self.notes.append(f"test citations: not checked ({self.tests_dir} not found)")
            return
        sources = {p.name: p.read_text(encoding="utf-8") for p in self.tests_dir.glob("test_*.py")}
        every_test = set(re.findall(r"^\s*def (test_\w+)\(", "\n".join(sources.values()), re.M))
        n = 0
        for page in pages:
            for file, name in TEST_CITATION.findall(page.main.text_content()):
                n += 1
                cited = f"cites tests/{file}::{name}"
                if file not in sources:
                    self.fail(page.rel, f"{cited}, but tests/{file} does not exist")
                elif not re.search(rf"^\s*def {name}\(", sources[file], re.M):
                    self.fail(page.rel, f"{cited}, which is not defined there")
            codes = {code.text_content().strip() for code in page.main.iter("code")}
            for name in sorted(c for c in codes if re.fullmatch(r"test_\w+", c)):
                n += 1
                if name not in every_test:
                    self.fail(page.rel, f"names test {name}, which no tests/test_*.py defines")
        self.notes.append(f"test citations: {n} checked against {self.tests_dir}")

    # -- API reference ------------------------------------------------------------

    def public_names(self) -> dict[str, set[str]] | None:
        """``{object: acceptable page names}`` for every name in an ``__all__`` of a module of
        the package (subpackages included): its shortest public name, the one api.rst
        documents it under: ``convs2s_edu.X`` when the package root exports ``X``, else the
        highest subpackage whose ``__init__`` exports it (``convs2s_edu.training.X``), else
        its module (``convs2s_edu.lab.timing.X``); ``convs2s_edu.module.X`` is accepted too
        for a root name (``data.PAD``: documented there for its ``#:`` comment)."""
        init = self.package_dir / "__init__.py"
        if not init.is_file():
            return None

        all_of = lambda path: list(assigned(path, "__all__") or [])

        package = self.package_dir.name
        root = set(all_of(init))
        names = {f"{package}.{name}": {f"{package}.{name}"} for name in root}
        for path in sorted(self.package_dir.rglob("*.py")):
            if path.name.startswith("_"):  # __init__ re-exports; _checks etc. are private
                continue
            parts = [package, *path.relative_to(self.package_dir).with_suffix("").parts]
            for name in all_of(path):
                if name in root:
                    names[f"{package}.{name}"].add(".".join([*parts, name]))
                    continue
                short = parts
                for i in range(len(parts) - 1, 1, -1):  # subpackages, from the module up
                    if name not in all_of(self.package_dir.joinpath(*parts[1:i], "__init__.py")):
                        break
                    short = parts[:i]
                names[".".join([*short, name])] = {".".join([*short, name])}
        return names

    def check_api(self) -> None:
        pages = sorted((self.site / "api" / "generated").glob("*.html"))
        if not (self.site / "api.html").is_file():
            self.fail("api.html", "missing")
        if not pages:
            self.fail("api/generated", "no API pages")
            return
        public = self.public_names()
        if public is None:
            self.notes.append(f"API coverage: not checked ({self.package_dir} not found)")
        else:
            have = {p.stem for p in pages}
            add = "(add it to an autosummary in docs/api.rst)"
            for full in sorted(full for full, accepted in public.items() if not accepted & have):
                self.fail("api.rst", f"public object {full} has no API page {add}")
            self.notes.append(f"API coverage: {len(public)} public objects")
        examples = [p for p in pages if "sphx-glr-thumbnails" in p.read_text(encoding="utf-8")]
        if not examples:
            self.fail("api/generated", "no API page shows an 'Examples using' mini-gallery")
        self.notes.append(f"API: {len(pages)} pages, {len(examples)} with mini-galleries")

    # -- quick mode -------------------------------------------------------------------

    def check_quick_banner(self) -> None:
        quick = os.environ.get("CONVS2S_EDU_QUICK", "").strip().lower() in ("1", "true", "yes")
        index = self.site / "index.html"
        if not index.is_file():
            self.fail("index.html", "missing")
            return
        has = QUICK_BANNER in index.read_text(encoding="utf-8")
        if quick and not has:
            self.fail("index.html", "CONVS2S_EDU_QUICK=1 but the page has no quick-mode banner")
        if has and not quick:
            why = "(CONVS2S_EDU_QUICK unset): is this a stale quick build?"
            self.fail("index.html", f"quick-mode banner on a full build {why}")
        self.notes.append(f"quick-mode banner: {'expected and present' if quick else 'absent'}")

    # -- the "Try the models" page --------------------------------------------------

    def check_try_page(self) -> None:
        """The page's script, its models.json, every graph that names and the runtime's files
        are in the site (tools/export_onnx.py writes them; a build without them would show
        readers a page that cannot run)."""
        if not (self.site / "try.html").is_file():
            self.fail("try.html", "missing: the site has no 'Try the models' page")
            return
        folder = self.site / "_static" / "try"
        manifest = folder / "models.json"
        if not manifest.is_file():
            run = "run tools/export_onnx.py before sphinx-build"
            self.fail("try.html", f"{manifest.relative_to(self.site)} is missing: {run}")
            return
        data = json.loads(manifest.read_text(encoding="utf-8"))
        runtime = [data["runtime"]["script"], "ort-wasm-simd-threaded.wasm"]
        runtime.append("ort-wasm-simd-threaded.mjs")
        needed = ["try.js", "try.css", *(f"ort/{name}" for name in runtime)]
        needed += [f for m in data["models"].values() for f in m["files"].values()]
        for rel in needed:
            if not (folder / rel).is_file() or (folder / rel).stat().st_size == 0:
                self.fail("try.html", f"_static/try/{rel} is missing or empty")
        self.notes.append(f"try page: {len(needed)} files, {len(data['models'])} models")

    def run(self) -> int:
        if not (pages := self.all_pages()):
            self.fail(str(self.site), "no HTML pages")
        else:
            self.check_gallery()
            self.check_images_and_links(pages)
            self.check_math(pages)
            for check in (self.check_paper_map, self.check_api, self.check_quick_banner):
                check()
            self.check_try_page()
        for note in self.notes:
            print(f"  {note}")
        self.failures = list(dict.fromkeys(self.failures))  # once each, in order
        if self.failures:
            lines = [f"\ncheck_site: {len(self.failures)} failure(s) in {self.site}:"]
            print("\n  - ".join(lines + self.failures), file=sys.stderr)
            return 1
        print(f"check_site: OK ({len(pages)} pages in {self.site})")
        return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="the built site, e.g. docs/_build/html")
    for option, default, what in (
        ("--gallery-dir", ROOT / "gallery", "the gallery scripts"),
        ("--tests-dir", ROOT / "tests", "the tests the paper map cites"),
        ("--package-dir", ROOT / "convs2s_edu", "the package whose __all__ names need API pages"),
        ("--site-extension", EXTENSION, "the extension whose REDIRECTS lists old addresses"),
    ):
        parser.add_argument(option, type=Path, default=default, help=f"{what} (%(default)s)")
    args = parser.parse_args(argv)
    if not (args.html_dir / "index.html").is_file():
        build = "build the site first (tox -e docs-quick, or tox -e docs)"
        print(f"check_site: {args.html_dir} holds no index.html; {build}", file=sys.stderr)
        return 2
    dirs = (args.gallery_dir, args.tests_dir, args.package_dir, args.site_extension)
    return Checker(args.html_dir.resolve(), *(d.resolve() for d in dirs)).run()


if __name__ == "__main__":
    sys.exit(main())
