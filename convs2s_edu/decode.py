r"""Decoding: greedy search and beam search for any encoder-decoder of the package.

Training uses *teacher forcing*: the decoder reads the reference prefix. At
test time there is no reference, so the model has to read its own previous
outputs, one token at a time (the left-to-right decoding of Sutskever et al. [2]_):

.. math:: \hat y_{t} = \arg\max_{y}\; p(y \mid \hat y_{<t}, x),
          \qquad \hat y_0 = \texttt{<sos>},

until it emits ``<eos>`` (greedy search, :func:`greedy_decode`), or keeping the
``beam_size`` most probable prefixes at every step (:func:`beam_search`, the search
ConvS2S is evaluated with [1]_, with a length normalisation in the spirit of [3]_).

Both drive any :class:`~convs2s_edu.EncoderDecoder` through the interface of
:mod:`convs2s_edu.seq2seq` only. For ConvS2S the decoder state is a
:class:`~convs2s_edu.convs2s.DecoderCache` (every causal convolution keeps its last
:math:`k-1` inputs), so one step costs one column of every layer; for the GRU it holds
the recurrent state :math:`s_{t-1}`.

Token conventions (see :mod:`convs2s_edu.data`): decoded sequences are lists
of ints *without* ``<sos>`` and ``<eos>``; ``PAD`` and ``<sos>`` are never
produced (their scores are set to :math:`-\infty`).

References
----------
.. [1] J. Gehring et al. "Convolutional Sequence to Sequence Learning."
   ICML 2017, §3 (the decoder) and §4.3 (beam search of width 5).
.. [2] I. Sutskever, O. Vinyals, Q. V. Le. "Sequence to Sequence Learning with
   Neural Networks." NIPS 2014 (left-to-right beam search).
.. [3] Y. Wu et al. "Google's Neural Machine Translation System." 2016,
   arXiv:1609.08144, §7 (length normalisation; this module's departure: :func:`beam_search`).
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Iterator
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import BatchSampler

from ._checks import check_int
from .data import PAD, LengthBucketSampler, eos_index, sos_index
from .seq2seq import EncoderDecoder

__all__ = ["Hypothesis", "greedy_decode", "beam_search", "decode_all"]


@contextlib.contextmanager
def _inference(model: nn.Module) -> Iterator[None]:
    """Eval mode and ``torch.no_grad()`` inside the block; every submodule's
    training flag is restored afterwards (even if decoding raises)."""
    modes = {m: m.training for m in model.modules()}
    model.eval()  # dropout off: the incremental cache assumes a deterministic decoder
    try:
        with torch.no_grad():
            yield
    finally:
        for m, mode in modes.items():
            m.training = mode


def _prepare(model, src) -> torch.Tensor:
    """Check ``model`` and ``src``; return ``src`` ``(B, S)`` as int64 on the model's device."""
    if not isinstance(model, EncoderDecoder):
        raise TypeError(
            f"cannot decode with a {type(model).__name__}; expected an "
            f"EncoderDecoder (ConvS2S, RNNSeq2Seq or HybridSeq2Seq)"
        )
    src, _ = model.check_inputs(src)
    p = next(model.parameters(), None)
    return src.to(p.device) if p is not None else src


