"""Tests of ``convs2s_edu.fast.paths``, the execution paths: the switch to the fast paths and
back, compiled and bf16 runs that agree with eager fp32, a path this machine cannot run
refused with the reason, and ``default_path`` picking one that can run."""

from __future__ import annotations

import copy

import pytest
import torch
from _tiny import KINDS, MODEL_SIZES, tiny_config, tiny_model
from torch import nn

from convs2s_edu import ConvBlock, GRUDecoder, GRUEncoder, SortingDataset, TrainConfig
from convs2s_edu.fast import FAST_CLASSES, use_fast_paths
from convs2s_edu.fast.paths import (
    ExecutionPath,
    apply_compile,
    autocast,
    available_paths,
    bf16_support,
    check_precision,
    cpu_bf16_support,
    use_compiled_fast_paths,
)
from convs2s_edu.training import build_model, train
from convs2s_edu.training.calibrate import default_path
from convs2s_edu.training.step import make_train_step


def _batches(n=3, seed=0, fixed=False):
    ds = SortingDataset.generate(24 * n, 5 if fixed else 2, 6 if not fixed else 5, 10, seed=seed)
    return [ds.collate([ds[j] for j in range(24 * i, 24 * (i + 1))]) for i in range(n)]


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_compiled_logits_and_training_match_eager(kind, device, single_thread):
    """Compiled logits == eager logits (1e-5), then the same training steps, dropout
    included on a CPU: there the model compiles through its fast paths that compile
    (``use_compiled_fast_paths``), the eager twin runs the same classes, and from the
    same seed both draw the same dropout masks.

    One compilation per model (cost on the 2-core CI machine: the compile dominates the
    test): training mode, batches of one length, so the forward and backward graphs are
    traced once; a second source length is :func:`train_run`'s business.
    """
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    # dropout on a CPU only: there both draw FastDropout's masks; a GPU compiles the
    # reference, whose dropout inductor draws with its own generator
    dropout = 0.3 if device.type == "cpu" else 0.0
    eager = tiny_model(kind, dropout=dropout).to(device)
    compiled = tiny_model(kind, dropout=dropout).to(device)
    compiled.load_state_dict(eager.state_dict())
    apply_compile(compiled)
    if device.type == "cpu":  # compiled through these classes (a GPU compiles the reference)
        use_compiled_fast_paths(eager)
        assert [type(m) for m in compiled.modules()] == [type(m) for m in eager.modules()]
    batches = [b.to(device) for b in _batches(fixed=True)]
    b = batches[0]
    logits = {}
    for name, m in (("eager", eager), ("compiled", compiled)):
        torch.manual_seed(0)  # the same dropout masks
        logits[name] = m(b.src, b.tgt_in)
    torch.testing.assert_close(logits["compiled"], logits["eager"], atol=1e-5, rtol=0)
    # the compiler really ran: frames were captured (a silent fallback to eager fails here)
    assert counters["stats"]["unique_graphs"] > 0
    # a few training steps of each: the same losses and weights (Adam, clipping)
    steps = {}
    for name, m in (("eager", eager), ("compiled", compiled)):
        torch.manual_seed(1)
        step = make_train_step(m, torch.optim.Adam(m.parameters(), lr=3e-3), 1.0)
        steps[name] = [float(step(b)) for b in batches * 2]
    torch.testing.assert_close(
        torch.tensor(steps["compiled"]), torch.tensor(steps["eager"]), atol=1e-4, rtol=0
    )
    assert steps["compiled"][-1] < steps["compiled"][0]  # it trains
    for (k, a), (_, c) in zip(eager.state_dict().items(), compiled.state_dict().items()):
        torch.testing.assert_close(c, a, atol=1e-4, rtol=0, msg=k)


