"""Tests of ``convs2s_edu.lab.figures``, the gallery's figure helpers: ``capture`` records what
modules compute and leaves no hook behind, the heatmaps draw what they are given, and
``loss_curves`` puts epochs on the clock it is given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _tiny import tiny_model  # noqa: E402

from convs2s_edu import History  # noqa: E402
from convs2s_edu.lab import figures  # noqa: E402


def test_capture_records_outputs_inputs_and_gradients_then_removes_its_hooks():
    model = tiny_model("convs2s").eval()
    src, tgt = torch.tensor([[3, 1, 2]]), torch.tensor([[11, 1, 2, 3]])
    enc = model.encoder
    with figures.capture({"e": enc.embed, "b": enc.blocks[0]}, retain_grad=True) as out:
        with figures.capture({"b": enc.blocks[1]}, inputs=True) as inp:
            z = model.encode(src).states
    assert torch.equal(inp["b"][0], out["b"][0])  # block 1's output is block 2's input
    assert out["e"][0].shape == (1, 3, 16) and len(out["b"]) == 1
    z.sum().backward()
    assert out["e"][0].grad is not None  # retain_grad: the gradient reached the record
    model.encode(src)  # after the block: nothing more is recorded
    assert len(out["b"]) == 1 and len(inp["b"]) == 1
    assert not enc.blocks[0]._forward_hooks and not enc.blocks[1]._forward_pre_hooks
    model(src, tgt)


def test_token_labels_name_the_special_tokens():
    assert figures.token_labels([0, 3, 11, 12], 10) == ["·", "3", "<sos>", "<eos>"]
    assert figures.token_labels(torch.tensor([11, 5]), 10) == ["<sos>", "5"]


def test_the_heatmap_draws_the_part_the_labels_name():
    fig, ax = plt.subplots()
    a = torch.arange(12.0).view(3, 4) / 12  # (T, S)
    im = figures.attention_heatmap(ax, a, ["x", "y"], ["1", "2", "3"], vmax=None)
    assert im.get_array().shape == (3, 2)  # rows of the targets, columns of the named sources
    assert im.get_clim() == (0, float(a[:, :2].max()))
    plt.close(fig)


def test_loss_curves_put_the_epochs_on_the_clock_given():
    h = History(
        epochs=[{"epoch": e, "valid_loss": 1.0 / e} for e in (1, 2)], step_losses=[4, 3, 2, 1]
    )
    for spe, ends in ((None, [1.0, 2.0]), ({"m": 10.0}, [10.0, 20.0])):
        fig, ax = plt.subplots()
        figures.loss_curves(ax, {"m": h}, {"m": "C0"}, seconds_per_epoch=spe)
        steps, dots = ax.get_lines()
        assert np.allclose(dots.get_xdata(), ends)
        assert np.allclose(dots.get_ydata(), [1.0, 0.5])
        assert np.allclose(steps.get_xdata()[-1], ends[-1])  # the last step ends the last epoch
        plt.close(fig)
