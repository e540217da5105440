"""The options that choose the GPU model, the parallelism and the weight formats, shared by ``run``,
``serve`` and ``sweep`` (one definition, so their help and their checks agree)."""
from __future__ import annotations

import argparse
from typing import Any

from ..costs.gpu_model import DEFAULT_GPU_MODEL, GPU_MODELS, check_gpu_model_name


def _gpu_model_arg(text: str) -> str:
    return check_gpu_model_name(text, "--gpu-model")


def _redundant_arg(text: str) -> int | str:
    from .._validate import int_arg
    return "auto" if text.strip() == "auto" else int_arg("experts", lo=0)(text)


def _nodes_arg(text: str) -> int:
    from .._validate import int_arg
    return int_arg("gpus")(text)


def _weight_format_arg(text: str) -> str:
    from ..formats import parse_weight_formats
    parse_weight_formats(text, "--weight-format")     # refuses a bad one here (exit 2)
    return text


def add_gpu_args(p: argparse.ArgumentParser, *, parallelism: bool = True) -> None:
    """``--gpu-model``, ``--weight-format`` and (with ``parallelism``) ``--attention``, ``--experts``."""
    p.add_argument("--gpu-model", type=_gpu_model_arg, default=DEFAULT_GPU_MODEL, metavar="NAME",
                   help=f"GPU timing model: {' or '.join(GPU_MODELS)} (default {DEFAULT_GPU_MODEL}: kernels priced "
                        "from published measurements with fixed costs, format peaks and measured collectives; "
                        "roofline: the Sieve paper's max(flops/peak, bytes/bw))")
    p.add_argument("--weight-format", type=_weight_format_arg, default=None, metavar="SPEC",
                   help="storage formats overriding the model's: a format (bf16, fp8, fp8-block, mxfp8, mxfp4, "
                        "nvfp4) for every linear weight, or parts, e.g. experts=mxfp4 or experts=nvfp4,kv=fp8 "
                        "(default: the model's; a Hugging Face config's quantization_config is read)")
    if parallelism:
        p.add_argument("--attention", default="dp", choices=("dp", "tp"),
                       help="attention data-parallel (dp, B/G requests per GPU; default) or tensor-parallel "
                            "(tp, 1/G of the heads of every request, all-reduced)")
        p.add_argument("--nodes", type=_nodes_arg, default=None, metavar="N",
                       help="NVLink domains the --gpus span, joined by the hardware's scale-out network "
                            "(default: the hardware's interconnect.gpus_per_node; one domain without it)")
        p.add_argument("--redundant-experts", type=_redundant_arg, default="auto", metavar="R",
                       help="R extra replicas of the hottest experts, placed as DeepSeek's EPLB places them "
                            "(experts + R a multiple of --gpus; default auto: 0 when --gpus divides the experts, "
                            "else the fewest that make them a multiple, e.g. 32 for 256 experts on 72 GPUs)")
        p.add_argument("--dispatch", default="low-latency", choices=("low-latency", "normal"),
                       help="DeepEP's dispatch/combine kernels across nodes: low-latency (default; pure RDMA, a token "
                            "once to every GPU that needs it, as decode deployments run) or normal (once per node, "
                            "forwarded over NVLink inside it)")
        p.add_argument("--attention-on", default="pim", choices=("pim", "gpu"),
                       help="where decode attention runs beside PIM experts: pim (the Sieve paper's; default) or gpu "
                            "(the experts are still split between GPU and PIM by the policy)")
        p.add_argument("--experts", default="ep", choices=("ep", "tp"),
                       help="routed experts expert-parallel (ep, E/G per GPU; default) or tensor-parallel "
                            "(tp, every expert split by its intermediate size; with --attention tp)")


def gpu_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The StepSimulator keywords these options give."""
    out: dict[str, Any] = {"gpu_model": args.gpu_model, "weight_format": args.weight_format}
    if hasattr(args, "attention"):
        out.update(attention=args.attention, experts=args.experts, nodes=args.nodes,
                   redundant_experts=args.redundant_experts, dispatch=args.dispatch, attention_on=args.attention_on)
    return out
