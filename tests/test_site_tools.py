"""The site's notebook and landing-page helpers (docs/_ext/convs2s_site.py, issue 11).

They turn the Sphinx markup that sphinx-gallery leaves in a notebook's markdown
into plain markdown, put the set-up header in front of every notebook, and word
the training times on the pages. The module is read from the source tree (it is
part of the site, not of the package) and needs no Sphinx for these functions.
"""

import json
from pathlib import Path

import pytest
from _files import ROOT, load_module


@pytest.fixture(scope="module")
def site():
    return load_module("docs/_ext/convs2s_site.py", "convs2s_site_under_test")


BASE = "https://example.org/convs2s"
INVENTORY = {
    "convs2s_edu.exact_match": (
        "api/generated/convs2s_edu.exact_match.html#convs2s_edu.exact_match"
    ),
    "convs2s_edu.ConvBlock": "api/generated/convs2s_edu.ConvBlock.html#convs2s_edu.ConvBlock",
}


@pytest.mark.parametrize(
    "text, expected",
    [
        (":func:`~convs2s_edu.exact_match` scores it", "`exact_match` scores it"),
        (":class:`convs2s_edu.ConvBlock`", "`convs2s_edu.ConvBlock`"),
        (":term:`exact match` of it", "exact match of it"),
        (":term:`the scores <token accuracy>`", "the scores"),
        (":meth:`~convs2s_edu.ConvDecoder.step`", "`step`"),
        (":func:`the metric <convs2s_edu.exact_match>`", "`the metric`"),
        (
            "the `decoding page <sphx_glr_auto_examples_plot_15_decoding.py>` shows",
            "the [decoding page](plot_15_decoding.ipynb) shows",
        ),
        # a page of a subfolder: its notebook lies in that folder of the zip
        (
            "`speed <sphx_glr_auto_examples_speed_plot_01_training_speed.py>`",
            "[speed](speed/plot_01_training_speed.ipynb)",
        ),
        ("see :doc:`paper_map`", "see the paper map"),
        ("see `the gallery <gallery>` first", "see the gallery first"),
        (
            "plain text with $\\sqrt{0.5}$ and ``code``",
            "plain text with $\\sqrt{0.5}$ and ``code``",
        ),
    ],
)
def test_markdown_without_a_site_address(site, text, expected):
    assert site.convert_markdown(text, None, INVENTORY) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            ":func:`~convs2s_edu.exact_match`",
            f"[`exact_match`]({BASE}/{INVENTORY['convs2s_edu.exact_match']})",
        ),
        # a short name resolves against the package
        (":class:`ConvBlock`", f"[`ConvBlock`]({BASE}/{INVENTORY['convs2s_edu.ConvBlock']})"),
        # an object the inventory does not know stays code, never a broken link
        (":func:`~convs2s_edu.nowhere`", "`nowhere`"),
        (
            "`decoding <sphx_glr_auto_examples_plot_15_decoding.py>`",
            f"[decoding]({BASE}/auto_examples/plot_15_decoding.html)",
        ),
        (
            "`the bench <sphx_glr_auto_examples_speed_plot_04_bench.py>`",
            f"[the bench]({BASE}/auto_examples/speed/plot_04_bench.html)",
        ),
        (":doc:`departures`", f"[departures from the paper]({BASE}/departures.html)"),
    ],
)
def test_markdown_with_a_site_address(site, text, expected):
    assert site.convert_markdown(text, BASE + "/", INVENTORY) == expected


@pytest.mark.parametrize(
    "here, expected",
    [
        ("", "[a](plot_15_decoding.ipynb) [b](speed/plot_04_bench.ipynb)"),
        ("speed", "[a](../plot_15_decoding.ipynb) [b](plot_04_bench.ipynb)"),
        ("appendix", "[a](../plot_15_decoding.ipynb) [b](../speed/plot_04_bench.ipynb)"),
    ],
)
def test_links_between_notebooks_follow_their_folders(site, here, expected):
    text = (
        "`a <sphx_glr_auto_examples_plot_15_decoding.py>` "
        "`b <sphx_glr_auto_examples_speed_plot_04_bench.py>`"
    )
    assert site.convert_markdown(text, None, {}, here) == expected


