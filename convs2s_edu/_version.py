"""The package version, in a module of its own so that submodules never import the package."""

__version__ = "0.4.0"
