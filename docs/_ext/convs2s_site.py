"""Sphinx extension of the convs2s_edu site: the learner's path around the gallery.

What it adds to a build (each step is a function below):

1. :func:`write_test_pages` (``builder-inited``, before the sources are read):
   one page per ``tests/test_*.py`` under ``docs/tests/``, every test function
   with its own anchor, so that a test id in the paper map can link to its code.
   :func:`link_test_ids` turns every literal ``tests/test_x.py::test_name`` of
   a page into such a link (``doctree-resolved``).
2. :func:`after_gallery` (``builder-inited``, after sphinx-gallery ran the pages):
   the landing page's include files, from what the build measured: the headline
   numbers (``headline.json`` of ``gallery/plot_10_training``, ``speed.json`` of
   ``gallery/speed/plot_01_training_speed``) and the reading path (every page by
   chapter: title, what it teaches, running time from ``*.cost.json``); and a
   note atop every page that trains models: what it trains, how long it took.
3. :func:`fix_notebooks` (``build-finished``): the downloadable notebooks run as
   downloaded: a first cell saying what they train; Sphinx roles become code, or
   links when ``CONVS2S_EDU_SITE_URL`` names the published site; references to
   pages become links to their notebooks; the solutions' ``<details>`` markup a
   plain "Solution" line (Jupyter cannot nest a code cell in ``<details>``).
4. :func:`write_redirects` (``build-finished``): a stub at every old address of
   :data:`REDIRECTS` (a ``<meta http-equiv="refresh">``, a ``<link
   rel="canonical">`` and a visible link: offline, without scripts) sends the
   reader to the page that holds its content; ``tools/check_site.py`` checks them.
"""

from __future__ import annotations

import ast
import html
import json
import math
import os
import re
import zipfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
GALLERY = ROOT / "gallery"
TESTS = ROOT / "tests"
GENERATED = DOCS / "_generated"  # include files of the landing page (not in git)
TEST_PAGES = DOCS / "tests"  # generated test pages (not in git)
AUTO = DOCS / "auto_examples"
MARK = ".. convs2s-site-note"
#: Brackets the "Next" footer the build adds to every page.
NEXT_MARK = ".. convs2s-site-next"

#: The reading path's chapters in order: a folder of ``gallery/`` ("" for the lesson)
#: and its heading.
CHAPTERS = (
    ("", "The lesson: from the recurrent model's bottleneck to decoding"),
    ("normalisation", "The paper's normalisation and initialisation"),
    ("speed", "Speed"),
    ("experiments", "Experiments: the paper's claims at a small scale"),
    ("appendix", "Appendix"),
)

#: A reader's pace for a page's reading time: words of prose and lines of code a minute.
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE = 200, 30

#: One line per page of the reading path, by its path under ``gallery/``: what it
#: teaches. The title and the running time come from the build. A page missing here
#: gets its docstring's first sentence.
TEACHES = {
    "plot_00_sorting_task": "the task, the special tokens, padding and teacher forcing",
    "plot_01_fixed_size_bottleneck": "why attention: one fixed context or attention, by length",
    "plot_02_bahdanau_attention": "Bahdanau's attention and one GRU step, checked by hand",
    "plot_03_two_models": "both trained models as boxes and arrows (Figure 1): the GRU's "
    "chain of dependent steps against ConvS2S's few layers",
    "plot_04_glu_block": "the embeddings and one convolution block: GLU and residual",
    "plot_05_deep_stack": "why a deep stack trains: √0.5 and the GLU's linear gradient path",
    "plot_06_encoder_decoder": "the encoder and the causal decoder: receptive fields, and "
    "why nothing leaks from the future",
    "plot_07_multistep_attention": "ConvS2S's multi-step attention (eq. 1) by hand, and "
    "layer 1's context in layer 2's query, before training and after",
    "plot_08_two_queries": "what each model's query knows when it scores the source: "
    "the token just written, or not",
    "plot_09_convs2s_by_hand": "one forward step of ConvS2S with tiny sizes, every number "
    "written out and checked against the module",
    "plot_10_training": "both models trained on the same data: parameters and loss curves",
    "plot_11_evaluation": "exact match and token accuracy, per length; sample outputs",
    "plot_12_attention_heatmaps": "what the trained attentions look at, against the ideal",
    "plot_13_trained_attention": "how the trained ConvS2S sorts with its attention: its "
    "weights against source values, and where each layer points",
    "plot_14_attention_values": "what the input embeddings e add to the attention's "
    "values z + e: a knock-out on the trained model, and models retrained without them",
    "plot_15_decoding": "greedy and beam search; ConvS2S's incremental decoding",
    "plot_16_decoder_window": "what the causal decoder sees of its own output: runs of "
    "equal values against its window",
    "plot_17_questions": "the attention's values, the residual's place, m·√(1/m), √0.5 "
    "and the missing 1/√f, each answered from the paper and checked on the model",
    "normalisation/plot_01_encoder_gradient_scaling": "the encoder gradient scaling under Adam",
    "normalisation/plot_02_weight_normalisation": "a length and a direction per output unit",
    "normalisation/plot_03_initialisation": "the paper's initialisation against PyTorch's",
    "normalisation/plot_04_activation_variance": "the activations' variance through the stacks",
    "normalisation/plot_05_context_scaling": "the m·√(1/m) context scaling",
    "normalisation/plot_06_original_against_paper": (
        "short runs of the original notebook's ConvS2S and the paper's"
    ),
    "speed/plot_01_training_speed": "both models timed in interleaved windows: tokens "
    "per second, loss against the clock, the speed table",
    "speed/plot_02_what_makes_one_faster": "arithmetic per token, dependent steps and the "
    "path between two positions",
    "speed/plot_03_length_scaling": "how time per step grows with the sequence length",
    "speed/plot_04_bench": "both models against this machine's limits (``convs2s-edu bench``)",
    "speed/plot_05_attention_cost": "what attention in every layer costs a training step, "
    "beside the paper's 4%",
    "experiments/plot_01_encoder_decoder": "which encoder and decoder pairs sort best: "
    "the article's question, ConvS2S, the GRU and both hybrids",
    "experiments/plot_02_positions": "position embeddings removed from the source, the "
    "target or both (Table 4)",
    "experiments/plot_03_attention_layers": "attention in every decoder layer or fewer (Table 5)",
    "experiments/plot_04_depth_kernel": "depth and kernel width of encoder and decoder "
    "(Figure 2, Tables 7-8)",
    "experiments/plot_05_beam": "beam search against greedy decoding, and generation speed "
    "(Table 3)",
    "experiments/plot_06_claims": "every claim judged: supported, contradicted or not "
    "resolved, with its effect and interval",
    "appendix/plot_01_data_parallel": "processes training one model (DistributedDataParallel)",
    "appendix/plot_02_fast_paths": "the fast paths: the same models, computed faster",
}

