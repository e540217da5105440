"""What a PIM would need for decode attention to beat the GPU: devices changed by a few knobs.

Knobs (:data:`WHAT_IF_KEYS`), written ``macs=32,vectors=8`` on the command line:

- ``macs``: MACs per PU per all-bank MAC command on one vector (``macs_per_command``): each
  command reads ``2 x macs`` bytes of every bank (a wider column: more internal bandwidth);
- ``vectors``: vectors each command multiplies that column with (``vectors_per_mac``; a PU with
  ``macs x vectors`` multipliers). Used where vectors share a matrix: the query heads of a GQA
  group over their KV head's cache. A PU that holds V vectors at once holds V times the default
  vector state: ``vectors`` also scales the accumulators and the global buffer by V unless
  ``accumulators`` / ``buffer`` are given;
- ``accumulators``: output registers per PU; ``buffer``: global buffer bytes per pseudo-channel.

:func:`attention_needs` prices one attention layer on every combination of ``macs`` and
``vectors`` for several GQA group sizes (query heads per KV head) beside the GPU's time.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Sequence

from ..errors import field_error
from .expert import AttentionLayer, PIMDevice

__all__ = ["WHAT_IF_KEYS", "parse_what_if", "what_if_device", "attention_needs"]

#: knob -> (PIMDevice field, smallest, largest value)
WHAT_IF_KEYS: dict[str, tuple[str, int, int]] = {
    "macs": ("macs_per_command", 1, 512),
    "vectors": ("vectors_per_mac", 1, 256),
    "accumulators": ("accumulators", 1, 1 << 16),
    "buffer": ("global_buffer_bytes", 32, 1 << 24),
}


def parse_what_if(text: str, field: str = "--what-if") -> dict[str, int]:
    """``"macs=32,vectors=8"`` -> ``{"macs": 32, "vectors": 8}``; anything else -> one error
    naming ``field``, the value and what was expected."""
    expected = ("comma-separated KEY=INTEGER with KEY in " + ", ".join(
        f"{k} ({lo}..{hi})" for k, (_, lo, hi) in WHAT_IF_KEYS.items()) + ", each key at most once")
    out: dict[str, int] = {}
    parts = [p.strip() for p in str(text).split(",")]
    if not str(text).strip() or any(not p for p in parts):
        raise field_error(field, text, expected)
    for part in parts:
        m = re.fullmatch(r"([a-z_]+)\s*=\s*([0-9]{1,9})", part)
        if not m or m.group(1) not in WHAT_IF_KEYS or m.group(1) in out:
            raise field_error(field, text, expected)
        _, lo, hi = WHAT_IF_KEYS[m.group(1)]
        value = int(m.group(2))
        if not lo <= value <= hi:
            raise field_error(f"{field} {m.group(1)}", value, f"an integer from {lo} to {hi}")
        out[m.group(1)] = value
    return out


def what_if_device(device: PIMDevice, changes: dict[str, int], field: str = "--what-if macs") -> PIMDevice:
    """``device`` with the knobs of ``changes`` (see the module: ``vectors`` scales the
    accumulators and the global buffer unless they are given); ``field`` names ``macs`` in an
    error (it must divide a PU's row)."""
    fields = {WHAT_IF_KEYS[k][0]: v for k, v in changes.items()}
    v = changes.get("vectors", 1)
    if v > 1:
        fields.setdefault("accumulators", device.accumulators * v)
        fields.setdefault("global_buffer_bytes", device.global_buffer_bytes * v)
    if "macs" in changes:
        row = int(device.config.org["column"] * device.config.tx_bytes) * device.banks_per_pu
        if (row // device.operand_bytes) % changes["macs"]:
            raise field_error(field, changes["macs"],
                              f"a divisor of the {row // device.operand_bytes} elements of a PU's row")
    return dataclasses.replace(device, **fields)


def attention_needs(layer: AttentionLayer, device: PIMDevice, context_lens: Sequence[int],
                    gpu_time_s: Callable[[int], float], *, groups: Sequence[int] = (4, 8, 16),
                    macs: Sequence[int] = (16, 32, 64), vectors: Sequence[int] = (1, 2, 4, 8, 16),
                    field: str = "--macs") -> list[dict]:
    """One row per (GQA group size, macs, vectors): ``layer`` with ``group`` query heads per KV
    head (its KV cache unchanged) on ``device`` changed by ``macs`` and ``vectors``
    (:func:`what_if_device`), for requests of ``context_lens`` tokens on one GPU.
    ``gpu_time_s(group)``: the GPU's time of the same attention [s].

    Keys: ``group``, ``macs``, ``vectors``, ``macs_per_command`` (= macs x vectors, MACs per PU
    per command), ``pim_us`` (:meth:`AttentionLayer.time_s`), ``gpu_us``, ``pim_over_gpu``
    (below 1: offload pays), ``beats_gpu``."""
    rows = []
    for g in groups:
        lay = dataclasses.replace(layer, q_per_kv=int(g))
        gpu = gpu_time_s(int(g))
        for m in macs:
            for v in vectors:
                changes = {"macs": int(m)} | ({"vectors": int(v)} if v > 1 else {})
                dev = what_if_device(device, changes, field)
                t = lay.time_s(dev, context_lens)
                rows.append({"group": int(g), "macs": int(m), "vectors": int(v), "macs_per_command": int(m) * int(v),
                             "pim_us": t * 1e6, "gpu_us": gpu * 1e6, "pim_over_gpu": t / gpu if gpu else float("inf"),
                             "beats_gpu": bool(t < gpu)})
    return rows