def test_solution_markup_becomes_a_plain_line(site):
    text = (
        "**1. A question?**\n\n.. raw:: html\n\n"
        '   <details class="solution"><summary>Solution</summary>\n\n'
        "The answer is 3.\n"
    )
    out = site.convert_markdown(text, None, {})
    assert (
        out == "**1. A question?**\n\n**Solution** (predict first, then read on):\n\n"
        "The answer is 3.\n"
    )
    closing = ".. raw:: html\n\n   </details>\n\n**2. Next.**\n"
    assert site.convert_markdown(closing, None, {}) == "**2. Next.**\n"


def _notebook():
    return {
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": "QUICK = True"},
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": "Use :func:`~convs2s_edu.exact_match`.",
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_notebook_gets_one_header_and_plain_markdown_even_when_processed_twice(site):
    nb = _notebook()
    facts = {
        "plot_01_x": {
            "stem": "plot_01_x",
            "title": "X",
            "teaches": "x",
            "seconds": 2.0,
            "site_models": False,
            "own_training": False,
            "own_cached": False,
        }
    }
    assert site.process_notebook(nb, "plot_01_x", None, {}, facts, None) is True
    once = json.dumps(nb)
    assert site.process_notebook(nb, "plot_01_x", None, {}, facts, None) is False
    assert json.dumps(nb) == once
    assert [c["cell_type"] for c in nb["cells"]] == ["markdown", "code", "markdown"]
    assert nb["cells"][0]["source"].startswith("**Before you run this notebook.**")
    assert "Running it took 2.0 s" in nb["cells"][0]["source"]
    assert nb["cells"][2]["source"] == "Use `exact_match`."


@pytest.mark.parametrize(
    "seconds, expected",
    [
        (3.24, "3.2 s"),
        (9.96, "10 s"),
        (42.4, "42 s"),
        (59.6, "1 min 00 s"),
        (125, "2 min 05 s"),
        (3600, "60 min 00 s"),
    ],
)
def test_durations(site, seconds, expected):
    assert site._duration(seconds) == expected


def test_training_sentence_scales_the_quick_time_to_the_full_mode(site):
    from convs2s_edu import TrainConfig

    full = TrainConfig()
    head = {"mode": "quick", "n_train": 2_000, "epochs": 5}
    ratio = (full.n_train * full.epochs) / (2_000 * 5)
    training = {"head": head, "seconds": 120.0, "ratio": ratio, "full": full}
    page = {"seconds": 4.0, "site_models": True, "own_training": False, "own_cached": False}
    text = site.training_sentence(page, training)
    assert "trained on 2,000 examples for 5 epochs" in text
    assert "about 2 min 00 s of training on the machine that built this site with one " in text
    assert "(quick mode; the epochs times the seconds per epoch timed on the speed" in text
    # by hand: 120 s x (10,000 x 30) / (2,000 x 5) = 120 s x 30 = 3600 s
    assert f"does {ratio:.1f} times as much work" in text and ratio == 30
    assert "about 60 min 00 s on the same machine" in text
    assert "Running it took 4.0 s with the models already cached" in text
    # a page that trains nothing of the site's says nothing about it
    plain = site.training_sentence(
        {"seconds": 1.0, "site_models": False, "own_training": False, "own_cached": False},
        training,
    )
    assert plain == "Running it took 1.0 s when this site was built."
    # a page that loads runs of its own which the build trained first (page 12, the beam
    # experiment) says so, and that its time was with them cached
    own = site.training_sentence(
        {"seconds": 2.0, "site_models": False, "own_training": False, "own_cached": True},
        training,
    )
    assert "trains small models of its own once and caches them" in own
    assert "every time it runs" not in own
    assert own.endswith(
        "Running it took 2.0 s with the models already cached when this site was built."
    )


def _generated(tmp_path, speed: bool = True):
    head = {
        "mode": "full",
        "n_train": 10_000,
        "epochs": 30,
        "n_test": 1000,
        "recipes": {
            r: {
                m: {
                    "exact_match": 0.9,
                    "token_accuracy": 0.99,
                    "steps": 2370,
                    "epochs": e,
                    "n_train": n,
                    "fresh_data": r == "fast",
                    "n_parameters": 1000,
                    "device": "cpu",
                }
                for m in ("convs2s", "gru")
            }
            for r, e, n in (("original", 30, 10_000), ("fast", 8, 12_800))
        },
    }
    (tmp_path / "headline.json").write_text(json.dumps(head))
    level = {"step": 500, "examples": 64_000, "seconds": {"1 thread": 80.0, "2 threads": 60.0}}
    conv = [
        {
            "model": m,
            "steps": 800,
            "timed_on": ["1 thread", "2 threads"],
            "levels": {"0.5": level, "0.9": level, "0.95": None if m == "gru" else level},
        }
        for m in ("convs2s", "gru")
    ]
    per_epoch = {
        "convs2s": {"1 thread": 10.0, "2 threads": 7.0},
        "gru": {"1 thread": 5.0, "2 threads": 4.0},
    }
    if speed:
        (tmp_path / "speed.json").write_text(
            json.dumps(
                {
                    "ok": True,
                    "text": "verdict text.",
                    "cpu": "Test CPU",
                    "recipes": {
                        r: {"sec_per_epoch": per_epoch, "convergence": conv}
                        for r in ("original", "fast")
                    },
                }
            )
        )


def test_training_cost_comes_from_the_interleaved_seconds_never_the_runs_clocks(
    site, tmp_path, monkeypatch
):
    monkeypatch.setattr(site, "GENERATED", tmp_path)
    _generated(tmp_path)
    t = site.training_summary()
    assert t["seconds"] == pytest.approx(10.0 * 30 + 5.0 * 30)  # epochs x s/epoch, 1 thread
    lines = "\n".join(site.headline_table(t["head"], t["speed"]))
    assert "seconds per epoch (1 thread, 2 threads)" in lines
    assert "10.0 / 7.0" in lines and "5.0 / 4.0" in lines
    assert "500 / 500" in lines and "500 / not reached" in lines
    assert "80 / 60" in lines and "not reached in 800 steps" in lines
    assert "fast (fresh, 2,370 steps)" in lines and "original (10,000 x 30 epochs)" in lines
    _generated(tmp_path, speed=False)
    (tmp_path / "speed.json").unlink()
    t = site.training_summary()
    assert t["seconds"] is None and "not measured" in "\n".join(
        site.headline_table(t["head"], None)
    )


def test_test_pages_list_every_module_level_test_and_nothing_else(site, tmp_path):
    source = tmp_path / "test_demo.py"
    source.write_text(
        "def test_a():\n    pass\n\n\ndef helper():\n    pass\n\n\n"
        "class TestGroup:\n    def test_inside(self):\n        pass\n\n\n"
        "def test_b():\n    def test_nested():\n        pass\n"
    )
    assert site._test_functions(source) == ["test_a", "test_b"]
    assert site.test_label("test_demo.py", "test_a") == "test-demo-test-a"
    assert site.test_label("test_demo.py", "test_a") != site.test_label("test_demo.py", "test_b")


@pytest.mark.parametrize(
    "source, trains",
    [
        ("results = train(cfg, progress=False)", True),
        ("optimizer = torch.optim.Adam(model.parameters())", True),
        ("loss.backward()  # gradients for a receptive field", False),
        ("results = train_or_load(site_config(name))", False),  # the site's cached models
        ("model.train()", False),
    ],
)
def test_what_counts_as_a_page_training_its_own_models(site, source, trains):
    assert (site.OWN_TRAINING.search(source) is not None) is trains


def test_a_page_that_loads_its_own_variant_of_a_site_config_does_not_load_the_two_models(site):
    assert site.OWN_VARIANT.search('train_or_load(site_config("gru", "fast", task="reverse"))')
    assert site.OWN_VARIANT.search("train_or_load(site_config(m, model_options=o))")
    assert not site.OWN_VARIANT.search("train_or_load(site_config(name))")
    assert not site.OWN_VARIANT.search('build_model(site_config(n, model_options={"a": 1}))')


# ---- the reading path and the old addresses (issue 17) ------------------------------


def test_reading_path_covers_every_page_in_reading_order(site):
    facts = site.page_facts()
    paths = [page["path"] for page in facts]
    gallery = site.GALLERY
    expected = [
        f"{folder}/{p.stem}" if folder else p.stem
        for folder, _ in site.CHAPTERS
        for p in sorted((gallery / folder).glob("plot_*.py"))
    ]
    assert paths == expected
    folders = [folder for folder, _ in site.CHAPTERS]
    assert folders == ["", "normalisation", "speed", "experiments", "appendix"]
    assert {p.parent.name for p in gallery.rglob("plot_*.py")} == {
        "gallery",
        "normalisation",
        "speed",
        "experiments",
        "appendix",
    }
    # one line per page, and no line for a page that is gone
    assert set(site.TEACHES) == set(paths)
    # the notebooks are matched to their page by file name
    assert len({page["stem"] for page in facts}) == len(facts)
    assert facts[0]["stem"] == "plot_00_sorting_task"
    # the story: the recurrent model and attention before ConvS2S (issue 38)
    assert paths[1:3] == ["plot_01_fixed_size_bottleneck", "plot_02_bahdanau_attention"]
    assert site.gallery_label("speed/plot_01_training_speed") == (
        "sphx_glr_auto_examples_speed_plot_01_training_speed.py"
    )


def test_every_old_address_sends_to_pages_that_exist_and_is_no_page_itself(site):
    pages = {
        p.relative_to(site.GALLERY).with_suffix("").as_posix()
        for p in site.GALLERY.rglob("plot_*.py")
    }
    for old, new in site.REDIRECTS.items():
        assert old not in pages, old
        assert new and set(new) <= pages, (old, new)


def test_redirect_stub_refreshes_links_and_names_the_canonical_page(site):
    titles = {"speed/plot_04_bench": "Speed & the bench", "plot_10_training": "Training"}
    stub = site.redirect_stub("plot_12_speed", ("speed/plot_04_bench",), titles)
    assert '<meta http-equiv="refresh" content="0; url=speed/plot_04_bench.html">' in stub
    assert '<link rel="canonical" href="speed/plot_04_bench.html">' in stub
    assert '<a href="speed/plot_04_bench.html">Speed &amp; the bench</a>' in stub
    assert "<script" not in stub  # works without scripts, offline
    # with the site's public address, the canonical link is absolute
    stub = site.redirect_stub("plot_12_speed", ("speed/plot_04_bench",), titles, BASE + "/")
    assert f'<link rel="canonical" href="{BASE}/auto_examples/speed/plot_04_bench.html">' in stub
    # a page that was split lists where its other parts went
    stub = site.redirect_stub(
        "plot_05_training", ("plot_10_training", "speed/plot_04_bench"), titles
    )
    assert "url=plot_10_training.html" in stub
    assert '<li><a href="speed/plot_04_bench.html">Speed &amp; the bench</a></li>' in stub
    # from an old address in a subfolder, every link climbs out of it first
    stub = site.redirect_stub(
        "speed/plot_09_old", ("plot_10_training", "speed/plot_04_bench"), titles
    )
    assert 'url=../plot_10_training.html"' in stub and 'href="../plot_10_training.html"' in stub
    assert '<li><a href="../speed/plot_04_bench.html">' in stub


def _gallery_page(stem: str) -> str:
    return (
        f'<html><body><article><a href="{stem}.ipynb">nb</a> <a href="{stem}.py">py</a>'
        "</article></body></html>"
    )


def test_check_site_accepts_redirect_stubs_and_finds_the_broken_ones(site, tmp_path):
    check = load_module("tools/check_site.py", "check_site_under_test")
    gallery, html = tmp_path / "gallery", tmp_path / "html" / "auto_examples"
    for rel in ("plot_01_a", "speed/plot_01_b"):
        (gallery / rel).parent.mkdir(parents=True, exist_ok=True)
        (gallery / f"{rel}.py").write_text('"""A page."""\n')
        (html / rel).parent.mkdir(parents=True, exist_ok=True)
        (html / f"{rel}.html").write_text(_gallery_page(Path(rel).name))
        for ext in (".ipynb", ".py"):
            (html / f"{rel}{ext}").write_text("")
    titles = {"speed/plot_01_b": "B"}
    (html / "plot_00_old.html").write_text(
        site.redirect_stub("plot_00_old", ("speed/plot_01_b",), titles)
    )
    (html / "plot_02_to_nowhere.html").write_text(
        site.redirect_stub("plot_02_to_nowhere", ("plot_09_missing",), titles)
    )
    (html / "plot_03_stale.html").write_text(_gallery_page("plot_03_stale"))
    extension = tmp_path / "ext.py"
    extension.write_text(
        'REDIRECTS = {"plot_00_old": ("speed/plot_01_b",), "plot_04_gone": ("plot_01_a",)}\n'
    )
    checker = check.Checker(tmp_path / "html", gallery, tmp_path, tmp_path, extension)
    checker.check_gallery()
    failures = "\n".join(checker.failures)
    assert "plot_00_old" not in failures  # a good stub: no notebook demanded from it
    assert "auto_examples/plot_02_to_nowhere.html: redirect stub points to a missing" in failures
    assert "auto_examples/plot_03_stale.html: a gallery page without a script" in failures
    assert "auto_examples/plot_04_gone.html: no redirect stub" in failures
    assert len(checker.failures) == 3, failures
    assert "gallery: 2 pages, 1 redirect stubs" in checker.notes


# ---- tools/check_site.py on a small site: every check passes, then fails on its defect ----

MATHJAX = '<script src="_static/mathjax/tex-chtml.js?v=1"></script>'
PAGES = {
    "index.html": f"<html><head>{MATHJAX}"
    '<link rel="canonical" href="https://example.org/index.html"></head><body>'
    "<p>Built in quick mode</p><article><h1 id='top'>Title</h1>"
    '<p>See <span class="math notranslate">\\(\\sqrt{d}\\)</span> and '
    '<a href="paper_map.html#row">the map</a>, <img src="_images/a.png" alt="a">.</p>'
    "<pre>x = r'\\sqrt'  # code may hold LaTeX</pre>"
    '<div class="math">\\[y = 1\\]</div></article></body></html>',
    "paper_map.html": f"<html><head>{MATHJAX}</head><body><article>"
    '<table class="paper-map"><tbody><tr id="row"><td>(1) GLU</td>'
    '<td><span class="math">\\(a \\otimes b\\)</span></td>'
    '<td><a href="api/generated/pkg.f.html#pkg.f">f</a></td>'
    "<td><code>tests/test_demo.py::test_a</code></td>\n"
    '<td><a href="index.html#top">the page</a></td></tr></tbody></table>'
    "<p>Also <code>test_b</code>.</p></article></body></html>",
    "api.html": "<html><body><article>API</article></body></html>",
    "api/generated/pkg.f.html": '<html><body><article id="pkg.f">f'
    '<div class="sphx-glr-thumbnails"></div></article></body></html>',
}


@pytest.fixture
def small_site(tmp_path, monkeypatch):
    """A site of four pages on which every check below passes, and the checker's module."""
    monkeypatch.setenv("CONVS2S_EDU_QUICK", "1")
    html = tmp_path / "html"
    for rel, text in {**PAGES, "_images/a.png": "png", "_static/mathjax/tex-chtml.js": ""}.items():
        (html / rel).parent.mkdir(parents=True, exist_ok=True)
        (html / rel).write_text(text, encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text('__all__ = ["f"]\n')
    (tmp_path / "tests").mkdir()
    tests = "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n"
    (tmp_path / "tests" / "test_demo.py").write_text(tests)
    check = load_module("tools/check_site.py", "check_site_small_under_test")
    return check, html


def _run_checks(check, html):
    root = html.parent
    checker = check.Checker(html, root, root / "tests", root / "pkg", root / "none.py")
    pages = checker.all_pages()
    checker.check_images_and_links(pages)
    checker.check_math(pages)
    checker.check_paper_map()
    checker.check_api()
    checker.check_quick_banner()
    return checker


def _edit(html, rel, old, new):
    text = (html / rel).read_text(encoding="utf-8")
    assert old in text, old
    (html / rel).write_text(text.replace(old, new), encoding="utf-8")


def test_check_site_passes_a_good_small_site(small_site):
    check, html = small_site
    checker = _run_checks(check, html)
    assert checker.failures == []
    assert "math: 3 containers checked" in checker.notes
    assert "paper map: 1 rows" in checker.notes
    assert "test citations: 2 checked against " + str(html.parent / "tests") in checker.notes


@pytest.mark.parametrize(
    "rel, old, new, failure",
    [
        # images and links
        (
            "index.html",
            "paper_map.html#row",
            "paper_map.html#gone",
            "index.html: link points to a missing anchor: paper_map.html#gone",
        ),
        (
            "index.html",
            "paper_map.html#row",
            "nowhere.html",
            "index.html: link points to a missing file: nowhere.html",
        ),
        (
            "index.html",
            "_images/a.png",
            "_images/b.png",
            "index.html: <img> points to a missing file: _images/b.png",
        ),
        (
            "index.html",
            "_images/a.png",
            "https://example.org/a.png",
            "index.html: <img> loads from another host: https://example.org/a.png",
        ),
        # no CDN, and MathJax from _static/mathjax
        (
            "index.html",
            "</head>",
            '<link rel="stylesheet" href="https://example.org/s.css"></head>',
            "index.html: <link> loads from another host: https://example.org/s.css",
        ),
        (
            "index.html",
            "</head>",
            '<script src="//example.org/x.js"></script></head>',
            "index.html: <script> loads from another host: //example.org/x.js",
        ),
        (  # the URL in two parts: the site shows this file, which must not hold one itself
            "index.html",
            "Title",
            "Title https:/" + "/cdn.example.org/lib.js",
            "index.html: CDN URL in the page: https:/" + "/cdn.example.org/lib.js",
        ),
        (
            "paper_map.html",
            MATHJAX,
            "",
            "paper_map.html: page has math but does not load _static/mathjax/tex-chtml.js",
        ),
        (
            "index.html",
            "\\[y = 1\\]",
            "y = 1",
            "index.html: math container without \\( \\) or \\[ \\]: 'y = 1'",
        ),
        # what did not render
        (
            "index.html",
            "Title",
            "Title \\alpha ",
            "index.html: unrendered LaTeX '\\\\alpha' in the text",
        ),
        (
            "index.html",
            "Title",
            "Title :math:`x` ",
            "index.html: unrendered reST markup ':math:`'",
        ),
        # the paper map
        (
            "paper_map.html",
            '<span class="math">\\(a \\otimes b\\)</span>',
            "a x b",
            "paper_map.html row '(1) GLU': the equation cell holds no rendered math",
        ),
        (
            "paper_map.html",
            "api/generated/pkg.f.html#pkg.f",
            "index.html",
            "paper_map.html row '(1) GLU': the 'computed by' cell links to no API page",
        ),
        (
            "paper_map.html",
            "api/generated/pkg.f.html#pkg.f",
            "api/generated/pkg.f.html#pkg.g",
            "paper_map.html row '(1) GLU': link to a missing anchor: "
            "api/generated/pkg.f.html#pkg.g",
        ),
        (
            "paper_map.html",
            "<code>tests/test_demo.py::test_a</code>",
            "a test",
            "paper_map.html "
            "row '(1) GLU': the 'checked by' cell cites no tests/test_x.py::test_name",
        ),
        (
            "paper_map.html",
            '<a href="index.html#top">the page</a>',
            "later",
            "paper_map.html row '(1) GLU': the 'shown in' cell has no link",
        ),
        ("paper_map.html", "<td>(1) GLU</td>", "", "4 cells, expected 5"),
        (
            "paper_map.html",
            "test_demo.py::test_a",
            "test_demo.py::test_c",
            "paper_map.html: cites tests/test_demo.py::test_c, which is not defined there",
        ),
        (
            "paper_map.html",
            "test_demo.py::test_a",
            "test_gone.py::test_a",
            "paper_map.html: "
            "cites tests/test_gone.py::test_a, but tests/test_gone.py does not exist",
        ),
        (
            "paper_map.html",
            "<code>test_b</code>",
            "<code>test_z</code>",
            "paper_map.html: names test test_z, which no tests/test_*.py defines",
        ),
        # the API reference and the banner
        (
            "api/generated/pkg.f.html",
            "sphx-glr-thumbnails",
            "x",
            "api/generated: no API page shows an 'Examples using' mini-gallery",
        ),
        (
            "index.html",
            "Built in quick mode",
            "Built",
            "index.html: CONVS2S_EDU_QUICK=1 but the page has no quick-mode banner",
        ),
    ],
)
def test_check_site_names_each_defect(small_site, rel, old, new, failure):
    check, html = small_site
    _edit(html, rel, old, new)
    failures = "\n".join(_run_checks(check, html).failures)
    assert failure in failures, failures


def test_check_site_wants_an_api_page_for_every_public_name(small_site):
    check, html = small_site
    (html.parent / "pkg" / "__init__.py").write_text('__all__ = ["f", "g"]\n')
    (html.parent / "pkg" / "sub").mkdir()
    (html.parent / "pkg" / "sub" / "__init__.py").write_text('__all__ = ["h"]\n')
    (html.parent / "pkg" / "sub" / "mod.py").write_text('__all__ = ["h", "k"]\n')
    (html / "api/generated/pkg.sub.h.html").write_text("<html></html>")
    failures = _run_checks(check, html).failures
    assert failures == [
        "api.rst: public object pkg.g has no API page (add it to an autosummary in docs/api.rst)",
        "api.rst: public object pkg.sub.mod.k has no API page (add it to an autosummary in "
        "docs/api.rst)",
    ]


def test_check_site_refuses_the_banner_on_a_full_build_and_reads_only_prose(
    small_site, monkeypatch
):
    check, html = small_site
    monkeypatch.delenv("CONVS2S_EDU_QUICK")
    failures = _run_checks(check, html).failures
    assert failures == [
        "index.html: quick-mode banner on a full build (CONVS2S_EDU_QUICK unset): is this a "
        "stale quick build?"
    ]  # and the \sqrt of the <pre> and of the math containers is no failure


def test_check_site_skips_the_anchors_of_viewcode_pages(small_site):
    check, html = small_site
    (html / "_modules").mkdir()
    (html / "_modules" / "pkg.html").write_text('<a href="../index.html#nowhere">[docs]</a>')
    assert _run_checks(check, html).failures == []
    (html / "other.html").write_text('<a href="index.html#nowhere">x</a>')
    assert _run_checks(check, html).failures == [
        "other.html: link points to a missing anchor: index.html#nowhere"
    ]


def test_test_pages_give_every_test_its_anchor_and_code(site, tmp_path, monkeypatch):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_demo.py").write_text(
        '"""Demo tests.\n\nMore."""\n\n\ndef test_a():\n    pass\n\n\ndef test_b():\n    pass\n'
    )
    monkeypatch.setattr(site, "TESTS", tmp_path / "tests")
    monkeypatch.setattr(site, "TEST_PAGES", tmp_path / "pages")
    site.write_test_pages(None)
    index = (tmp_path / "pages" / "index.rst").read_text()
    assert index.startswith(":orphan:\n\nThe tests\n=========\n\n")
    assert index.endswith(".. toctree::\n   :maxdepth: 1\n\n   test_demo\n")
    page = (tmp_path / "pages" / "test_demo.rst").read_text()
    assert page.startswith("tests/test_demo.py\n==================\n\nDemo tests.\n\n")
    assert page.count(".. literalinclude:: ../../tests/test_demo.py") == 2
    assert ".. _test-demo-test-b:\n\n.. rubric:: ``test_b``\n\n" in page
    assert page.endswith("   :pyobject: test_b\n   :lineno-match:\n")


def test_downloaded_notebooks_and_their_zip_are_processed_once(site, tmp_path):
    import types
    import zipfile

    downloads = tmp_path / "_downloads" / "x"
    downloads.mkdir(parents=True)
    (downloads / "plot_01_x.ipynb").write_text(json.dumps(_notebook()))
    with zipfile.ZipFile(downloads / "all.zip", "w") as zf:
        zf.writestr("plot_01_x.ipynb", json.dumps(_notebook()))
        zf.writestr("README.txt", "not a notebook")
    objects = {"convs2s_edu.exact_match": types.SimpleNamespace(docname="api/em", node_id="em")}
    app = types.SimpleNamespace(
        outdir=str(tmp_path),
        builder=types.SimpleNamespace(format="html"),
        env=types.SimpleNamespace(domains={"py": types.SimpleNamespace(objects=objects)}),
    )
    site.fix_notebooks(app, None)
    nb = json.loads((downloads / "plot_01_x.ipynb").read_text())
    with zipfile.ZipFile(downloads / "all.zip") as zf:
        zipped = json.loads(zf.read("plot_01_x.ipynb"))
        assert zf.read("README.txt") == b"not a notebook"
    for notebook in (nb, zipped):
        assert notebook["cells"][0]["source"].startswith("**Before you run this notebook.**")
        assert notebook["cells"][2]["source"] == "Use `exact_match`."
    before = (downloads / "all.zip").read_bytes(), (downloads / "plot_01_x.ipynb").read_text()
    site.fix_notebooks(app, None)  # a second build-finished changes nothing
    assert (
        (downloads / "all.zip").read_bytes(),
        (downloads / "plot_01_x.ipynb").read_text(),
    ) == before


def test_reading_time_counts_the_prose_and_the_code_a_reader_sees(site):
    prose = " ".join(["word"] * 100)  # 100 words in the docstring, 300 in text cells
    page = (
        f'r"""\nTitle\n=====\n\n{prose}\n"""\n\n# %%\n# {prose}\n# {prose}\n# {prose}\n'
        + "x = 1  # a comment is code\n" * 45
        + "# sphinx_gallery_start_ignore\n"
        + "assert x\n" * 300  # hidden from the reader
        + "# sphinx_gallery_end_ignore\n"
    )
    # 402 words (the title's too) / 200 a minute + 45 lines / 30 a minute = 3.5 -> 4
    assert site.reading_minutes(page) == 4
    assert site.reading_minutes('"""One line."""\n') == 1  # never 0


def test_a_figures_smallest_text_is_measured_as_the_page_shows_it(site):
    """Issue 55: text at >= 9 px as rendered. A figure wider than the article is shown
    scaled down, its text with it; a narrow one at its pixel size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    narrow, ax = plt.subplots(figsize=(4, 3))
    ax.set_title("title", fontsize=12)
    ax.set_xlabel("small", fontsize=6)
    ax.text(0.5, 0.5, "   ", fontsize=2)  # blank: nothing to read
    # 6 pt at 150 dpi: 12.5 px, shown at full size (600 px < the article's width)
    px, text = site.smallest_text_px(narrow, dpi=150)
    assert text == "small" and px == pytest.approx(6 / 72 * 150)
    wide, ax = plt.subplots(figsize=(13, 3))
    ax.set_xlabel("small", fontsize=6)
    # 1950 px shown at the article's width: the 12.5 px become 5.9 px
    px, _ = site.smallest_text_px(wide, dpi=150)
    assert px == pytest.approx(6 / 72 * 150 * site.CONTENT_WIDTH_PX / 1950)
    assert px < site.MIN_TEXT_PX
    empty = plt.figure()
    assert site.smallest_text_px(empty, dpi=150) is None
    plt.close("all")


def test_a_phone_shows_figures_at_the_width_the_text_check_assumes(site):
    """Issue 55: on a phone a figure keeps its laptop width (where the build checks its
    text against MIN_TEXT_PX) and scrolls sideways in its box, instead of shrinking to a
    third of it."""
    import re

    css = (ROOT / "docs/_static/custom.css").read_text(encoding="utf-8")
    phone = css[css.index("@media (max-width: 600px)") :]
    phone = phone[: phone.index("\n}\n")]  # the block, up to its closing brace
    box = re.search(r"a\.zoom-link \{([^}]*)\}", phone)
    assert box and "overflow-x: auto" in box.group(1)
    figure = re.search(r"a\.zoom-link > img\.sphx-glr-single-img \{([^}]*)\}", phone)
    assert figure, "no phone rule for the gallery's figures"
    assert f"width: {site.CONTENT_WIDTH_PX}px;" in figure.group(1)
    assert "max-width: none" in figure.group(1)


def test_every_page_ends_with_the_next_page_of_the_reading_path(site):
    """Issue 54: every page says what the next page asks; the last one where to go."""
    facts = site.page_facts()
    footers = site.next_pages(facts)
    assert list(footers) == [page["path"] for page in facts]
    first, second = facts[0], facts[1]
    assert footers[first["path"]] == (
        f".. rubric:: Next\n\n:ref:`{second['title']} "
        f"<{site.gallery_label(second['path'])}>`: {second['teaches'].rstrip('.')}."
    )
    assert "the end of the reading path" in footers[facts[-1]["path"]]
