"""The hardware dataclasses (GPU, HBM-PIM, interconnect, system) and the check of every field
(units in the field names: FLOP/s, bytes/s, bytes, seconds)."""
from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._inputs import is_int as _is_int
from .._validate import Problems
from ..errors import field_error

_PRESET_DIR = Path(__file__).resolve().parent.parent / "data" / "hardware"

#: Where the processing units sit: one per bank (AttAcc 1P1B, NeuPIMs, Duplex bank-PIM), one per
#: pair of banks (Samsung HBM-PIM / Aquabolt-XL), one per bank group (AttAcc BG-PIM).
PU_PLACEMENTS: tuple[str, ...] = ("bank", "bank_pair", "bankgroup")
#: Banks that share one PU, per placement (bank groups of 4 banks, as in HBM3/HBM3E).
BANKS_PER_PU: dict[str, int] = {"bank": 1, "bank_pair": 2, "bankgroup": 4}
TOPOLOGIES: tuple[str, ...] = ("switch",)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# Upper ends far above any machine (a B200: 2.25e15 FLOP/s, 8e12 B/s, 8 stacks), so that derived
# figures (ridge point, PIM peak) stay finite and a typo is named where it was made.
_UPPER = {"FLOP/s": 1e21, "bytes/s": 1e18, "bytes/s per direction": 1e18, "bytes": 2.0**50,
          "HBM stacks per GPU": 64, "experts": 1 << 16, "MACs per PU per command": 4096,
          "internal / external bandwidth": 1e4, "bytes per PIM channel": 2**30, "bytes per weight element": 16,
          "tokens per tile": 4096}
#: Physical floors of the rates and sizes: far below any machine simulated here (a GPU does 1e14
#: FLOP/s, an HBM stack 1e12 bytes/s, a link 1e10), so that a typo such as 1e-300 is refused
#: instead of turning times into inf or nan.
_LOWER = {"FLOP/s": 1e9, "bytes/s": 1e6, "bytes/s per direction": 1e6,
          "internal / external bandwidth": 1e-3, "bytes per weight element": 0.125}


def _positive(what: str, *, integer: bool = False) -> Any:
    """A check of a positive number (integer) of ``what``, at most its physical ceiling."""
    hi = _UPPER.get(what, math.inf)
    lo = _LOWER.get(what)

    def check(fname: str, value: Any, src: str | None) -> None:
        ok = _is_int(value) if integer else _is_number(value)
        if not ok or value <= 0 or value > hi or (lo is not None and value < lo):
            kind = "a positive integer" if integer else "a positive number"
            if lo is not None:
                limit = f" from {lo:g} to {hi:g}"
            else:
                limit = f" up to {hi:g}" if hi != math.inf else ""
            raise field_error(fname, value, f"{kind}{limit} ({what})", source=src)
    return check


def _fraction(fname: str, value: Any, src: str | None) -> None:
    if not _is_number(value) or not 1e-3 <= value <= 1:
        raise field_error(fname, value, "a fraction in [0.001, 1] (share of the peak that is reached)", source=src)


def _boolean(fname: str, value: Any, src: str | None) -> None:
    if not isinstance(value, bool):
        raise field_error(fname, value, "true or false", source=src)


def _latency(fname: str, value: Any, src: str | None) -> None:
    if not (_is_number(value) and 0 <= value < 1):
        raise field_error(fname, value, "a latency in seconds, >= 0 and < 1", source=src)


def _decision_work(fname: str, value: Any, src: str | None) -> None:
    if not (_is_number(value) and 0 <= value <= 1e6):
        raise field_error(fname, value, "a work in sorted-expert equivalents, from 0 to 1e6", source=src)


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(fname: str, value: Any, src: str | None) -> None:
        if not isinstance(value, str) or value not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise field_error(fname, value, f"one of {list(choices)}{hint}", source=src)
    return check


def _check_fields(obj: Any, src: str) -> None:
    """Every field of a section (:data:`_FIELD_CHECKS`), all problems in one error."""
    problems = Problems(src)
    for fname, check in _FIELD_CHECKS[type(obj)].items():
        with problems.check():
            check(fname, getattr(obj, fname), src)
    problems.raise_if_any()


