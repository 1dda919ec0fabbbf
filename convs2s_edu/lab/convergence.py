"""Deprecated: moved to :mod:`convs2s_edu.lab.timing`; this alias goes in the next release."""

import warnings

from .timing import LEVELS, convergence, format_convergence, hardware_label  # noqa: F401

#: Nothing documented here: the names are documented in convs2s_edu.lab.timing.
__all__: list[str] = []

warnings.warn(
    "convs2s_edu.lab.convergence is deprecated: import from convs2s_edu.lab.timing",
    DeprecationWarning,
    stacklevel=2,
)
