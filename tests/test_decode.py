"""Tests of ``convs2s_edu.decode``: greedy decoding and beam search on all four encoder/decoder
combinations (incremental decoding equal to the full recompute, greedy a fixed point of teacher
forcing, beam scores equal to the model's, batches equal to rows, limits, no autograd), and beam
search against exhaustive search."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from _tiny import DECODING_VOCAB, KINDS, RUN_MODEL, decoding_model, tiny_model

from convs2s_edu import PAD, Hypothesis, beam_search, eos_index, greedy_decode, sos_index
from convs2s_edu.decode import decode_all

pytestmark = pytest.mark.usefixtures("single_thread")

VOCAB = DECODING_VOCAB
SEEDS = (0, 1, 2)
# added to the <eos> logit: -1e4 -> never stop (every output runs to the step
# limit), 0 -> random models stop now and then, 3 -> they stop at all sorts of
# steps, so both the <eos> and the step-limit paths are exercised
EOS_BIASES = (-1e4, 0.0, 1.5, 3.0)
# beam search fills up with short finished hypotheses when <eos> is likely;
# these biases keep hypotheses long, so beams get pruned and reordered
BEAM_EOS_BIASES = (-1e4, 0.0, 0.3)


def make_src(batch=8, length=7, seed=0):
    """Right-padded random sources of lengths length, length-1, ..., >= 1."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, VOCAB + 1, (batch, length), generator=g)  # (B, S)
    for i in range(batch):
        src[i, length - i % length :] = PAD
    return src


def sequence_log_prob(model, src_row, tokens, ended_with_eos):
    """log p(tokens [+ <eos>] | src) under teacher forcing."""
    tgt_in = torch.tensor([[sos_index(VOCAB), *tokens]])
    targets = [*tokens, eos_index(VOCAB)] if ended_with_eos else list(tokens)
    model.eval()
    with torch.no_grad():
        lp = F.log_softmax(model(src_row, tgt_in).double(), dim=-1)[0]  # (T, V)
    return sum(lp[t, y].item() for t, y in enumerate(targets))


@pytest.mark.parametrize("kind", KINDS)
def test_incremental_matches_full_recompute(kind):
    """Step-by-step decoding from the state gives the same tokens as re-running the decoder
    over the prefix."""
    src = make_src()
    for seed in SEEDS:
        for bias in EOS_BIASES:
            model = decoding_model(kind, seed, bias)
            fast = greedy_decode(model, src, incremental=True)
            slow = greedy_decode(model, src, incremental=False)
            assert fast == slow, (seed, bias)


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_is_a_fixed_point_of_teacher_forcing(kind):
    """Feeding the greedy output back with teacher forcing, every position's argmax is the
    token greedy chose (and <eos> where it stopped)."""
    src = make_src()
    eos = eos_index(VOCAB)
    for seed in SEEDS:
        model = decoding_model(kind, seed, eos_bias=1.5).eval()
        out = greedy_decode(model, src)
        for b, toks in enumerate(out):
            n_src = int(src[b].ne(PAD).sum())
            stopped = len(toks) < n_src + 1
            tgt_in = torch.tensor([[sos_index(VOCAB), *toks]])
            with torch.no_grad():
                logits = model(src[b : b + 1, :n_src], tgt_in)[0]  # (T, V)
            logits[:, [PAD, sos_index(VOCAB)]] = float("-inf")
            expected = toks + [eos] if stopped else toks
            assert logits.argmax(-1).tolist()[: len(expected)] == expected


@pytest.mark.parametrize("kind", KINDS)
def test_beam_size_one_equals_greedy(kind):
    src = make_src()
    for seed in SEEDS:
        for bias in EOS_BIASES:
            model = decoding_model(kind, seed, bias)
            for alpha in (0.0, 1.0):
                assert beam_search(model, src, beam_size=1, length_penalty=alpha) == greedy_decode(
                    model, src
                ), (seed, bias, alpha)