@dataclass(frozen=True)
class GPUSpec:
    """One GPU, as the roofline cost model sees it (Duplex style: ``t = max(flops/peak, bytes/bw)``)."""

    name: str
    #: Dense bf16 tensor-core peak, FLOP/s.
    peak_flops_bf16: float
    #: HBM bandwidth of all stacks together, bytes/s.
    hbm_bandwidth_bytes_per_s: float
    #: HBM capacity, bytes.
    hbm_capacity_bytes: int
    #: HBM stacks attached to the GPU (each is one HBM-PIM stack when PIM is present).
    num_hbm_stacks: int
    #: Fraction of ``peak_flops_bf16`` that GEMMs reach (1.0 = Duplex; AttAcc uses 0.8).
    compute_efficiency: float = 1.0
    #: Fraction of ``hbm_bandwidth_bytes_per_s`` that streaming reaches (1.0 = Duplex; AttAcc uses 0.85).
    memory_efficiency: float = 1.0
    #: Modelled latency of one expert-partitioning decision (Sieve, PIMoE) on the GPU at the
    #: reference work: ``scheduler_reference_experts`` activated experts sorted and as many moves
    #: tried (Sieve paper Section 5: about 20 us per layer on a B200 for DeepSeek-R1's 256), seconds.
    scheduler_latency_s: float = 20e-6
    #: Activated experts (and moves tried) of the reference decision.
    scheduler_reference_experts: int = 256
    #: Fixed work of one decision, in sorted-expert equivalents. Shape of the work measured on
    #: sievesim's own compiled rule (counting sort + scan) over n = 4..1024:
    #: ``python benchmarks/run.py policies DecisionWorkShape`` (docs/policies.md).
    scheduler_fixed_work: float = 3.5
    #: Work of one move tried (one ``T_total`` evaluation of the scan) per expert sorted (same measurement).
    scheduler_try_work: float = 1.15
    #: Energy of one bf16 tensor-core FLOP, picojoules (None: no energy model; docs/energy.md).
    energy_pj_per_flop: float | None = None
    #: GPU-side energy per byte of HBM traffic (L2, L1, registers), picojoules; the DRAM's own
    #: energy per byte comes from the DRAM configuration (:mod:`sievesim.dram.energy`).
    energy_pj_per_hbm_byte: float | None = None
    #: Power the GPU draws whatever it does (leakage, clocks, what the per-operation figures leave
    #: out), watts, over the whole step.
    static_power_w: float | None = None
    # --- the calibrated GPU model (docs/hardware.md, "The calibrated GPU model"); None: not given ---
    #: Dense FP8 tensor-core peak, FLOP/s (None: no FP8 tensor cores; FP8 weights compute in bf16).
    peak_flops_fp8: float | None = None
    #: Dense FP4 tensor-core peak, FLOP/s (None: no FP4 tensor cores; FP4 weights are dequantised
    #: and compute at the next format the GPU has, as deployments on it do).
    peak_flops_fp4: float | None = None
    #: Launch cost of one kernel replayed in a CUDA graph (the gap before the next dependent
    #: kernel starts), seconds.
    kernel_launch_s: float | None = None
    #: Time a kernel takes beyond its bytes at the achieved bandwidth (ramp and tail: the first
    #: bytes wait a DRAM latency, the last wave drains), seconds.
    kernel_ramp_s: float | None = None
    #: Bandwidth a large memory-bound kernel (a streaming copy, a weight-bound GEMV) reaches, as a
    #: share of ``hbm_bandwidth_bytes_per_s``.
    kernel_bandwidth_fraction: float | None = None
    #: FLOP/s a large GEMM reaches, as a share of the tensor-core peak of its format.
    kernel_flops_fraction: float | None = None
    #: Bandwidth a decode-attention kernel reaches over a long KV cache, as a share of
    #: ``hbm_bandwidth_bytes_per_s``.
    attention_bandwidth_fraction: float | None = None
    #: Tokens of one M tile of a grouped GEMM: an expert with t tokens computes ``ceil(t / tile)``
    #: tiles (padding), tokens.
    gemm_tile_tokens: int | None = None
    #: Time a serving engine adds to every iteration per request in the batch (the host's work
    #: on each request's output that CUDA graphs do not hide), seconds.
    step_overhead_s_per_request: float | None = None

    def __post_init__(self) -> None:
        name_ok = isinstance(self.name, str) and bool(self.name)
        _check_fields(self, f"gpu {self.name!r}" if name_ok else "gpu")

    def decision_time_s(self, activated: int, tries: int) -> float:
        """Modelled latency [s] of one GPU's decision that sorts ``activated`` experts and tries
        ``tries`` moves: the reference latency scaled by the work, fixed + sorted + tried."""
        ref = self.scheduler_fixed_work + self.scheduler_reference_experts * (1.0 + self.scheduler_try_work)
        work = self.scheduler_fixed_work + activated + self.scheduler_try_work * tries
        return self.scheduler_latency_s * work / ref

    def scheduler_time_s(self, experts: int) -> float:
        """Modelled latency [s] of the worst-case decision over ``experts`` experts: every one
        activated and every move tried (:meth:`decision_time_s`)."""
        return self.decision_time_s(experts, experts)

    def peak_flops(self, tensor_core: str = "bf16") -> float:
        """Dense tensor-core peak [FLOP/s] for a format's class (``bf16``, ``fp8``, ``fp4``). A class
        the GPU lacks runs as deployments run it there: weights dequantised in the kernel, the math
        in the widest class it has below (FP4 on Hopper computes in BF16; vLLM's Marlin MXFP4 and
        NVFP4 kernels, TensorRT-LLM's weight-only kernels)."""
        if tensor_core == "fp4" and self.peak_flops_fp4 is not None:
            return self.peak_flops_fp4
        if tensor_core == "fp8" and self.peak_flops_fp8 is not None:
            return self.peak_flops_fp8
        if tensor_core not in ("bf16", "fp8", "fp4"):
            raise field_error("tensor_core", tensor_core, "one of ['bf16', 'fp8', 'fp4']")
        return self.peak_flops_bf16

    def calibration_missing(self) -> list[str]:
        """Fields the calibrated GPU model needs that this GPU leaves out (empty: it can run)."""
        return [f for f in GPU_KERNEL_FIELDS if getattr(self, f) is None]

    @property
    def effective_flops(self) -> float:
        """Reachable bf16 FLOP/s (``peak_flops_bf16 * compute_efficiency``)."""
        return self.peak_flops_bf16 * self.compute_efficiency

    @property
    def effective_bandwidth_bytes_per_s(self) -> float:
        """Reachable HBM bytes/s (``hbm_bandwidth_bytes_per_s * memory_efficiency``)."""
        return self.hbm_bandwidth_bytes_per_s * self.memory_efficiency

    @property
    def hbm_bandwidth_per_stack(self) -> float:
        """External (GPU-visible) bandwidth of one stack, bytes/s."""
        return self.hbm_bandwidth_bytes_per_s / self.num_hbm_stacks

    @property
    def ridge_flops_per_byte(self) -> float:
        """Roofline ridge point, FLOP/byte (peak FLOP/s over bandwidth, both at their efficiencies)."""
        return self.effective_flops / self.effective_bandwidth_bytes_per_s


