"""Input checks shared by the models: clear ``ValueError`` messages, never a deep stack trace."""

from __future__ import annotations

import dataclasses
import numbers

import torch


def check_int(name: str, value, low: int = 1, high: int | None = None) -> int:
    """Return ``int(value)``; raise ``ValueError`` naming the value and the allowed
    range unless ``value`` is an integer (not a bool) in ``low..high`` (``>= low``
    without ``high``)."""
    allowed = f">= {low}" if high is None else f"in {low}..{high}"
    integer = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not integer or value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer {allowed}, got {value!r}")
    return int(value)


def check_int_fields_positive(cfg) -> None:
    """:func:`check_int` (``>= 1``) on every ``int`` field of the dataclass ``cfg``
    (sizes, counts, lengths: a model config has no other kind of integer field)."""
    for f in dataclasses.fields(cfg):
        if f.type in ("int", int):
            check_int(f.name, getattr(cfg, f.name))


def check_probability(name: str, value) -> None:
    """Raise ``ValueError`` unless ``0 <= value < 1``."""
    if not isinstance(value, numbers.Real) or not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")


def check_tokens(
    x: torch.Tensor, n_ids: int, name: str, max_len: int | None = None
) -> None:
    """Check a ``(B, T)`` int64 tensor of token ids (see
    :func:`~convs2s_edu.data.as_token_batch`) against the vocabulary and the length
    limit."""
    if x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(
            f"{name} must have at least one row and one column, got {tuple(x.shape)}"
        )
    if max_len is not None and x.shape[1] > max_len:
        raise ValueError(
            f"{name} has length {x.shape[1]}, longer than the position table allows "
            f"(1..{max_len}); build the model with a larger max_positions"
        )
    lo, hi = int(x.min()), int(x.max())
    if lo < 0 or hi >= n_ids:
        bad = lo if lo < 0 else hi
        raise ValueError(
            f"{name} holds token id {bad}, outside the vocabulary's range 0..{n_ids - 1}"
        )


def check_model_inputs(
    src: torch.Tensor,
    tgt_in: torch.Tensor | None,
    n_ids: int,
    max_positions: int,
    pad: int = 0,
) -> None:
    """The checks both models run on ``model(src, tgt_in)``: token ids inside
    ``0..n_ids-1``, lengths inside the position table, right-padded non-empty sources,
    equal batch sizes."""
    check_tokens(src, n_ids, "src", max_positions)
    empty = (src != pad).sum(dim=1).eq(0).nonzero()
    if len(empty):
        raise ValueError(
            f"src row {int(empty[0])} holds only padding; every row needs at least 1 real token"
        )
    gaps = ((src[:, :-1] == pad) & (src[:, 1:] != pad)).any(dim=1).nonzero()
    if len(gaps):
        raise ValueError(
            f"src row {int(gaps[0])} has a real token after padding; pad on the right only"
        )
    if tgt_in is not None:
        check_tokens(tgt_in, n_ids, "tgt_in", max_positions)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"src and tgt_in must have the same batch size, got {src.shape[0]} and "
                f"{tgt_in.shape[0]}"
            )