def _mask_special(scores: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Forbid ``PAD`` and ``<sos>`` as outputs: their scores become :math:`-\\infty`."""
    scores = scores.clone()
    # (..., V): any leading shape
    scores[..., [PAD, sos_index(vocab_size)]] = float("-inf")
    return scores


def _step_limits(src: torch.Tensor, max_len, max_positions: int) -> torch.Tensor:
    """Most decoding steps per row ``(B,)``: ``max_len`` as :func:`greedy_decode` reads it."""
    if max_len is None:
        src_len = src.ne(PAD).sum(dim=1)  # (B,)
        return (src_len + 1).clamp(max=max_positions)
    max_len = check_int("max_len", max_len, 1, max_positions)
    return torch.full((src.shape[0],), max_len, dtype=torch.long, device=src.device)


# ---- Greedy search -------------------------------------------------------
def greedy_decode(
    model,
    src,
    max_len: int | None = None,
    incremental: bool = True,
    return_attention: bool = False,
    stop_at_eos: bool = True,
):
    r"""Greedy decoding of a batch of sources, for ConvS2S and the GRU model alike.

    Parameters
    ----------
    model : EncoderDecoder
        ConvS2S, RNNSeq2Seq or a HybridSeq2Seq, run in eval mode under
        :func:`torch.no_grad` (its modules' training flags are restored afterwards).
    src : Tensor, shape (B, S), or list of list of int
        Right-padded source tokens, converted and checked by
        :func:`~convs2s_edu.data.as_token_batch`; moved to the model's device.
    max_len : int, optional
        Most decoding steps, ``<eos>`` included, ``1..max_positions``. Default: per row,
        the source length + 1 (for sorting, the output is as long as the input), capped
        at ``max_positions``.
    incremental : bool, default True
        ``True``: one ``model.decoder.step`` per token (ConvS2S reuses its
        :class:`~convs2s_edu.convs2s.DecoderCache`). ``False``: run ``model.decoder``
        (teacher forcing) over the whole prefix at every step and keep the last
        position (the slow reference, same tokens).
    return_attention : bool, default False
        Also return the attention of every step.
    stop_at_eos : bool, default True
        ``False`` decodes exactly the step limit for every row and keeps any
        ``<eos>`` as an ordinary token (used to time a fixed amount of work).

    Returns
    -------
    tokens : list of list of int
        One list per source, without ``<sos>``/``<eos>``; at most ``max_len``
        tokens (``max_len`` tokens and no ``<eos>`` when the limit was hit).
    attention : list of Tensor
        Only with ``return_attention=True``: row ``b`` in the layout of
        ``model(src, tgt_in, return_attention=True)``,
        ``([n_decoder_layers,] T_b, S_b)`` for ``S_b`` real source tokens and ``T_b``
        steps taken (``len(tokens[b])``, plus one for the step that produced ``<eos>``).

    Notes
    -----
    At every step each row takes the single most probable next token (the
    module's :math:`\hat y_t`, never ``PAD`` or ``<sos>``); a row stops at its first
    ``<eos>`` or at its step limit, and the loop ends when every row has stopped.
    Rows that have stopped keep being fed ``PAD`` (their outputs are ignored): the batch
    keeps its shape, which is simpler than removing rows and costs little on this task.

    Greedy search is not exact: a locally best token can lead to a worse
    sequence; :func:`beam_search` keeps more candidates.

    Examples
    --------
    >>> import torch
    >>> from convs2s_edu import ConvS2S, ConvS2SConfig
    >>> model = ConvS2S(ConvS2SConfig(vocab_size=9, embed_dim=16, hidden_dim=16))
    >>> out = greedy_decode(model, torch.tensor([[3, 1, 2], [5, 4, 0]]))
    >>> [len(o) <= 4 for o in out]  # at most source length + 1 tokens
    [True, True]
    """
    src = _prepare(model, src)  # (B, S)
    sos, eos = sos_index(model.vocab_size), eos_index(model.vocab_size)
    with _inference(model):
        B = src.shape[0]
        limits = _step_limits(src, max_len, model.max_positions)  # (B,)
        enc = model.encode(src)
        state = model.decoder.start(enc) if incremental else None
        # (B, 1): <sos>
        prefix = torch.full((B, 1), sos, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)  # (B,)
        n_steps = limits.clone()  # (B,) steps taken per row (final once done)
        attentions = []
        for t in range(int(limits.max())):
            if incremental:
                logits, attn, state = model.decoder.step(prefix[:, -1], state)  # (B, V)
            else:  # the whole decoder over the whole prefix, every step again
                logits, attn = model.decoder(prefix, enc)  # (B, t, V), (B, L, t, S)
                logits, attn = logits[:, -1], attn[:, :, -1]  # (B, V), (B, L, S)
            if return_attention:
                attentions.append(attn)  # (B, L, S)
            # y_t = argmax_y log p(y | y_<t, x), never PAD or <sos>
            y = _mask_special(logits, model.vocab_size).argmax(dim=-1)  # (B,)
            y = y.masked_fill(done, PAD)  # stopped rows: filler, ignored
            prefix = torch.cat([prefix, y.unsqueeze(1)], dim=1)  # (B, t + 2)
            stop = (t + 1) >= limits  # (B,)
            if stop_at_eos:
                stop = stop | y.eq(eos)
            n_steps[stop & ~done] = t + 1  # the rows that stop now
            done |= stop
            if bool(done.all()):
                break

        # after <sos>
        out = [prefix[b, 1 : 1 + int(n)].tolist() for b, n in enumerate(n_steps)]
        out = [
            seq[:-1] if stop_at_eos and seq and seq[-1] == eos else seq for seq in out
        ]
        if not return_attention:
            return out
        attn = torch.stack(attentions, dim=2)  # (B, L, T, S)
        if not model.decoder.multi_step:
            attn = attn[:, 0]  # (B, T, S): the model-level layout of a single attention
        src_len = src.ne(PAD).sum(dim=1)  # (B,)
        # row b: ([L,] T_b, S_b), the steps taken over the real source tokens
        return out, [
            a[..., : int(n), : int(s)].cpu() for a, n, s in zip(attn, n_steps, src_len)
        ]


# ---- Beam search ---------------------------------------------------------
class Hypothesis(NamedTuple):
    """A finished beam-search hypothesis.

    Attributes
    ----------
    tokens : list of int
        The output, without ``<sos>``/``<eos>``.
    log_prob : float
        :math:`\\log p(y \\mid x)` summed over the generated tokens, ``<eos>``
        included when the hypothesis ended with it.
    score : float
        ``log_prob / length ** length_penalty``, the value beams are ranked by.
    ended_with_eos : bool
        ``False`` when the hypothesis was cut at the step limit.
    """

    tokens: list
    log_prob: float
    score: float
    ended_with_eos: bool


def beam_search(
    model,
    src,
    beam_size: int = 5,
    max_len: int | None = None,
    length_penalty: float = 1.0,
    return_hypotheses: bool = False,
):
    r"""Batched beam search for ConvS2S and the GRU model alike.

    Parameters
    ----------
    model : EncoderDecoder
        As in :func:`greedy_decode`.
    src : Tensor, shape (B, S), or list of list of int
        Right-padded source tokens, converted and checked as in :func:`greedy_decode`.
    beam_size : int, default 5
        :math:`K`, the number of hypotheses kept per source, ``>= 1``.
        ``beam_size=1`` gives exactly :func:`greedy_decode`'s output.
    max_len : int, optional
        Most decoding steps, as in :func:`greedy_decode`.
    length_penalty : float, default 1.0
        :math:`\alpha \ge 0` in the score :math:`\log p(y \mid x) / |y|^\alpha`;
        ``0`` ranks by raw log-probability, ``1`` by the average per token.
    return_hypotheses : bool, default False
        Return up to ``beam_size`` :class:`Hypothesis` per source, best first,
        instead of the best token list.

    Returns
    -------
    list of list of int, or list of list of Hypothesis
        The best hypothesis per source (tokens without ``<sos>``/``<eos>``).

    Notes
    -----
    All :math:`B K` hypotheses advance in *one* decoder call per step. The encoder runs
    once on the
    :math:`B` sources; its output is then repeated :math:`K` times (``reorder`` with index
    ``[0,..,0, 1,..,1, ...]``), so row :math:`bK + k` is hypothesis :math:`k` of source
    :math:`b`.

    At step :math:`t`, every alive hypothesis :math:`h` with cumulative
    log-probability :math:`s_h` is extended by every token:

    .. math:: s(h, y) = s_h + \log p(y \mid h, x).

    The :math:`2K` best extensions per source are taken (at most :math:`K`
    of them can end in ``<eos>``, one per hypothesis, so at least :math:`K`
    do not). Those among the best :math:`K` that end in ``<eos>`` (or all of
    them at the step limit) are *finished* and stored with the length-normalised score

    .. math:: \mathrm{score}(y) = \frac{\log p(y \mid x)}{|y|^{\alpha}},

    :math:`|y|` counting ``<eos>``. Departure: Wu et al. (2016, §7) divide by
    :math:`lp(y) = (5 + |y|)^{\alpha} / (5 + 1)^{\alpha}` (and add a coverage
    penalty); this is the plain :math:`|y|^{\alpha}` of fairseq's ``lenpen``, which
    ranks hypotheses of one length the same way and needs no extra constant. The
    :math:`K` best extensions that do not end in ``<eos>`` stay alive; the decoder state
    follows them with ``model.decoder.reorder`` (the state's encoder rows too:
    :mod:`convs2s_edu.seq2seq`). A source is done once it has :math:`K` finished
    hypotheses or reaches its step limit (the stopping rule of fairseq); the answer is
    its finished hypothesis of highest score.

    Beam search is still approximate: the best sequence can be pruned early,
    so a wider beam does not guarantee a more probable output than greedy
    search. At step 0 only the first copy of each source is alive (the others
    start at :math:`-\infty`), so the beam does not fill with duplicates.

    References
    ----------
    Sutskever et al. (2014); Wu et al. (2016), §7 (length normalisation, in the simpler
    form above); Gehring et al. (2017), §4.3 (beam width 5).
    """
    K, alpha = check_int("beam_size", beam_size), length_penalty
    if (
        isinstance(alpha, bool)
        or not isinstance(alpha, numbers.Real)
        or not 0 <= alpha < math.inf
    ):
        raise ValueError(
            f"length_penalty must be a finite number >= 0, got {length_penalty!r}"
        )
    alpha = float(alpha)
    src = _prepare(model, src)  # (B, S)
    V_words, decoder = model.vocab_size, model.decoder
    eos = eos_index(V_words)
    with _inference(model):
        B, device = src.shape[0], src.device
        limits = _step_limits(src, max_len, model.max_positions)  # (B,)
        state = decoder.start(model.encode(src))
        # row b*K + k is hypothesis k of source b
        state = decoder.reorder(
            state, torch.arange(B, device=device).repeat_interleave(K)
        )
        # (B, K) cumulative log p
        scores = torch.full((B, K), float("-inf"), device=device)
        scores[:, 0] = 0.0  # only the first copy is alive at step 0
        tokens = torch.empty((B, K, 0), dtype=torch.long, device=device)  # (B, K, t)
        y_prev = torch.full(
            (B * K,), sos_index(V_words), dtype=torch.long, device=device
        )
        finished: list[list[Hypothesis]] = [[] for _ in range(B)]
        done = [False] * B
        rows = torch.arange(B, device=device).unsqueeze(1)  # (B, 1): source b

        for t in range(int(limits.max())):
            logits, _, state = decoder.step(y_prev, state)  # (B K, V)
            # (B K, V)
            lprobs = _mask_special(F.log_softmax(logits.float(), dim=-1), V_words)
            V = lprobs.shape[-1]
            # s(h, y) = s_h + log p(y | h, x)
            cand = scores.unsqueeze(-1) + lprobs.view(B, K, V)  # (B, K, V)
            top_scores, top_idx = cand.view(B, K * V).topk(2 * K, dim=1)  # (B, 2K)
            # (B, 2K) parent hypothesis
            top_beam = torch.div(top_idx, V, rounding_mode="floor")
            top_tok = top_idx % V  # (B, 2K) appended token
            is_eos = top_tok.eq(eos)  # (B, 2K)
            last = ((t + 1) >= limits).tolist()  # (B,) the step limit is reached

            # finish the hypotheses among the best K that end in <eos> (all at the
            # limit)
            ts, tb, tt, te = (
                x.tolist() for x in (top_scores, top_beam, top_tok, is_eos)
            )
            for b in range(B):
                if done[b]:
                    continue
                for j in range(K):
                    if ts[b][j] == float("-inf") or not (te[b][j] or last[b]):
                        continue
                    seq = tokens[b, tb[b][j]].tolist() + (
                        [] if te[b][j] else [tt[b][j]]
                    )
                    length = len(seq) + int(te[b][j])  # |y|, <eos> included
                    score = ts[b][j] / length**alpha  # log p(y | x) / |y|^alpha
                    finished[b].append(Hypothesis(seq, ts[b][j], score, bool(te[b][j])))
                if len(finished[b]) >= K or last[b]:
                    done[b] = True
            if all(done):
                break

            # the K best extensions that do not end in <eos> stay alive
            alive_scores = top_scores.masked_fill(is_eos, float("-inf"))  # (B, 2K)
            scores, pick = alive_scores.topk(K, dim=1)  # (B, K), indices into the 2K
            parent = top_beam.gather(1, pick)  # (B, K)
            new_tok = top_tok.gather(1, pick)  # (B, K)
            # tokens of the parents, then the new token: (B, K, t + 1)
            tokens = torch.cat([tokens[rows, parent], new_tok.unsqueeze(-1)], dim=-1)
            # rows of the parents
            state = decoder.reorder(state, (rows * K + parent).view(-1))
            y_prev = new_tok.view(-1)  # (B K,)

    ranked = [sorted(f, key=lambda h: h.score, reverse=True)[:K] for f in finished]
    if return_hypotheses:
        return ranked
    return [r[0].tokens for r in ranked]


# ---- A whole data set ----------------------------------------------------
def decode_all(
    model,
    sources,
    beam_size: int = 1,
    batch_size: int = 256,
    max_len: int | None = None,
    bucket: bool = True,
) -> list[list[int]]:
    """The outputs of ``model`` for many sources, decoded ``batch_size`` at a time.

    Parameters
    ----------
    model : EncoderDecoder
    sources : sequence of sequence of int
        Token lists of any lengths (each chunk is padded with ``PAD``).
    beam_size : int, default 1
        ``1``: :func:`greedy_decode`; more: :func:`beam_search` with that width.
    batch_size : int, default 256
        Sources decoded together, ``>= 1``.
    max_len : int, optional
        Step limit, as in :func:`greedy_decode`.
    bucket : bool, default True
        Decode sources of equal length together
        (:class:`~convs2s_edu.data.LengthBucketSampler`, in length order), as the
        paper's timing of generation does (Table 3): a batch's sources then have no
        padding (its outputs may still end at different steps). ``False``: in the order
        given. The outputs are returned in the order of ``sources`` either way, and are
        the same up to floating-point rounding (every model is padding-invariant).

    Returns
    -------
    list of list of int
        One output per source, in order, without ``<sos>`` and ``<eos>``.
    """
    beam_size = check_int("beam_size", beam_size)
    batch_size = check_int("batch_size", batch_size)
    sources = list(sources)
    if bucket and sources:
        lengths = [len(x) for x in sources]
        batches = LengthBucketSampler(lengths, batch_size, shuffle=False)
    else:  # in the order given
        batches = BatchSampler(range(len(sources)), batch_size, drop_last=False)
    outputs: list = [None] * len(sources)
    for idx in batches:
        chunk = [sources[i] for i in idx]  # padded by as_token_batch inside the search
        if beam_size == 1:
            decoded = greedy_decode(model, chunk, max_len=max_len)
        else:
            decoded = beam_search(model, chunk, beam_size=beam_size, max_len=max_len)
        for i, out in zip(idx, decoded):
            outputs[i] = out
    return outputs