@dataclass(frozen=True)
class PIMSpec:
    """The processing-in-memory logic of one HBM-PIM stack.

    The internal bandwidth is ``internal_bandwidth_ratio`` x the GPU's external bandwidth per
    stack (16x for bank-level PIM with one 16-MAC PU per bank at ``tCCD_AB``); the PU does one
    multiply-accumulate (2 FLOP) per weight element it reads, so the peak is
    ``internal bandwidth / operand_bytes * 2`` FLOP/s (= internal bytes/s for bf16, op/B = 1).
    """

    #: Engine DRAM configuration name (timing + organisation), e.g. ``"hbm3e-8000"``, ``"hbm3-6400"``.
    dram_config: str = "hbm3e-8000"
    #: One of :data:`PU_PLACEMENTS`: ``"bank"``, ``"bank_pair"`` or ``"bankgroup"``.
    pu_placement: str = "bank"
    #: MACs one PU performs per all-bank MAC command (NeuPIMs ``pim_comp_coverage`` = 16 bf16).
    macs_per_command: int = 16
    #: Internal (PU-visible) over external (GPU-visible) bandwidth of one stack, dimensionless.
    internal_bandwidth_ratio: float = 16.0
    #: Global (vector) buffer of one PIM channel (pseudo-channel), bytes; holds the broadcast token vector.
    global_buffer_bytes: int = 2048
    #: True when the PU applies the SwiGLU activation itself (else the GPU does, between the GEMVs).
    activation_on_pim: bool = False
    #: True when a PU can apply one weight read to several token vectors (multi-token GEMV);
    #: False = one GEMV per token, as in the Sieve paper.
    multi_vector_pu: bool = False
    #: Bytes per weight element the PU reads (2 = bf16).
    operand_bytes: float = 2.0
    #: Dual row buffers (NeuPIMs): PIM and normal reads keep separate open rows in a bank.
    dual_row_buffer: bool = True
    #: One hand-over between the GPU and the PIM inside an expert or attention layer (the GPU step
    #: after the PIM's results, the PIM's next GEMV after the GPU step), seconds: a dependent kernel
    #: in a CUDA graph, about 0.875 us (docs/hardware.md).
    sync_latency_s: float = 8.75e-7
    #: Command-clock cycles between all-bank MAC commands under a power budget; 0 = the DRAM
    #: configuration's nCCDAB (no power limit beyond it). See docs/hardware.md.
    macab_interval_cycles: int = 0
    #: External bandwidth of one stack, bytes/s; set by :class:`HardwareSpec` from the GPU
    #: (``hbm_bandwidth_bytes_per_s / num_hbm_stacks``); None for a PIMSpec on its own.
    external_bandwidth_bytes_per_s_per_stack: float | None = None
    #: Command-clock cycles from an input write (GWRITE) to the MAC command that uses it; 0 = the
    #: DRAM standard's nCWL + nBL. Samsung's Aquabolt-XL: 19 (docs/pim.md, section 8).
    input_write_to_mac_cycles: int = 0
    #: Command-clock cycles between input writes (GWRITE -> GWRITE); 0 = the standard's nBL.
    input_write_interval_cycles: int = 0
    #: Command-clock cycles per PU clock: MAC commands at least this far apart; 0 = no PU clock
    #: limit beyond nCCDAB. Aquabolt-XL: 300 MHz PUs on a 1.2 GHz command clock, 4.
    pu_clock_divider: int = 0
    #: Command-clock cycles a PIM kernel spends entering and leaving PIM mode, added once to every
    #: PIM program; 0 = none.
    mode_switch_cycles: int = 0
    #: Banks of a PU whose rows one opened row feeds its MACs; 0 = all of the PU's banks (the
    #: all-bank activation opens them all). Samsung's GEMV kernel reads one bank of the pair per
    #: opened row: 1.
    banks_per_row_opening: int = 0
    #: True when an input write closes the open PIM row (Aquabolt-XL writes its input registers
    #: through a reserved row), so the weights are re-opened after every input write.
    input_write_closes_row: bool = False

    def __post_init__(self) -> None:
        _check_fields(self, "pim")

    @property
    def banks_per_pu(self) -> int:
        """Banks that share one PU (1, 2 or 4)."""
        return BANKS_PER_PU[self.pu_placement]

    @property
    def internal_bandwidth_bytes_per_s_per_stack(self) -> float:
        """Bandwidth the PUs of one stack read weights at, bytes/s (external per stack x ratio)."""
        if self.external_bandwidth_bytes_per_s_per_stack is None:
            raise field_error("external_bandwidth_bytes_per_s_per_stack", None,
                              "a value: use HardwareSpec(...).pim, which sets it from the GPU", source="pim")
        return self.external_bandwidth_bytes_per_s_per_stack * self.internal_bandwidth_ratio

    @property
    def peak_flops_per_stack(self) -> float:
        """PIM FLOP/s of one stack: 2 FLOP per MAC, one MAC per weight element read."""
        return self.internal_bandwidth_bytes_per_s_per_stack / self.operand_bytes * 2.0

    def implied_internal_bandwidth_bytes_per_s_per_stack(self, banks_per_stack: int,
                                                         command_interval_s: float) -> float:
        """Internal bandwidth implied by the organisation: PUs per stack x ``macs_per_command`` x
        ``operand_bytes`` per all-bank MAC command, one command every ``command_interval_s`` seconds
        (``tCCD_AB``). Used to check that ``internal_bandwidth_ratio`` agrees with the engine."""
        if not _is_int(banks_per_stack) or banks_per_stack <= 0:
            raise field_error("banks_per_stack", banks_per_stack, "a positive integer")
        if not _is_number(command_interval_s) or command_interval_s <= 0:
            raise field_error("command_interval_s", command_interval_s, "a positive time in seconds")
        pus = banks_per_stack // self.banks_per_pu
        return pus * self.macs_per_command * self.operand_bytes / command_interval_s


