"""How ``tools/screenshot_site.py`` judges what the browser recorded (no browser needed), and
what it records in a real one (where Playwright and Chromium are installed).

``show_view`` only records a view (its requests and their answers, what the page showed
once it settled, the screenshot); ``judge_view`` turns that record into the problems that
fail the build. A clean record of a real page must pass, and each kind of fault a broken
site produces must be named.
"""

import pytest
from _files import load_module
from PIL import Image

BASE = "http://127.0.0.1:8000"


@pytest.fixture(scope="module")
def tool():
    return load_module("tools/screenshot_site.py", "screenshot_site_under_test")


def _png(path, width, height, colourful=True):
    """A PNG of ``width`` x ``height``: noise (a real page's pixels) or one grey."""
    raw = bytes(
        (x * 7 + y * 13) % 251 if colourful else 128
        for y in range(height)
        for x in range(width * 3)
    )
    Image.frombytes("RGB", (width, height), raw).save(path, format="PNG")


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    (root / "_images").mkdir(parents=True)
    (root / "page.html").write_text(
        '<html><body><article><img src="_images/fig.png" alt="f"></article></body></html>',
        encoding="utf-8",
    )
    return root


def _view(tmp_path, theme="light", width=40, phone=False, colourful=True):
    shot = tmp_path / f"shot-{theme}-{width}.png"
    _png(shot, width, 30, colourful)
    return {
        "page": "page.html",
        "url": "/page.html",
        "theme": theme,
        "width": width,
        "height": 30,
        "phone": phone,
        "base": BASE,
        "shot": str(shot),
    }


def _response(path, status):
    return {"url": f"{BASE}/{path}", "status": status, "bytes": 0}


def _record(**browser_changes):
    browser = {
        "images": [f"{BASE}/_images/fig.png"],
        "broken": [],
        "math": 2,
        "rendered": 2,
        "merror": 0,
        "mathjax": "typeset",
        "theme": "light",
        "overflow": [],
        "page_width": 40,
        "window_width": 40,
        "late": [],
    }
    browser.update(browser_changes)
    return {
        "requests": [f"{BASE}/page.html", f"{BASE}/_images/fig.png"],
        "responses": [_response("page.html", 200), _response("_images/fig.png", 200)],
        "failed": [],
        "browser": browser,
    }


def test_a_clean_view_passes(tool, site, tmp_path):
    report = tool.judge_view(_view(tmp_path), _record(), site)
    assert report["problems"] == []
    assert report["requests"] == 2


def test_each_fault_of_the_page_is_named(tool, site, tmp_path):
    view = _view(tmp_path, theme="dark")
    record = _record(
        theme="light",
        broken=[f"{BASE}/_images/fig.png"],
        mathjax="loaded",
        rendered=0,
        merror=1,
        overflow=[{"excess": 120, "line": "x = 1"}],
        late=["fonts", f"image {BASE}/_images/fig.png"],
    )
    problems = "\n".join(tool.judge_view(view, record, site)["problems"])
    for expected in (
        "theme 'light', not 'dark'",
        "image did not load",
        "MathJax is loaded",
        "rendered none",
        "1 formula error",
        "code cell 120 px wider",
        "fonts: not ready within --timeout",
    ):
        assert expected in problems
    # a late image is reported once, as not loaded, not also as late
    assert "image http" not in problems


def test_requests_elsewhere_failed_or_refused_are_named(tool, site, tmp_path):
    record = _record()
    record["requests"].append("https://elsewhere.example/x.js")
    record["responses"] = [_response("page.html", 200), _response("_images/fig.png", 404)]
    record["failed"] = [
        {"url": f"{BASE}/_images/fig.png", "error": "net::ERR_ABORTED"},  # the 404's: once
        {"url": f"{BASE}/style.css", "error": "net::ERR_CONNECTION_RESET"},
        {"url": f"{BASE}/favicon.ico", "error": "net::ERR_ABORTED"},  # browsers ask for it
    ]
    problems = tool.judge_view(_view(tmp_path), record, site)["problems"]
    assert "request to another host: https://elsewhere.example/x.js" in problems
    assert "request /_images/fig.png answered 404" in problems
    assert "image never fetched with status 200: _images/fig.png" in problems
    assert "request /style.css failed: net::ERR_CONNECTION_RESET" in problems
    assert not any("fig.png failed" in p or "favicon" in p for p in problems)


def test_phone_views_check_sideways_scrolling_not_code_cells(tool, site, tmp_path):
    view = _view(tmp_path, width=39, phone=True)
    wide = _record(page_width=60, window_width=39, overflow=[{"excess": 50, "line": "y"}])
    problems = tool.judge_view(view, wide, site)["problems"]
    assert problems == ["the page is 60 px wide in a 39 px window: it scrolls sideways"]