@pytest.mark.parametrize("kind", KINDS)
def test_beam_hypotheses_scores_match_model(kind):
    """Every returned hypothesis carries its true log-probability and normalised score,
    hypotheses are distinct and sorted, and the best one is what beam_search returns."""
    src = make_src(batch=5)
    K, alpha = 4, 0.7
    for seed, bias in itertools.product(SEEDS, BEAM_EOS_BIASES):
        model = decoding_model(kind, seed, bias)
        hyps = beam_search(model, src, beam_size=K, length_penalty=alpha, return_hypotheses=True)
        best = beam_search(model, src, beam_size=K, length_penalty=alpha)
        for b, row in enumerate(hyps):
            n_src = int(src[b].ne(PAD).sum())
            assert 1 <= len(row) <= K
            assert all(isinstance(h, Hypothesis) for h in row)
            assert best[b] == row[0].tokens
            assert [h.score for h in row] == sorted((h.score for h in row), reverse=True)
            assert len({(tuple(h.tokens), h.ended_with_eos) for h in row}) == len(row)
            for h in row:
                assert len(h.tokens) <= n_src + 1
                assert h.ended_with_eos or len(h.tokens) == n_src + 1
                length = len(h.tokens) + int(h.ended_with_eos)
                assert h.score == pytest.approx(h.log_prob / length**alpha)
                ref = sequence_log_prob(model, src[b : b + 1, :n_src], h.tokens, h.ended_with_eos)
                assert h.log_prob == pytest.approx(ref, abs=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_batch_decoding_equals_row_by_row(kind):
    """Padding a source into a batch does not change its output."""
    src = make_src(batch=5)
    for bias in BEAM_EOS_BIASES:
        model = decoding_model(kind, 0, bias)
        greedy = greedy_decode(model, src)
        beam = beam_search(model, src, beam_size=3, return_hypotheses=True)
        for b in range(src.shape[0]):
            row = src[b : b + 1, : int(src[b].ne(PAD).sum())]
            assert greedy_decode(model, row) == [greedy[b]]
            alone = beam_search(model, row, beam_size=3, return_hypotheses=True)[0]
            assert [h.tokens for h in alone] == [h.tokens for h in beam[b]]
            assert [h.log_prob for h in alone] == pytest.approx(
                [h.log_prob for h in beam[b]], abs=1e-5
            )


@pytest.mark.parametrize("bucket", [True, False])
def test_decode_all_returns_every_output_in_the_order_given(bucket):
    model = decoding_model("convs2s")
    sources = [[t for t in row if t != PAD] for row in make_src(batch=7).tolist()]
    for beam in (1, 2):  # 7 sources in chunks of 3: the last chunk holds one
        alone = [beam_search(model, [s], beam_size=beam)[0] for s in sources]
        assert decode_all(model, sources, beam, batch_size=3, bucket=bucket) == alone


def test_decode_all_buckets_decode_sources_of_one_length_together(monkeypatch):
    from convs2s_edu import decode

    chunks = []

    def spy(model, chunk, max_len):  # greedy_decode, recording each chunk; outputs = inputs
        chunks.append(chunk)
        return chunk

    monkeypatch.setattr(decode, "greedy_decode", spy)
    sources = [[1] * n for n in (3, 1, 3, 2, 1, 3, 2)]
    assert decode_all(decoding_model("convs2s"), sources, batch_size=2) == sources
    assert sorted(len(c) for c in chunks) == [1, 2, 2, 2]  # one length-3 source left over
    assert all(len({len(s) for s in c}) == 1 for c in chunks)  # one length per chunk


@pytest.mark.parametrize("kind", KINDS)
def test_eos_and_step_limits(kind):
    src = make_src(batch=4)
    n_src = src.ne(PAD).sum(dim=1).tolist()
    # <eos> always wins: every output is empty
    assert greedy_decode(decoding_model(kind, 0, eos_bias=1e4), src) == [[]] * 4
    assert beam_search(decoding_model(kind, 0, eos_bias=1e4), src, beam_size=3) == [[]] * 4
    # <eos> never wins: outputs run to the default limit, source length + 1
    never = decoding_model(kind, 0, eos_bias=-1e4)
    assert [len(o) for o in greedy_decode(never, src)] == [n + 1 for n in n_src]
    assert [len(o) for o in beam_search(never, src, beam_size=3)] == [n + 1 for n in n_src]
    assert [len(o) for o in greedy_decode(never, src, max_len=3)] == [3] * 4
    # no PAD / <sos> / <eos> in the outputs
    for o in greedy_decode(decoding_model(kind, 1), src) + beam_search(
        decoding_model(kind, 1), src
    ):
        assert all(1 <= t <= VOCAB for t in o)
    # stop_at_eos=False: exactly max_len tokens, <eos> kept as a token
    forced = greedy_decode(
        decoding_model(kind, 0, eos_bias=1e4), src, max_len=5, stop_at_eos=False
    )
    assert forced == [[eos_index(VOCAB)] * 5] * 4


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("incremental", [True, False])
def test_return_attention(kind, incremental):
    src = make_src(batch=4)
    model = decoding_model(kind, 0, eos_bias=2.0)
    out, attn = greedy_decode(model, src, return_attention=True, incremental=incremental)
    assert out == greedy_decode(model, src)
    for b, (toks, a) in enumerate(zip(out, attn)):
        n_src = int(src[b].ne(PAD).sum())
        steps = len(toks) + int(len(toks) < n_src + 1)  # + the step that produced <eos>
        if model.decoder.multi_step:
            assert a.shape == (model.decoder.cfg.n_decoder_layers, steps, n_src)
        else:
            assert a.shape == (steps, n_src)
        assert torch.allclose(a.sum(-1), torch.ones(a.shape[:-1]), atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_training_mode_restored_and_no_grad(kind):
    model = decoding_model(kind, 0).train()
    model.encoder.eval()  # a mixed state must come back as it was
    before = {name: m.training for name, m in model.named_modules()}
    greedy_decode(model, make_src(batch=2))
    beam_search(model, make_src(batch=2), beam_size=2)
    greedy_decode(model, make_src(batch=2), incremental=False)
    assert {name: m.training for name, m in model.named_modules()} == before
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("kind", KINDS)
def test_list_input(kind):
    model = decoding_model(kind, 0, eos_bias=1.5)
    src = make_src(batch=3)
    rows = [[t for t in row if t != PAD] for row in src.tolist()]
    assert greedy_decode(model, rows) == greedy_decode(model, src)
    assert beam_search(model, rows, beam_size=2) == beam_search(model, src, beam_size=2)


def test_bad_arguments():
    model, src = decoding_model("convs2s"), make_src(batch=2)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, beam_size=0)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, max_len=0)
    with pytest.raises(ValueError, match=r"max_len.*1\.\.24"):
        greedy_decode(model, src, max_len=25)
    with pytest.raises(ValueError, match="max_len"):
        beam_search(decoding_model("gru"), src, max_len=0)
    for alpha in (-1.0, float("inf"), float("nan"), True):
        with pytest.raises(ValueError, match="length_penalty"):
            beam_search(model, src, length_penalty=alpha)
    with pytest.raises(ValueError, match="padding"):
        greedy_decode(model, torch.tensor([[1, 2], [0, 0]]))
    with pytest.raises(ValueError, match="token id"):
        greedy_decode(model, torch.tensor([[1, 99]]))
    with pytest.raises(TypeError, match="Linear"):
        greedy_decode(torch.nn.Linear(2, 2), src)