@dataclass(frozen=True)
class InterconnectSpec:
    """GPU-to-GPU links (NVLink through a switch: every GPU pair at full per-direction bandwidth)."""

    #: Bandwidth one GPU can send (and, at the same time, receive), bytes/s.
    bandwidth_bytes_per_s_per_direction: float
    #: Latency of one transfer (start-up), seconds.
    latency_s: float
    #: ``"switch"``: all-to-all through an NVLink switch (the only topology modelled).
    topology: str = "switch"
    #: Energy of one bit sent over a link, picojoules (None: no energy model; docs/energy.md).
    energy_pj_per_bit: float | None = None
    # --- measured collective curves (the calibrated GPU model); None: not given ---
    #: Fixed time of one small all-reduce among the GPUs (NCCL, in a CUDA graph), seconds.
    allreduce_latency_s: float | None = None
    #: All-reduce bus bandwidth of large messages (nccl-tests' busbw), bytes/s.
    allreduce_bandwidth_bytes_per_s: float | None = None
    #: Fixed time of one expert-parallel dispatch or combine (DeepEP-style all-to-all), seconds.
    alltoall_latency_s: float | None = None
    #: Bandwidth one GPU reaches sending (and receiving) in a dispatch or combine, bytes/s.
    alltoall_bandwidth_bytes_per_s: float | None = None
    # --- more than one NVLink domain (docs/hardware.md, "Nodes") ---
    #: GPUs that share one NVLink domain (a node of 8, an NVL72 rack); None: every GPU of a run.
    gpus_per_node: int | None = None
    #: The scale-out network between domains: what one GPU's NIC sends per direction, bytes/s.
    scaleout_bandwidth_bytes_per_s_per_direction: float | None = None
    #: Latency of one scale-out transfer, seconds.
    scaleout_latency_s: float | None = None
    #: Measured dispatch/combine over the scale-out network (the calibrated GPU model): fixed time
    #: [s] and bandwidth one GPU reaches [bytes/s].
    scaleout_alltoall_latency_s: float | None = None
    scaleout_alltoall_bandwidth_bytes_per_s: float | None = None
    #: DeepEP's normal (NVLink-forwarded) kernels, ``dispatch="normal"``: the bandwidth one GPU reaches
    #: over NVLink and over RDMA (per node, not per GPU), bytes/s.
    forwarded_alltoall_bandwidth_bytes_per_s: float | None = None
    scaleout_forwarded_bandwidth_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        _check_fields(self, "interconnect")
        if self.gpus_per_node is not None and (self.scaleout_bandwidth_bytes_per_s_per_direction is None
                                               or self.scaleout_latency_s is None):
            raise field_error("interconnect.scaleout_bandwidth_bytes_per_s_per_direction", None,
                              f"a scale-out bandwidth and latency (gpus_per_node = {self.gpus_per_node}: GPUs in "
                              "other nodes are reached over the scale-out network)", source="interconnect")

    def nodes(self, gpus: int) -> int:
        """NVLink domains that ``gpus`` GPUs span (1 without ``gpus_per_node``); a GPU count that
        fills no whole number of domains is refused."""
        per = self.gpus_per_node
        if per is None or gpus <= per:
            return 1
        if gpus % per:
            raise field_error("gpus", gpus, f"a multiple of the {per} GPUs of one node (interconnect.gpus_per_node), "
                              "or at most one node")
        return gpus // per

    def allreduce_time_s(self, num_bytes: float, gpus: int) -> float:
        """One all-reduce of ``num_bytes`` per GPU among ``gpus`` GPUs on the measured curve:
        ``latency + 2 (G-1)/G x bytes / busbw`` (nccl-tests' bus-bandwidth convention); 0 on one GPU."""
        if gpus <= 1 or num_bytes <= 0:
            return 0.0
        self._need_collectives("allreduce_latency_s", "allreduce_bandwidth_bytes_per_s")
        return (max(self.allreduce_latency_s, self.latency_s)
                + 2.0 * (gpus - 1) / gpus * num_bytes / self.collective_bandwidth("allreduce"))

    def alltoall_time_s(self, num_bytes: float) -> float:
        """One dispatch or combine in which this GPU sends (and receives) ``num_bytes`` on the
        measured curve: ``latency + bytes / bandwidth``."""
        self._need_collectives("alltoall_latency_s", "alltoall_bandwidth_bytes_per_s")
        return max(self.alltoall_latency_s, self.latency_s) + num_bytes / self.collective_bandwidth("alltoall")

    def collective_bandwidth(self, kind: str) -> float:
        """Bytes/s a collective reaches: its measured figure, never above the link's line rate
        (``bandwidth_bytes_per_s_per_direction``: a slower link slows it; a faster one needs a new
        measurement)."""
        measured = self.allreduce_bandwidth_bytes_per_s if kind == "allreduce" else self.alltoall_bandwidth_bytes_per_s
        return min(float(measured), self.bandwidth_bytes_per_s_per_direction)

    def _need_collectives(self, *names: str) -> None:
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise field_error(f"interconnect.{missing[0]}", None, "a measured value for the calibrated GPU model "
                              f"(also needed: {', '.join(missing[1:]) or 'nothing else'}; docs/hardware.md)")

    def transfer_time_s(self, num_bytes: float) -> float:
        """Seconds to send ``num_bytes`` from one GPU: ``latency_s + bytes / bandwidth`` (0 for 0 bytes)."""
        if not _is_number(num_bytes) or num_bytes < 0:
            raise field_error("num_bytes", num_bytes, "a non-negative number of bytes")
        return 0.0 if num_bytes == 0 else self.latency_s + num_bytes / self.bandwidth_bytes_per_s_per_direction


