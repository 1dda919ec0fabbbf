r"""Evaluation metrics for the sorting task: exact match and token accuracy.

The paper reports BLEU on translation; a sorted sequence is either right or wrong, so
the original notebook uses two simpler measures: :func:`exact_match`, the share of
sequences that are entirely right, and :func:`token_accuracy`, the share of reference
positions that are right.
:func:`evaluate` decodes a data set with a model and returns both;
:func:`teacher_forced_scores` gets the same exact match, and the loss, from one
teacher-forced pass.

Both take *decoded* sequences (token lists without ``<sos>``/``<eos>``, as the search
functions of
:mod:`convs2s_edu.decode` return them) or ``PAD``-padded 2-D integer tensors. Token ids must be
integers ``>= 0`` (a float such as ``1.9`` is refused, never truncated to ``1``);
trailing ``PAD`` (``0``) is stripped from every sequence, so a padded tensor scores as
the unpadded lists would; a ``PAD`` *followed* by a real token is refused, since it
cannot be padding.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from ._checks import check_int
from .data import PAD, collate_batch
from .decode import _inference, _mask_special, decode_all
from .loss import sequence_loss

__all__ = ["exact_match", "token_accuracy", "evaluate", "teacher_forced_scores"]


def _token(name: str, i: int, t) -> int:
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Integral):
        raise ValueError(
            f"{name}[{i}] holds {t!r}; token ids must be integers >= 0 "
            "(floats are refused, not truncated)"
        )
    if t < 0:
        raise ValueError(f"{name}[{i}] holds token id {int(t)}; token ids must be >= 0")
    return int(t)


def _as_lists(name: str, seqs) -> list[list[int]]:
    """Token lists from a list of lists or a 2-D integer tensor (``ValueError`` otherwise;
    a tensor's rows are checked as rows of a list)."""
    if isinstance(seqs, torch.Tensor) and seqs.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D (batch, length) tensor, got shape {tuple(seqs.shape)}"
        )
    need = f"{name} must be a sequence of token sequences (lists of int)"
    if isinstance(seqs, (str, bytes)) or not isinstance(seqs, Iterable):
        raise ValueError(f"{need}, got {type(seqs).__name__}")
    out = []
    for i, s in enumerate(seqs):
        if isinstance(s, torch.Tensor):
            if s.is_floating_point() or s.is_complex() or s.dtype == torch.bool:
                raise ValueError(
                    f"{name}[{i}] must hold integer token ids, got dtype {s.dtype}"
                )
            s = s.tolist()
        if isinstance(s, (str, bytes)) or not isinstance(s, Iterable):
            raise ValueError(f"{need}; {name}[{i}] is {s!r}")
        out.append([_token(name, i, t) for t in s])
    return out


def _strip_pad(name: str, i: int, seq: list[int]) -> list[int]:
    """Drop trailing ``PAD``; a ``PAD`` followed by a real token is a ``ValueError``."""
    n = len(seq)
    while n and seq[n - 1] == PAD:
        n -= 1
    if PAD in seq[:n]:
        raise ValueError(
            f"{name}[{i}] holds PAD ({PAD}) at position {seq.index(PAD)} before a "
            "real token; PAD may only fill the end of a sequence"
        )
    return seq[:n]


def _prepare(predictions, references, eos):
    preds = _as_lists("predictions", predictions)
    refs = _as_lists("references", references)
    if len(preds) != len(refs):
        raise ValueError(
            f"predictions and references must have the same length, got {len(preds)} and "
            f"{len(refs)}"
        )
    if not refs:
        raise ValueError("need at least one (prediction, reference) pair, got 0")
    if eos is not None and (
        isinstance(eos, bool) or not isinstance(eos, numbers.Integral)
    ):
        raise ValueError(f"eos must be an integer token id or None, got {eos!r}")
    # None is never in seq
    cut = lambda seq: seq[: seq.index(eos)] if eos in seq else seq
    return (
        [_strip_pad("predictions", i, cut(p)) for i, p in enumerate(preds)],
        [_strip_pad("references", i, cut(r)) for i, r in enumerate(refs)],
    )


