r"""Execution paths: the reference model or its fast paths, eager or compiled, fp32 or
bf16.

A *path* is how a training step runs, not what it computes: the same model, the same
loss, the same optimiser. Four switches, all fields of :class:`~convs2s_edu.TrainConfig`
and flags of ``convs2s-edu train``:

``fast`` (bool)
    Train through the fast paths of :mod:`convs2s_edu.fast`: :func:`use_fast_paths`
    switches the model's modules, in place, to subclasses that compute the same function
    faster on a CPU (:data:`FAST_CLASSES`); :func:`~convs2s_edu.train` switches them
    back to the reference before it returns the model. Eager only: ``compile`` compiles
    the model with the fast paths that compile (:func:`apply_compile`), so the two
    are exclusive.
``compile`` (bool)
    :func:`torch.compile` the encoder and the decoder of the model, in place
    (:meth:`torch.nn.Module.compile`), so the checkpoint's parameter names do
    not change; on a CPU through the fast paths that compile
    (:data:`COMPILED_FAST_CLASSES`). Batches of different lengths make the compiler
    trace once more with symbolic lengths (``dynamic=None``, PyTorch's default), then
    reuse it.
``compile_mode`` (str or None)
    :func:`torch.compile`'s ``mode``: ``None`` (default), ``"reduce-overhead"``
    (CUDA graphs: one launch replays a whole captured step, which removes the
    per-kernel launch cost that dominates small models on a GPU),
    ``"max-autotune"``. Only used with ``compile=True``.
``precision`` (``"fp32"`` or ``"bf16"``)
    ``"bf16"`` runs the forward pass under :func:`torch.autocast` with
    ``torch.bfloat16``: matrix products and convolutions in bfloat16, the
    loss, the weights, the gradients and Adam in float32 (mixed precision).
    On a CPU this is only faster with bf16 matrix instructions (AVX-512 BF16 or
    AMX); without them PyTorch emulates bf16 slowly, so :func:`check_precision`
    refuses it and says why.

:func:`~convs2s_edu.training.calibrate.default_path` is the default path of a device:
on a GPU fixed from measurements (:data:`MEASURED_FASTEST`); on a CPU, the reference or
the fast paths, whichever a short timing on that machine chose
(:mod:`convs2s_edu.training.calibrate`).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass

import torch
from torch import nn

from .._machine import cpu_flags
from ..convs2s import ConvBlock
from ..rnn import FixedContext, GRUDecoder, GRUEncoder
from .conv import FastConvBlock
from .dropout import FastDropout
from .gru import FastGRUDecoder, FastGRUEncoder

__all__ = [
    "FAST_CLASSES",
    "COMPILED_FAST_CLASSES",
    "has_fast_path",
    "use_fast_paths",
    "apply_path",
    "PRECISIONS",
    "COMPILE_MODES",
    "ExecutionPath",
    "PATHS",
    "cpu_bf16_support",
    "bf16_support",
    "check_precision",
    "check_compile_mode",
    "MEASURED_FASTEST",
    "apply_compile",
    "use_compiled_fast_paths",
    "autocast",
    "available_paths",
]

#: Values of :attr:`TrainConfig.precision <convs2s_edu.TrainConfig>`.
PRECISIONS = ("fp32", "bf16")
#: Values of :attr:`TrainConfig.compile_mode <convs2s_edu.TrainConfig>` (``None``: the
#: default).
COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune")

#: CPU flags (``/proc/cpuinfo``) of instructions that multiply bf16 matrices in
#: hardware.
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")


#: Every module class with a fast path, and the subclass :func:`use_fast_paths` puts in
#: its place (same parameters, same function; ``tests/test_fast_*.py`` prove it: values
#: and gradients, and for dropout the masks' distribution).
FAST_CLASSES = {
    ConvBlock: FastConvBlock,
    nn.Dropout: FastDropout,
    GRUEncoder: FastGRUEncoder,
    GRUDecoder: FastGRUDecoder,
}
#: The fast classes :func:`apply_compile` compiles a model through on a CPU: those that
#: :func:`torch.compile` traces without a graph break.
COMPILED_FAST_CLASSES = (FastConvBlock, FastDropout)


def _has_fast_path(module: nn.Module) -> bool:
    # FastGRUDecoder computes the Bahdanau energy; RNNencdec's decoder has none
    return not isinstance(getattr(module, "attention", None), FixedContext)


def has_fast_path(model: nn.Module) -> bool:
    """Whether :func:`use_fast_paths` would switch any module of ``model``."""
    return any(type(m) in FAST_CLASSES and _has_fast_path(m) for m in model.modules())


def use_fast_paths(model: nn.Module, enabled: bool = True) -> nn.Module:
    """Switch every module of ``model`` that has a fast path to it (``enabled``), or
    back to the reference class (``enabled=False``), in place; returns ``model``.

    The fast classes of :data:`FAST_CLASSES` are subclasses that override how a module
    computes (``forward``, or
    :meth:`ConvBlock.convolve <convs2s_edu.ConvBlock.convolve>`), never what it holds:
    the switch changes a module's class and nothing else, so parameters, state-dict
    names, the optimiser's state and checkpoints are untouched. A GRU decoder without
    attention (:class:`~convs2s_edu.FixedContext`) has no fast path and stays as it is.
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, got {enabled!r}")
    reference = {fast: ref for ref, fast in FAST_CLASSES.items()}
    for module in model.modules():
        if enabled and type(module) in FAST_CLASSES and _has_fast_path(module):
            module.__class__ = FAST_CLASSES[type(module)]
        elif not enabled and type(module) in reference:
            module.__class__ = reference[type(module)]
    return model