def test_compiled_train_run_trains_and_checkpoints_like_eager(tmp_path, single_thread):
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    cfg = tiny_config(
        "gru",
        n_train=96,
        n_valid=24,
        n_test=24,
        batch_size=32,
        epochs=2,
        model_options=dict(MODEL_SIZES, max_positions=16),
    )
    fast = train(cfg.replace(compile=True, fast=False), out_dir=tmp_path / "c", progress=False)
    assert counters["stats"]["unique_graphs"] > 0  # train() compiled the model, no fallback
    slow = train(cfg, progress=False)
    assert fast.history.epochs[-1]["train_loss"] < fast.history.epochs[0]["train_loss"]
    torch.testing.assert_close(
        torch.tensor(fast.history.step_losses),
        torch.tensor(slow.history.step_losses),
        atol=1e-4,
        rtol=0,
    )
    # same parameter names as an eager model: the checkpoint loads into one
    from convs2s_edu import load_checkpoint

    loaded = load_checkpoint(tmp_path / "c")
    assert loaded.model.state_dict().keys() == slow.model.state_dict().keys()


@pytest.mark.parametrize("kind", ["convs2s", "gru"])
def test_bf16_run_close_to_fp32(kind, device, single_thread):
    ok, why = bf16_support(device)
    if not ok:
        pytest.skip(why)
    # tolerance: after 40 steps the bf16 loss is within 0.05 nats (or 5 %) of fp32's, and the
    # token accuracy on the training batches within 5 points: bf16 keeps 8 bits of mantissa,
    # the loss, weights and Adam stay in fp32
    results = {}
    for precision in ("fp32", "bf16"):
        m = tiny_model(kind).to(device)
        step = make_train_step(m, torch.optim.Adam(m.parameters(), lr=3e-3), 1.0, precision)
        batches = [b.to(device) for b in _batches(4)]
        for _ in range(10):
            for b in batches:
                loss = float(step(b))
        m.eval()
        with torch.no_grad(), autocast(device, precision):
            hits = total = 0
            for b in batches:
                pred = m(b.src, b.tgt_in).argmax(-1)
                mask = b.tgt_out != 0
                hits += int((pred == b.tgt_out)[mask].sum())
                total += int(mask.sum())
        results[precision] = (loss, hits / total)
    (l32, a32), (l16, a16) = results["fp32"], results["bf16"]
    assert abs(l16 - l32) <= max(0.05, 0.05 * l32)
    assert abs(a16 - a32) <= 0.05


def test_bf16_refused_with_the_reason_where_the_cpu_lacks_it():
    ok, why = cpu_bf16_support()
    if ok:
        check_precision("bf16", "cpu")  # accepted on a CPU with bf16 instructions
    else:
        with pytest.raises(ValueError, match="bf16 matrix instructions"):
            check_precision("bf16", "cpu")
    with pytest.raises(ValueError, match="precision must be one of"):
        check_precision("fp16", "cpu")


def test_cpu_flag_detection(monkeypatch):
    import convs2s_edu.fast.paths as fast

    monkeypatch.setattr(fast, "cpu_flags", lambda: {"avx2", "amx_bf16"})
    assert fast.cpu_bf16_support()[0]
    monkeypatch.setattr(fast, "cpu_flags", lambda: {"avx2", "fma"})
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    ok, why = fast.cpu_bf16_support()
    assert not ok and "AVX2" in why


def test_paths_and_the_default_path(monkeypatch, tmp_path):
    paths, skipped = available_paths("cpu")
    assert ExecutionPath() in paths and ExecutionPath(True) in paths
    assert ExecutionPath(fast=True) in paths
    assert [ExecutionPath().name, ExecutionPath(fast=True).name] == ["eager-fp32", "fast-fp32"]
    assert "compile-reduce-overhead-fp32" in skipped  # CUDA graphs: CUDA only
    assert ExecutionPath(True, "reduce-overhead", "bf16").name == "compile-reduce-overhead-bf16"
    monkeypatch.setenv("CONVS2S_EDU_CACHE", str(tmp_path))
    cfg = tiny_config("convs2s", fast=None)
    p = default_path("cpu", cfg)
    assert p in paths  # a path that can run here
    assert p in (ExecutionPath(), ExecutionPath(fast=True))  # fp32: the machine's choice
    with pytest.raises(ValueError, match="not decided"):
        ExecutionPath.of(cfg)


