"""Tests of convs2s_edu.decode (greedy and beam search on all four encoder/decoder
combinations), convs2s_edu.speed and convs2s_edu.samples."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from conftest import KINDS, make_model, output_layer

from convs2s_edu import PAD, Hypothesis, beam_search, eos_index, greedy_decode, sos_index
from convs2s_edu.lab.samples import format_samples, predict_samples
from convs2s_edu.lab.timing import time_incremental_vs_full

VOCAB = 9
SEEDS = (0, 1, 2)
# added to the <eos> logit: -1e4 -> never stop (every output runs to the step
# limit), 0 -> random models stop now and then, 3 -> they stop at all sorts of
# steps, so both the <eos> and the step-limit paths are exercised
EOS_BIASES = (-1e4, 0.0, 1.5, 3.0)
# beam search fills up with short finished hypotheses when <eos> is likely;
# these biases keep hypotheses long, so beams get pruned and reordered
BEAM_EOS_BIASES = (-1e4, 0.0, 0.3)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # tiny tensors: thread start-up costs more than it saves (and a busy
    # machine makes multi-threaded tiny ops very slow)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _tiny(kind, seed=0, eos_bias=0.0, **overrides):
    model = make_model(kind, seed, vocab_size=VOCAB, attention_dim=16, dropout=0.1, **overrides)
    with torch.no_grad():
        output_layer(model).bias[eos_index(VOCAB)] += eos_bias
    return model


def tiny_conv(seed=0, eos_bias=0.0, **overrides):
    return _tiny("convs2s", seed, eos_bias, **overrides)


def tiny_rnn(seed=0, eos_bias=0.0, **overrides):
    return _tiny("gru", seed, eos_bias, n_encoder_layers=1, n_decoder_layers=1, **overrides)


MAKERS = {
    kind: (lambda seed=0, eos_bias=0.0, kind=kind: _tiny(kind, seed, eos_bias)) for kind in KINDS
}
MAKERS["gru"] = tiny_rnn


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


@pytest.mark.parametrize("kind", MAKERS)
def test_incremental_matches_full_recompute(kind):
    """Step-by-step decoding from the state gives the same tokens as re-running the decoder
    over the prefix."""
    src = make_src()
    for seed in SEEDS:
        for bias in EOS_BIASES:
            model = MAKERS[kind](seed, bias)
            fast = greedy_decode(model, src, incremental=True)
            slow = greedy_decode(model, src, incremental=False)
            assert fast == slow, (seed, bias)


@pytest.mark.parametrize("kind", MAKERS)
def test_greedy_is_a_fixed_point_of_teacher_forcing(kind):
    """Feeding the greedy output back with teacher forcing, every position's argmax is the
    token greedy chose (and <eos> where it stopped)."""
    src = make_src()
    eos = eos_index(VOCAB)
    for seed in SEEDS:
        model = MAKERS[kind](seed, eos_bias=1.5).eval()
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


@pytest.mark.parametrize("kind", MAKERS)
def test_beam_size_one_equals_greedy(kind):
    src = make_src()
    for seed in SEEDS:
        for bias in EOS_BIASES:
            model = MAKERS[kind](seed, bias)
            for alpha in (0.0, 1.0):
                assert beam_search(model, src, beam_size=1, length_penalty=alpha) == greedy_decode(
                    model, src
                ), (seed, bias, alpha)


@pytest.mark.parametrize("kind", MAKERS)
def test_beam_hypotheses_scores_match_model(kind):
    """Every returned hypothesis carries its true log-probability and normalised score,
    hypotheses are distinct and sorted, and the best one is what beam_search returns."""
    src = make_src(batch=5)
    K, alpha = 4, 0.7
    for seed, bias in itertools.product(SEEDS, BEAM_EOS_BIASES):
        model = MAKERS[kind](seed, bias)
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


@pytest.mark.parametrize("kind", MAKERS)
def test_batch_decoding_equals_row_by_row(kind):
    """Padding a source into a batch does not change its output."""
    src = make_src(batch=5)
    for bias in BEAM_EOS_BIASES:
        model = MAKERS[kind](0, bias)
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


@pytest.mark.parametrize("kind", MAKERS)
def test_eos_and_step_limits(kind):
    src = make_src(batch=4)
    n_src = src.ne(PAD).sum(dim=1).tolist()
    # <eos> always wins: every output is empty
    assert greedy_decode(MAKERS[kind](0, eos_bias=1e4), src) == [[]] * 4
    assert beam_search(MAKERS[kind](0, eos_bias=1e4), src, beam_size=3) == [[]] * 4
    # <eos> never wins: outputs run to the default limit, source length + 1
    never = MAKERS[kind](0, eos_bias=-1e4)
    assert [len(o) for o in greedy_decode(never, src)] == [n + 1 for n in n_src]
    assert [len(o) for o in beam_search(never, src, beam_size=3)] == [n + 1 for n in n_src]
    assert [len(o) for o in greedy_decode(never, src, max_len=3)] == [3] * 4
    # no PAD / <sos> / <eos> in the outputs
    for o in greedy_decode(MAKERS[kind](1), src) + beam_search(MAKERS[kind](1), src):
        assert all(1 <= t <= VOCAB for t in o)
    # stop_at_eos=False: exactly max_len tokens, <eos> kept as a token
    forced = greedy_decode(MAKERS[kind](0, eos_bias=1e4), src, max_len=5, stop_at_eos=False)
    assert forced == [[eos_index(VOCAB)] * 5] * 4


@pytest.mark.parametrize("kind", MAKERS)
@pytest.mark.parametrize("incremental", [True, False])
def test_return_attention(kind, incremental):
    src = make_src(batch=4)
    model = MAKERS[kind](0, eos_bias=2.0)
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


@pytest.mark.parametrize("kind", MAKERS)
def test_training_mode_restored_and_no_grad(kind):
    model = MAKERS[kind](0).train()
    model.encoder.eval()  # a mixed state must come back as it was
    before = {name: m.training for name, m in model.named_modules()}
    greedy_decode(model, make_src(batch=2))
    beam_search(model, make_src(batch=2), beam_size=2)
    greedy_decode(model, make_src(batch=2), incremental=False)
    assert {name: m.training for name, m in model.named_modules()} == before
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("kind", MAKERS)
def test_list_input(kind):
    model = MAKERS[kind](0, eos_bias=1.5)
    src = make_src(batch=3)
    rows = [[t for t in row if t != PAD] for row in src.tolist()]
    assert greedy_decode(model, rows) == greedy_decode(model, src)
    assert beam_search(model, rows, beam_size=2) == beam_search(model, src, beam_size=2)


def test_bad_arguments():
    model, src = tiny_conv(), make_src(batch=2)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src, beam_size=0)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, max_len=0)
    with pytest.raises(ValueError, match=r"max_len.*1\.\.24"):
        greedy_decode(model, src, max_len=25)
    with pytest.raises(ValueError, match="max_len"):
        beam_search(tiny_rnn(), src, max_len=0)
    with pytest.raises(ValueError, match="length_penalty"):
        beam_search(model, src, length_penalty=-1.0)
    with pytest.raises(ValueError, match="padding"):
        greedy_decode(model, torch.tensor([[1, 2], [0, 0]]))
    with pytest.raises(ValueError, match="token id"):
        greedy_decode(model, torch.tensor([[1, 99]]))
    with pytest.raises(TypeError, match="Linear"):
        greedy_decode(torch.nn.Linear(2, 2), src)


@pytest.mark.parametrize("kind", MAKERS)
def test_time_incremental_vs_full_records(kind):
    model = MAKERS[kind](0)
    was_training = model.training
    records = time_incremental_vs_full(model, target_lengths=(3, 6), batch_size=2, repeats=1)
    assert [r["target_len"] for r in records] == [3, 6]
    for r in records:
        assert set(r) >= {"target_len", "seconds_full", "seconds_incremental", "speedup"}
        assert r["seconds_full"] > 0 and r["seconds_incremental"] > 0
        assert r["speedup"] == pytest.approx(r["seconds_full"] / r["seconds_incremental"])
    assert model.training == was_training
    with pytest.raises(ValueError, match="max_positions"):
        time_incremental_vs_full(model, target_lengths=(3, 25), batch_size=1, repeats=1)
    with pytest.raises(ValueError, match="repeats"):
        time_incremental_vs_full(model, target_lengths=(3,), repeats=0)


def test_predict_samples_and_format():
    examples = [([3, 1, 2], [1, 2, 3]), ([5, 4], [4, 5])]
    models = {"conv": tiny_conv(0, eos_bias=1.5), "gru": tiny_rnn(0, eos_bias=1.5)}
    rows = predict_samples(models, examples, beam_size=2)
    assert len(rows) == 2
    assert list(rows[0]) == [
        "source",
        "reference",
        "conv greedy",
        "conv beam=2",
        "gru greedy",
        "gru beam=2",
    ]
    src = [x for x, _ in examples]
    assert [r["conv greedy"] for r in rows] == greedy_decode(models["conv"], src)
    assert [r["gru beam=2"] for r in rows] == beam_search(models["gru"], src, beam_size=2)
    text = format_samples(rows)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["#", "source", "reference"]
    assert lines[1].startswith("0  3 1 2")
    # columns are aligned: the "reference" column starts at the same offset on every line
    col = lines[0].index("reference")
    assert lines[1][col:].startswith("1 2 3") and lines[2][col:].startswith("4 5")
    blocks = format_samples(rows, layout="blocks")
    assert "example 1" in blocks and "gru beam=2" in blocks
    hand = [
        {"source": [2, 1], "reference": [1, 2], "m": [1, 2]},
        {"source": [2, 1], "reference": [1, 2], "m": [2]},
    ]
    assert format_samples(hand).splitlines() == [
        "#  source  reference  m",
        "0  2 1     1 2        1 2",
        "1  2 1     1 2        2*",
        "* differs from the reference",
    ]
    with pytest.raises(ValueError, match="layout"):
        format_samples(rows, layout="wide")
    with pytest.raises(ValueError, match="beam_size"):
        predict_samples(models, examples, beam_size=0)
