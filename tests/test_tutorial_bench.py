"""``tools/tutorial_bench.py``: the tutorial's models read from a checkout's notebooks and
trained by the same harness as this package's, on the same batches. A fake checkout holds
notebooks with tiny stand-ins in the tutorial's signatures and data layouts (its GRU takes
``(length, batch)`` tensors and returns an empty first output), so the harness is checked
without the tutorial; the real one runs with ``--any-commit`` off its pinned commit only."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
from _files import load_module

from convs2s_edu import TrainConfig
from convs2s_edu.data import n_token_ids
from convs2s_edu.lab.timing import training_batches

CONV = """class Encoder(nn.Module):
    def __init__(self, V, emb, hid, layers, k, dropout, device, max_length=100):
        super().__init__()
        self.emb = nn.Embedding(V, emb)
    def forward(self, src):
        return self.emb(src), self.emb(src)
"""
CONV_DEC = """class Decoder(nn.Module):
    def __init__(self, V, emb, hid, layers, k, dropout, pad, device, max_length=100):
        super().__init__()
        self.emb, self.out = nn.Embedding(V, emb), nn.Linear(emb, V)
    def forward(self, trg, conved, combined):
        return self.out(self.emb(trg) + combined.mean(1, keepdim=True)), None
"""
CONV_S2S = """class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
    def forward(self, src, trg):
        return self.decoder(trg, *self.encoder(src))
"""
GRU = """class Attention(nn.Module):
    def __init__(self, enc_hid, dec_hid):
        super().__init__()
class Encoder(nn.Module):
    def __init__(self, V, emb, enc_hid, dec_hid, dropout):
        super().__init__()
        self.emb = nn.Embedding(V, emb)
class Decoder(nn.Module):
    def __init__(self, V, emb, enc_hid, dec_hid, dropout, attention):
        super().__init__()
        self.emb, self.out = nn.Embedding(V, emb), nn.Linear(emb, V)
class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder
    def forward(self, src, trg, teacher_forcing_ratio):
        assert teacher_forcing_ratio == 1.0
        assert src.shape[1] == trg.shape[1]  # (length, batch) both
        context = self.encoder.emb(src).mean(0)  # (batch, emb)
        out = self.decoder.out(self.decoder.emb(trg[:-1]) + context)  # inputs y_0..y_{T-1}
        return torch.cat([torch.zeros_like(out[:1]), out])  # output 0 is left empty
"""


@pytest.fixture
def checkout(tmp_path):
    bench = load_module("tools/tutorial_bench.py", "tutorial_bench_under_test")
    for model, cells in (("convs2s", [CONV, CONV_DEC, CONV_S2S]), ("gru", [GRU])):
        path = tmp_path / bench.NOTEBOOKS[model]
        path.parent.mkdir(parents=True, exist_ok=True)
        code = [{"cell_type": "code", "source": c.splitlines(True)} for c in cells]
        markdown = {"cell_type": "markdown", "source": ["# class notes\n"]}
        code.insert(0, {"cell_type": "code", "source": ["import spacy  # never run\n"]})
        path.write_text(json.dumps({"cells": [markdown, *code]}))
    return bench, tmp_path


@pytest.mark.parametrize("model", ["convs2s", "gru"])
def test_the_tutorials_step_trains_on_this_packages_batches(checkout, model):
    bench, path = checkout
    cfg = TrainConfig(device="cpu", n_train=64, batch_size=16)
    batch = training_batches(cfg, 1)[0]
    step = bench.tutorial_step(path, model, n_token_ids(cfg.vocab_size))
    names = bench.tutorial_classes(path, model)
    assert {"Encoder", "Decoder", "Seq2Seq"} <= set(names)  # class cells only were run
    before = [p.detach().clone() for p in step.model.parameters()]
    step(batch)  # the loss over the same target tokens (shapes must line up), clipping, Adam
    after = list(step.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before))


def test_another_commit_of_the_tutorial_is_refused(checkout, capsys):
    bench, path = checkout
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    with pytest.raises(SystemExit):
        bench.main([str(path), "--threads", "1"])
    assert bench.TUTORIAL_COMMIT in capsys.readouterr().err


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_this_packages_step_trains_in_the_precision_asked(checkout, monkeypatch, precision):
    """``--bf16`` times the fast path with its forward pass in bf16: the step is built with
    that precision (issue 53 found a timing that built every step in fp32)."""
    from convs2s_edu.training import step as step_module

    bench, _ = checkout
    built, make = [], step_module.make_train_step

    def recording(net, optimizer, clip_norm, precision="fp32"):
        built.append(precision)
        return make(net, optimizer, clip_norm, precision)

    monkeypatch.setattr(step_module, "make_train_step", recording)
    cfg = TrainConfig(device="cpu", n_train=64, batch_size=16)
    step = bench.package_step("convs2s", True, precision=precision)
    step(training_batches(cfg, 1)[0])
    assert built == [precision]
