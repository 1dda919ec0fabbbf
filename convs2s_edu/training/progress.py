"""The one progress reporter: a tqdm bar on a terminal, otherwise one line per
milestone.

Training reports its epochs through it, the lab's experiments their runs.
"""

from __future__ import annotations

import contextlib
import sys

__all__ = ["progress_stream", "Progress"]


def progress_stream():
    """Where progress goes: stderr, or the build's log when sphinx-gallery captured
    stderr (it puts a page's stderr into the page and logs it only with ``-v``: the
    build's log is where a reader waits for progress)."""
    captured = type(sys.stderr).__module__.startswith("sphinx_gallery")
    return sys.__stderr__ if captured and sys.__stderr__ else sys.stderr


class Progress(contextlib.AbstractContextManager):
    """Progress on :func:`progress_stream`: a tqdm bar on a terminal, else one line per
    note.

    Parameters
    ----------
    total : int
        Units of work (training steps, runs) the bar counts.
    desc : str
        The bar's label.
    enabled : bool, optional
        ``False`` shows nothing; ``None`` or ``True`` show the bar when the stream
        is a terminal and, when it is not (docs builds, CI logs, notebooks), every
        :meth:`note` as a line, so that a long run shows it is alive.
    """

    def __init__(self, total: int, desc: str, enabled: bool | None = None):
        self.stream = progress_stream()
        self.bar = None
        self.lines = enabled is not False and not self.stream.isatty()
        if enabled is not False and not self.lines:
            # tqdm.std: no notebook widgets (and no ipywidgets warning)
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True)

    def update(self, n: int = 1) -> None:
        """``n`` units done (the bar moves; no line is printed)."""
        if self.bar is not None:
            self.bar.update(n)

    def note(self, line: str, **postfix) -> None:
        """A milestone: ``line`` on a line of its own in a log; on a terminal, the bar's
        postfix (``postfix`` as ``key=value`` pairs when given, else ``line``)."""
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix(**postfix)
            else:
                self.bar.set_postfix_str(line)
        elif self.lines:
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __exit__(self, *exc) -> None:
        self.close()