def test_fastest_cuda_path_keeps_compile_and_falls_back_to_fp32_without_bf16(monkeypatch):
    # a lookup, not a run: it needs no GPU. CUDA graphs, compiled, bf16 where supported
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Test GPU")
    for bf16, precision in ((True, "bf16"), (False, "fp32")):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda b=bf16: b)
        assert default_path("cuda") == ExecutionPath(True, "reduce-overhead", precision)


def test_bf16_support_on_a_machine_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bf16_support("cuda") == (False, "no CUDA device on this machine")
    assert default_path("cuda").precision == "fp32"


def test_compile_takes_the_encoder_and_the_decoder(monkeypatch):
    compiled = []

    def spy(fn, *args, **kwargs):  # nn.Module.compile calls torch.compile(self._call_impl)
        compiled.append(fn.__self__)
        return fn

    monkeypatch.setattr(torch, "compile", spy)
    for kind in KINDS:
        compiled.clear()
        model = build_model(tiny_config(kind))
        apply_compile(model)
        assert [id(m) for m in compiled] == [id(model.encoder), id(model.decoder)], kind


@pytest.mark.parametrize("kind", KINDS)
def test_the_switch_changes_classes_only_and_goes_back(kind):
    model = build_model(tiny_config(kind))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    parts = {id(m): type(m) for m in model.modules()}
    assert use_fast_paths(model) is model
    switched = [m for m in model.modules() if type(m) is not parts[id(m)]]
    assert switched and all(FAST_CLASSES[parts[id(m)]] is type(m) for m in switched)
    assert all(isinstance(m, (ConvBlock, GRUEncoder, GRUDecoder, nn.Dropout)) for m in switched)
    assert model.state_dict().keys() == before.keys()  # checkpoints load either way
    twin = copy.deepcopy(model)  # a copy keeps the fast classes
    assert [type(m) for m in twin.modules()] == [type(m) for m in model.modules()]
    use_fast_paths(model, False)
    assert {id(m): type(m) for m in model.modules()} == parts
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
    with pytest.raises(TypeError, match="enabled must be True or False, got 'yes'"):
        use_fast_paths(model, "yes")


def test_a_path_is_compiled_or_fast_not_both():
    with pytest.raises(ValueError, match="compiled .* or fast, not both"):
        ExecutionPath(True, fast=True)
    with pytest.raises(ValueError, match="compile=True needs fast=False"):
        TrainConfig(compile=True, fast=True)
    assert TrainConfig().fast is None  # the machine decides (training.calibrate)
    assert TrainConfig(compile=True).fast is None
    with pytest.raises(TypeError, match="fast must be True, False or None, got 1"):
        TrainConfig(fast=1)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "reference"])
def test_train_runs_the_path_of_its_config_and_returns_the_reference(fast, monkeypatch):
    """``TrainConfig.fast`` decides the classes the steps run through; the trained model is
    the reference either way."""
    seen = set()
    real = make_train_step

    def spy(model, *args, **kwargs):
        seen.update(type(m) for m in model.modules())
        return real(model, *args, **kwargs)

    monkeypatch.setattr("convs2s_edu.training.loop.make_train_step", spy)
    cfg = tiny_config("gru", n_train=48, n_valid=16, n_test=16, batch_size=16, epochs=1)
    result = train(cfg.replace(fast=fast), progress=False)
    assert bool(seen & set(FAST_CLASSES.values())) is fast
    assert not any(type(m) in FAST_CLASSES.values() for m in result.model.modules())