#: Pages that moved: old address under ``auto_examples/`` -> the new pages that hold its
#: content, the first being where the old address now sends a reader. Addresses without
#: ``.html``; a literal, so that ``tools/check_site.py`` can read it with :mod:`ast`.
REDIRECTS = {
    "plot_00_architecture": ("plot_03_two_models",),
    "plot_01_sorting_task": ("plot_00_sorting_task",),
    "plot_04_attention": ("plot_07_multistep_attention", "plot_02_bahdanau_attention"),
    "plot_05_training": (
        "plot_10_training",
        "speed/plot_01_training_speed",
        "speed/plot_02_what_makes_one_faster",
    ),
    "plot_06_evaluation": ("plot_11_evaluation",),
    "plot_07_attention_heatmaps": ("plot_12_attention_heatmaps",),
    "plot_08_decoding": ("plot_15_decoding",),
    "plot_09_length_scaling": ("speed/plot_03_length_scaling",),
    "plot_10_paper_normalisation": (
        "normalisation/plot_02_weight_normalisation",
        "normalisation/plot_03_initialisation",
        "normalisation/plot_04_activation_variance",
    ),
    "plot_11_gradient_context_scaling": (
        "normalisation/plot_01_encoder_gradient_scaling",
        "normalisation/plot_05_context_scaling",
        "normalisation/plot_06_original_against_paper",
    ),
    "plot_12_speed": ("speed/plot_04_bench",),
    "plot_13_data_parallel": ("appendix/plot_01_data_parallel",),
    "plot_01_two_models": ("plot_03_two_models",),
    "plot_02_glu_block": ("plot_04_glu_block", "plot_05_deep_stack"),
    "plot_03_encoder_decoder": ("plot_06_encoder_decoder",),
    "plot_04_multistep_attention": ("plot_07_multistep_attention",),
    "plot_05_convs2s_by_hand": ("plot_09_convs2s_by_hand",),
    "plot_06_bahdanau_attention": ("plot_02_bahdanau_attention",),
    "plot_07_weight_normalisation": ("normalisation/plot_02_weight_normalisation",),
    "plot_08_initialisation": ("normalisation/plot_03_initialisation",),
    "plot_09_activation_variance": ("normalisation/plot_04_activation_variance",),
    "plot_10_encoder_gradient_scaling": ("normalisation/plot_01_encoder_gradient_scaling",),
    "plot_11_context_scaling": ("normalisation/plot_05_context_scaling",),
    "plot_12_seed_against_paper": ("normalisation/plot_06_original_against_paper",),
    "normalisation/plot_06_seed_against_paper": ("normalisation/plot_06_original_against_paper",),
    "plot_13_training": ("plot_10_training",),
    "plot_14_evaluation": ("plot_11_evaluation",),
    "plot_15_attention_heatmaps": ("plot_12_attention_heatmaps",),
    "plot_16_decoding": ("plot_15_decoding",),
    "plot_05_encoder_decoder": ("plot_06_encoder_decoder",),
    "plot_06_multistep_attention": ("plot_07_multistep_attention", "plot_13_trained_attention"),
    "plot_07_convs2s_by_hand": ("plot_09_convs2s_by_hand",),
    "plot_08_training": ("plot_10_training",),
    "plot_09_evaluation": ("plot_11_evaluation",),
    "plot_10_attention_heatmaps": ("plot_12_attention_heatmaps",),
    "plot_11_decoding": ("plot_15_decoding",),
    "plot_08_convs2s_by_hand": ("plot_09_convs2s_by_hand",),
    "plot_09_training": ("plot_10_training",),
    "plot_10_evaluation": ("plot_11_evaluation",),
    "plot_11_attention_heatmaps": ("plot_12_attention_heatmaps",),
    "plot_12_trained_attention": (
        "plot_13_trained_attention",
        "plot_14_attention_values",
        "plot_17_questions",
    ),
    "plot_13_decoding": ("plot_15_decoding",),
    "plot_14_decoder_window": ("plot_16_decoder_window",),
    "plot_15_questions": ("plot_17_questions",),
}


