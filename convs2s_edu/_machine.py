"""The machine, read with the standard library only: the CPU's model and flags, the
usable cores, and the CPU's theoretical arithmetic peak from its documented figures.

Only :mod:`os`, :mod:`platform` and :mod:`re` are imported, so that the OpenMP defaults
(:mod:`convs2s_edu._threads`, before torch loads) and the build's timer
(``tools/timed.py``, which loads this file by its path) can use it too.
"""

from __future__ import annotations

import os
import platform
import re

__all__ = ["cpu_model", "cpu_flags", "usable_cores", "theoretical_peak"]


def _cpuinfo() -> dict[str, str]:
    """The first value of every key of ``/proc/cpuinfo`` (empty where there is none)."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if value.strip():
                    info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


def _sysfs_cpu0(name: str) -> str | None:
    """The text of ``/sys/devices/system/cpu/cpu0/<name>``, None where there is none."""
    try:
        with open(f"/sys/devices/system/cpu/cpu0/{name}", encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def cpu_model() -> str:
    """The CPU's model name: ``/proc/cpuinfo``'s ``model name`` (Linux), else
    ``platform.processor()``, else ``platform.machine()``, else ``"unknown CPU"``."""
    info = _cpuinfo()
    value = info.get("model name") or info.get("Model") or info.get("Hardware")
    if value:
        return " ".join(value.split())
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_flags() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``'s ``flags``; empty where there is none)."""
    return set(_cpuinfo().get("flags", "").split())


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# FMA units per core and their width, by (vendor, family, models), first match wins.
# Intel: Optimization Reference Manual (248966), the Skylake server and Sapphire Rapids
# chapters, and ark.intel.com's "# of AVX-512 FMA Units" of each Xeon SKU. AMD: Software
# Optimization Guides for family 17h (Zen 1: 256-bit operations as two 128-bit halves;
# Zen 2, models 30h on: two 256-bit FMA pipes), 19h (Zen 4: 512-bit operations as two
# 256-bit halves on the same two pipes) and 1Ah (Zen 5: a 512-bit datapath).
_XEON = "a Xeon SKU with 1 AVX-512 FMA unit (ark.intel.com lists them) has half this"
_ZEN4 = {*range(0x10, 0x20), *range(0x60, 0x80), *range(0xA0, 0xB0)}
# The last column: the highest "max turbo frequency" (GHz) among the line's server SKUs,
# on ark.intel.com and amd.com (Xeon Gold 6244, 6334, 6434, 6544Y, 6980P; EPYC 7371,
# 7F52, 72F3, 9174F, 9175F). A virtual machine often reports only its base clock
# (``cpu MHz``) and no cpufreq folder, while its cores run at turbo: the line's highest
# turbo is then the clock of an upper bound, a peak that no measurement on this machine
# can exceed. vendor, family, models, microarchitecture, FMA units, bits, turbo
_FMA_UNITS = (
    ("GenuineIntel", 6, {85}, "Skylake-SP/Cascade Lake", 2, 512, 4.4),
    ("GenuineIntel", 6, {106, 108}, "Ice Lake-SP", 2, 512, 3.7),
    ("GenuineIntel", 6, {143}, "Sapphire Rapids", 2, 512, 4.1),
    ("GenuineIntel", 6, {207}, "Emerald Rapids", 2, 512, 4.1),
    ("GenuineIntel", 6, {173, 174}, "Granite Rapids", 2, 512, 3.9),
    ("GenuineIntel", 6, {175, 182, 190}, "Gracemont/Crestmont E-cores", 2, 128, None),
    ("AuthenticAMD", 23, range(0x30), "Zen/Zen+", 2, 128, 3.8),
    ("AuthenticAMD", 23, range(0x30, 0x100), "Zen 2", 2, 256, 3.9),
    ("AuthenticAMD", 25, _ZEN4, "Zen 4", 2, 256, 4.4),
    ("AuthenticAMD", 25, range(0x100), "Zen 3", 2, 256, 4.1),
    ("AuthenticAMD", 26, range(0x100), "Zen 5", 2, 512, 5.0),
)
# What a row's figures leave out: every Intel row of 512 bits is a Xeon line, some of
# whose SKUs have one FMA unit (_XEON); AMD's, by microarchitecture.
_NOTES = {
    "Zen 4": "512-bit instructions run in 2 halves",
    "Zen 5": "mobile Zen 5 has half this",
}
# bf16 FLOP per cycle and core: AMX's TMUL, 1024 (Intel, "Intel AMX" overview of the 4th
# Gen Xeon Scalable processors: 1024 bf16 or 2048 int8 operations per cycle per core);
# else AVX512_BF16's VDPBF16PS, two bf16 products per fp32 lane: twice the fp32 figure.
_AMX_BF16_PER_CYCLE = 1024


def _fma_units(info: dict, flags: set) -> tuple | None:
    """``(microarchitecture, FMA units, bits, note, turbo GHz)`` of the CPU, None where
    unknown."""
    vendor, family, model = (
        info.get("vendor_id"),
        info.get("cpu family"),
        info.get("model"),
    )
    if not (family or "").isdigit() or not (model or "").isdigit():
        return None
    for v, f, models, name, units, bits, turbo in _FMA_UNITS:
        if (v, f) == (vendor, int(family)) and int(model) in models:
            xeon = v == "GenuineIntel" and bits == 512
            return name, units, bits, _XEON if xeon else _NOTES.get(name, ""), turbo
    if vendor == "GenuineIntel" and {"avx2", "fma"} <= flags:  # Haswell and later cores
        note = "assumed, as Haswell and later; one 512-bit unit gives the same, E-cores half"
        return "an Intel core with AVX2 and FMA", 2, 256, note, None
    return None


