"""Figure helpers of the gallery: what a forward pass computed, and heatmaps of it.

The pages explain the models; the code that only draws or records lives here, once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from ..data import eos_index, sos_index

__all__ = ["capture", "token_labels", "attention_heatmap", "loss_curves"]


@contextlib.contextmanager
def capture(
    modules: Mapping[str, nn.Module], *, inputs: bool = False, retain_grad: bool = False
) -> Iterator[dict]:
    """Record what the named modules compute inside the ``with`` block.

    Parameters
    ----------
    modules : mapping of str to nn.Module
        The modules to watch, by the name the record uses.
    inputs : bool
        Record every call's first input instead of its output.
    retain_grad : bool
        Outputs keep their ``.grad`` (:meth:`torch.Tensor.retain_grad`) for a later
        ``backward()``.

    Yields
    ------
    dict of str to list
        Per name, what every call of that module gave, in call order. The hooks are
        removed when the block ends, so later calls record nothing.

    Examples
    --------
    >>> from convs2s_edu import ConvS2S
    >>> model = ConvS2S().eval()
    >>> with capture({"e": model.encoder.embed}) as seen:
    ...     _ = model(torch.tensor([[3, 1, 2]]), torch.tensor([[51, 1, 2, 3]]))
    >>> tuple(seen["e"][0].shape)
    (1, 3, 128)
    """
    seen = {name: [] for name in modules}

    def keep(name):
        def hook(module, args, output=None):  # a forward pre-hook gets no output
            value = args[0] if inputs else output
            if retain_grad and not inputs:
                value.retain_grad()
            seen[name].append(value)

        return hook

    with contextlib.ExitStack() as hooks:  # a hook's handle removes it on exit
        for name, m in modules.items():
            register = (
                m.register_forward_pre_hook if inputs else m.register_forward_hook
            )
            hooks.enter_context(register(keep(name)))
        yield seen


def token_labels(ids: Sequence[int] | torch.Tensor, vocab_size: int) -> list[str]:
    """Token ids as tick labels: the integers, ``<sos>``, ``<eos>`` and ``·`` for padding."""
    sos, eos = sos_index(vocab_size), eos_index(vocab_size)
    ids = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
    names = {sos: "<sos>", eos: "<eos>", 0: "·"}
    return [names.get(int(t), str(int(t))) for t in ids]


def attention_heatmap(
    ax,
    weights,
    source_labels: Sequence[str],
    target_labels: Sequence[str],
    *,
    title: str | None = None,
    cmap: str = "Blues",
    vmax: float | None = 1.0,
    fontsize: int = 8,
    xlabel: str = "source position $j$",
    ylabel: str = "target position $i$",
):
    """Draw an attention map :math:`a_{ij}` and return the image (for a colour bar): one
    row per target position, one column per source position, the weights from 0 (white)
    to ``vmax`` (``None``: the map's maximum).

    ``weights`` is a ``(T, S)`` tensor or array; only its first ``len(target_labels)``
    rows and ``len(source_labels)`` columns are drawn (padding left out).
    """
    a = torch.as_tensor(weights).detach().float().cpu().numpy()
    a = a[: len(target_labels), : len(source_labels)]  # (T, S)
    im = ax.imshow(
        a, cmap=cmap, vmin=0, vmax=a.max() if vmax is None else vmax, aspect="auto"
    )
    ax.set_xticks(range(len(source_labels)), source_labels, fontsize=fontsize)
    ax.set_yticks(range(len(target_labels)), target_labels, fontsize=fontsize)
    ax.set_xlabel(xlabel, fontsize=fontsize + 1)
    ax.set_ylabel(ylabel, fontsize=fontsize + 1)
    ax.tick_params(length=0)
    if title:
        ax.set_title(title, fontsize=fontsize + 2)
    return im


def loss_curves(
    ax,
    histories: Mapping[str, object],
    colours: Mapping[str, str],
    seconds_per_epoch: Mapping[str, float] | None = None,
):
    """Draw training histories: each step's loss (a running mean over a quarter of an
    epoch, thin lines) and the held-out loss after every epoch (dots), on a log scale.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    histories : mapping of str to History
        Label -> :class:`~convs2s_edu.History` of a run.
    colours : mapping of str to str
        Label -> a matplotlib colour.
    seconds_per_epoch : mapping of str to float, optional
        Label -> seconds per epoch: the x axis becomes a clock (epoch ``k`` ends at
        ``k`` times it); by default it counts epochs.
    """
    import matplotlib.pyplot as plt
    import matplotlib.ticker as mticker

    for label, h in histories.items():
        steps = np.asarray(h.step_losses)
        n_epochs = len(h.epochs)
        per_epoch = len(steps) // n_epochs
        # epochs -> seconds
        scale = 1 if seconds_per_epoch is None else seconds_per_epoch[label]
        # where each step ends, within its epoch
        ends = np.arange(1, per_epoch + 1) / per_epoch
        x = (np.arange(n_epochs)[:, None] + ends).ravel() * scale
        x_epochs = np.asarray(h.column("epoch"), dtype=float) * scale
        window = max(1, per_epoch // 4)
        # running mean
        smooth = np.convolve(steps, np.ones(window) / window, mode="valid")
        c = colours[label]
        ax.plot(x[window - 1 :], smooth, color=c, lw=0.9, alpha=0.6)
        ax.plot(
            x_epochs, h.column("valid_loss"), "o-", color=c, ms=3.5, lw=1.2, label=label
        )
    ax.set_ylabel("cross-entropy per token")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(mticker.LogLocator(subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(mticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    ax.grid(alpha=0.3, which="both")
    kinds = [
        plt.Line2D([], [], color="grey", lw=0.9, alpha=0.7),
        plt.Line2D([], [], color="grey", marker="o", ms=3.5, lw=1.2),
    ]
    names = ["training (running mean)", "held-out, end of epoch"]
    ax.add_artist(ax.legend(kinds, names, loc="lower left", fontsize=9))
    ax.legend(loc="upper right", fontsize=9)