def gallery_label(path: str) -> str:
    """The sphinx-gallery label of a page, by its path under ``gallery/``:
    ``speed/plot_01_x`` -> ``sphx_glr_auto_examples_speed_plot_01_x.py``."""
    return "sphx_glr_auto_examples_" + path.replace("/", "_") + ".py"


# -- 1. Test pages and links to them ---------------------------------------------------


def test_label(file: str, name: str) -> str:
    return f"{file.removesuffix('.py')}-{name}".replace("_", "-").lower()


def _test_functions(path: Path) -> list[str]:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n.name for n in tree.body if isinstance(n, functions) and n.name.startswith("test_")]


def write_test_pages(app) -> None:
    """``docs/tests/index.rst`` and one page per test file, an anchor per test."""
    TEST_PAGES.mkdir(exist_ok=True)
    index = """:orphan:

The tests
=========

Every test of the package, grouped by file, with its code. The paper map
links each equation to the tests that check it against a hand computation.

.. toctree::
   :maxdepth: 1
"""
    for path in sorted(TESTS.glob("test_*.py")):
        index += f"\n   {path.stem}"
        title = f"tests/{path.name}"
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        text = f"{title}\n{'=' * len(title)}\n"
        if doc:
            text += "\n" + doc.strip().split("\n\n")[0].replace("\n", " ") + "\n"
        for name in _test_functions(path):
            text += f"""
.. _{test_label(path.name, name)}:

.. rubric:: ``{name}``

.. literalinclude:: ../../tests/{path.name}
   :language: python
   :pyobject: {name}
   :lineno-match:
"""
        _write_if_changed(TEST_PAGES / f"{path.stem}.rst", text)
    _write_if_changed(TEST_PAGES / "index.rst", index + "\n")


TEST_ID = re.compile(r"^tests/(test_\w+\.py)::(test_\w+)$")


def link_test_ids(app, doctree, docname) -> None:
    """``tests/test_x.py::test_y`` written as a literal becomes a link to the test's code.

    The literal stays a literal (code font, wraps in the paper map's narrow
    column) inside the link. ``tools/check_site.py`` checks that every such link
    of the paper map reaches an existing anchor.
    """
    from docutils import nodes  # here, so that the notebook helpers import without Sphinx

    if app.builder.format != "html":
        return
    for literal in list(doctree.findall(nodes.literal)):
        if isinstance(literal.parent, nodes.reference):
            continue
        m = TEST_ID.match(literal.astext())
        if not m or not (TESTS / m.group(1)).is_file():
            continue
        page = f"tests/{m.group(1).removesuffix('.py')}"
        uri = app.builder.get_relative_uri(docname, page) + "#" + test_label(*m.groups())
        link = nodes.reference("", "", internal=True, refuri=uri)
        literal.replace_self(link)
        link += literal


# -- 2. After the gallery ran: the landing page's includes and the pages' notes --------


def _write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _duration(seconds: float) -> str:
    """``3.2 s``, ``42 s``, ``2 min 05 s``."""
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    if round(seconds) < 60:
        return f"{round(seconds)} s"
    minutes, sec = divmod(round(seconds), 60)
    return f"{minutes} min {sec:02d} s"


def reading_minutes(source: str) -> int:
    """Minutes to read a gallery page: its prose (the docstring and the text cells) at
    :data:`WORDS_PER_MINUTE`, its code at :data:`CODE_LINES_PER_MINUTE`, rounded up."""
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or ""
    after_doc = tree.body[0].end_lineno if doc else 0  # the lines after the docstring
    words, code, hidden = len(doc.split()), 0, False
    for line in source.splitlines()[after_doc:]:
        text = line.strip()
        if text.startswith("# sphinx_gallery_start_ignore"):
            hidden = True
        elif text.startswith("# sphinx_gallery_end_ignore"):
            hidden = False
        elif hidden or not text or text.startswith(("# %%", "# sphinx_gallery")):
            continue
        elif line.startswith("#"):  # a text cell's line (code comments are indented or inline)
            words += len(text.lstrip("#").split())
        else:
            code += 1
    return max(1, math.ceil(words / WORDS_PER_MINUTE + code / CODE_LINES_PER_MINUTE))