@dataclass(frozen=True)
class HardwareSpec:
    """One node type: a GPU, the PIM logic of each of its HBM stacks (None = plain HBM), its links."""

    name: str
    gpu: GPUSpec
    pim: PIMSpec | None
    interconnect: InterconnectSpec
    #: Free text: where the values come from (not part of equality).
    description: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise field_error("name", self.name, "a non-empty string", source="hardware")
        src = f"hardware {self.name!r}"
        for fname, cls in (("gpu", GPUSpec), ("interconnect", InterconnectSpec)):
            if not isinstance(getattr(self, fname), cls):
                raise field_error(fname, getattr(self, fname), f"a {cls.__name__}", source=src)
        if self.pim is not None:
            if not isinstance(self.pim, PIMSpec):
                raise field_error("pim", self.pim, "a PIMSpec or None", source=src)
            per_stack = self.gpu.hbm_bandwidth_per_stack
            given = self.pim.external_bandwidth_bytes_per_s_per_stack
            if given is None:
                object.__setattr__(self, "pim", dataclasses.replace(
                    self.pim, external_bandwidth_bytes_per_s_per_stack=per_stack))
            elif not math.isclose(given, per_stack, rel_tol=1e-9):
                raise field_error("pim.external_bandwidth_bytes_per_s_per_stack", given,
                                  f"the GPU's bandwidth per stack, {per_stack:g} bytes/s "
                                  f"(gpu.hbm_bandwidth_bytes_per_s / gpu.num_hbm_stacks)", source=src)

    @property
    def has_pim(self) -> bool:
        """True when the HBM stacks carry PIM logic."""
        return self.pim is not None

    @property
    def hbm_bandwidth_per_stack(self) -> float:
        """External bandwidth of one HBM stack, bytes/s."""
        return self.gpu.hbm_bandwidth_per_stack

    def _need_pim(self) -> PIMSpec:
        if self.pim is None:
            raise field_error("pim", None, "a PIM section (this hardware has plain HBM)", source=f"hardware {self.name!r}")
        return self.pim

    @property
    def pim_internal_bandwidth_bytes_per_s(self) -> float:
        """PIM weight-read bandwidth of all stacks of one GPU, bytes/s."""
        return self._need_pim().internal_bandwidth_bytes_per_s_per_stack * self.gpu.num_hbm_stacks

    @property
    def pim_peak_flops(self) -> float:
        """PIM FLOP/s of all stacks of one GPU."""
        return self._need_pim().peak_flops_per_stack * self.gpu.num_hbm_stacks

    def summary(self) -> dict[str, Any]:
        """All fields plus derived figures, JSON-ready (what ``sievesim hardware show --json`` prints)."""
        out = hardware_to_dict(self)
        out["derived"] = {
            "hbm_bandwidth_per_stack_bytes_per_s": self.hbm_bandwidth_per_stack,
            "gpu_ridge_flops_per_byte": self.gpu.ridge_flops_per_byte,
        }
        if self.pim is not None:
            out["derived"].update({
                "pim_internal_bandwidth_bytes_per_s_per_stack": self.pim.internal_bandwidth_bytes_per_s_per_stack,
                "pim_internal_bandwidth_bytes_per_s": self.pim_internal_bandwidth_bytes_per_s,
                "pim_peak_flops_per_stack": self.pim.peak_flops_per_stack,
                "pim_peak_flops": self.pim_peak_flops,
            })
        return out


