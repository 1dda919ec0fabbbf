"""Tests of ``convs2s_edu.hybrid``: the bridges between a GRU part and a convolutional part,
the config that both parts must agree on, and hybrids trained, saved and loaded by name. (Their
model-level properties are tested with the other combinations in ``test_seq2seq.py``.)"""

from __future__ import annotations

import pytest
import torch
from _tiny import randomise_biases, tiny_config, tiny_model
from torch.testing import assert_close

from convs2s_edu import (
    MODEL_NAMES,
    HybridConfig,
    beam_search,
    build_model,
    collate_batch,
    greedy_decode,
    load_checkpoint,
)
from convs2s_edu.training import cache_key, train

pytestmark = pytest.mark.usefixtures("single_thread")


def test_bridges_have_the_sizes_the_parts_need():
    f, n = 16, 20
    gru_conv = tiny_model("gru+conv", embed_dim=f, hidden_dim=n)
    conv_gru = tiny_model("conv+gru", embed_dim=f, hidden_dim=n)
    assert gru_conv.bridge.weight.shape == (f, 2 * n)  # annotations 2n -> keys f
    assert conv_gru.bridge.weight.shape == (2 * n, f)  # z^u f -> annotations 2n
    assert conv_gru.decoder.W_init.weight.shape == (n * 2, f)  # s_0 from the mean of z^u
    assert tiny_model("convs2s").bridge is None and tiny_model("gru").bridge is None
    src = torch.tensor([[3, 1, 2, 0]])
    with torch.no_grad():
        for model in (gru_conv, conv_gru):
            randomise_biases(model)
            raw = model.encoder(src)
            enc = model.encode(src)
            # z~_j = W_b z_j + b_b on the real tokens, zero at padding
            by_hand = raw.states[0, :3] @ model.bridge.weight.T + model.bridge.bias
            assert_close(enc.states[0, :3], by_hand)
            assert (enc.states[0, 3] == 0).all()
    # the conv encoder's summary is the mean of z^u over the real tokens
    z = conv_gru.encoder(src)
    assert_close(z.summary[0], z.states[0, :3].mean(0))


def test_hybrid_parts_must_agree_on_shared_sizes():
    cfg = HybridConfig.from_options("gru+conv", vocab_size=10, embed_dim=8)
    assert cfg.conv.embed_dim == cfg.rnn.embed_dim == 8
    with pytest.raises(ValueError, match=r"agree on embed_dim, got 8 \(conv\) and 16 \(rnn\)"):
        HybridConfig("gru+conv", cfg.conv, cfg.rnn.replace(embed_dim=16))
    with pytest.raises(ValueError, match="name must be one of"):
        HybridConfig("lstm+conv")
    with pytest.raises(ValueError, match="n_heads"):
        HybridConfig.from_options("conv+gru", n_heads=4)


@pytest.mark.parametrize("kind", ["gru+conv", "conv+gru"])
def test_hybrids_train_by_name_and_their_checkpoints_load(kind, tmp_path):
    cfg = tiny_config(kind, n_train=64)
    result = train(cfg, out_dir=tmp_path, progress=False)
    assert result.model.cfg.name == kind
    loaded = load_checkpoint(tmp_path)
    src = collate_batch([([3, 1, 2], [1, 2, 3])], 10).src
    assert greedy_decode(loaded.model, src) == greedy_decode(result.model, src)
    assert beam_search(loaded.model, src, beam_size=2) == beam_search(
        result.model, src, beam_size=2
    )
    # the paper switch reaches the convolutional part; the cache keeps the kinds apart
    conv_part = build_model(cfg).cfg.conv
    assert conv_part.weight_norm and conv_part.scale_context
    assert not build_model(cfg.replace(paper_normalisation=False)).cfg.conv.weight_norm
    keys = {cache_key(cfg.replace(model=k)) for k in MODEL_NAMES}
    assert len(keys) == len(MODEL_NAMES)
