#!/usr/bin/env python
"""Export the site's two trained models to ONNX for the "Try the models" page, and check them.

``tox -e docs`` and ``tox -e docs-quick`` run this after ``tools/prepare_site.py`` (which trained
the models into the cache) and ``npm ci`` (which installed onnxruntime-web), and before
``sphinx-build``::

    python tools/export_onnx.py              # CONVS2S_EDU_QUICK decides full or quick
    python tools/export_onnx.py --no-cache   # export and check again

It loads the two models the gallery trains, ``site_config("convs2s")`` and
``site_config("gru")``, with :func:`convs2s_edu.train_or_load` (from the training cache: it
trains only what ``prepare_site`` did not), and writes ``docs/_build/try-assets-<mode>/try/``,
which ``docs/conf.py`` adds to the site's static files (``_static/try/``):

``convs2s.onnx``
    ``(src (1, S), prefix (1, T)) -> log_probs (1, V), attention (1, L, S)``: the package's
    own ``model.decoder(prefix, model.encode(src))`` over the whole prefix, kept at the last
    position; ``attention`` holds one map per decoder layer. A step of the incremental
    ``Decoder.step`` would not export faithfully: its position is a Python ``int`` that the
    graph would freeze. The prefix graph is the ``incremental=False`` path of
    :func:`~convs2s_edu.greedy_decode`.
``gru_encoder.onnx``, ``gru_step.onnx``
    ``src (1, S) -> h (1, S, 2n), keys (1, S, A), s (L, 1, n)`` (the encoder and
    ``Decoder.start``) and ``(y_prev (1,), h, keys, s) -> log_probs (1, V), attention (1, 1, S),
    s_next`` (``Decoder.step``). The GRU encoder packs its batch
    (``pack_padded_sequence``), which does not export; a batch of one source has no padding,
    so the graph runs the same ``nn.GRU`` without packing, and the check below proves the
    two equal.
``models.json``
    what the page needs: the token ids, the vocabulary, the position table, the files.
``ort/``
    the onnxruntime-web files the page loads, copied from ``node_modules`` (``npm ci``).

Checks; any failure exits with status 1 and writes nothing:

* weight normalisation: a copy without the parametrizations is exported (the graph holds
  the plain weights :math:`w = g v / \\lVert v \\rVert`); the cached model keeps them and its
  parameters are unchanged afterwards;
* the unpacked GRU encoder equals the packed one on every test source and at lengths 1, 2
  and the longest allowed (``max_positions``): the same numbers, to
  :data:`PACK_TOL`;
* dynamic lengths: every graph, run by onnxruntime at source and prefix lengths 1, 2 and
  ``max_positions``, gives PyTorch's numbers (log-probabilities, attention, the GRU state)
  to :data:`TOL`, and so do whole greedy decodings of sources of ``max_positions`` tokens;
  a length frozen at the example's would fail here, and so would the axes of the saved
  graphs if they were not free (:func:`check_dynamic_axes`);
* the GRU graphs keep ``linear_before_reset=1`` (PyTorch's GRU applies the reset gate after
  the recurrent matrix product; a translation that drops it is off by ~0.1);
* the whole test set: onnxruntime's greedy decoding gives PyTorch's
  (:func:`~convs2s_edu.greedy_decode`) output on every test example, and at every step
  of it the same log-probabilities of every token id, to :data:`TOL`, and the same
  attention;
* the runtime: the graphs' opset is :data:`OPSET` and onnxruntime (Python, pinned on the
  release line of onnxruntime-web) loads them; the onnxruntime-web in ``node_modules`` is
  on that release line.

Cache: the exported and checked files are kept in ``$CONVS2S_EDU_CACHE/onnx-export/<key>``,
the key a hash of both checkpoints, this file and the versions of torch, onnx, onnxruntime
and the package; a later build with the same key copies them instead of exporting and
checking again.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import random
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

# before anything loads torch: the package's OpenMP settings (convs2s_edu._threads)
import convs2s_edu

# isort: split
import numpy as np
import onnx
import onnxruntime
import torch
from torch import nn
from torch.nn.utils import parametrize

from convs2s_edu.data import PAD, eos_index, sos_index
from convs2s_edu.registry import model_entry
from convs2s_edu.rnn import GRUDecoderState
from convs2s_edu.seq2seq import EncoderOut

ROOT = Path(__file__).resolve().parents[1]
NODE_ORT = ROOT / "node_modules" / "onnxruntime-web"
#: The ONNX opset of every graph: one that onnxruntime 1.30 (Python and web) runs in full.
OPSET = 18
#: Most a log-probability (or an attention weight, or a GRU state) may differ between
#: onnxruntime and PyTorch. Both compute in float32; what they differ by is the order of
#: the sums; a wrong graph differs by 1e-2 and more.
TOL = 1e-4
#: Most the unpacked GRU encoder may differ from the packed one (the same kernels, one
#: sequence: in practice they agree exactly).
PACK_TOL = 1e-6
#: The onnxruntime-web files the page loads: the classic-script API (no bundler needed),
#: the WebAssembly runtime without WebGPU (the smallest) and its ES-module loader.
RUNTIME_FILES = ("ort.wasm.min.js", "ort-wasm-simd-threaded.wasm", "ort-wasm-simd-threaded.mjs")
#: The site's two models; any registered model exports the way its registry entry says
#: (:data:`convs2s_edu.registry.EXPORTS`).
SITE_MODELS = ("convs2s", "gru")


class CheckFailed(RuntimeError):
    """A check of the exported graphs failed: the message says which and by how much."""


# -- The graphs: thin wrappers around the package's own modules (nothing re-implemented) --


class _Wrapper(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model


class PrefixNext(_Wrapper):
    """``(src (1, S), prefix (1, T)) -> log p(y_{T+1} | prefix, src) (1, V)``, and the
    attention of every decoder layer for that position ``(1, L, S)``: any model's own
    decoder over the whole prefix (ConvS2S's graph)."""

    def forward(self, src, prefix):
        logits, attention = self.model.decoder(prefix, self.model.encode(src))
        return torch.log_softmax(logits[:, -1], dim=-1), attention[:, :, -1]


class GRUStart(_Wrapper):
    """``src (1, S) -> h, keys, s_0``: the GRU encoder without packing, then
    ``Decoder.start``. One source has no padding, so packing changes nothing."""

    def forward(self, src):
        enc = self.model.encoder
        x = enc.dropout(enc.embed(src))  # (1, S, E)
        h, h_n = enc.gru(x)  # (1, S, 2n), (2 L_enc, 1, n)
        out = EncoderOut(states=h, embedded=x, padding_mask=src.eq(PAD), summary=h_n[-1])
        state = self.model.decoder.start(out)
        return state.h, state.keys, state.s


class GRUStep(_Wrapper):
    """``(y_prev (1,), h, keys, s) -> log p(y_t) (1, V), attention (1, 1, S), s_t``:
    ``Decoder.step`` on a state without padding."""

    def forward(self, y_prev, h, keys, s):
        no_padding = torch.zeros(h.shape[:2], dtype=torch.bool, device=h.device)
        state = GRUDecoderState(h=h, keys=keys, padding_mask=no_padding, s=s)
        logits, attention, new = self.model.decoder.step(y_prev, state)
        return torch.log_softmax(logits, dim=-1), attention, new.s


def parametrized(model) -> list[str]:
    """The names of the parametrized (weight-normalised) modules of ``model``."""
    return [n for n, m in model.named_modules() if parametrize.is_parametrized(m)]


def without_weight_norm(model):
    """A plain copy of ``model`` in eval mode: every weight-normalised weight computed once,
    :math:`w = g v / \\lVert v \\rVert`, into a model built without weight normalisation;
    ``model`` is left alone.

    Not ``remove_parametrizations`` on a ``copy.deepcopy``: the copy shares the original's
    parametrized class (``ParametrizedLinear``), and removing the parametrization deletes the
    ``weight`` property from that shared class, which breaks the original (the cached model
    then fails with ``'ParametrizedLinear' object has no attribute 'weight'``).
    """
    cfg = getattr(model, "cfg", None)
    if not getattr(cfg, "weight_norm", False):
        plain = copy.deepcopy(model)
    else:
        plain = type(model)(cfg.replace(weight_norm=False))
        state = {k: v for k, v in model.state_dict().items() if ".parametrizations." not in k}
        with torch.no_grad():
            for name, module in model.named_modules():
                if parametrize.is_parametrized(module):
                    for p in module.parametrizations:
                        state[f"{name}.{p}"] = getattr(module, p).detach().clone()
        plain.load_state_dict(state)  # strict: every tensor of the plain model accounted for
    if left := parametrized(plain):
        raise CheckFailed(f"parametrizations left in the copy to export: {left}")
    return plain.eval()


def export_graph(module, args, path: Path, inputs: str, outputs: str, dynamic) -> None:
    """``torch.onnx.export`` of ``module`` at :data:`OPSET`, one file, its inputs and outputs
    named (``inputs``, ``outputs``: names separated by spaces), with the axes in ``dynamic``
    (``{input or output name: {axis: name}}``) left free.

    The TorchScript exporter (``dynamo=False``), not the ``torch.export`` one: both give
    the same numbers here, but the latter freezes the sequence length of the GRU's
    intermediate shapes at the example's, so that onnxruntime warns at every run at another
    length, and it needs onnxscript. The TorchScript exporter translates ``nn.GRU`` to one
    ONNX ``GRU`` node with free lengths.
    """
    with torch.no_grad(), warnings.catch_warnings():
        # What the TorchScript exporter says about this export, each checked below instead:
        # it is deprecated (see the note in this docstring); the tracer freezes three Python
        # checks of the package (the position-table bound, the embedding size, a convolution's
        # input at least k long), whose inputs the page checks first; constant folding skips
        # a Slice; a GRU batch other than 1 (ours is 1).
        warnings.filterwarnings("ignore", message="You are using the legacy TorchScript")
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", message="Constant folding", category=UserWarning)
        warnings.filterwarnings("ignore", message="Exporting a model to ONNX with a batch_size")
        warnings.filterwarnings("ignore", message="The feature will be removed")
        names = {"input_names": inputs.split(), "output_names": outputs.split()}
        options = {"dynamic_axes": dynamic, "opset_version": OPSET, "dynamo": False}
        torch.onnx.export(module, args, str(path), **names, **options)
    check_dynamic_axes(path, dynamic)


def check_dynamic_axes(path: Path, dynamic: dict) -> None:
    """Every axis of ``dynamic`` is a named (free) dimension of the saved graph, not the
    example's length."""
    graph = onnx.load(str(path)).graph
    declared = {v.name: v.type.tensor_type.shape.dim for v in [*graph.input, *graph.output]}
    for name, axes in dynamic.items():
        for axis, label in axes.items():
            if (dim := declared[name][axis]).dim_param != label:
                frozen = (
                    f"{path.name}: axis {axis} of {name!r} is {dim.dim_param or dim.dim_value}"
                )
                raise CheckFailed(f"{frozen}, not the free length {label!r}")


# -- Decoding with onnxruntime and with PyTorch --------------------------------


class OrtModel:
    """The exported graphs of one model (``kind``: ``"prefix"``, ConvS2S's one graph over the
    prefix, or ``"step"``, the GRU's encoder and one-step graphs), run by onnxruntime (Python)
    the way the page runs them in the browser."""

    def __init__(self, kind: str, files: dict, ids: dict):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # like the page (one WebAssembly thread)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.kind, self.ids = kind, ids
        self.sessions = {
            role: onnxruntime.InferenceSession(str(path), options, ["CPUExecutionProvider"])
            for role, path in files.items()
        }

    def greedy(self, src, max_positions: int):
        """Greedy decoding of ``src``: tokens (``<eos>`` included when emitted), and the
        log-probabilities and attention of every step."""
        run = {role: session.run for role, session in self.sessions.items()}
        x, tokens, logps, attns = np.asarray([src], dtype=np.int64), [self.ids["sos"]], [], []
        if self.kind == "step":
            h, keys, s = run["encoder"](None, {"src": x})
        for _ in range(min(len(src) + 1, max_positions)):
            fed = np.asarray([tokens] if self.kind == "prefix" else tokens[-1:], dtype=np.int64)
            if self.kind == "prefix":
                logp, attn = run["decoder"](None, {"src": x, "prefix": fed})
            else:
                logp, attn, s = run["step"](None, {"y_prev": fed, "h": h, "keys": keys, "s": s})
            tokens.append(next_token(logp[0], self.ids))
            logps.append(logp[0])  # (V,)
            attns.append(attn[0])  # (L, S)
            if tokens[-1] == self.ids["eos"]:
                break
        return tokens[1:], logps, attns


def next_token(logp, ids) -> int:
    """greedy_decode's rule: the most probable id that is neither PAD nor <sos>."""
    masked = np.array(logp, dtype=np.float64)
    masked[[ids["pad"], ids["sos"]]] = -np.inf
    return int(masked.argmax())


def torch_greedy_batch(model, sources, ids) -> list:
    """PyTorch's greedy decoding of every source of ``sources``
    (:func:`~convs2s_edu.greedy_decode`), with the log-probabilities of every step from teacher
    forcing on that output, and the attention: one ``(tokens, log-probs (T, V), attention
    (T, L, S))`` per source (numpy; the tokens with ``<eos>`` when emitted), in the order of
    ``sources``.

    One batch per source length: sources of one length need no padding, so each row is what
    its own decoding gives (up to the rounding of a batched matrix product, far below the
    checks' tolerance); the teacher-forced pass pads the shorter outputs on the right, which
    the causal decoders never see.
    """
    refs: list = [None] * len(sources)
    modes = {m: m.training for m in model.modules()}
    model.eval()  # no dropout in the reference (greedy_decode does the same); restored below
    try:
        for length in sorted({len(src) for src in sources}):
            rows = [i for i, src in enumerate(sources) if len(src) == length]
            src = torch.tensor([sources[i] for i in rows])  # (B, S): one length, no padding
            out, attn = convs2s_edu.greedy_decode(model, src, return_attention=True)
            # T_b, attention's rows: the tokens, plus the step of <eos> when one was emitted
            eos = [[ids["eos"]] * (a.shape[-2] > len(o)) for o, a in zip(out, attn)]
            tokens = [list(o) + e for o, e in zip(out, eos)]
            T = max(len(t) for t in tokens)
            tgt_in = torch.full((len(rows), T), ids["pad"], dtype=torch.long)  # (B, T)
            for b, toks in enumerate(tokens):
                tgt_in[b, : len(toks)] = torch.tensor([ids["sos"], *toks[:-1]])
            with torch.no_grad():
                logits = model(src, tgt_in)  # (B, T, V)
            logp = torch.log_softmax(logits.double(), dim=-1).float()
            for b, i in enumerate(rows):
                a = attn[b] if attn[b].dim() == 3 else attn[b].unsqueeze(0)  # (L, T_b, S)
                n = len(tokens[b])
                refs[i] = (tokens[b], logp[b, :n].numpy(), a.transpose(0, 1).numpy())
    finally:
        for m, mode in modes.items():
            m.training = mode
    return refs


# -- The checks ----------------------------------------------------------------


def _max_diff(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.abs(a - b).max()) if a.size else 0.0


def _compare(pairs, what: str, tol: float = TOL) -> float:
    """The largest difference of the ``(name, got, expected)`` triples ``pairs`` (arrays or
    tensors); past ``tol``, :class:`CheckFailed` says ``what.format(name)`` differs."""
    worst = 0.0
    for name, got, expected in pairs:
        if (d := _max_diff(got, expected)) > tol:
            raise CheckFailed(
                f"{what.format(name)} by {d:.2e} (tolerance {tol:.0e}); shapes "
                f"{tuple(np.shape(got))} and {tuple(np.shape(expected))}"
            )
        worst = max(worst, d)
    return worst


def check_packing(model, gru_start, sources, what: str) -> float:
    """The unpacked encoder + ``Decoder.start`` against the package's (packed) ones."""
    worst = 0.0
    with torch.no_grad():
        for src in sources:
            x = torch.tensor([src])
            ref = model.decoder.start(model.encode(x))
            pairs = zip(("h", "keys", "s"), gru_start(x), (ref.h, ref.keys, ref.s))
            where = f"on {what} (length {len(src)})"
            differs = f"GRU encoder without packing: {{}} differs from the packed one's {where}"
            worst = max(worst, _compare(pairs, differs, PACK_TOL))
    return worst


def check_lengths(name, model, wrappers, ort_model: OrtModel, ids, max_positions, rng) -> float:
    """onnxruntime against PyTorch at source and prefix lengths 1, 2 and ``max_positions``."""
    vocab, lengths, worst = model.vocab_size, sorted({1, 2, max_positions}), 0.0
    run = {role: session.run for role, session in ort_model.sessions.items()}
    differs = f"{name}: onnxruntime's {{}} differs from PyTorch's at "
    with torch.no_grad():
        for S in lengths:
            src = [rng.randint(1, vocab) for _ in range(S)]
            x = torch.tensor([src])
            if ort_model.kind == "prefix":
                (module,) = wrappers
                for T in lengths:
                    prefix = [ids["sos"]] + [rng.randint(1, vocab) for _ in range(T - 1)]
                    ref = module(x, torch.tensor([prefix]))
                    got = run["decoder"](None, {"src": x.numpy(), "prefix": np.asarray([prefix])})
                    pairs = zip(("log_probs", "attention"), got, ref)
                    worst = max(worst, _compare(pairs, differs + f"S={S}, T={T}"))
                continue
            start, step = wrappers
            h, keys, s = ref_start = start(x)
            got = run["encoder"](None, {"src": x.numpy()})
            worst = max(
                worst, _compare(zip(("h", "keys", "s"), got, ref_start), differs + f"S={S}")
            )
            # a few steps from s_0, each from the state PyTorch reached
            y = ids["sos"]
            for t in range(min(3, S + 1)):
                ref = step(torch.tensor([y]), h, keys, s)
                feed = {"y_prev": np.asarray([y]), "h": h.numpy(), "keys": keys.numpy()}
                got = run["step"](None, {**feed, "s": s.numpy()})
                pairs = zip(("log_probs", "attention", "s_next"), got, ref)
                worst = max(worst, _compare(pairs, differs + f"S={S}, step {t + 1}"))
                s, y = ref[2], rng.randint(1, vocab)
    return worst


def check_test_set(name, model, ort_model: OrtModel, sources, ids, max_positions) -> dict:
    """onnxruntime's greedy decoding against PyTorch's on every source of ``sources``."""
    worst_lp, worst_att, ties, exact = 0.0, 0.0, 0, 0
    refs = torch_greedy_batch(model, sources, ids)
    for i, (src, (ref_tokens, ref_logp, ref_attn)) in enumerate(zip(sources, refs)):
        tokens, logps, attns = ort_model.greedy(src, max_positions)
        for t, (tok, logp, attn) in enumerate(zip(tokens, logps, attns)):
            d_lp, d_att = _max_diff(logp, ref_logp[t]), _max_diff(attn, ref_attn[t])
            if d_lp > TOL or d_att > TOL:
                raise CheckFailed(
                    f"{name}: test example {i} (length {len(src)}), step {t + 1}: "
                    f"onnxruntime's log-probabilities differ from PyTorch's by {d_lp:.2e}, "
                    f"the attention by {d_att:.2e} (tolerance {TOL:.0e})"
                )
            worst_lp, worst_att = max(worst_lp, d_lp), max(worst_att, d_att)
            if tok != ref_tokens[t]:
                # a near-tie: the two tokens' log-probabilities agree to within the
                # tolerance, so either choice is PyTorch's up to rounding
                gap = abs(float(ref_logp[t][tok]) - float(ref_logp[t][ref_tokens[t]]))
                if gap > TOL:
                    raise CheckFailed(
                        f"{name}: test example {i} (length {len(src)}): onnxruntime decodes "
                        f"{tokens} but PyTorch {ref_tokens}; they part at step {t + 1}, where "
                        f"PyTorch's log-probabilities of the two tokens differ by {gap:.2e}"
                    )
                ties += 1
                break
        else:
            if tokens != ref_tokens:
                decodes = f"onnxruntime decodes {tokens}, PyTorch {ref_tokens}"
                raise CheckFailed(f"{name}: test example {i}: {decodes}")
        exact += tokens == ref_tokens
    return {
        "examples": len(sources),
        "same_output": exact,
        "near_ties": ties,
        "max_logp_diff": worst_lp,
        "max_attention_diff": worst_att,
    }


def check_gru_nodes(paths) -> None:
    """Every ONNX ``GRU`` node keeps ``linear_before_reset=1`` (PyTorch's GRU)."""
    for path in paths:
        grus = [n for n in onnx.load(str(path)).graph.node if n.op_type == "GRU"]
        if not grus:
            raise CheckFailed(f"{path.name}: no ONNX GRU node (the GRU was translated otherwise)")
        for node in grus:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            if (lbr := attrs.get("linear_before_reset", 0)) != 1:
                gru = f"{path.name}: GRU node {node.name!r}"
                raise CheckFailed(f"{gru} has linear_before_reset={lbr}, PyTorch's GRU needs 1")


def graph_facts(path: Path) -> dict:
    """The graph's IR version, opset and size, once its opset is :data:`OPSET` alone and
    ``onnx.checker`` accepts it."""
    model = onnx.load(str(path))
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    if opsets.get("ai.onnx") != OPSET or len(opsets) != 1:
        raise CheckFailed(f"{path.name}: opsets {opsets}, expected ai.onnx {OPSET} only")
    onnx.checker.check_model(model, full_check=True)
    return {"ir_version": model.ir_version, "opset": OPSET, "bytes": path.stat().st_size}


# -- Export, check, cache ------------------------------------------------------


def versions() -> dict:
    return {m.__name__: m.__version__ for m in (torch, onnx, onnxruntime, convs2s_edu)}


def cache_key(results: dict) -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(json.dumps(versions(), sort_keys=True).encode())
    for name in SITE_MODELS:
        h.update(name.encode())
        h.update(Path(results[name].path).read_bytes())
    return h.hexdigest()[:20]


def token_ids(vocab_size: int) -> dict:
    return {"pad": PAD, "sos": sos_index(vocab_size), "eos": eos_index(vocab_size)}


def export_model(name: str, model, out: Path):
    """Export the model ``name`` into ``out`` the way its registry entry says
    (:data:`convs2s_edu.registry.EXPORTS`): ``"prefix"``, one graph ``<name>.onnx`` over the
    prefix; ``"step"``, the GRU's encoder graph (with ``Decoder.start``) ``<name>_encoder.onnx``
    and one-step graph ``<name>_step.onnx``.

    Returns the files by role (``{"decoder": path}`` or ``{"encoder": path, "step": path}``)
    and the PyTorch modules that were exported, in that order.
    """
    src = torch.tensor([[3, 1, 2, 5]])
    plain = without_weight_norm(model)
    if model_entry(name).export == "prefix":
        prefix = torch.tensor([[token_ids(model.vocab_size)["sos"], 1, 2]])
        files = {"decoder": out / f"{name}.onnx"}
        module = PrefixNext(plain).eval()
        free = {"src": {1: "S"}, "prefix": {1: "T"}, "attention": {2: "S"}}
        names = ("src prefix", "log_probs attention")
        export_graph(module, (src, prefix), files["decoder"], *names, free)
        return files, (module,)
    files = {"encoder": out / f"{name}_encoder.onnx", "step": out / f"{name}_step.onnx"}
    start, step = GRUStart(plain).eval(), GRUStep(plain).eval()
    free = {"src": {1: "S"}, "h": {1: "S"}, "keys": {1: "S"}}
    export_graph(start, (src,), files["encoder"], "src", "h keys s", free)
    with torch.no_grad():
        state = start(src)  # h, keys, s
    free = {"h": {1: "S"}, "keys": {1: "S"}, "attention": {2: "S"}}
    names = ("y_prev h keys s", "log_probs attention s_next")
    export_graph(step, (torch.tensor([1]), *state), files["step"], *names, free)
    return files, (start, step)


def export_models(models: dict, out: Path) -> tuple[dict, dict]:
    """:func:`export_model` of every model of ``models`` (by registered name): the files and
    the exported modules, by name."""
    exported = {name: export_model(name, model, out) for name, model in models.items()}
    return {n: e[0] for n, e in exported.items()}, {n: e[1] for n, e in exported.items()}


def export_and_check(models: dict, sources, out: Path, seed: int) -> dict:
    """Export ``models`` (by registered name, e.g. ``{"convs2s": model, "gru": model}``) into
    ``out`` and run every check, the greedy one on every source of ``sources``; returns the
    report."""
    V, P = next(iter(models.values())).vocab_size, next(iter(models.values())).max_positions
    if len({(m.vocab_size, m.max_positions) for m in models.values()}) > 1:
        both = ", ".join(f"{n} {m.vocab_size}/{m.max_positions}" for n, m in models.items())
        raise CheckFailed(f"the models disagree on the vocabulary or the position table: {both}")
    for name, model in models.items():
        if model.bridge is not None:
            raise CheckFailed(f"{name} has a bridge; the exported graphs assume none")
    ids = token_ids(V)
    # every parameter and buffer of the cached models (copied), and their parametrized modules
    before = {
        name: ({k: v.detach().clone() for k, v in m.state_dict().items()}, parametrized(m))
        for name, m in models.items()
    }
    rng = random.Random(seed)
    report: dict = {"tolerance": TOL, "pack_tolerance": PACK_TOL, "models": {}}
    t0 = time.perf_counter()
    files, wrappers = export_models(models, out)
    report["export_seconds"] = round(time.perf_counter() - t0, 1)
    paths = [p for model in files.values() for p in model.values()]
    report["graphs"] = {p.name: graph_facts(p) for p in paths}

    kinds = {name: model_entry(name).export for name in models}
    # the GRU graphs: linear_before_reset kept, the packed and unpacked encoders agree
    trap_sources = [[rng.randint(1, V) for _ in range(n)] for n in sorted({1, 2, P})]
    report["pack_max_diff"] = 0.0
    for name in [n for n, kind in kinds.items() if kind == "step"]:
        check_gru_nodes(files[name].values())
        start = wrappers[name][0]
        report["pack_max_diff"] = max(
            report["pack_max_diff"],
            check_packing(models[name], start, trap_sources, "lengths 1, 2, max"),
            check_packing(models[name], start, sources, "the test set"),
        )

    t1 = time.perf_counter()
    # whole decodings at the longest length the position table allows (up to P steps, where
    # the rounding of the GRU's state has the most steps to add up)
    longest = [[rng.randint(1, V) for _ in range(P)] for _ in range(3)]
    for name in models:
        ort_model = OrtModel(kinds[name], files[name], ids)
        lengths = check_lengths(name, models[name], wrappers[name], ort_model, ids, P, rng)
        long = check_test_set(name, models[name], ort_model, longest, ids, P)
        facts = check_test_set(name, models[name], ort_model, sources, ids, P)
        lengths = max(lengths, long["max_logp_diff"], long["max_attention_diff"])
        report["models"][name] = {"lengths_max_diff": lengths, **facts}
    report["check_seconds"] = round(time.perf_counter() - t1, 1)

    # the cached models are as they were: parameters and parametrizations
    for name, (state, names) in before.items():
        if parametrized(models[name]) != names:
            raise CheckFailed(f"{name}: the export changed the cached model's parametrizations")
        after = models[name].state_dict()
        for key, value in state.items():
            if not torch.equal(value, after[key]):
                raise CheckFailed(f"{name}: the export changed the cached model's {key}")
    report["weight_norm_removed"] = {name: len(names) for name, (_, names) in before.items()}
    report["ids"], report["vocab_size"], report["max_positions"] = ids, V, P
    report["files"] = {
        name: {"kind": kinds[name], "files": {k: p.name for k, p in files[name].items()}}
        for name in models
    }
    report["versions"] = versions()
    return report


def runtime_version() -> str:
    """The version of onnxruntime-web in node_modules, checked against the Python runtime."""
    package = NODE_ORT / "package.json"
    if not package.is_file():
        raise CheckFailed(
            f"{package} is missing: install the site's JavaScript with `npm ci` first "
            "(Node.js and npm are prerequisites of the docs build)"
        )
    web = json.loads(package.read_text(encoding="utf-8"))["version"]
    python = onnxruntime.__version__
    if web.split(".")[:2] != python.split(".")[:2]:
        raise CheckFailed(
            f"onnxruntime-web {web} (package.json) and onnxruntime {python} (Python, "
            "constraints.txt) are on different release lines: pin both to the same X.Y"
        )
    return web


def write_site(report: dict, cached: Path, dest: Path, results: dict, web: str) -> dict:
    """Copy the graphs and the runtime into ``dest`` and write ``models.json``."""
    from convs2s_edu.lab.site import is_quick_mode

    shutil.rmtree(dest, ignore_errors=True)
    (dest / "ort").mkdir(parents=True)
    for name in report["graphs"]:
        shutil.copy2(cached / name, dest / name)
    for name in RUNTIME_FILES:
        if not (NODE_ORT / "dist" / name).is_file():
            raise CheckFailed(f"onnxruntime-web {web} has no dist/{name}")
        shutil.copy2(NODE_ORT / "dist" / name, dest / "ort" / name)
    cfg = results["convs2s"].config
    layers = {"convs2s": results["convs2s"].model.decoder.cfg.n_decoder_layers, "gru": 1}
    loaded = sum(g["bytes"] for g in report["graphs"].values())
    loaded += sum((dest / "ort" / name).stat().st_size for name in RUNTIME_FILES)
    manifest = {
        "mode": "quick" if is_quick_mode() else "full",
        **report["ids"],
        "vocab_size": report["vocab_size"],
        "max_positions": report["max_positions"],
        "train_lengths": [cfg.min_len, cfg.max_len],
        "train_min": cfg.min_len,
        "train_max": cfg.max_len,
        "tolerance": report["tolerance"],
        "download_bytes": loaded,
        "download_mb": f"{loaded / 1e6:.1f}",
        "runtime": {"package": "onnxruntime-web", "version": web, "script": RUNTIME_FILES[0]},
        "models": {
            n: {"label": model_entry(n).label, **report["files"][n], "layers": layers[n]}
            for n in SITE_MODELS
        },
    }
    (dest / "models.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        help="folder for the page's files (default: docs/_build/try-assets-<mode>/try)",
    )
    parser.add_argument("--no-cache", action="store_true", help="export and check again")
    parser.add_argument("--seed", type=int, default=0, help="seed of the length checks' inputs")
    args = parser.parse_args(argv)

    from convs2s_edu import make_datasets, train_or_load
    from convs2s_edu.lab.site import is_quick_mode, site_config
    from convs2s_edu.training import cache_dir

    mode = "quick" if is_quick_mode() else "full"
    dest = args.out or ROOT / "docs" / "_build" / f"try-assets-{mode}" / "try"
    t0 = time.perf_counter()
    try:
        web = runtime_version()
        results = {name: train_or_load(site_config(name), progress=False) for name in SITE_MODELS}
        cached = cache_dir() / "onnx-export" / cache_key(results)
        if args.no_cache or not (cached / "report.json").is_file():
            with tempfile.TemporaryDirectory(prefix="export-onnx-") as tmp:
                models = {name: results[name].model for name in SITE_MODELS}
                sources = [list(x) for x, _ in make_datasets(results["convs2s"].config)[2]]
                report = export_and_check(models, sources, Path(tmp), args.seed)
                (Path(tmp) / "report.json").write_text(json.dumps(report, indent=2) + "\n")
                shutil.rmtree(cached, ignore_errors=True)
                cached.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(tmp, cached)
            how = "exported and checked"
        else:
            report = json.loads((cached / "report.json").read_text())
            how = f"from the cache ({cached}; checked when it was exported)"
        manifest = write_site(report, cached, dest, results, web)
    except CheckFailed as err:
        print(f"export_onnx: FAILED: {err}", file=sys.stderr)
        return 1
    for name in SITE_MODELS:
        m, label = report["models"][name], model_entry(name).label
        print(
            f"export_onnx: {label}: onnxruntime = PyTorch on {m['same_output']} of "
            f"{m['examples']} test examples (near-ties: {m['near_ties']}); log-probabilities "
            f"within {m['max_logp_diff']:.1e}, attention within {m['max_attention_diff']:.1e} "
            f"(tolerance {report['tolerance']:.0e}); lengths 1, 2, {report['max_positions']}: "
            f"within {m['lengths_max_diff']:.1e}"
        )
    sizes = ", ".join(f"{n} {g['bytes'] / 1e6:.2f} MB" for n, g in report["graphs"].items())
    print(
        f"export_onnx ({mode} site): {how}; opset {OPSET}, IR "
        f"{sorted({g['ir_version'] for g in report['graphs'].values()})}; {sizes}; packed = "
        f"unpacked GRU encoder within {report['pack_max_diff']:.1e}; page loads "
        f"{manifest['download_mb']} MB with onnxruntime-web {web}; -> {dest} "
        f"({time.perf_counter() - t0:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