@dataclass(frozen=True)
class SystemSpec:
    """``num_gpus`` identical nodes: attention data-parallel (``"dp"``) or tensor-parallel (``"tp"``), routed
    experts expert-parallel (``"ep"``) or, with tensor-parallel attention, tensor-parallel (``"tp"``)."""

    hardware: HardwareSpec
    num_gpus: int
    attention: str = "dp"
    experts: str = "ep"

    def __post_init__(self) -> None:
        if not isinstance(self.hardware, HardwareSpec):
            raise field_error("hardware", self.hardware, "a HardwareSpec", source="system")
        _positive("GPUs in the system", integer=True)("num_gpus", self.num_gpus, "system")
        if self.attention not in ("dp", "tp"):
            raise field_error("attention", self.attention, "'dp' (data-parallel) or 'tp' (tensor-parallel attention)",
                              source="system")
        if self.experts not in ("ep", "tp"):
            raise field_error("experts", self.experts, "'ep' (expert parallelism) or 'tp' (tensor-parallel experts)",
                              source="system")
        if self.experts == "tp" and self.attention != "tp":
            raise field_error("experts", self.experts, "'ep' with data-parallel attention", source="system")

    def experts_per_gpu(self, num_experts: int) -> int:
        """Routed experts each GPU owns under EP (``num_experts`` must divide evenly)."""
        if not _is_int(num_experts) or num_experts <= 0 or num_experts % self.num_gpus:
            raise field_error("num_experts", num_experts,
                              f"a positive multiple of num_gpus = {self.num_gpus} (even expert parallelism)",
                              source="system")
        return num_experts // self.num_gpus


