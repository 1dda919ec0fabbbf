"""Sphinx configuration of the convs2s_edu site.

Build it with ``tox -e docs`` (full experiment) or ``tox -e docs-quick``
(``CONVS2S_EDU_QUICK=1``: small data, few epochs). Both run ``sphinx-build -W``,
so every warning, and every gallery script that raises, fails the build.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

# Headless matplotlib for the gallery scripts (and anything they import).
os.environ.setdefault("MPLBACKEND", "Agg")
# OpenMP threads that sleep instead of spinning, before torch is imported (convs2s_edu._threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

DOCS_DIR = Path(__file__).resolve().parent
ROOT = DOCS_DIR.parent
# Prefer the installed package (tox installs a wheel); fall back to the source tree.
try:
    import convs2s_edu  # noqa: F401
except ImportError:  # pragma: no cover - plain `sphinx-build` from a checkout
    sys.path.insert(0, str(ROOT))
    import convs2s_edu  # noqa: F401

sys.path.insert(0, str(DOCS_DIR / "_ext"))  # convs2s_site: the learner's path (see its docstring)

# same rule as convs2s_edu.lab.site.is_quick_mode
QUICK = os.environ.get("CONVS2S_EDU_QUICK", "").strip().lower() in ("1", "true", "yes")

# -- Project -----------------------------------------------------------------

project = "convs2s_edu"
author = "convs2s_edu developers"
copyright = "2026, convs2s_edu developers"
version = release = convs2s_edu.__version__

# -- General -----------------------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # copies MathJax 3 into _static/mathjax: no CDN
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "sphinx.ext.viewcode",  # "[source]" links on the API pages
    "sphinx_copybutton",  # a copy button on every code cell
    "convs2s_site",  # test pages, landing-page includes, notebooks that run as downloaded
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "_generated", "_ext", "Thumbs.db", ".DS_Store"]
exclude_patterns.append("**.ipynb_checkpoints")
root_doc = "index"
default_role = "py:obj"

# Every cross-reference to our own objects must resolve; references to objects
# of libraries without a local inventory (no network: no intersphinx) are not
# checked.
nitpicky = True
nitpick_ignore_regex = [
    # objects of other packages (no intersphinx offline): torch.nn.Linear, time.perf_counter
    (
        r"py:.*",
        r"(torch|nn|F|numpy|np|matplotlib|tqdm|typing|collections|dataclasses|numbers|"
        r"math|time|os|sys|json|pathlib|functools|itertools|random|hashlib|io|"
        r"subprocess|contextlib|warnings)(\..*)?",
    ),
    # bare names of builtins, typing and torch that numpydoc or autodoc link
    (
        r"py:.*",
        r"(Tensor|Module|Sequence|Iterable|Iterator|Mapping|Callable|NamedTuple|"
        r"Dataset|DataLoader|Generator|Path|Any|optional|default|int|float|bool|str|"
        r"bytes|list|tuple|dict|set|None|callable|object|type)",
    ),
    # numpydoc type phrases: "list of int", "sequence of (input_seq, sorted_seq)"
    (r"py:.*", r".*\s.*"),
]

# -- Math: local MathJax only ------------------------------------------------

# sphinx-mathjax-offline sets this too; repeat it so that no config order can
# bring back the CDN default.
mathjax_path = "mathjax/tex-chtml.js"

# -- copy buttons: the code without the prompts of doctest examples and shell lines ----

copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

# -- autodoc / autosummary / numpydoc -----------------------------------------

autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"member-order": "bysource"}  # :members: is in the class template
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
autoclass_content = "class"
# nn.Module.forward's docstring is about nn.Module, not about our forward methods
autodoc_inherit_docstrings = False
add_module_names = False

numpydoc_show_class_members = False  # the autosummary template lists members
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = False


def _skip_namedtuple_fields(app, what, name, obj, skip, options):
    """Hide ``EncoderOut.z`` etc.: their only docstring is "Alias for field number N",
    and the class docstring's Attributes section already describes them."""
    doc = getattr(obj, "__doc__", None) or ""
    return True if doc.startswith("Alias for field number") else None


_PACKAGE = "convs2s_edu"


def _shortest_name(target: str) -> str | None:
    """The name an object is documented under (api.rst): the shortest ``convs2s_edu...``
    path that gives the same object (sphinx-gallery's rule for its backreferences).

    ``convs2s_edu.training.cache.cache_key`` -> ``convs2s_edu.training.cache_key``;
    ``convs2s_edu.loss.sequence_loss`` -> ``convs2s_edu.sequence_loss``."""
    parts = target.split(".")
    try:  # the object exists; this imports the longest module prefix of its name
        pkgutil.resolve_name(target)
        split = max(i for i in range(1, len(parts)) if ".".join(parts[:i]) in sys.modules)
    except (ImportError, AttributeError, ValueError):  # no such object (or no module)
        return None
    obj = getattr(sys.modules[".".join(parts[:split])], parts[split])  # e.g. ConvBlock (.step)
    for i in range(1, split + 1):  # from the package root down
        try:
            if getattr(importlib.import_module(".".join(parts[:i])), parts[split], None) is obj:
                return ".".join(parts[:i] + parts[split:])
        except ImportError:
            continue
    return None