def test_a_missing_blank_or_wrong_size_screenshot_fails(tool, site, tmp_path):
    blank = _view(tmp_path, colourful=False)
    assert any("blank" in p for p in tool.judge_view(blank, _record(), site)["problems"])
    # almost one colour (a few stray pixels on an empty page) is blank too
    almost = Image.new("RGB", (40, 30), "white")
    for i, grey in enumerate(range(100, 200, 20)):
        almost.putpixel((i, i), (grey, grey, grey))
    almost.save(blank["shot"])
    assert any("blank" in p for p in tool.judge_view(blank, _record(), site)["problems"])
    wrong = dict(_view(tmp_path), width=41)
    assert (
        "screenshot is 40x30, expected 41x30"
        in tool.judge_view(wrong, _record(), site)["problems"]
    )
    gone = dict(_view(tmp_path), shot=str(tmp_path / "none.png"))
    assert "no screenshot was written" in tool.judge_view(gone, _record(), site)["problems"]


def test_a_screenshot_that_is_no_png_or_is_cut_short_fails(tool, site, tmp_path):
    view = _view(tmp_path)
    Image.open(view["shot"]).save(tmp_path / "shot.jpg", format="JPEG")
    jpeg = dict(view, shot=str(tmp_path / "shot.jpg"))
    assert tool.judge_view(jpeg, _record(), site)["problems"] == [
        "the screenshot is not a PNG file"
    ]
    (tmp_path / "text.png").write_text("<html>not an image</html>")
    text = dict(view, shot=str(tmp_path / "text.png"))
    assert "the screenshot is not a PNG file" in tool.judge_view(text, _record(), site)["problems"]
    data = (tmp_path / view["shot"]).read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    cut = tool.judge_view(dict(view, shot=str(tmp_path / "cut.png")), _record(), site)
    assert any("image data cannot be read" in p for p in cut["problems"]), cut["problems"]


def test_a_view_the_browser_could_not_show_fails(tool, site, tmp_path):
    record = {"requests": [], "responses": [], "failed": [], "driver_error": "Navigation timeout"}
    problems = tool.judge_view(_view(tmp_path), record, site)["problems"]
    assert "the browser could not show the page: Navigation timeout" in problems
    assert any("did not finish loading" in p for p in problems)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--width", "0"], "--width: must be at least 1, got 0"),
        (["--phone-width", "-1"], "--phone-width: must be at least 0, got -1"),
        (["--timeout", "nan"], "--timeout: must be between 0 and 3600 seconds, got nan"),
        (["--height", "tall"], "--height: expected a whole number, got 'tall'"),
    ],
)
def test_out_of_range_options_are_refused_with_the_value(tool, tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        tool.main([str(tmp_path), "--out", str(tmp_path / "out"), *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_missing_playwright_is_named(tool, monkeypatch):
    monkeypatch.setattr(tool.importlib.util, "find_spec", lambda name: None)
    _, missing = tool.browser_or_missing(None)
    assert any(what.startswith("Playwright for Python") for what in missing)


def test_a_real_browser_records_the_view_in_its_theme(tool, site, tmp_path):
    """One view in Chromium: the theme set before the page's scripts, every request and
    its answer, a broken image probed, the screenshot; a page without WebAssembly."""
    pytest.importorskip("playwright")
    chromium, missing = tool.browser_or_missing(None)
    if missing:
        pytest.skip(f"missing: {missing}")
    _png(site / "_images" / "fig.png", 8, 8)
    script = "<script>document.documentElement.dataset.theme = localStorage.theme</script>"
    html = (site / "page.html").read_text().replace("</article>", '<img src="gone.png"></article>')
    (site / "page.html").write_text(html.replace("<body>", "<body>" + script))
    view = dict(_view(tmp_path, theme="dark", width=300), shot=str(tmp_path / "real.png"))

    def run(browser, base):
        view["base"] = base
        page_record = {}
        context, page = tool.new_page(browser, page_record, wasm=False)
        page.goto(base + "/page.html")
        page_record["wasm"] = page.evaluate("typeof WebAssembly")
        context.close()
        return tool.show_view(browser, view, 20), page_record

    version, (record, page_record) = tool.drive(site, chromium, run)
    problems = tool.judge_view(view, record, site)["problems"]
    assert record["browser"]["theme"] == "dark"
    assert record["browser"]["broken"] == [f"{view['base']}/gone.png"]
    assert f"{view['base']}/_images/fig.png" in record["requests"]
    assert {"url": f"{view['base']}/gone.png", "status": 404} in [
        {k: r[k] for k in ("url", "status")} for r in record["responses"]
    ]
    assert "request /gone.png answered 404" in problems
    assert not any("theme" in p or "screenshot" in p for p in problems), problems
    assert page_record["wasm"] == "undefined" and page_record["requests"]