def _clock(turbo: float | None = None, arch: str = "") -> tuple[float | None, str]:
    """The clock of the peak, in GHz, and where it comes from: sysfs's maximum (turbo)
    clock where there is one; else the highest of the line's documented ``turbo``, the
    model name's "@ x.xxGHz" (the base clock) and ``/proc/cpuinfo``'s ``cpu MHz``."""
    info, found = _cpuinfo(), []
    if (khz := _sysfs_cpu0("cpufreq/cpuinfo_max_freq")) and khz.isdigit():
        return int(khz) / 1e6, "cpufreq's cpuinfo_max_freq"
    if turbo:
        found.append(
            (turbo, f"the highest max turbo of {arch} server CPUs (no cpufreq here)")
        )
    if m := re.search(r"@\s*([\d.]+)\s*GHz", info.get("model name", "")):
        found.append((float(m.group(1)), "the model name"))
    if re.fullmatch(r"[\d.]+", info.get("cpu MHz", "")):
        found.append((float(info["cpu MHz"]) / 1e3, "/proc/cpuinfo's cpu MHz"))
    return max(found, default=(None, "no clock in /proc/cpuinfo or sysfs"))


def _threads_per_core(info: dict) -> int:
    """SMT threads per physical core: /proc/cpuinfo's logical CPUs per package
    (``siblings``) over its cores per package (``cpu cores``), else 1."""
    n, cores = info.get("siblings", ""), info.get("cpu cores", "")
    return max(1, int(n) // int(cores)) if n.isdigit() and cores.isdigit() else 1


def theoretical_peak(threads: int) -> dict:
    r"""The CPU's theoretical fp32 and bf16 peaks, from its documented figures, stated.

    Parameters
    ----------
    threads : int
        The threads that compute (PyTorch's intra-op threads).

    Returns
    -------
    dict
        ``{"fp32_flops", "bf16_flops", "text"}`` (FLOP/s, and one line that states
        them), plus the figures (``microarchitecture``, ``fma_units``, ``fp32_lanes``,
        ``clock_ghz``, ``clock_source``, ``cores``, ``threads_per_core``, ``note``)
        where the CPU is known. An unknown CPU or clock gives ``None`` peaks and the
        reason in ``text``, never a guessed figure; a CPU without bf16 instructions, no
        bf16 peak.

    Notes
    -----
    .. math::

        \text{peak} = \text{cores} \times \text{clock} \times \text{fp32 lanes}
        \times \text{FMA units per core} \times 2

    (an FMA is 2 FLOPs). The FMA units and their width come from a table of
    microarchitectures keyed by ``/proc/cpuinfo``'s vendor, family and model; the clock
    is sysfs's maximum (turbo) clock where Linux gives one, else the highest of the
    line's documented max turbo (the table's last column), the model name's base clock
    and ``cpu MHz`` (without the first, a turbo clock above them makes the peak an
    underestimate, which the text says); the cores are the threads, each assumed on its
    own physical core while there are enough of them (usable logical CPUs over SMT
    threads per core; a virtual machine may place two vCPUs on one core without saying
    so). The bf16 peak uses AMX's 1024 FLOP per cycle and core where the CPU has
    ``amx_bf16``, else twice the fp32 figure with ``avx512_bf16``.
    """
    info, flags = _cpuinfo(), cpu_flags()
    arch = _fma_units(info, flags)
    ghz, source = _clock(*arch[4:], arch[0]) if arch else _clock()
    where = f"{cpu_model()}, family {info.get('cpu family')} model {info.get('model')}"
    if arch is None or ghz is None:
        why = "not in the table of FMA units" if arch is None else source
        return {
            "fp32_flops": None,
            "bf16_flops": None,
            "text": f"no peak for {where}: {why}",
        }
    name, units, bits, note, _ = arch
    per_core = _threads_per_core(info)
    cores = min(threads, max(1, usable_cores() // per_core))
    fp32_per_cycle = (bits // 32) * units * 2  # per core
    bf16_per_cycle, bf16_how = None, ""
    if "amx_bf16" in flags:
        bf16_per_cycle, bf16_how = _AMX_BF16_PER_CYCLE, "AMX tiles"
    elif "avx512_bf16" in flags:
        bf16_per_cycle, bf16_how = 2 * fp32_per_cycle, "AVX512_BF16 dot products"
    cycles = cores * ghz * 1e9  # per second, all cores together
    fp32, bf16 = cycles * fp32_per_cycle, bf16_per_cycle and cycles * bf16_per_cycle
    text = (
        f"{where} ({name}): {units} FMA units/core of {bits // 32} fp32 lanes, clock "
        f"{ghz:.2f} GHz from {source}{'' if 'turbo' in source else ' (turbo may exceed it)'}, "
        f"{cores} core(s) at {per_core} "
        f"thread(s)/core: fp32 {fp32 / 1e9:,.1f} GFLOP/s"
    )
    if bf16:
        text += f", bf16 ({bf16_how}, {bf16_per_cycle} FLOP/cycle/core) {bf16 / 1e9:,.1f} GFLOP/s"
    return {
        "fp32_flops": fp32,
        "bf16_flops": bf16,
        "text": text + (f"; {note}" if note else ""),
        "microarchitecture": name,
        "fma_units": units,
        "fp32_lanes": bits // 32,
        "clock_ghz": ghz,
        "clock_source": source,
        "cores": cores,
        "threads_per_core": per_core,
        "note": note,
    }