def _resolve_reexported(app, env, node, contnode):
    """Resolve a cross-reference that names an object by its defining module
    (``convs2s_edu.training.cache.cache_key``) or relative to it (``sos_index`` written in
    ``convs2s_edu.data``) against the name the API reference documents it under."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    candidates = []
    if target.startswith(_PACKAGE + "."):
        candidates.append(_shortest_name(target))
    else:
        for base in (node.get("py:module"), _PACKAGE):
            if base:
                candidates.append(_shortest_name(f"{base}.{target}"))
                if node.get("py:class"):
                    candidates.append(_shortest_name(f"{base}.{node['py:class']}.{target}"))
    domain = env.domains["py"]
    # last resort: the one documented object whose name ends with the target's last part
    # (``~convs2s_edu.ConvMemory``, which lives in convs2s_edu.convs2s)
    last = "." + target.rsplit(".", 1)[-1]
    ends = sorted(
        n
        for n, entry in domain.objects.items()
        if n.startswith(_PACKAGE)
        and n.endswith(last)
        and (entry.objtype == "module") == (node["reftype"] == "mod")
    )
    candidates += ends if len(ends) == 1 else []
    for cand in candidates:
        if cand and cand in domain.objects:
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, node["reftype"], cand, node, contnode
            )
    return None


# -- sphinx-gallery -------------------------------------------------------------

# The first cell of every downloadable notebook. A downloaded notebook runs in a
# kernel that may not have the package: the package is not on PyPI and the site
# has no public address to install from, so the cell installs the wheel the site
# offers for download (index page, "Install") from the notebook's folder, the
# parent folder or ~/Downloads (on Colab: upload it to /content first), or tells
# how to install from a clone. It also chooses the quick mode (QUICK) before the
# package reads CONVS2S_EDU_QUICK.
FIRST_CELL = """\
# Set-up: run this cell first.
# QUICK = True: small data, few epochs (minutes on a laptop CPU).
# QUICK = False: the full experiment of the site (the original notebook's 10,000
# examples, 30 epochs).
QUICK = True

import glob, importlib.util, os, subprocess, sys

os.environ["CONVS2S_EDU_QUICK"] = "1" if QUICK else "0"
# OpenMP threads that sleep instead of spinning, set before torch loads (see the Performance page)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

missing = [m for m in ("convs2s_edu", "matplotlib") if importlib.util.find_spec(m) is None]
if missing:  # install the wheel downloaded from the site (it brings PyTorch along)
    places = [".", "..", os.path.expanduser("~/Downloads"), "/content"]
    wheels = sorted(w for p in places for w in glob.glob(os.path.join(p, "convs2s_edu-*.whl")))
    if not wheels:
        raise ImportError(
            "convs2s_edu is not installed. Download the wheel (convs2s_edu-*.whl) from the "
            "site's landing page into this notebook's folder (on Colab: upload it to /content) "
            "and run this cell again, or run `pip install /path/to/a/clone` in a terminal."
        )
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", wheels[-1],
                           "matplotlib"])
    importlib.invalidate_caches()
import convs2s_edu