def exact_match(
    predictions: Sequence[Sequence[int]],
    references: Sequence[Sequence[int]],
    eos: int | None = None,
) -> float:
    r"""Share of predictions that equal their reference exactly.

    Parameters
    ----------
    predictions, references : sequence of sequence of int
        Decoded token lists (no ``<sos>``/``<eos>``), the same number of each, ``>= 1``.
    eos : int, optional
        If given, every sequence is first cut at its first ``eos`` (for raw
        outputs that still contain it). Trailing ``PAD`` is then stripped.

    Returns
    -------
    float
        In :math:`[0, 1]`.

    Notes
    -----
    With :math:`N` pairs :math:`(\hat y^{(n)}, y^{(n)})`,

    .. math::

        \mathrm{EM} = \frac{1}{N} \sum_{n=1}^{N}
        \mathbb{1}\big[\,|\hat y^{(n)}| = |y^{(n)}| \;\wedge\;
        \hat y^{(n)}_t = y^{(n)}_t \;\; \forall t\,\big].

    A prediction is right only with ``<eos>`` in place: a missing token (``<eos>`` too
    early) and an extra token (``<eos>`` too late, or never) both make it wrong.

    Examples
    --------
    >>> exact_match([[1, 2, 3], [1, 2], [1, 2, 3, 3]], [[1, 2, 3]] * 3)
    0.3333333333333333
    """
    preds, refs = _prepare(predictions, references, eos)
    # EM = (1/N) Σ_n 1[ŷ^(n) = y^(n)]
    return sum(p == r for p, r in zip(preds, refs)) / len(refs)


def token_accuracy(
    predictions: Sequence[Sequence[int]],
    references: Sequence[Sequence[int]],
    eos: int | None = None,
) -> float:
    r"""Share of reference positions predicted right (micro-average over all tokens).

    Parameters
    ----------
    predictions, references, eos
        As in :func:`exact_match`; the references must hold at least one token in total.

    Returns
    -------
    float
        In :math:`[0, 1]`.

    Notes
    -----
    Position by position, over the *reference* length:

    .. math::

        \mathrm{TokAcc} = \frac{\sum_{n=1}^{N} \sum_{t=1}^{|y^{(n)}|}
            \mathbb{1}\big[\,t \le |\hat y^{(n)}| \;\wedge\; \hat y^{(n)}_t = y^{(n)}_t\,\big]}
            {\sum_{n=1}^{N} |y^{(n)}|}

    * a prediction that is too short counts its missing positions as wrong;
    * tokens beyond the reference length are ignored: they neither add credit
      nor count against token accuracy (they do fail :func:`exact_match`);
    * positions are compared as they stand, with no alignment, so one token
      missing at the front shifts, and usually spoils, every later position.

    Long references weigh more than short ones (a micro-average over tokens,
    not a mean of per-sequence accuracies).

    Examples
    --------
    >>> token_accuracy([[1, 2, 9], [1]], [[1, 2, 3], [1, 2]])
    0.6
    """
    preds, refs = _prepare(predictions, references, eos)
    total = sum(len(r) for r in refs)
    if total == 0:
        raise ValueError("references hold no tokens at all; token accuracy needs >= 1")
    # Σ_n Σ_{t <= |y|} 1[t <= |ŷ| and ŷ_t = y_t]; zip stops at the shorter sequence
    correct = sum(sum(a == b for a, b in zip(p, r)) for p, r in zip(preds, refs))
    return correct / total


def evaluate(
    model: nn.Module,
    dataset_or_examples,
    batch_size: int = 256,
    beam_size: int = 1,
    device=None,
    max_len: int | None = None,
) -> dict:
    r"""Decode a data set with ``model`` and score it.

    Parameters
    ----------
    model : EncoderDecoder
        Decoded as by :func:`~convs2s_edu.decode.greedy_decode` (eval mode, no
        autograd).
    dataset_or_examples : SortingDataset or sequence of (source, reference)
        At least one example.
    batch_size, beam_size, max_len
        As in :func:`~convs2s_edu.decode.decode_all` (``beam_size=1``: greedy search).
    device : str or torch.device, optional
        If given, the model is moved there first (``nn.Module.to`` works in
        place, so it stays there); by default the model's own device is used.

    Returns
    -------
    dict
        ``{"exact_match": float, "token_accuracy": float, "n_examples": int}``,
        see :func:`exact_match` and :func:`token_accuracy`.
    """
    if device is not None:
        model.to(device)
    sources, references = _pairs(dataset_or_examples)
    predictions = decode_all(model, sources, beam_size, batch_size, max_len)
    return {
        "exact_match": exact_match(predictions, references),
        "token_accuracy": token_accuracy(predictions, references),
        "n_examples": len(sources),
    }


