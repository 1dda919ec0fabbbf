#!/usr/bin/env python
"""Check the built HTML of the convs2s_edu site (standard library only).

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
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}
# text inside these never counts as prose
NON_PROSE_TAGS = {"script", "style", "pre", "code", "kbd", "samp", "textarea", "svg", "math"}
NON_PROSE_CLASSES = {
    "math",
    "highlight",
    "pre",
    "sig",
    "sig-object",
    "literal",
    "doctest",
    "sphx-glr-script-out",
    "sphx-glr-download",
    "MathJax",
}
LATEX_COMMAND = re.compile(r"\\(?:[A-Za-z]{2,}|[,;:!{}\[\]()])")
LEFTOVER_MARKUP = re.compile(r"\.\. math::|:(?:math|class|func|meth|attr|ref|doc|obj|mod):`")
QUICK_BANNER = "Built in quick mode"
TEST_CITATION = re.compile(r"tests/(test_\w+\.py)::(test_\w+)")
REFRESH_URL = re.compile(r"^\s*\d+\s*;\s*url\s*=\s*(\S+)\s*$", re.IGNORECASE)


def redirect_table(extension: Path) -> dict[str, tuple] | None:
    """``REDIRECTS`` of the site's Sphinx extension (old -> new pages), read with
    :mod:`ast`; ``None`` when the file or the table is not there."""
    if not extension.is_file():
        return None
    for node in ast.parse(extension.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "REDIRECTS" for t in node.targets
        ):
            return {old: tuple(new) for old, new in ast.literal_eval(node.value).items()}
    return None


# --------------------------------------------------------------------------
# A small DOM from html.parser
# --------------------------------------------------------------------------


class Node:
    __slots__ = ("tag", "attrs", "children", "parent")

    def __init__(self, tag: str, attrs: dict, parent: Node | None):
        self.tag, self.attrs, self.children, self.parent = tag, attrs, [], parent

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def iter(self, tag: str | None = None):
        """All element descendants (depth first), optionally only one tag."""
        for child in self.children:
            if isinstance(child, Node):
                if tag is None or child.tag == tag:
                    yield child
                yield from child.iter(tag)

    def text(self, skip=lambda node: False) -> str:
        parts = []
        for child in self.children:
            if isinstance(child, str):
                parts.append(child)
            elif not skip(child):
                parts.append(child.text(skip))
        return "".join(parts)


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v or "") for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, {k: (v or "") for k, v in attrs}, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:  # unmatched end tags are ignored
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


class Page:
    def __init__(self, site: Path, path: Path):
        self.site, self.path = site, path
        self.rel = path.relative_to(site).as_posix()
        self.raw = path.read_text(encoding="utf-8")
        builder = TreeBuilder()
        builder.feed(self.raw)
        builder.close()
        self.root = builder.root
        self.ids = {n.attrs["id"] for n in self.root.iter() if "id" in n.attrs}

    def main(self) -> Node:
        """The page's content (``<article>`` in the pydata theme), else the whole page."""
        return next(self.root.iter("article"), None) or self.root

    def resolve(self, url: str) -> tuple[Path | None, str]:
        """Local file and fragment a relative URL points to; ``None`` for external URLs."""
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or url.startswith("//"):
            return None, ""
        if not parts.path:  # "#anchor": this page
            return self.path, parts.fragment
        target = (self.path.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        return target, parts.fragment


def is_external(url: str) -> bool:
    parts = urlsplit(url)
    return bool(parts.scheme in ("http", "https") or parts.netloc or url.startswith("//"))


def skip_non_prose(node: Node) -> bool:
    return node.tag in NON_PROSE_TAGS or bool(node.classes & NON_PROSE_CLASSES)


# --------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------


class Checker:
    def __init__(
        self,
        site: Path,
        gallery_dir: Path,
        tests_dir: Path,
        package_dir: Path,
        extension: Path = ROOT / "docs" / "_ext" / "convs2s_site.py",
    ):
        self.site, self.gallery_dir, self.tests_dir = site, gallery_dir, tests_dir
        self.package_dir, self.extension = package_dir, extension
        self.failures: list[str] = []
        self.notes: list[str] = []
        self._pages: dict[Path, Page] = {}

    def fail(self, where: str, message: str) -> None:
        self.failures.append(f"{where}: {message}")

    def page(self, path: Path) -> Page:
        path = path.resolve()
        if path not in self._pages:
            self._pages[path] = Page(self.site, path)
        return self._pages[path]

    def all_pages(self) -> list[Page]:
        skip = {"search.html", "genindex.html", "py-modindex.html"}
        return [
            self.page(p)
            for p in sorted(self.site.rglob("*.html"))
            if p.name not in skip and "_static" not in p.parts and "_sources" not in p.parts
        ]

    # -- gallery -----------------------------------------------------------

    def redirect_target(self, page: Page) -> str | None:
        """The URL a stub's ``<meta http-equiv="refresh">`` sends to; ``None`` for a page
        that is not a redirect stub."""
        for meta in page.root.iter("meta"):
            if meta.attrs.get("http-equiv", "").lower() == "refresh":
                m = REFRESH_URL.match(meta.attrs.get("content", ""))
                return m.group(1) if m else ""
        return None

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
            main = page.main()
            source = script.read_text(encoding="utf-8")
            draws = re.search(r"\bplt\.|matplotlib", source) is not None
            own = [
                img
                for img in main.iter("img")
                if f"sphx_glr_{script.stem}_" in img.attrs.get("src", "")
                and "_thumb" not in img.attrs.get("src", "")
            ]
            if draws and not own:
                self.fail(
                    where,
                    f"{script.name} draws with matplotlib but the page shows none of "
                    f"its figures (no <img> of sphx_glr_{script.stem}_NNN.png)",
                )
            for ext in (".ipynb", ".py"):
                links = [
                    a.attrs["href"]
                    for a in page.root.iter("a")
                    if a.attrs.get("href", "").split("#")[0].endswith(ext)
                    and not is_external(a.attrs["href"])
                ]
                if not links:
                    self.fail(where, f"no download link to the {ext} file")
                for href in links:
                    target, _ = page.resolve(href)
                    if target is None or not target.is_file():
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
            url = self.redirect_target(page)
            if url is None:
                self.fail(
                    page.rel,
                    "a gallery page without a script in the gallery and not a redirect "
                    "stub (a stale page of an older build?)",
                )
                continue
            target, _ = page.resolve(url) if url else (None, "")
            if target is None or not target.is_file():
                self.fail(page.rel, f"redirect stub points to a missing page: {url!r}")
                continue
            if target.resolve() not in pages:
                self.fail(page.rel, f"redirect stub points to {url!r}, not to a gallery page")
            canonical = [
                link.attrs.get("href", "")
                for link in page.root.iter("link")
                if link.attrs.get("rel", "") == "canonical"
            ]
            if not canonical:
                self.fail(page.rel, 'redirect stub without <link rel="canonical">')
            for href in canonical:
                same = (
                    href.endswith("/" + target.relative_to(self.site).as_posix())
                    if is_external(href)
                    else page.resolve(href)[0] == target
                )
                if not same:
                    self.fail(page.rel, f"canonical link {href!r} is not {url!r}")
            links = [a.attrs["href"] for a in page.root.iter("a") if a.attrs.get("href")]
            if not any(page.resolve(href)[0] == target for href in links):
                self.fail(page.rel, f"redirect stub has no visible link to {url!r}")
            stubs[html.relative_to(gallery).with_suffix("").as_posix()] = target.resolve()
        table = redirect_table(self.extension)
        if table is None:
            self.notes.append(f"redirect table: not checked ({self.extension} has none)")
        else:
            for old, new in table.items():
                want = (gallery / f"{new[0]}.html").resolve()
                if old not in stubs:
                    self.fail(f"auto_examples/{old}.html", f"no redirect stub (to {new[0]})")
                elif stubs[old] != want:
                    self.fail(f"auto_examples/{old}.html", f"redirects elsewhere than {new[0]}")
        return len(stubs)

    # -- images and links on every page -------------------------------------

    def check_images_and_links(self, pages: list[Page]) -> None:
        n_img = n_links = n_anchors = 0
        for page in pages:
            for img in page.root.iter("img"):
                src = img.attrs.get("src", "")
                n_img += 1
                if not src:
                    self.fail(page.rel, "<img> without src")
                    continue
                if is_external(src):
                    self.fail(page.rel, f"<img> loads from another host: {src}")
                    continue
                if src.startswith("data:"):
                    continue
                target, _ = page.resolve(src)
                if target is None or not target.is_file():
                    self.fail(page.rel, f"<img> points to a missing file: {src}")
            for a in page.root.iter("a"):
                href = a.attrs.get("href", "")
                if not href or href.startswith(("mailto:", "javascript:", "data:")):
                    continue
                if is_external(href):
                    continue
                target, fragment = page.resolve(href)
                n_links += 1
                if target is None or not target.exists():
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
        self.notes.append(
            f"images: {n_img} checked; relative links: {n_links} checked, "
            f"{n_anchors} of them to an anchor"
        )

    # -- math, MathJax and CDNs ----------------------------------------------

    def check_math(self, pages: list[Page]) -> None:
        n_math = 0
        mathjax = self.site / "_static" / "mathjax" / "tex-chtml.js"
        if not mathjax.is_file():
            self.fail("_static/mathjax", "the offline MathJax (tex-chtml.js) was not copied")
        for page in pages:
            for tag, attr in (("script", "src"), ("link", "href"), ("iframe", "src")):
                for node in page.root.iter(tag):
                    url = node.attrs.get(attr, "")
                    if url and is_external(url):
                        if tag == "link" and node.attrs.get("rel", "") not in (
                            "stylesheet",
                            "preload",
                            "modulepreload",
                            "prefetch",
                            "icon",
                        ):
                            continue  # <link rel="canonical"> etc. load nothing
                        self.fail(page.rel, f"<{tag}> loads from another host: {url}")
            for m in re.finditer(
                r"https?://[^\s\"'<>]*(?:cdn|jsdelivr|unpkg)[^\s\"'<>]*", page.raw, flags=re.I
            ):
                self.fail(page.rel, f"CDN URL in the page: {m.group(0)}")
            containers = [
                n for n in page.root.iter() if "math" in n.classes and n.tag in ("span", "div")
            ]
            n_math += len(containers)
            for node in containers:
                body = node.text().strip()
                inline = body.startswith("\\(") and body.endswith("\\)")
                display = body.startswith("\\[") and body.endswith("\\]")
                if not (inline or display):
                    self.fail(
                        page.rel, f"math container without \\( \\) or \\[ \\]: {body[:60]!r}"
                    )
            if containers:
                srcs = [s.attrs.get("src", "") for s in page.root.iter("script")]
                local = [
                    s for s in srcs if s.split("?")[0].endswith("_static/mathjax/tex-chtml.js")
                ]
                if not local:
                    self.fail(
                        page.rel, "page has math but does not load _static/mathjax/tex-chtml.js"
                    )
                for src in local:
                    target, _ = page.resolve(src)
                    if target is None or not target.is_file():
                        self.fail(page.rel, f"MathJax script points to a missing file: {src}")
            prose = page.main().text(skip_non_prose)
            for pattern, what in (
                (LATEX_COMMAND, "unrendered LaTeX"),
                (LEFTOVER_MARKUP, "unrendered reST markup"),
            ):
                for m in pattern.finditer(prose):
                    context = prose[max(0, m.start() - 40) : m.end() + 40].replace("\n", " ")
                    self.fail(page.rel, f"{what} {m.group(0)!r} in the text: ...{context}...")
        self.notes.append(f"math: {n_math} containers checked")

    # -- paper map --------------------------------------------------------------

    def check_paper_map(self) -> None:
        path = self.site / "paper_map.html"
        if not path.is_file():
            self.fail("paper_map.html", "missing")
            return
        page = self.page(path)
        tables = [t for t in page.root.iter("table") if "paper-map" in t.classes]
        if not tables:
            self.fail(page.rel, "no table with class 'paper-map'")
            return
        n_rows = 0
        for table in tables:
            for row in (r for body in table.iter("tbody") for r in body.iter("tr")):
                n_rows += 1
                cells = list(c for c in row.children if isinstance(c, Node) and c.tag == "td")
                label = " ".join(cells[0].text().split()) if cells else "?"
                where = f"{page.rel} row {label!r}"
                if len(cells) < 5:
                    self.fail(where, f"{len(cells)} cells, expected 5")
                    continue
                if not any("math" in n.classes for n in cells[1].iter()):
                    self.fail(where, "the equation cell holds no rendered math")
                api_links = [
                    a for a in cells[2].iter("a") if "api/generated/" in a.attrs.get("href", "")
                ]
                if not api_links:
                    self.fail(where, "the 'computed by' cell links to no API page")
                shown = cells[4]
                if not list(shown.iter("a")) and "none yet" not in shown.text():
                    self.fail(where, "the 'shown in' cell has no link (write 'none yet' if none)")
                for a in row.iter("a"):
                    href = a.attrs.get("href", "")
                    if not href or is_external(href):
                        continue
                    target, fragment = page.resolve(href)
                    if target is None or not target.is_file():
                        self.fail(where, f"link to a missing page: {href}")
                    elif fragment and fragment not in self.page(target).ids:
                        self.fail(where, f"link to a missing anchor: {href}")
                if "none yet" not in cells[3].text() and not TEST_CITATION.search(cells[3].text()):
                    self.fail(where, "the 'checked by' cell cites no tests/test_x.py::test_name")
        if n_rows == 0:
            self.fail(page.rel, "the paper map tables have no rows")
        self.notes.append(f"paper map: {n_rows} rows")
        self.check_test_citations(
            [page] + [self.page(p) for p in [self.site / "departures.html"] if p.is_file()]
        )

    def check_test_citations(self, pages: list[Page]) -> None:
        if not self.tests_dir.is_dir():
            self.notes.append(f"test citations: not checked ({self.tests_dir} not found)")
            return
        sources: dict[str, str] = {
            p.name: p.read_text(encoding="utf-8") for p in self.tests_dir.glob("test_*.py")
        }
        every_test = set(re.findall(r"^\s*def (test_\w+)\(", "\n".join(sources.values()), re.M))
        n = 0
        for page in pages:
            text = page.main().text()
            for file, name in TEST_CITATION.findall(text):
                n += 1
                if file not in sources:
                    self.fail(
                        page.rel, f"cites tests/{file}::{name}, but tests/{file} does not exist"
                    )
                elif not re.search(rf"^\s*def {name}\(", sources[file], re.M):
                    self.fail(page.rel, f"cites tests/{file}::{name}, which is not defined there")
            bare = {
                m
                for code in page.main().iter("code")
                for m in re.findall(r"^(test_\w+)$", code.text().strip())
            }
            for name in sorted(bare):
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

        def all_of(path: Path) -> list[str]:
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
                ):
                    return list(ast.literal_eval(node.value))
            return []

        package = self.package_dir.name
        root = set(all_of(init))
        names = {f"{package}.{name}": {f"{package}.{name}"} for name in root}
        for path in sorted(self.package_dir.rglob("*.py")):
            if path.name.startswith("_"):  # __init__ re-exports; _checks etc. are private
                continue
            parts = [package, *path.relative_to(self.package_dir).with_suffix("").parts]
            for name in all_of(path):
                in_module = ".".join([*parts, name])
                if name in root:
                    names[f"{package}.{name}"].add(in_module)
                    continue
                short = parts
                for i in range(len(parts) - 1, 1, -1):  # subpackages, from the module up
                    sub_init = self.package_dir.joinpath(*parts[1:i], "__init__.py")
                    if sub_init.is_file() and name in all_of(sub_init):
                        short = parts[:i]
                    else:
                        break
                names[".".join([*short, name])] = {".".join([*short, name])}
        return names

    def check_api(self) -> None:
        api_dir = self.site / "api" / "generated"
        pages = sorted(api_dir.glob("*.html"))
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
            for full, accepted in sorted(public.items()):
                if not accepted & have:
                    self.fail(
                        "api.rst",
                        f"public object {full} has no API page "
                        f"(add it to an autosummary in docs/api.rst)",
                    )
            self.notes.append(f"API coverage: {len(public)} public objects")
        with_examples = [
            p for p in pages if "sphx-glr-thumbnails" in p.read_text(encoding="utf-8")
        ]
        if not with_examples:
            self.fail("api/generated", "no API page shows an 'Examples using' mini-gallery")
        self.notes.append(f"API: {len(pages)} pages, {len(with_examples)} with mini-galleries")

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
        if not quick and has:
            self.fail(
                "index.html",
                "quick-mode banner on a full build (CONVS2S_EDU_QUICK unset): "
                "is this a stale quick build?",
            )
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
            self.fail(
                "try.html",
                f"{manifest.relative_to(self.site)} is missing: run "
                "tools/export_onnx.py before sphinx-build",
            )
            return
        data = json.loads(manifest.read_text(encoding="utf-8"))
        needed = ["try.js", "try.css", f"ort/{data['runtime']['script']}"]
        needed += ["ort/ort-wasm-simd-threaded.wasm", "ort/ort-wasm-simd-threaded.mjs"]
        needed += [f for m in data["models"].values() for f in m["files"].values()]
        for rel in needed:
            if not (folder / rel).is_file() or (folder / rel).stat().st_size == 0:
                self.fail("try.html", f"_static/try/{rel} is missing or empty")
        self.notes.append(f"try page: {len(needed)} files, {len(data['models'])} models")

    def run(self) -> int:
        pages = self.all_pages()
        if not pages:
            self.fail(str(self.site), "no HTML pages")
        else:
            self.check_gallery()
            self.check_images_and_links(pages)
            self.check_math(pages)
            self.check_paper_map()
            self.check_api()
            self.check_quick_banner()
            self.check_try_page()
        for note in self.notes:
            print(f"  {note}")
        self.failures = list(dict.fromkeys(self.failures))  # once each, in order
        if self.failures:
            print(
                f"\ncheck_site: {len(self.failures)} failure(s) in {self.site}:", file=sys.stderr
            )
            for f in self.failures:
                print(f"  - {f}", file=sys.stderr)
            return 1
        print(f"check_site: OK ({len(pages)} pages in {self.site})")
        return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, help="the built site, e.g. docs/_build/html")
    parser.add_argument(
        "--gallery-dir",
        type=Path,
        default=ROOT / "gallery",
        help="the gallery scripts (default: %(default)s)",
    )
    parser.add_argument(
        "--tests-dir",
        type=Path,
        default=ROOT / "tests",
        help="the tests the paper map cites (default: %(default)s)",
    )
    parser.add_argument(
        "--package-dir",
        type=Path,
        default=ROOT / "convs2s_edu",
        help="the package whose __all__ names need API pages (default: %(default)s)",
    )
    parser.add_argument(
        "--site-extension",
        type=Path,
        default=ROOT / "docs" / "_ext" / "convs2s_site.py",
        help="the Sphinx extension whose REDIRECTS table lists the old addresses "
        "(default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if not (args.html_dir / "index.html").is_file():
        print(
            f"check_site: {args.html_dir} holds no index.html; build the site first "
            f"(tox -e docs-quick, or tox -e docs)",
            file=sys.stderr,
        )
        return 2
    return Checker(
        args.html_dir.resolve(),
        args.gallery_dir.resolve(),
        args.tests_dir.resolve(),
        args.package_dir.resolve(),
        args.site_extension.resolve(),
    ).run()


if __name__ == "__main__":
    sys.exit(main())
