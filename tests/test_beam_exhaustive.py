"""Beam search checked against exhaustive search on a vocabulary and length small enough to
enumerate every output.

With ``v`` ordinary tokens and a step limit ``L`` a source has
``N = sum_{n<L} v^n + v^L`` possible outputs: ``n`` tokens then ``<eos>`` (``n < L``), or ``L``
tokens cut at the limit. Each one's log-probability is computed here from the models' *full*
teacher-forced forward pass (``model(src, tgt_in)``), one unpadded source at a time, not from the
decoders' incremental ``step`` that beam search uses, so the two computations share nothing but
the weights.

* A beam ``N`` wide prunes nothing: it must return all ``N`` outputs, ranked exactly as the
  exhaustive scores rank them (catches a search that stops at its first finished hypothesis).
* A narrow beam (``K = 1, 2, 3``) must return what the textbook algorithm returns, run here in
  plain Python over the exhaustive table: per step the ``2K`` best extensions, those among the
  best ``K`` that end in ``<eos>`` finished, the ``K`` best others alive, a source done once it
  holds ``K`` finished hypotheses (catches keeping ``K`` instead of ``2K`` candidates, and
  stopping early).
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from convs2s_edu.convs2s import ConvS2S, ConvS2SConfig
from convs2s_edu.data import eos_index, sos_index
from convs2s_edu.decode import beam_search
from convs2s_edu.rnn import RNNSeq2Seq, RNNSeq2SeqConfig

pytestmark = pytest.mark.usefixtures("single_thread")


def random_model(kind: str, vocab: int, seed: int) -> torch.nn.Module:
    """A tiny model with weights spread wider than the default init, so that its output
    distributions are far from uniform and no two outputs score (nearly) the same."""
    torch.manual_seed(seed)
    if kind == "convs2s":
        model = ConvS2S(
            ConvS2SConfig(
                vocab_size=vocab,
                embed_dim=8,
                hidden_dim=8,
                n_encoder_layers=1,
                n_decoder_layers=2,
                kernel_size=3,
                dropout=0.0,
                max_positions=12,
            )
        )
    else:
        model = RNNSeq2Seq(
            RNNSeq2SeqConfig(
                vocab_size=vocab,
                embed_dim=8,
                hidden_dim=8,
                attention_dim=8,
                dropout=0.0,
                max_positions=12,
            )
        )
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.6)
    return model.eval()


def next_token_table(model, src: list[int], vocab: int, L: int) -> dict[tuple, list[float]]:
    """log p(. | prefix, src) for every prefix of ordinary tokens shorter than L, from the full
    forward pass on the unpadded source (float64 log-softmax of its logits)."""
    sos = sos_index(vocab)
    table = {}
    with torch.no_grad():
        for n in range(L):
            prefixes = list(itertools.product(range(1, vocab + 1), repeat=n))
            tgt_in = torch.tensor([[sos, *p] for p in prefixes])  # (P, n + 1)
            x = torch.tensor([src] * len(prefixes))  # (P, S)
            logits = model(x, tgt_in)  # (P, n + 1, V)
            lp = F.log_softmax(logits[:, -1].double(), dim=-1)  # (P, V)
            for p, row in zip(prefixes, lp.tolist()):
                table[p] = row
    return table


def outputs_with_scores(table, vocab: int, L: int, alpha: float):
    """Every possible output as (tokens, log p, score, ended_with_eos), by brute force."""
    eos = eos_index(vocab)
    out = []
    for n in range(L + 1):
        for y in itertools.product(range(1, vocab + 1), repeat=n):
            logp = sum(table[y[:t]][y[t]] for t in range(n))
            if n < L:  # n tokens then <eos>
                logp += table[y][eos]
                length, ended = n + 1, True
            else:  # cut at the step limit
                length, ended = L, False
            # score(y) = log p(y | x) / |y|^alpha, |y| counting <eos>
            out.append((list(y), logp, logp / length**alpha, ended))
    return out


def reference_beam(table, vocab: int, L: int, K: int, alpha: float):
    """The documented algorithm (fairseq's), one source, in plain Python."""
    eos = eos_index(vocab)
    allowed = [*range(1, vocab + 1), eos]  # PAD and <sos> are never produced
    alive = [((), 0.0)]
    finished = []
    for t in range(L):
        cands = sorted(
            ((s + table[pre][tok], pre, tok) for pre, s in alive for tok in allowed),
            key=lambda c: -c[0],
        )[: 2 * K]
        last = t == L - 1
        for s, pre, tok in cands[:K]:
            if tok == eos:
                finished.append((list(pre), s, s / (len(pre) + 1) ** alpha, True))
            elif last:
                finished.append((list(pre) + [tok], s, s / (len(pre) + 1) ** alpha, False))
        if len(finished) >= K or last:
            break
        alive = [(pre + (tok,), s) for s, pre, tok in cands if tok != eos][:K]
    return sorted(finished, key=lambda h: -h[2])[:K]


def sources(vocab: int, seed: int, n: int = 4):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 5, (n,), generator=g).tolist()
    return [torch.randint(1, vocab + 1, (s,), generator=g).tolist() for s in lengths]


