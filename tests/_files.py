"""Load a file of the repository that is not part of the package (a tool, the site's extension)."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_module(relative_path: str, name: str):
    """``ROOT / relative_path`` imported as a fresh module called ``name``."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