def _doc_lines(script: Path) -> list[str]:
    """The lines of the docstring of a gallery page, stripped: its title first."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return [line.strip() for line in doc.strip().splitlines()]


OWN_TRAINING = re.compile(r"(?<![\w.])train\(|torch\.optim\.")
# trained with another task or model: the page's own runs, not the site's two models
OWN_VARIANT = re.compile(r"train_or_load\(\s*site_config\([^)]*\b(task|model_options)=")


def page_facts() -> list[dict]:
    """Every page of the reading path (:data:`CHAPTERS`), in reading order: stem, path
    under ``gallery/``, folder, title, what it teaches, seconds it ran, what it trains."""
    facts = []
    for folder, _ in CHAPTERS:
        for script in sorted((GALLERY / folder).glob("plot_*.py")):
            source = script.read_text(encoding="utf-8")
            lines = _doc_lines(script)
            title = lines[0] if lines else script.stem
            body = " ".join(lines[2:]).split(". ")[0].rstrip(".") + "."
            path = f"{folder}/{script.stem}" if folder else script.stem
            cost = AUTO / f"{path}.cost.json"
            seconds = json.loads(cost.read_text())["time"] if cost.is_file() else None
            site_models = "train_or_load(" in source and "site_config(" in source
            site_models = site_models and not OWN_VARIANT.search(source)
            facts.append(
                {
                    "stem": script.stem,
                    "path": path,
                    "folder": folder,
                    "title": title,
                    "teaches": TEACHES.get(path, body),
                    "seconds": seconds,
                    "read_minutes": reading_minutes(source),
                    # pages that use the two models trained with the site's configuration
                    "site_models": site_models,
                    # pages that train models of their own (or time their training steps)
                    # when run, cached or not; a gradient alone (``.backward()``, e.g. to
                    # measure receptive fields) is not that
                    "own_training": OWN_TRAINING.search(source) is not None,
                    # pages that load runs of their own from the cache, which the site's
                    # build trains before the pages run (tools/prepare_site.py) and an
                    # empty cache (a downloaded notebook) makes the page train first
                    "own_cached": "train_or_load(" in source and not site_models,
                }
            )
    return facts


def training_summary() -> dict | None:
    """What training the two site models costs, from the build's ``headline.json`` (written by
    the training page) and ``speed.json`` (the speed page's interleaved seconds per epoch):
    the seconds are epochs x the windows' median seconds per epoch with one thread, never
    the training runs' own clocks (they shared the machine when the site was built)."""
    files = (GENERATED / "headline.json", GENERATED / "speed.json")
    head, speed = (json.loads(p.read_text()) if p.is_file() else None for p in files)
    if head is None:
        return None
    original = head["recipes"]["original"]
    seconds = None
    if speed:
        per_epoch = speed["recipes"]["original"]["sec_per_epoch"]
        seconds = sum(per_epoch[m]["1 thread"] * original[m]["epochs"] for m in original)
    from convs2s_edu import TrainConfig

    full = TrainConfig()
    ratio = (full.n_train * full.epochs) / (head["n_train"] * head["epochs"])
    return {"head": head, "seconds": seconds, "ratio": ratio, "full": full, "speed": speed}


def training_sentence(page: dict, training: dict | None) -> str:
    """What running ``page`` trains and what that costs, in one paragraph."""
    parts = []
    if page["site_models"] and training:
        head = training["head"]
        parts.append(
            f"This page needs ConvS2S and the GRU baseline trained on {head['n_train']:,} "
            f"examples for {head['epochs']} epochs. They are trained once and cached (the "
            "site's build trains every model before the pages run, one process per core)"
        )
        if training["seconds"] is not None:
            parts[-1] += (
                f"; run on its own with an empty cache, this page trains both first, about "
                f"{_duration(training['seconds'])} of training on the machine that built "
                f"this site with one thread ({head['mode']} mode; the epochs times the "
                "seconds per epoch timed on the speed page)"
            )
            if head["mode"] == "quick":
                parts[-1] += (
                    f"; the full mode ({training['full'].n_train:,} examples, "
                    f"{training['full'].epochs} epochs) does {training['ratio']:.1f} times "
                    f"as much work, about "
                    f"{_duration(training['seconds'] * training['ratio'])} on the same "
                    f"machine"
                )
        parts[-1] += "."
    if page["own_training"] and not page["site_models"]:
        parts.append(
            "This page trains small models of its own (or times their training "
            "steps) every time it runs."
        )
    elif page["own_cached"]:
        parts.append(
            "This page trains small models of its own once and caches them: the site's "
            "build trained them before the pages ran, and with an empty cache (a "
            "downloaded notebook) the page trains them first."
        )
    if page["seconds"] is not None:
        cached = " with the models already cached" * (page["site_models"] or page["own_cached"])
        took = f"Running it took {_duration(page['seconds'])}"
        parts.append(f"{took}{cached} when this site was built.")
    return " ".join(parts)


def headline_table(head: dict, speed: dict | None) -> list[str]:
    """The landing page's table: per model and recipe, the test scores, the seconds per epoch
    and the convergence speed (steps and seconds to 90% and 95% held-out exact match) at
    every thread count the speed page measured."""
    from convs2s_edu.registry import model_entry

    names = {name: model_entry(name).label for name in ("convs2s", "gru")}
    labels = []
    if speed:
        first = next(iter(speed["recipes"].values()))["sec_per_epoch"]
        labels = list(next(iter(first.values())))
    threads = ", ".join(labels or ["not measured"])
    header = "model|recipe|exact match|token accuracy|seconds per epoch ({0})|steps to 90% / 95% "
    rows = [(header + "held-out exact match|seconds to 95% ({0})|parameters").format(threads)]
    for recipe, models in head["recipes"].items():
        rec = (speed or {}).get("recipes", {}).get(recipe)
        conv = {r["model"]: r for r in rec["convergence"]} if rec else {}
        for key, m in models.items():
            per_epoch = steps = seconds = "not measured"
            if rec:
                per_epoch = " / ".join(f"{rec['sec_per_epoch'][key][t]:.1f}" for t in labels)
                lv = conv[key]["levels"]
                steps = " / ".join(
                    f"{lv[x]['step']:,}" if lv[x] else "not reached" for x in ("0.9", "0.95")
                )
                at = lv["0.95"] and lv["0.95"]["seconds"]  # None: not reached
                never = f"not reached in {conv[key]['steps']:,} steps"
                seconds = " / ".join(f"{at[t]:,.0f}" for t in labels) if at else never
            fresh = f"fresh, {m['steps']:,} steps"
            data = fresh if m["fresh_data"] else f"{m['n_train']:,} x {m['epochs']} epochs"
            scores = f"{m['exact_match']:.1%}|{m['token_accuracy']:.1%}"
            rows.append(f"{names.get(key, key)}|{recipe} ({data})|{scores}|{per_epoch}|{steps}")
            rows[-1] += f"|{seconds}|{m['n_parameters']:,}"
    return list_table(["   :class: headline"], rows)


def list_table(options: list[str], rows: list[str]) -> list[str]:
    """The lines of a reST list-table with ``options``: a row per string of ``rows`` (the
    first the header), its cells separated by ``|``."""
    lines = [".. list-table::", "   :header-rows: 1", *options, ""]
    for row in rows:
        first, *cells = row.split("|")
        lines += [f"   * - {first}", *(f"     - {cell}" for cell in cells)]
    return lines


def after_gallery(app) -> None:
    GENERATED.mkdir(exist_ok=True)
    facts = page_facts()
    training = training_summary()

    # reading path: one table per chapter
    pace = f"{WORDS_PER_MINUTE} words of prose and {CODE_LINES_PER_MINUTE} lines of code"
    rows = [f"Reading times count {pace} a minute.", ""]
    for folder, chapter in CHAPTERS:
        pages = [page for page in facts if page["folder"] == folder]
        if not pages:
            continue
        table = ["#|page|what it teaches|reading time"]
        for page in pages:
            link = f":ref:`{page['title']} <{gallery_label(page['path'])}>`"
            minutes = f"{page['read_minutes']} min"
            table.append(f"{page['stem'][5:7]}|{link}|{page['teaches']}|{minutes}")
        options = ["   :widths: 5 35 48 12", "   :class: reading-path"]
        rows += [chapter, "~" * len(chapter), "", *list_table(options, table), ""]
    _write_if_changed(GENERATED / "reading_path.inc", "\n".join(rows))

    # headline numbers: accuracy from plot_10_training; speed and convergence from
    # speed/plot_01_training_speed's interleaved measurement (never from the training
    # runs' own clocks)
    if training:
        head, speed = training["head"], training["speed"]
        lines = headline_table(head, speed)
        device = head["recipes"]["original"]["convs2s"]["device"]
        summary = (
            f"Measured by this build ({head['mode']} mode, greedy decoding of "
            f"{head['n_test']:,} test examples, trained on {device}"
            + (f", timed on {speed['cpu']}" if speed else "")
            + "). Seconds are the steps times the median seconds per step of both models "
            "timed in alternating windows of training steps, at every thread count. "
        )
        summary += "Speed: " + speed["text"].replace("\n", " ") + " " if speed else ""
        link = f":ref:`The training speed page <{gallery_label('speed/plot_01_training_speed')}>`"
        summary += f"{link} says how the times were taken and how much to trust them. "
        claims = f":ref:`the claims page <{gallery_label('experiments/plot_06_claims')}>`"
        summary += (
            "These are the site's two models at the original notebook's sizes; "
            f"{claims} times the experiments' narrower models, whose speed verdicts need "
            "not agree with these (the width changes the arithmetic per token and how "
            "much of each operation a second thread can share)."
        )
        warn = speed and not speed["ok"]
        lines += ["", *([".. warning::", "", "   " + summary] if warn else [summary])]
    else:
        ran = "written by the gallery page 'Training both models'; this build did not run it."
        lines = [f"The headline numbers are {ran}"]
    _write_if_changed(GENERATED / "headline.inc", "\n".join(lines) + "\n")

    # a note at the top of every page that trains
    for page in facts:
        rst = AUTO / f"{page['path']}.rst"
        trains = page["site_models"] or page["own_training"] or page["own_cached"]
        if not trains or not rst.is_file():
            continue
        old_note = rf"\n{re.escape(MARK)}.*?{re.escape(MARK)} end\n"
        text = re.sub(old_note, "\n", rst.read_text(encoding="utf-8"), flags=re.DOTALL)
        if not (m := re.search(r"^\S.*\n=+\n", text, flags=re.MULTILINE)):  # the page title
            continue
        note = (
            f"\n{MARK}\n\n.. admonition:: Before you run this page\n   :class: tip\n\n"
            f"   {training_sentence(page, training)} As a notebook, it starts with "
            f"``QUICK = True`` (small data, few epochs); set ``QUICK = False`` there for "
            f"the full experiment.\n\n{MARK} end\n"
        )
        _write_if_changed(rst, text[: m.end()] + note + text[m.end() :])

    # where the reading path goes next, at the end of every page
    for path, footer in next_pages(facts).items():
        rst = AUTO / f"{path}.rst"
        if not rst.is_file():
            continue
        old = rf"\n{re.escape(NEXT_MARK)}.*?{re.escape(NEXT_MARK)} end\n"
        text = re.sub(old, "\n", rst.read_text(encoding="utf-8"), flags=re.DOTALL)
        at = text.find("\n.. _sphx_glr_download_")  # before the download buttons
        at = len(text) if at < 0 else at
        _write_if_changed(
            rst, text[:at] + f"\n{NEXT_MARK}\n\n{footer}\n\n{NEXT_MARK} end\n" + text[at:]
        )


def next_pages(facts: list[dict]) -> dict[str, str]:
    """Per page of the reading path, the rst of its last words: the page that follows
    it, with the question it asks (what it teaches), or the end of the path."""
    footers = {}
    for page, following in zip(facts, [*facts[1:], None]):
        if following is None:
            to = "the end of the reading path: the :doc:`paper map </paper_map>` lists "
            to += "every equation with its class, test and page"
        else:
            link = f":ref:`{following['title']} <{gallery_label(following['path'])}>`"
            to = f"{link}: {following['teaches'].rstrip('.')}"
        footers[page["path"]] = f".. rubric:: Next\n\n{to}."
    return footers


# -- 3. The downloadable notebooks -----------------------------------------------------

ROLES = "func|class|meth|attr|obj|data|mod|exc"
ROLE = re.compile(rf":(?:py:)?({ROLES}|const):`(~?)([^`<]+?)`")
ROLE_WITH_TEXT = re.compile(rf":(?:py:)?(?:{ROLES}):`([^`<]+?)\s*<([^`>]+)>`")
DOC_ROLE = re.compile(r":doc:`(?:([^`<]+?)\s*<([^`>]+)>|([^`]+))`")
# sphinx-gallery already turned :ref:`text <label>` into `text <label>`; a page of a
# subfolder has the folder in its label (sphx_glr_auto_examples_speed_plot_01_x.py)
PAGE_REF = re.compile(r"`([^`<]+?)\s*<sphx_glr_auto_examples_(?:(\w+?)_)?(plot_\w+?)\.py>`")
OTHER_REF = re.compile(r"`([^`<]+?)\s*<([\w\-:.]+)>`(?!_)")
RAW_HTML = re.compile(r"^\.\. raw:: html\n\n((?:[ \t]+.*(?:\n|$)|\n)+)", flags=re.MULTILINE)
DOC_TITLES = {
    "paper_map": "the paper map",
    "departures": "departures from the paper",
    "api": "the API reference",
    "index": "the landing page",
    "glossary": "the glossary",
}


def convert_markdown(text: str, base: str | None, inventory: dict, here: str = "") -> str:
    """Sphinx markup left in a notebook's markdown -> plain markdown (see the module doc).

    ``here`` is the gallery folder of the notebook ("" for the main gallery), for the
    relative links to other notebooks."""

    def site(page: str, shown: str) -> str:  # a link to the published site, when it has one
        return f"[{shown}]({base.rstrip('/')}/{page})" if base else shown

    def obj(name: str, shown: str) -> str:
        name = name.strip().lstrip("~").lstrip(".")
        page = inventory.get(name) or inventory.get(f"convs2s_edu.{name}")
        return site(page, f"`{shown}`") if page else f"`{shown}`"

    def doc(m):
        target = (m.group(2) or m.group(3)).strip().lstrip("/")
        return site(f"{target}.html", (m.group(1) or DOC_TITLES.get(target, target)).strip())

    def page(m):
        shown, folder, stem = m.group(1).strip(), m.group(2) or "", m.group(3)
        if base:
            return site(f"auto_examples/{folder}/{stem}.html".replace("//", "/"), shown)
        # the other notebook, where it lies in the site's zip of all notebooks
        up, sub = ("", "") if folder == here else ("../" if here else "", folder and f"{folder}/")
        return f"[{shown}]({up}{sub}{stem}.ipynb)"

    text = ROLE_WITH_TEXT.sub(lambda m: obj(m.group(2), m.group(1).strip()), text)
    short = lambda m: m.group(3).split(".")[-1] if m.group(2) else m.group(3)  # ~ drops modules
    text = ROLE.sub(lambda m: obj(m.group(3), short(m)), text)
    text = DOC_ROLE.sub(doc, text)
    text = PAGE_REF.sub(page, text)
    text = OTHER_REF.sub(lambda m: m.group(1).strip(), text)
    solution = "**Solution** (predict first, then read on):\n\n"
    text = RAW_HTML.sub(lambda m: solution if "<summary" in m.group(1) else "", text)
    # a glossary term: its words, plain (the notebook has no glossary)
    text = re.sub(r":term:`([^`<]+?)(?:\s*<[^>]+>)?`", r"\1", text)
    # any other role: keep its text as code
    return re.sub(r":[a-z]+(?::[a-z]+)?:`([^`]+)`", r"`\1`", text)


def notebook_header(stem: str, facts: dict, training: dict | None) -> str:
    header = (
        "**Before you run this notebook.** The first code cell installs the `convs2s_edu` "
        "package when it is missing (from a wheel next to this notebook; see *Install and "
        "run* on the site's landing page) and chooses the mode: `QUICK = True` (the default) "
        "trains on small data for a few epochs, `QUICK = False` runs the full experiment."
    )
    sentence = training_sentence(facts[stem], training) if stem in facts else ""
    return f"{header}\n\n{sentence}" if sentence else header


def process_notebook(nb: dict, stem: str, base, inventory, facts, training) -> bool:
    meta = nb.setdefault("metadata", {})
    if meta.get("convs2s_edu", {}).get("processed"):
        return False
    # the notebook's gallery folder, "" for the main one
    here = {p.stem: p.parent for p in GALLERY.rglob("plot_*.py")}.get(stem, GALLERY)
    here = "" if here == GALLERY else here.relative_to(GALLERY).as_posix()
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            src = "".join(cell["source"])
            cell["source"] = convert_markdown(src, base, inventory, here)
    header = notebook_header(stem, facts, training)
    nb["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": header})
    meta["convs2s_edu"] = {"processed": True}
    return True