def padded(srcs):
    width = max(map(len, srcs))
    return torch.tensor([s + [0] * (width - len(s)) for s in srcs])  # (B, S), PAD = 0


def assert_same_hypotheses(got, expected):
    assert [h.tokens for h in got] == [e[0] for e in expected]
    for h, (_, logp, score, ended) in zip(got, expected):
        assert h.log_prob == pytest.approx(logp, abs=1e-4)
        assert h.score == pytest.approx(score, abs=1e-4)
        assert h.ended_with_eos == ended


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_full_width_beam_returns_every_output_ranked_as_exhaustive_search(kind, alpha):
    vocab, L = 2, 4
    n_outputs = sum(vocab**n for n in range(L)) + vocab**L  # 31
    model = random_model(kind, vocab, seed=3)
    srcs = sources(vocab, seed=5)
    got = beam_search(
        model,
        padded(srcs),
        beam_size=n_outputs,
        max_len=L,
        length_penalty=alpha,
        return_hypotheses=True,
    )
    for src, hyps in zip(srcs, got):
        table = next_token_table(model, src, vocab, L)
        exhaustive = sorted(outputs_with_scores(table, vocab, L, alpha), key=lambda h: -h[2])
        assert len(exhaustive) == n_outputs
        assert len(hyps) == n_outputs  # K distinct finished hypotheses exist: all returned
        assert len({tuple(h.tokens) for h in hyps}) == n_outputs
        assert_same_hypotheses(hyps, exhaustive)
        # the answer of a plain call is the exhaustive best
        best = beam_search(
            model, padded([src]), beam_size=n_outputs, max_len=L, length_penalty=alpha
        )
        assert best == [exhaustive[0][0]]


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_narrow_beam_follows_the_algorithm_and_returns_k_distinct_hypotheses(kind):
    vocab, L = 3, 4
    checked = 0
    for seed, K, alpha in itertools.product((0, 1, 2), (1, 2, 3), (0.0, 0.6, 1.0)):
        model = random_model(kind, vocab, seed)
        srcs = sources(vocab, seed=10 + seed)
        got = beam_search(
            model,
            padded(srcs),
            beam_size=K,
            max_len=L,
            length_penalty=alpha,
            return_hypotheses=True,
        )
        for src, hyps in zip(srcs, got):
            table = next_token_table(model, src, vocab, L)
            expected = reference_beam(table, vocab, L, K, alpha)
            assert len(expected) == K  # (the reference always finds K here)
            assert len({tuple(h.tokens) for h in hyps}) == K
            assert_same_hypotheses(hyps, expected)
            # every returned score is the exhaustive score of that output
            exhaustive = {tuple(h[0]): h for h in outputs_with_scores(table, vocab, L, alpha)}
            for h in hyps:
                assert h.score == pytest.approx(exhaustive[tuple(h.tokens)][2], abs=1e-4)
            checked += 1
    assert checked == 3 * 3 * 3 * 4  # seeds x K x alpha x sources
