"""Number formats of weights, activations and the KV cache: bytes per element (scales included)
and the tensor-core class a GPU computes them in.

A format is data: the bits of one value, and, for block-scaled formats, the elements that share
one scale and the bits of that scale. ``bytes_per_element`` counts both, so capacity and HBM
traffic follow what a checkpoint really stores:

===========  ======================================================  =================  ============
name         what it is                                               bytes / element    tensor cores
===========  ======================================================  =================  ============
bf16         bfloat16 (the Sieve paper's format for everything)       2                  bf16
fp16         IEEE half                                                2                  bf16
fp8          FP8 E4M3, one scale per tensor (KV caches, per-tensor)   1                  fp8
fp8-block    FP8 E4M3, one fp32 scale per 128 x 128 block             1 + 4 / 16384      fp8
             (DeepSeek-V3/R1, Qwen3-FP8 ``weight_block_size``)
mxfp8        OCP MX FP8: one E8M0 scale per 32 values                 1 + 1 / 32         fp8
mxfp4        OCP MX FP4 (E2M1): one E8M0 scale per 32 values          0.5 + 1 / 32       fp4
             (GPT-OSS experts)
nvfp4        NVIDIA FP4 (E2M1): one E4M3 scale per 16 values          0.5 + 1 / 16       fp4
===========  ======================================================  =================  ============

Sources: OCP Microscaling Formats (MX) v1.0 specification (block of 32, E8M0 scale); NVIDIA's
NVFP4 description (blocks of 16 with an FP8 E4M3 scale; "Introducing NVFP4", NVIDIA technical blog,
2025); DeepSeek-V3 technical report section 3.3 (128 x 128 weight blocks); the GPT-OSS model card
(MXFP4 MoE weights). A GPU without tensor cores for a format runs it as deployments do on it:
weight-only, dequantised in the kernel, computing in BF16 (:meth:`sievesim.hardware.GPUSpec.peak_flops`).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from .errors import field_error

__all__ = ["NumberFormat", "FORMATS", "TENSOR_CORE_CLASSES", "get_format", "bytes_of", "parse_weight_formats",
           "FORMAT_PARTS"]

#: Tensor-core classes, from the widest to the narrowest.
TENSOR_CORE_CLASSES: tuple[str, ...] = ("bf16", "fp8", "fp4")


@dataclass(frozen=True)
class NumberFormat:
    """One storage format."""

    name: str
    #: Bits of one value.
    value_bits: int
    #: Values sharing one scale (None: no block scale, or one per tensor, negligible).
    block: int | None
    #: Bits of one block scale.
    scale_bits: int
    #: Tensor-core class that computes it (one of :data:`TENSOR_CORE_CLASSES`).
    tensor_core: str
    description: str

    @property
    def bytes_per_element(self) -> float:
        """Bytes one stored value takes, its share of the block scale included."""
        scale = self.scale_bits / 8.0 / self.block if self.block else 0.0
        return self.value_bits / 8.0 + scale


FORMATS: dict[str, NumberFormat] = {f.name: f for f in (
    NumberFormat("bf16", 16, None, 0, "bf16", "bfloat16"),
    NumberFormat("fp16", 16, None, 0, "bf16", "IEEE half precision"),
    NumberFormat("fp8", 8, None, 0, "fp8", "FP8 E4M3 with one scale per tensor"),
    NumberFormat("fp8-block", 8, 128 * 128, 32, "fp8", "FP8 E4M3 with one fp32 scale per 128 x 128 block"),
    NumberFormat("mxfp8", 8, 32, 8, "fp8", "OCP MX FP8: one E8M0 scale per 32 values"),
    NumberFormat("mxfp4", 4, 32, 8, "fp4", "OCP MX FP4 (E2M1): one E8M0 scale per 32 values"),
    NumberFormat("nvfp4", 4, 16, 8, "fp4", "NVIDIA FP4 (E2M1): one FP8 E4M3 scale per 16 values"),
)}

#: What a ``--weight-format`` part names: routed and shared experts, the other linear weights
#: (attention, dense MLPs, router), the KV cache.
FORMAT_PARTS: tuple[str, ...] = ("experts", "weights", "kv")


def get_format(name: Any, field: str = "format") -> NumberFormat:
    """The format called ``name`` (case-insensitive); a clear error naming ``field`` otherwise."""
    key = name.strip().lower() if isinstance(name, str) else name
    fmt = FORMATS.get(key) if isinstance(key, str) else None
    if fmt is None:
        close = difflib.get_close_matches(str(key), list(FORMATS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise field_error(field, name, f"one of {list(FORMATS)}{hint}")
    return fmt


def bytes_of(name: str) -> float:
    """Bytes per element of format ``name``."""
    return get_format(name).bytes_per_element


def parse_weight_formats(text: Any, field: str = "--weight-format") -> dict[str, str]:
    """``"fp8"`` (every linear weight), or parts such as ``"experts=mxfp4"`` or
    ``"experts=nvfp4,weights=fp8,kv=fp8"``: the format of each named part (:data:`FORMAT_PARTS`)."""
    if not isinstance(text, str) or not text.strip():
        raise field_error(field, text, f"a format ({', '.join(FORMATS)}) or parts such as 'experts=mxfp4,kv=fp8'")
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if "=" not in item:
            fmt = get_format(item, field).name
            for part in ("experts", "weights"):
                _put(out, part, fmt, field)
            continue
        part, _, value = item.partition("=")
        part = part.strip().lower()
        if part not in FORMAT_PARTS:
            close = difflib.get_close_matches(part, FORMAT_PARTS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise field_error(field, item, f"PART=FORMAT with PART one of {list(FORMAT_PARTS)}{hint}")
        _put(out, part, get_format(value, f"{field} {part}").name, field)
    return out


def _put(out: dict[str, str], part: str, fmt: str, field: str) -> None:
    if part in out and out[part] != fmt:
        raise field_error(field, f"{part}={fmt}", f"one format for {part} (given {out[part]!r} already)")
    out[part] = fmt