def _name(fname: str, value: Any, src: str | None) -> None:
    if not isinstance(value, str) or not value:
        raise field_error(fname, value, "a non-empty string", source=src)


def _dram_config_name(fname: str, value: Any, src: str | None) -> None:
    if not isinstance(value, str) or not value.strip():
        raise field_error(fname, value, "an engine DRAM configuration name such as 'hbm3e-8000'", source=src)


def _macab_interval(fname: str, value: Any, src: str | None) -> None:
    if not _is_int(value) or value < 0:
        raise field_error(fname, value, "cycles between all-bank MACs, >= 0 (0: the DRAM configuration's nCCDAB)",
                          source=src)


def _pim_cycles(expected: str) -> Any:
    def check(fname: str, value: Any, src: str | None) -> None:
        if not _is_int(value) or value < 0 or value > 1_000_000:
            raise field_error(fname, value, f"{expected}; a whole number up to 1000000", source=src)
    return check


def _banks_per_row_opening(fname: str, value: Any, src: str | None) -> None:
    if not _is_int(value) or value not in (0, 1, 2, 4):
        raise field_error(fname, value, "0 (all of a PU's banks), 1, 2 or 4 banks per opened row", source=src)


def _energy(unit: str, hi: float) -> Any:
    def check(fname: str, value: Any, src: str | None) -> None:
        if value is not None and not (_is_number(value) and 0 <= value <= hi):
            raise field_error(fname, value, f"a finite number from 0 to {hi:g} [{unit}]", source=src)
    return check


#: The GPU fields the calibrated GPU model needs (docs/hardware.md).
GPU_KERNEL_FIELDS = ("kernel_launch_s", "kernel_ramp_s", "kernel_bandwidth_fraction", "kernel_flops_fraction",
                     "attention_bandwidth_fraction", "gemm_tile_tokens", "step_overhead_s_per_request")
#: The interconnect fields the calibrated GPU model needs on more than one GPU.
COLLECTIVE_FIELDS = ("allreduce_latency_s", "allreduce_bandwidth_bytes_per_s", "alltoall_latency_s",
                     "alltoall_bandwidth_bytes_per_s")

#: The GPU's energy fields: all of them or none (an energy model needs each one).
GPU_ENERGY_FIELDS = ("energy_pj_per_flop", "energy_pj_per_hbm_byte", "static_power_w")


def _optional(check: Any) -> Any:
    def optional(fname: str, value: Any, src: str | None) -> None:
        if value is not None:
            check(fname, value, src)
    return optional