print("convs2s_edu", convs2s_edu.__version__, "| quick mode:", QUICK)
%matplotlib inline"""

SECTIONS = ("normalisation", "speed", "experiments", "appendix")  # the gallery's, in order
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "gallery"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",  # run every page
    # the reading order: the lesson (gallery/ itself, by file name), then the speed
    # chapter, the experiments and the appendix (paths relative to this folder)
    "subsection_order": [f"../gallery/{d}" for d in SECTIONS],
    "within_subsection_order": "FileNameSortKey",
    "plot_gallery": "True",
    "abort_on_example_error": True,  # a failing page fails the build
    "only_warn_on_example_error": False,
    "download_all_examples": True,
    "matplotlib_animations": False,
    "remove_config_comments": True,
    "show_memory": False,
    "backreferences_dir": "gen_modules/backreferences",
    "doc_module": ("convs2s_edu",),
    # names in the pages' code link to their API pages (this site's own reference)
    "reference_url": {"convs2s_edu": None},
    # the matplotlib scraper, after a check that every figure's text is legible at the
    # page's width (convs2s_site.legible_figures)
    "image_scrapers": ("convs2s_site.legible_figures",),
    "min_reported_time": 0,
    # the sg_execution_times pages load jQuery and DataTables from CDNs: the site
    # must work offline, and every page already reports its own running time
    "write_computation_times": False,
    # Every notebook must run as downloaded, in Jupyter or Colab (see FIRST_CELL).
    "first_notebook_cell": FIRST_CELL,
    # figures: 150 dpi, white background (readable in the dark theme), see docs/_ext
    "reset_modules": ("matplotlib", "convs2s_site.matplotlib_defaults", "seaborn"),
}

# -- HTML -------------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"convs2s_edu {release}"
html_static_path = ["_static"]
# The "Try the models" page (try.rst): the trained models as ONNX graphs and the
# onnxruntime-web files, written by tools/export_onnx.py (tox runs it before sphinx-build)
# into _build/try-assets-<mode>/try/; they join _static/try/ next to the page's script.
# A build without them still builds, and the page says that its models are missing.
TRY_ASSETS = DOCS_DIR / "_build" / f"try-assets-{'quick' if QUICK else 'full'}"
if (TRY_ASSETS / "try" / "models.json").is_file():
    html_static_path.append(str(TRY_ASSETS))
html_css_files = ["custom.css"]
html_js_files = ["zoom.js"]  # click a figure to open it at full size
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "show_prev_next": True,
    # the sphinx-gallery components render nothing outside the gallery; the landing page's
    # figures get the whole width, and so do the two models' panels of "Try the models"
    "secondary_sidebar_items": {
        "**": ["page-toc", "sg_download_links", "sg_launcher_links"],
        "index": [],
        "try": [],
    },
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
    "icon_links": [],
}
if QUICK:
    html_theme_options["announcement"] = (
        "Built in quick mode (CONVS2S_EDU_QUICK=1): small data, few steps, two seeds &mdash; "
        "the numbers show how each page works, not what it finds. <code>tox -e docs</code> "
        "builds the full site."
    )

# default_mode: a first visit follows the reader's system setting (else a console error)
html_context = {"convs2s_edu_quick": QUICK, "default_mode": "auto"}

# -- The wheel the site offers for download ------------------------------------------

# Under tox, the wheel tox built and installed here (TOX_PACKAGE); else one built here, into
# docs/_build/dist. html_extra_path copies it to the root of the site.
DIST = DOCS_DIR / "_build" / "dist"
WHEEL = f"convs2s_edu-{release}-py3-none-any.whl"
tox_wheels = [p for p in os.environ.get("TOX_PACKAGE", "").split(os.pathsep) if p.endswith(WHEEL)]
if tox_wheels and not (DIST / WHEEL).is_file():
    DIST.mkdir(parents=True, exist_ok=True)
    (DIST / WHEEL).write_bytes(Path(tox_wheels[0]).read_bytes())
for extra in ([], ["--no-isolation"]) if not (DIST / WHEEL).is_file() else ():
    build = [sys.executable, "-m", "build", "--wheel", *extra, "--outdir", str(DIST), str(ROOT)]
    if subprocess.run(build, capture_output=True).returncode == 0:
        break
html_extra_path = [str(DIST / WHEEL)] if (DIST / WHEEL).is_file() else []
# the site cannot know its own public address; set it to make the notebooks' links absolute
html_baseurl = os.environ.get("CONVS2S_EDU_SITE_URL", "")
# the headline figure page writes its numbers here for the landing page (convs2s_site)
os.environ["CONVS2S_EDU_SITE_DATA"] = str(DOCS_DIR / "_generated")
# the experiment record the Experiments chapter reads (convs2s_edu.lab.experiments.record)
os.environ.setdefault("CONVS2S_EDU_RECORD", str(DOCS_DIR / "experiment_record"))
# Pages without sub-pages need no left sidebar: the paper map's tables get the width, and so
# do the two models' panels side by side of "Try the models" and the gallery pages' code cells of
# up to 99 characters (a page's own table of contents and downloads stay on the right).
PAGES = [
    "index",
    "notation",
    "glossary",
    "paper_map",
    "departures",
    "try",
    "auto_examples/**plot_*",
]
html_sidebars = dict.fromkeys(PAGES, [])  # every gallery page, in every chapter

NO_WHEEL = "(none in this build: make one with ``python -m build``)"
rst_prolog = f"""
.. |quick| replace:: {"quick mode (small data, few epochs)" if QUICK else "full mode"}
.. |wheel| replace:: {f"`{WHEEL} <{WHEEL}>`__" if html_extra_path else NO_WHEEL}
"""


TRY_FILL = re.compile(r'(<span data-try-fill="(\w+)">)[^<]*(</span>)')


def _fill_try_page(app, docname, source):
    """Write the models' figures (``models.json``: the vocabulary, the longest source, the
    download's size, ...) into the "Try the models" page's placeholders, so that the page
    says them even where its script cannot load the models (opened from a file)."""
    manifest = TRY_ASSETS / "try" / "models.json"
    if docname != "try" or not manifest.is_file():
        return
    values = json.loads(manifest.read_text(encoding="utf-8"))
    fill = lambda m: f"{m[1]}{values[m[2]]}{m[3]}" if m[2] in values else m[0]  # noqa: E731
    source[0] = TRY_FILL.sub(fill, source[0])


def setup(app):
    app.connect("autodoc-skip-member", _skip_namedtuple_fields)
    app.connect("missing-reference", _resolve_reexported)
    app.connect("source-read", _fill_try_page)
