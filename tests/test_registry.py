"""The model registry (issue 52): a new architecture is one registry entry.

A model written here from the interface alone (``Encoder``, ``Decoder``,
``EncoderDecoder``; it subclasses none of the registered models) is registered once and
then trained, checkpointed and loaded back, decoded, exported to ONNX for the browser page
and drawn, by the package's own entry points, which read the registry; and the registry
refuses what it cannot serve, naming the bad value.
"""

import pytest
import torch
import torch.nn.functional as F
from _files import load_module
from _tiny import tiny_config
from torch import nn

from convs2s_edu import TrainConfig, build_model, greedy_decode, load_checkpoint, train
from convs2s_edu.cli import build_parser
from convs2s_edu.data import PAD, n_token_ids
from convs2s_edu.registry import MODELS, model_entry, register_model
from convs2s_edu.seq2seq import Decoder, Encoder, EncoderDecoder, EncoderOut


class PositionEncoder(Encoder):
    """Token + position embeddings, nothing else: z_j = e_j = w_j + p_j."""

    def __init__(self, n_ids: int, d: int, max_positions: int):
        super().__init__()
        self.out_dim = self.embed_dim = self.summary_dim = d
        self.tokens = nn.Embedding(n_ids, d, padding_idx=PAD)
        self.positions = nn.Embedding(max_positions, d)

    def forward(self, src):
        padding = src.eq(PAD)  # (B, S)
        positions = torch.arange(src.shape[1], device=src.device)
        e = self.tokens(src) + self.positions(positions)  # (B, S, d)
        e = e.masked_fill(padding.unsqueeze(-1), 0.0)
        return EncoderOut(e, e, padding, e.sum(1))


class LookupDecoder(Decoder):
    """Each position attends over the source with the previous token and its position
    as the query, and predicts from the query and the context: no recurrence, no
    convolution, so the state of a step is the encoder output and the position."""

    multi_step = False

    def __init__(self, n_ids: int, d: int, max_positions: int):
        super().__init__()
        self.in_dim = d
        self.tokens = nn.Embedding(n_ids, d, padding_idx=PAD)
        self.positions = nn.Embedding(max_positions, d)
        self.out = nn.Linear(2 * d, n_ids)

    def _predict(self, q, enc_states, padding):  # q (B, T, d)
        scores = q @ enc_states.transpose(1, 2)  # (B, T, S)
        a = F.softmax(scores.masked_fill(padding.unsqueeze(1), float("-inf")), dim=-1)
        c = a @ enc_states  # (B, T, d)
        return self.out(torch.cat([q, c], dim=-1)), a

    def forward(self, tgt_in, enc):
        positions = torch.arange(tgt_in.shape[1], device=tgt_in.device)
        q = self.tokens(tgt_in) + self.positions(positions)  # (B, T, d)
        logits, a = self._predict(q, enc.states, enc.padding_mask)
        return logits, a.unsqueeze(1)  # (B, T, V), (B, 1, T, S)

    def start(self, enc):
        return enc.states, enc.padding_mask, 0

    def step(self, y_prev, state):
        states, padding, t = state
        q = self.tokens(y_prev) + self.positions.weight[t]  # (B, d)
        logits, a = self._predict(q.unsqueeze(1), states, padding)
        return logits[:, 0], a, (states, padding, t + 1)  # (B, V), (B, 1, S)

    def reorder(self, state, index):
        states, padding, t = state
        return states[index], padding[index], t


class LookupModel(EncoderDecoder):
    def __init__(self, vocab_size: int, max_positions: int, d: int = 16):
        n = n_token_ids(vocab_size)
        super().__init__(
            PositionEncoder(n, d, max_positions),
            LookupDecoder(n, d, max_positions),
            vocab_size=vocab_size,
            max_positions=max_positions,
        )


@pytest.fixture
def lookup():
    """The new model, registered for one test (and removed after it)."""
    entry = register_model(
        "lookup", lambda paper, **options: LookupModel(**options), label="Lookup"
    )
    yield entry
    del MODELS["lookup"]