def _pairs(dataset_or_examples) -> tuple[list[list[int]], list[list[int]]]:
    """The sources and references of >= 1 non-empty ``(source, reference)`` pairs."""
    pairs = list(dataset_or_examples)
    for i, pair in enumerate(pairs):
        if (
            isinstance(pair, torch.Tensor)
            or not isinstance(pair, (tuple, list))
            or len(pair) != 2
        ):
            raise ValueError(
                f"example {i} must be a pair (source, reference), got {pair!r}"
            )
    sources = _as_lists("sources", [x for x, _ in pairs])
    references = _as_lists("references", [y for _, y in pairs])
    if not pairs:
        raise ValueError("need at least one example to evaluate, got 0")
    for i, (x, y) in enumerate(zip(sources, references)):
        if not x or not y:
            raise ValueError(f"example {i} is empty; sequences need length >= 1")
    return sources, references


def teacher_forced_scores(
    model: nn.Module, dataset_or_examples, batch_size: int = 512, device=None
) -> dict:
    r"""Score a data set in one teacher-forced pass: its loss, and greedy decoding's
    exact match without decoding.

    Parameters and mode as in :func:`evaluate` (``batch_size``: examples per forward
    pass). Returns a dict: ``loss``, the cross-entropy in nats per target token
    (``<eos>`` included; the paper's perplexity is its exponential); ``exact_match``;
    ``correct``, one ``bool`` per example in order; ``n_examples``; ``n_tokens``.

    Notes
    -----
    Greedy decoding (:func:`~convs2s_edu.decode.greedy_decode`) returns the reference
    exactly when, fed the reference's prefix :math:`y_{<t}`, every position (``<eos>``
    included) scores the reference token highest, ``PAD`` and ``<sos>`` masked:

    .. math::

        \hat y = y \iff \forall t \le |y| + 1:\;
        \arg\max_{v \notin \{\text{PAD}, \text{<sos>}\}} s_t(v \mid y_{<t}, x) = y_t ,

    by induction on :math:`t`: while greedy decoding's prefix is the reference's, it
    sees the scores of teacher forcing. A reference beyond greedy decoding's step limit
    (:math:`|y| > |x|`) counts as wrong. The two disagree only where a step's two best
    scores lie within float rounding (batched against step by step); the tests compare
    them.
    """
    batch_size = check_int("batch_size", batch_size)
    if device is not None:
        model.to(device)
    sources, references = _pairs(dataset_or_examples)
    where = next(model.parameters()).device
    loss, n_tokens, correct = 0.0, 0, []
    # eval mode, no autograd; every module's mode restored after
    with _inference(model):
        for i in range(0, len(sources), batch_size):
            pairs = list(
                zip(sources[i : i + batch_size], references[i : i + batch_size])
            )
            batch = collate_batch(pairs, model.vocab_size).to(where)
            logits = model(batch.src, batch.tgt_in)  # (B, T, V)
            loss += float(sequence_loss(logits, batch.tgt_out, "sum"))
            n_tokens += batch.n_target_tokens
            # ŷ_t = argmax over v not in {PAD, <sos>} of s_t(v | y_<t, x)
            guess = _mask_special(logits, model.vocab_size).argmax(dim=-1)  # (B, T)
            # (B,)
            right = (guess.eq(batch.tgt_out) | batch.tgt_padding_mask).all(dim=1)
            fits = batch.tgt_out.ne(PAD).sum(dim=1) <= batch.src.ne(PAD).sum(dim=1) + 1
            correct += (right & fits).tolist()
    return {
        "loss": loss / n_tokens,
        "exact_match": sum(correct) / len(correct),
        "correct": correct,
        "n_examples": len(correct),
        "n_tokens": n_tokens,
    }
