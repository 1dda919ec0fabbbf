"""The package's layout (``convs2s_edu/__init__.py``): layers that import only downwards, no
import cycle, and a public API for learners that leaves the lab in its subpackage.

Every import of every file is read from its source (imports inside functions included),
so that a cycle hidden in a function cannot creep back in.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import convs2s_edu

PACKAGE = Path(convs2s_edu.__file__).resolve().parent

#: The layers, bottom to top: a module may import its own layer and the ones below it.
#: The root ``convs2s_edu/__init__.py`` gathers the learner's names from the core and
#: training; no module of the package imports it.
LAYERS = {
    "core": 0,
    "training": 1,
    "lab": 2,
    "cli": 3,
    "root": 3,
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if module == "convs2s_edu":
        return "root"
    if parts[1] in ("training", "lab"):
        return parts[1]
    if parts[1] in ("cli", "__main__"):
        return "cli"
    return "core"


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    """Whether ``name`` is a module or package of convs2s_edu (a file, not a name in one)."""
    rel = Path(*name.split("."))
    return (PACKAGE.parent / rel).with_suffix(".py").is_file() or (
        PACKAGE.parent / rel / "__init__.py"
    ).is_file()


def imports_of(path: Path) -> set[str]:
    """The convs2s_edu modules ``path`` imports, anywhere in the file."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import mod` imports the module pkg.mod; `from mod import name`, mod
            targets = [
                f"{source}.{a.name}" if is_module(f"{source}.{a.name}") else source
                for a in node.names
            ]
        else:
            continue
        found.update(t for t in targets if t.split(".")[0] == "convs2s_edu")
    found.discard(me)
    return found


def import_graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_graph_reads_imports_inside_functions_and_relative_ones():
    graph = import_graph()
    assert "convs2s_edu.training.parallel" in graph["convs2s_edu.training.loop"]
    assert "convs2s_edu.lab.experiments" in graph["convs2s_edu.cli"]
    assert "convs2s_edu.data" in graph["convs2s_edu.seq2seq"]
    assert len(graph) >= 30  # every file of the package was read


def test_no_module_imports_a_layer_above_its_own():
    upward = [
        f"{a} ({layer_of(a)}) imports {b} ({layer_of(b)})"
        for a, targets in import_graph().items()
        for b in targets
        if LAYERS[layer_of(b)] > LAYERS[layer_of(a)] or (b == "convs2s_edu" and a != b)
    ]
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    graph = import_graph()
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(cycles)


def test_the_public_api_is_the_learners():
    names = convs2s_edu.__all__
    assert len(names) <= 45 and len(set(names)) == len(names)
    for name in names:
        assert hasattr(convs2s_edu, name), name
    for lab_name in ("run_bench", "measure_config", "run_experiment", "site_config", "compare"):
        with pytest.raises(ImportError):
            exec(f"from convs2s_edu import {lab_name}", {})
    # the lab is imported from its subpackage
    assert importlib.import_module("convs2s_edu.lab.bench").run_bench


#: The files a learner reads as the papers' models: the equations as written, nothing else.
MODEL_FILES = ("convs2s.py", "rnn.py", "seq2seq.py", "hybrid.py")


@pytest.mark.parametrize("name", MODEL_FILES)
def test_the_model_files_hold_no_fast_path(name):
    """Speed-ups live in ``convs2s_edu.fast``: a model file neither imports it nor branches
    on how it is being run (compiled, traced, exported)."""
    path = PACKAGE / name
    assert not {m for m in imports_of(path) if m.startswith("convs2s_edu.fast")}, name
    calls = {
        node.attr
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
    }
    banned = {"is_compiling", "is_tracing", "is_scripting", "is_in_onnx_export"}
    assert not calls & banned, f"{name} branches on {sorted(calls & banned)}"


def test_every_fast_path_replaces_a_model_class_and_lives_in_the_fast_package():
    from convs2s_edu.fast import FAST_CLASSES

    for reference, fast in FAST_CLASSES.items():
        assert issubclass(fast, reference)
        assert fast.__module__.startswith("convs2s_edu.fast."), fast
        # a class of the model files, or a PyTorch layer they use (dropout)
        models = {f"convs2s_edu.{n[:-3]}" for n in MODEL_FILES}
        assert reference.__module__ in models or reference.__module__.startswith("torch.nn.")
        # a fast class computes differently; it holds nothing new (mutmut's copies of a
        # method, ``x...__mutmut_N``, are the mutation run's, not the class's)
        assert not {n for n in vars(fast) if "__mutmut_" not in n} - {
            "__module__",
            "__doc__",
            "__qualname__",
            "forward",
            "convolve",
            "recur",
            "__firstlineno__",
            "__static_attributes__",
        }