def fix_notebooks(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    base = os.environ.get("CONVS2S_EDU_SITE_URL") or None
    objects = app.env.domains["py"].objects.items()  # public name -> its API page and anchor
    inventory = {name: f"{entry.docname}.html#{entry.node_id}" for name, entry in objects}
    facts = {p["stem"]: p for p in page_facts()}
    training = training_summary()
    out = Path(app.outdir) / "_downloads"

    def fixed(data, stem: str) -> str | None:  # the notebook's JSON; None: already processed
        nb = json.loads(data)
        if process_notebook(nb, stem, base, inventory, facts, training):
            return json.dumps(nb, indent=1, ensure_ascii=False)
        return None

    for path in sorted(out.rglob("*.ipynb")):
        if (new := fixed(path.read_text(encoding="utf-8"), path.stem)) is not None:
            path.write_text(new + "\n", encoding="utf-8")
    for path in sorted(out.rglob("*.zip")):  # the zip of all notebooks
        with zipfile.ZipFile(path) as zf:
            entries = [(info, zf.read(info)) for info in zf.infolist()]
        notebook = lambda info: info.filename.endswith(".ipynb")
        new = [fixed(data, Path(i.filename).stem) if notebook(i) else None for i, data in entries]
        if any(n is not None for n in new):
            tmp = path.with_suffix(".zip.tmp")
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
                for (info, data), n in zip(entries, new):
                    zf.writestr(info, data if n is None else n.encode())
            os.replace(tmp, path)


# -- 4. The old addresses of pages that moved ------------------------------------------

REDIRECT_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>Moved: {title}</title>
<meta http-equiv="refresh" content="0; url={url}">
<link rel="canonical" href="{canonical}">
</head>
<body>
<p>This page has moved to <a href="{url}">{title}</a>.</p>{more}
</body>
</html>
"""


def redirect_stub(old: str, new: tuple, titles: dict, base: str | None = None) -> str:
    """The HTML at old address ``old``: it sends the reader to ``new[0]`` and lists the
    other pages its content moved to. ``titles`` maps a new page to its title; ``base``
    is the site's public address, for an absolute canonical link."""
    link = lambda page: "../" * old.count("/") + f"{page}.html"  # from the old address
    url, title = link(new[0]), html.escape(titles.get(new[0], new[0]))
    canonical = f"{base.rstrip('/')}/auto_examples/{new[0]}.html" if base else url
    items = "".join(
        f'\n<li><a href="{link(page)}">{html.escape(titles.get(page, page))}</a></li>'
        for page in new[1:]
    )
    more = f"\n<p>Parts of it are now on:</p>\n<ul>{items}\n</ul>" if items else ""
    # html.escape quotes "" too: the URLs go into attributes
    return REDIRECT_PAGE.format(
        title=title, url=html.escape(url), more=more, canonical=html.escape(canonical)
    )


def write_redirects(app, exception) -> None:
    """A stub at every old address of :data:`REDIRECTS` (see the module doc)."""
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging  # here, so that the helpers import without Sphinx

    logger = logging.getLogger(__name__)
    docs = app.env.found_docs
    titles = {
        p.relative_to(GALLERY).with_suffix("").as_posix(): (_doc_lines(p) or [p.stem])[0]
        for p in GALLERY.rglob("plot_*.py")
    }
    out = Path(app.outdir) / "auto_examples"
    base = app.config.html_baseurl or None
    for old, new in REDIRECTS.items():
        if f"auto_examples/{old}" in docs:
            logger.warning(f"redirect: auto_examples/{old} is a page of this build again")
            continue
        if missing := [page for page in new if f"auto_examples/{page}" not in docs]:
            logger.warning(f"redirect: auto_examples/{old} -> {', '.join(missing)}: no such page")
            continue
        _write_if_changed(out / f"{old}.html", redirect_stub(old, new, titles, base))


#: The article's width in CSS pixels in a 1280-px-wide window (pydata-sphinx-theme): a
#: wider image is shown scaled down to it.
CONTENT_WIDTH_PX = 928
#: The smallest text a figure may show, in CSS pixels as the page renders it.
MIN_TEXT_PX = 9


def smallest_text_px(fig, dpi: float, content_width: float = CONTENT_WIDTH_PX):
    """The smallest visible text of the matplotlib figure ``fig`` as the page shows it:
    ``(pixels, text)``, or ``None`` for a figure without text.

    The image is saved at ``dpi`` and shown at its pixel width, or scaled down to
    ``content_width`` when wider: a font of ``s`` points renders at
    ``s / 72 * dpi * min(1, content_width / (width_in * dpi))`` pixels.
    """
    import matplotlib.text

    scale = min(1.0, content_width / (fig.get_figwidth() * dpi))
    texts = [
        (t.get_fontsize() / 72 * dpi * scale, t.get_text())
        for t in fig.findobj(matplotlib.text.Text)
        if t.get_visible() and t.get_text().strip()
    ]
    return min(texts) if texts else None


def legible_figures(block, block_vars, gallery_conf):
    """sphinx-gallery's matplotlib scraper, after a warning (an error under ``-W``) for
    every figure whose smallest text the page would show below :data:`MIN_TEXT_PX`."""
    import matplotlib.pyplot as plt
    from sphinx.util import logging
    from sphinx_gallery.scrapers import matplotlib_scraper

    dpi = plt.rcParams["savefig.dpi"]
    for number in plt.get_fignums():
        smallest = smallest_text_px(plt.figure(number), dpi)
        if smallest is not None and smallest[0] < MIN_TEXT_PX:
            logging.getLogger(__name__).warning(
                f"{block_vars['src_file']}: figure {number}'s text {smallest[1]!r} shows at "
                f"{smallest[0]:.1f} px, below {MIN_TEXT_PX} px at the page's width "
                f"({CONTENT_WIDTH_PX} px): a larger font or a narrower figure"
            )
    return matplotlib_scraper(block, block_vars, gallery_conf)


def matplotlib_defaults(gallery_conf, fname):
    """Before every gallery page (after sphinx-gallery's reset): 150 dpi figures on white.

    A figure keeps its on-screen size (``figure.dpi`` 100) and is saved at 150 dpi,
    so the image is sharper when it is zoomed; the white background keeps the
    figures readable in the theme's dark mode.
    """
    import matplotlib

    white = {"figure.facecolor": "white", "savefig.facecolor": "white"}
    matplotlib.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, **white})


def setup(app):
    app.connect("builder-inited", write_test_pages, priority=400)
    app.connect("builder-inited", after_gallery, priority=900)  # sphinx-gallery runs at 500
    app.connect("doctree-resolved", link_test_ids)
    app.connect("build-finished", fix_notebooks)
    app.connect("build-finished", write_redirects)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