def test_a_new_model_is_one_entry_trained_decoded_and_loaded(lookup, tmp_path):
    cfg = tiny_config("lookup", epochs=3, fast=False, lr=1e-2)
    assert isinstance(build_model(cfg), LookupModel)
    result = train(cfg, out_dir=tmp_path, progress=False)
    losses = [e["train_loss"] for e in result.history.epochs]
    assert losses[-1] < losses[0]  # it learnt something
    # decoded by the package's search, from the state its decoder keeps
    src = [[3, 1, 2], [5, 4, 6, 2]]
    out = greedy_decode(result.model, src)
    assert len(out) == 2 and all(0 < t <= cfg.vocab_size for row in out for t in row)
    # the checkpoint names its model and loads back by that name
    loaded = load_checkpoint(result.path)
    assert isinstance(loaded.model, LookupModel)
    for (k, v), w in zip(result.model.state_dict().items(), loaded.model.state_dict().values()):
        torch.testing.assert_close(v, w, msg=k)
    # the command line offers it
    args = build_parser().parse_args(["train", "--model", "lookup", "--out", str(tmp_path)])
    assert args.model == "lookup"


def test_a_new_model_is_exported_and_checked_for_the_browser(lookup, tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    tool = load_module("tools/export_onnx.py", "export_onnx_registry")
    model = LookupModel(vocab_size=10, max_positions=12).eval()
    sources = [[3, 1, 2], [5, 4, 6, 2, 9], [7]]
    report = tool.export_and_check({"lookup": model}, sources, tmp_path, seed=0)
    assert report["files"]["lookup"] == {"kind": "prefix", "files": {"decoder": "lookup.onnx"}}
    assert report["models"]["lookup"]["same_output"] == len(sources)
    assert report["models"]["lookup"]["max_logp_diff"] <= tool.TOL


def test_a_new_model_is_drawn(lookup):
    model = LookupModel(vocab_size=10, max_positions=12).eval()
    figure = lookup.draw(model, torch.tensor([[3, 1, 2, 5]]), torch.tensor([[11, 1, 2]]))
    # its own parts, in the order they ran, each arrow with the shapes it carried
    assert 'id="box:encoder"' in figure.svg and 'id="box:decoder"' in figure.svg
    assert 'id="arrow:decoder:3,13;1,3,4"' in figure.svg  # logits (T, V), attention (L, T, S)


def test_the_registry_names_what_it_refuses(lookup):
    with pytest.raises(ValueError, match=r"'lookup' is registered already"):
        register_model("lookup", lambda paper, **o: None, label="again")
    with pytest.raises(ValueError, match=r"export must be one of \('prefix', 'step'\), got 'x'"):
        register_model("other", lambda paper, **o: None, label="other", export="x")
    assert "other" not in MODELS
    with pytest.raises(ValueError, match=r"no model named 'nope'; registered: \[.*'lookup'\]"):
        model_entry("nope")
    with pytest.raises(ValueError, match=r"model must be one of the registered models .*'lookup'"):
        TrainConfig(model="nope")
    with pytest.raises(ValueError, match=r"model must be one of"):
        TrainConfig(model=["convs2s"])  # unhashable: refused, not a TypeError


def test_the_package_registers_its_own_models():
    assert list(MODELS)[:4] == ["convs2s", "gru", "gru+conv", "conv+gru"]
    assert model_entry("gru").export == "step" and model_entry("convs2s").export == "prefix"
    assert model_entry("gru").ignores == ("paper_normalisation",)
    assert model_entry("gru").label == "GRU + attention"


def test_ignored_fields_keeps_a_deprecation_alias():
    from convs2s_edu.training import config

    with pytest.warns(DeprecationWarning, match="IGNORED_FIELDS is deprecated"):
        assert config.IGNORED_FIELDS == {"gru": ("paper_normalisation",)}