# --------------------------------------------------------------------------
# Decoding builds no autograd graph
# --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
@pytest.mark.parametrize("decode", [greedy_decode, lambda m, s: beam_search(m, s, beam_size=3)])
def test_decoding_runs_without_autograd(kind, decode, ragged_batch):
    _, batch = ragged_batch
    model = tiny_model(kind, dropout=0.1, **RUN_MODEL[kind])
    assert all(p.requires_grad for p in model.parameters())
    grad_modes, outputs = [], []

    def hook(module, args, output):
        grad_modes.append(torch.is_grad_enabled())
        for o in output if isinstance(output, tuple) else (output,):
            if isinstance(o, torch.Tensor):
                outputs.append(o)

    hooks = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        decode(model, batch.src)
    finally:
        for h in hooks:
            h.remove()
    assert grad_modes and not any(grad_modes)
    assert outputs and not any(o.requires_grad or o.grad_fn is not None for o in outputs)


# --------------------------------------------------------------------------
# Beam search against exhaustive search, on a vocabulary and length small enough to
# enumerate every output
# --------------------------------------------------------------------------
#
# With ``v`` ordinary tokens and a step limit ``L`` a source has
# ``N = sum_{n<L} v^n + v^L`` possible outputs: ``n`` tokens then ``<eos>`` (``n < L``), or ``L``
# tokens cut at the limit. Each one's log-probability is computed here from the models' *full*
# teacher-forced forward pass (``model(src, tgt_in)``), one unpadded source at a time, not from the
# decoders' incremental ``step`` that beam search uses, so the two computations share nothing but
# the weights.
#
# * A beam ``N`` wide prunes nothing: it must return all ``N`` outputs, ranked exactly as the
#   exhaustive scores rank them (catches a search that stops at its first finished hypothesis).
# * A narrow beam (``K = 1, 2, 3``) must return what the textbook algorithm returns, run here in
#   plain Python over the exhaustive table: per step the ``2K`` best extensions, those among the
#   best ``K`` that end in ``<eos>`` finished, the ``K`` best others alive, a source done once it
#   holds ``K`` finished hypotheses (catches keeping ``K`` instead of ``2K`` candidates, and
#   stopping early).


def random_model(kind: str, vocab: int, seed: int) -> torch.nn.Module:
    """A tiny model with weights spread wider than the default init, so that its output
    distributions are far from uniform and no two outputs score (nearly) the same."""
    model = tiny_model(
        kind,
        seed,
        vocab_size=vocab,
        embed_dim=8,
        hidden_dim=8,
        attention_dim=8,
        n_encoder_layers=1,
        n_decoder_layers=2 if kind == "convs2s" else 1,
        max_positions=12,
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