@dataclass(frozen=True, repr=False)
class ExecutionPath:
    """An execution path ``(compile, compile_mode, precision, fast)`` with a short name.

    Parameters
    ----------
    compile, compile_mode, precision, fast
        The four :class:`~convs2s_edu.TrainConfig` fields of the module's notes; a path
        is compiled or fast, not both (``ValueError``). Frozen, so that paths compare
        and hash by their fields (:data:`PATHS` holds them).
    """

    compile: bool = False
    compile_mode: str | None = None
    precision: str = "fp32"
    fast: bool = False

    def __post_init__(self):
        if self.compile and self.fast:
            raise ValueError(
                "a path is compiled (through the fast paths that compile) or fast, "
                "not both"
            )

    @property
    def name(self) -> str:
        """``"eager-fp32"`` (the reference), ``"fast-fp32"``, ``"compile-fp32"``,
        ``"compile-reduce-overhead-bf16"``, ..."""
        if self.fast:
            how = "fast"
        elif not self.compile:
            how = "eager"
        elif self.compile_mode in (None, "default"):
            how = "compile"
        else:
            how = f"compile-{self.compile_mode}"
        return f"{how}-{self.precision}"

    @classmethod
    def of(cls, cfg) -> ExecutionPath:
        """The path of a :class:`~convs2s_edu.TrainConfig` (its four fields), once its
        ``fast`` is decided (:func:`~convs2s_edu.training.resolve_path`)."""
        if cfg.fast is None:  # else the reference, silently
            raise ValueError(
                "this config's path is not decided (fast=None): pass it through "
                "convs2s_edu.training.resolve_path first"
            )
        return cls(cfg.compile, cfg.compile_mode, cfg.precision, cfg.fast)

    def config_fields(self) -> dict:
        """The :class:`~convs2s_edu.TrainConfig` fields of this path."""
        return asdict(self)

    def __repr__(self) -> str:
        return f"ExecutionPath({self.name})"


#: Every path the bench knows, the eager reference (fp32) first.
PATHS = (
    ExecutionPath(),
    ExecutionPath(fast=True),
    ExecutionPath(True),
    ExecutionPath(False, None, "bf16", fast=True),
    ExecutionPath(True, None, "bf16"),
    ExecutionPath(True, "reduce-overhead"),
    ExecutionPath(True, "reduce-overhead", "bf16"),
)


def cpu_bf16_support() -> tuple[bool, str]:
    """Whether this CPU multiplies bf16 matrices in hardware, and the evidence.

    Reads the ``avx512_bf16``/``amx_bf16`` flags of ``/proc/cpuinfo`` and
    :func:`torch.backends.cpu.get_cpu_capability` (``"AVX512_BF16"`` or
    ``"AMX..."`` mean yes; ``"AVX2"`` means no).
    """
    flags = cpu_flags() & set(_BF16_CPU_FLAGS)
    capability = torch.backends.cpu.get_cpu_capability()
    if flags:
        return (
            True,
            f"CPU flags {', '.join(sorted(flags))} (PyTorch capability {capability})",
        )
    if "BF16" in capability.upper() or "AMX" in capability.upper():
        return True, f"PyTorch CPU capability {capability}"
    return False, (
        f"this CPU has no bf16 matrix instructions (no {' or '.join(_BF16_CPU_FLAGS)} "
        f"in /proc/cpuinfo; PyTorch CPU capability {capability}): bf16 would be "
        "emulated, slower than fp32"
    )