# Type and range of every field of each section, checked one field at a time (so that a file's
# problems are all found at once, before any section is built).
_FIELD_CHECKS: dict[type, dict[str, Any]] = {
    GPUSpec: {
        "name": _name,
        "peak_flops_bf16": _positive("FLOP/s"),
        "hbm_bandwidth_bytes_per_s": _positive("bytes/s"),
        "hbm_capacity_bytes": _positive("bytes", integer=True),
        "num_hbm_stacks": _positive("HBM stacks per GPU", integer=True),
        "compute_efficiency": _fraction,
        "memory_efficiency": _fraction,
        "scheduler_latency_s": _latency,
        "scheduler_reference_experts": _positive("experts", integer=True),
        "scheduler_fixed_work": _decision_work,
        "scheduler_try_work": _decision_work,
        "energy_pj_per_flop": _energy("pJ per FLOP", 1e3),
        "energy_pj_per_hbm_byte": _energy("pJ per byte", 1e4),
        "static_power_w": _energy("W", 1e5),
        "peak_flops_fp8": _optional(_positive("FLOP/s")),
        "peak_flops_fp4": _optional(_positive("FLOP/s")),
        "kernel_launch_s": _optional(_latency),
        "kernel_ramp_s": _optional(_latency),
        "kernel_bandwidth_fraction": _optional(_fraction),
        "kernel_flops_fraction": _optional(_fraction),
        "attention_bandwidth_fraction": _optional(_fraction),
        "gemm_tile_tokens": _optional(_positive("tokens per tile", integer=True)),
        "step_overhead_s_per_request": _optional(_latency),
    },
    PIMSpec: {
        "dram_config": _dram_config_name,
        "pu_placement": _one_of(PU_PLACEMENTS),
        "macs_per_command": _positive("MACs per PU per command", integer=True),
        "internal_bandwidth_ratio": _positive("internal / external bandwidth"),
        "global_buffer_bytes": _positive("bytes per PIM channel", integer=True),
        "operand_bytes": _positive("bytes per weight element"),
        "activation_on_pim": _boolean,
        "multi_vector_pu": _boolean,
        "dual_row_buffer": _boolean,
        "sync_latency_s": _latency,
        "macab_interval_cycles": _macab_interval,
        "external_bandwidth_bytes_per_s_per_stack": _optional(_positive("bytes/s")),
        "input_write_to_mac_cycles": _pim_cycles("cycles from an input write to its MAC, >= 0 (0: the DRAM "
                                                 "standard's nCWL + nBL)"),
        "input_write_interval_cycles": _pim_cycles("cycles between input writes, >= 0 (0: the DRAM standard's nBL)"),
        "pu_clock_divider": _pim_cycles("command-clock cycles per PU clock, >= 0 (0: no PU clock limit)"),
        "mode_switch_cycles": _pim_cycles("cycles a PIM kernel spends entering and leaving PIM mode, >= 0"),
        "banks_per_row_opening": _banks_per_row_opening,
        "input_write_closes_row": _boolean,
    },
    InterconnectSpec: {
        "bandwidth_bytes_per_s_per_direction": _positive("bytes/s per direction"),
        "latency_s": _latency,
        "topology": _one_of(TOPOLOGIES),
        "energy_pj_per_bit": _energy("pJ per bit", 1e3),
        "allreduce_latency_s": _optional(_latency),
        "allreduce_bandwidth_bytes_per_s": _optional(_positive("bytes/s per direction")),
        "alltoall_latency_s": _optional(_latency),
        "alltoall_bandwidth_bytes_per_s": _optional(_positive("bytes/s per direction")),
        "gpus_per_node": _optional(_positive("GPUs in the system", integer=True)),
        "scaleout_bandwidth_bytes_per_s_per_direction": _optional(_positive("bytes/s per direction")),
        "scaleout_latency_s": _optional(_latency),
        "scaleout_alltoall_latency_s": _optional(_latency),
        "scaleout_alltoall_bandwidth_bytes_per_s": _optional(_positive("bytes/s per direction")),
        "forwarded_alltoall_bandwidth_bytes_per_s": _optional(_positive("bytes/s per direction")),
        "scaleout_forwarded_bandwidth_bytes_per_s": _optional(_positive("bytes/s per direction")),
    },
}


# ====================================================================== dict / TOML


def hardware_to_dict(hw: HardwareSpec) -> dict[str, Any]:
    """The spec as nested plain dicts (TOML/JSON-ready). The PIM external bandwidth is left out: it
    is derived from the GPU when the dict is read back."""
    out: dict[str, Any] = {"name": hw.name}
    if hw.description:
        out["description"] = hw.description
    out["gpu"] = {k: v for k, v in dataclasses.asdict(hw.gpu).items() if v is not None}
    if hw.pim is not None:
        pim = dataclasses.asdict(hw.pim)
        pim.pop("external_bandwidth_bytes_per_s_per_stack")
        out["pim"] = pim
    out["interconnect"] = {k: v for k, v in dataclasses.asdict(hw.interconnect).items() if v is not None}
    return out
