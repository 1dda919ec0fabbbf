"""tools/export_onnx.py on small models: the graphs of the "Try the models" page (issue 20).

The tool exports the site's two trained models; here it exports tiny ones (weight-normalised
ConvS2S, a GRU model) and its own checks must pass on them, and fail on the mistakes they are
there to catch: a GRU translated without ``linear_before_reset``, a length frozen to the
example's, weight normalisation removed from the cached model itself, a Python onnxruntime on
another release line than the page's onnxruntime-web.
"""

import json
import random

import pytest
import torch
from _files import load_module
from _tiny import randomise_biases, tiny_model
from torch.nn.utils import parametrize

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

P = 12  # the tiny models' position table


@pytest.fixture(scope="module")
def tool():
    return load_module("tools/export_onnx.py", "export_onnx_under_test")


@pytest.fixture(scope="module")
def models():
    conv = tiny_model("convs2s", weight_norm=True, scale_context=True, max_positions=P)
    gru = tiny_model("gru", max_positions=P)  # two layers each: s is (2, 1, n)
    for model in (conv, gru):
        randomise_biases(model)
    return {"convs2s": conv.eval(), "gru": gru.eval()}


@pytest.fixture(scope="module")
def sources(models):
    rng = random.Random(0)
    V = models["convs2s"].vocab_size
    return [[rng.randint(1, V) for _ in range(n)] for n in (1, 2, 3, 5, 8, P)]


@pytest.fixture(scope="module")
def exported(tool, models, tmp_path_factory):
    out = tmp_path_factory.mktemp("graphs")
    files, wrappers = tool.export_models(models, out)
    return files, wrappers


def test_the_whole_export_passes_its_checks(tool, models, sources, tmp_path):
    report = tool.export_and_check(models, sources, tmp_path, seed=0)
    for name in tool.SITE_MODELS:
        facts = report["models"][name]
        assert facts["same_output"] == len(sources)
        assert facts["max_logp_diff"] <= tool.TOL
        assert facts["lengths_max_diff"] <= tool.TOL
    # one parametrization per weight-normalised layer of ConvS2S, none in the GRU model
    assert report["weight_norm_removed"]["convs2s"] > 0
    assert report["weight_norm_removed"]["gru"] == 0
    assert report["pack_max_diff"] <= tool.PACK_TOL
    assert {g["opset"] for g in report["graphs"].values()} == {tool.OPSET}


def test_the_plain_copy_leaves_the_cached_model_weight_normalised(tool, models):
    conv = models["convs2s"]
    plain = tool.without_weight_norm(conv)
    assert not any(parametrize.is_parametrized(m) for m in plain.modules())
    assert any(parametrize.is_parametrized(m) for m in conv.modules())
    src, tgt = torch.tensor([[3, 1, 2]]), torch.tensor([[conv.vocab_size + 1, 1, 2]])
    with torch.no_grad():
        torch.testing.assert_close(plain(src, tgt), conv(src, tgt))


def test_removing_the_parametrization_of_a_deep_copy_breaks_the_original():
    """Why without_weight_norm builds a new model: the copy shares the parametrized class."""
    import copy

    conv = tiny_model("convs2s", weight_norm=True, max_positions=P).eval()
    twin = copy.deepcopy(conv)
    for module in twin.modules():
        if parametrize.is_parametrized(module):
            parametrize.remove_parametrizations(module, "weight")
    with pytest.raises(AttributeError, match="weight"):
        conv(torch.tensor([[3, 1, 2]]), torch.tensor([[conv.vocab_size + 1]]))


def test_the_graphs_keep_their_lengths_free(tool, exported):
    files, _ = exported
    tool.check_dynamic_axes(files["convs2s"]["decoder"], {"src": {1: "S"}, "prefix": {1: "T"}})
    tool.check_dynamic_axes(files["gru"]["encoder"], {"src": {1: "S"}, "h": {1: "S"}})