def bf16_support(device: torch.device | str) -> tuple[bool, str]:
    """Whether bf16 autocast is worth running on ``device``, and why
    (see :func:`cpu_bf16_support`)."""
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return False, "no CUDA device on this machine"
        if torch.cuda.is_bf16_supported():
            return True, f"{torch.cuda.get_device_name(device)} supports bf16"
        return False, f"{torch.cuda.get_device_name(device)} does not support bf16"
    return cpu_bf16_support()


def check_precision(precision: str, device: torch.device | str) -> None:
    """Raise ``ValueError`` for an unknown precision, or bf16 where the hardware lacks it."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "bf16":
        ok, why = bf16_support(device)
        if not ok:
            raise ValueError(
                f"precision 'bf16' asked for on {torch.device(device).type}, "
                f"but {why}; use precision='fp32'"
            )


def check_compile_mode(compile_mode, device: torch.device | str | None = None) -> None:
    """Raise ``ValueError`` unless ``compile_mode`` is one of :data:`COMPILE_MODES`
    (and, given a ``device``, unless it can run there: CUDA graphs need CUDA)."""
    if compile_mode not in COMPILE_MODES:
        raise ValueError(
            f"compile_mode must be one of {COMPILE_MODES}, got {compile_mode!r}"
        )
    if (
        compile_mode == "reduce-overhead"
        and device is not None
        and torch.device(device).type != "cuda"
    ):
        raise ValueError(
            f"compile_mode 'reduce-overhead' (CUDA graphs) needs a CUDA device, "
            f"got {torch.device(device).type}; use compile_mode=None"
        )


def use_compiled_fast_paths(model: nn.Module) -> nn.Module:
    """Switch every module of ``model`` whose fast path compiles
    (:data:`COMPILED_FAST_CLASSES`) to it, in place; returns ``model``."""
    for module in model.modules():
        fast = FAST_CLASSES.get(type(module))
        if fast in COMPILED_FAST_CLASSES:
            module.__class__ = fast
    return model


def apply_compile(model: nn.Module, mode: str | None = None) -> nn.Module:
    """Compile ``model.encoder`` and ``model.decoder`` in place; returns ``model``.

    In place (:meth:`torch.nn.Module.compile`): ``state_dict()`` keys,
    checkpoints and decoding (:meth:`Decoder.step`, which is not ``forward``,
    stays eager) are unchanged. The bridge of a hybrid is one linear map and
    stays eager.

    On a CPU the model is compiled through its fast paths that compile
    (:func:`use_compiled_fast_paths`): the convolution as one matrix product over the
    windows, and dropout's masks from 16-bit numbers. Compiled from the reference
    classes, the step ran no faster than eager on a Xeon: its convolutions stay oneDNN's
    kernels, and the kernels inductor generates to draw dropout's random numbers were
    slower than PyTorch's own. :func:`~convs2s_edu.train` switches the classes back
    before it returns the model. The GRU's fast paths do not compile (their packed
    sequences); on a GPU the reference is compiled.
    """
    if next(model.parameters()).device.type == "cpu":
        use_compiled_fast_paths(model)
    kwargs = {} if mode in (None, "default") else {"mode": mode}
    model.encoder.compile(**kwargs)
    model.decoder.compile(**kwargs)
    return model


def apply_path(model: nn.Module, path: ExecutionPath) -> nn.Module:
    """Put ``model`` on ``path`` in place: its fast paths or the reference, compiled or
    not (the precision is the step's: :func:`autocast`); returns ``model``."""
    use_fast_paths(model, path.fast)
    if path.compile:
        apply_compile(model, path.compile_mode)
    return model


def autocast(device: torch.device | str, precision: str):
    """The context a forward pass of ``precision`` runs in (a no-op for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def available_paths(device: torch.device | str) -> tuple[list, dict]:
    """The paths of :data:`PATHS` that can run on ``device``, and why the others cannot."""
    device = torch.device(device)
    paths, skipped = [], {}
    bf16_ok, why = bf16_support(device)
    for p in PATHS:
        if p.precision == "bf16" and not bf16_ok:
            skipped[p.name] = why
        elif p.compile_mode == "reduce-overhead" and device.type != "cuda":
            skipped[p.name] = "CUDA graphs exist only on CUDA devices"
        else:
            paths.append(p)
    return paths, skipped


#: The path a GPU trains on by default
#: (:func:`~convs2s_edu.training.calibrate.default_path`, whose Notes say why).
MEASURED_FASTEST = {"cuda": ExecutionPath(True, "reduce-overhead", "bf16")}
