"""Deprecated: moved to :mod:`convs2s_edu.lab.timing`; this alias goes in the next release."""

import warnings

from .timing import (  # noqa: F401
    Comparison,
    compare,
    epoch_tokens,
    format_table,
    seconds_per_step,
    summarise,
)

#: Nothing documented here: the names are documented in convs2s_edu.lab.timing.
__all__: list[str] = []

warnings.warn(
    "convs2s_edu.lab.compare is deprecated: import from convs2s_edu.lab.timing",
    DeprecationWarning,
    stacklevel=2,
)