def test_a_length_frozen_to_the_example_is_refused(tool, models, tmp_path):
    module = tool.PrefixNext(tool.without_weight_norm(models["convs2s"])).eval()
    path = tmp_path / "frozen.onnx"
    example = (torch.tensor([[3, 1, 2, 5]]), torch.tensor([[models["convs2s"].vocab_size + 1]]))
    tool.export_graph(module, example, path, "src prefix", "lp att", {})
    with pytest.raises(tool.CheckFailed, match="not the free length 'S'"):
        tool.check_dynamic_axes(path, {"src": {1: "S"}})


def _drop_linear_before_reset(path):
    model = onnx.load(str(path))
    for node in model.graph.node:
        if node.op_type == "GRU":
            for attr in node.attribute:
                if attr.name == "linear_before_reset":
                    attr.i = 0
    onnx.save(model, str(path))


def test_a_gru_without_linear_before_reset_is_caught(tool, models, sources, tmp_path):
    files, _ = tool.export_models(models, tmp_path)
    _drop_linear_before_reset(files["gru"]["step"])
    with pytest.raises(tool.CheckFailed, match="linear_before_reset=0"):
        tool.check_gru_nodes(files["gru"].values())
    ids = tool.token_ids(models["gru"].vocab_size)
    wrong = tool.OrtModel("step", files["gru"], ids)
    with pytest.raises(tool.CheckFailed, match="differ from PyTorch's"):
        tool.check_test_set("gru", models["gru"], wrong, sources, ids, P)
    # and so does the comparison at lengths 1, 2 and max_positions
    (tmp_path / "again").mkdir()
    _, wrappers = tool.export_models(models, tmp_path / "again")
    with pytest.raises(tool.CheckFailed, match="gru: onnxruntime's .* differs from PyTorch's"):
        tool.check_lengths("gru", models["gru"], wrappers["gru"], wrong, ids, P, random.Random(0))


def test_the_unpacked_gru_encoder_equals_the_packed_one(tool, models, sources, exported):
    _, wrappers = exported
    worst = tool.check_packing(models["gru"], wrappers["gru"][0], sources, "test")
    assert worst <= tool.PACK_TOL


def test_greedy_never_picks_pad_or_sos(tool):
    ids = {"pad": 0, "sos": 4, "eos": 5}
    assert tool.next_token([9.0, -1.0, 0.5, 0.0, 8.0, 0.1], ids) == 2


def test_the_web_runtime_must_be_on_the_python_runtimes_line(tool, tmp_path, monkeypatch):
    import onnxruntime

    monkeypatch.setattr(tool, "NODE_ORT", tmp_path)
    with pytest.raises(tool.CheckFailed, match="npm ci"):
        tool.runtime_version()
    major, minor = onnxruntime.__version__.split(".")[:2]
    (tmp_path / "package.json").write_text(json.dumps({"version": f"{major}.{int(minor) + 1}.0"}))
    with pytest.raises(tool.CheckFailed, match="different release lines"):
        tool.runtime_version()
    (tmp_path / "package.json").write_text(json.dumps({"version": f"{major}.{minor}.9"}))
    assert tool.runtime_version() == f"{major}.{minor}.9"


def test_decodings_that_stop_at_eos_are_compared_to_their_end(tool, tmp_path):
    """PyTorch's reference keeps the step that emitted <eos> (its log-probabilities too)."""
    models = {m: tiny_model(m, eos_bias=3.0, max_positions=P).eval() for m in tool.SITE_MODELS}
    ids = tool.token_ids(models["convs2s"].vocab_size)
    sources = [[1, 2, 3], [4, 5, 6, 7, 8], [2, 2]]
    files, _ = tool.export_models(models, tmp_path)
    for name, kind in (("convs2s", "prefix"), ("gru", "step")):
        refs = tool.torch_greedy_batch(models[name], sources, ids)
        assert all(tokens[-1] == ids["eos"] for tokens, _, _ in refs)
        assert all(len(logp) == len(tokens) for tokens, logp, _ in refs)
        ort_model = tool.OrtModel(kind, files[name], ids)
        facts = tool.check_test_set(name, models[name], ort_model, sources, ids, P)
        assert facts["same_output"] == len(sources)
