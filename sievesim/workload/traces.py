"""Readers for recorded routing: the project's npz trace format and SGLang recorder dumps.

Two kinds of recorded routing exist:

* **per-token traces** (:class:`TraceData`): for every token (row), the routed expert ids at every
  MoE layer, plus which request the token belongs to, its position and its phase (prefill/decode).
  Source: the npz files of ``../shared/traces`` (format in their README) and SGLang ``per_token``
  dumps.
* **per-pass counts** (:class:`PassCounts`): for every recorded forward pass, tokens per expert per
  layer, without token identities. Source: SGLang ``per_pass`` and ``stat`` dumps.

SGLang dumps are ``torch.save`` files (``.pt``); reading them needs torch (optional extra).
:func:`convert_sglang_dump` turns one into an ``.npz`` that :func:`load_routing` reads with numpy
only. Every problem found in a file raises :class:`~sievesim.errors.TraceError` naming the file
and the field.
"""
from __future__ import annotations

import json
import math
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .._validate import BOUNDS, Problems, check_memory
from ..errors import SievesimError, TraceError, field_error

__all__ = [
    "TraceData", "PassCounts", "load_trace", "load_routing", "trace_from_arrays",
    "sglang_dump_to_routing", "convert_sglang_dump", "save_trace", "check_model",
    "SGLANG_FORWARD_MODE_EXTEND", "SGLANG_FORWARD_MODE_DECODE",
]

# sglang.srt.model_executor.forward_batch_info.ForwardMode (IntEnum with auto(), starting at 1).
SGLANG_FORWARD_MODE_EXTEND = 1
SGLANG_FORWARD_MODE_DECODE = 2
SGLANG_FORWARD_MODE_MIXED = 3


def _err(source: str, fld: str, value: Any, expected: str) -> TraceError:
    return field_error(fld, value, expected, source=source, cls=TraceError)  # type: ignore[return-value]


@dataclass(frozen=True)
class TraceData:
    """A per-token routing trace (one row = one token of one request).

    Attributes:
        topk_ids: (N, L, K) int16/int32 routed expert ids of token n at MoE layer l; -1 = not
            recorded (ignored by every statistic).
        seq_id: (N,) request index of each row.
        pos: (N,) token position inside its request (decode step or prompt-token index).
        phase: (N,) 0 = prefill (prompt) token, 1 = decode token.
        num_experts: routed experts per MoE layer (E).
        top_k: experts per token (K).
        model: model name from the file's metadata ("" if unknown).
        source: file the trace was read from (used in error messages).
        pass_id: (N,) forward pass of each row when the recorder knows it (SGLang), else None.
        meta: the file's metadata dict.
    """

    topk_ids: np.ndarray
    seq_id: np.ndarray
    pos: np.ndarray
    phase: np.ndarray
    num_experts: int
    top_k: int
    model: str = ""
    source: str = "<arrays>"
    pass_id: np.ndarray | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def num_tokens(self) -> int:
        """Rows (tokens) in the trace."""
        return int(self.topk_ids.shape[0])

    @property
    def num_layers(self) -> int:
        """MoE layers (L)."""
        return int(self.topk_ids.shape[1])

    def has_phase(self, phase: int) -> bool:
        """Whether any row has ``phase`` (0 prefill, 1 decode)."""
        return bool(np.any(self.phase == phase))

    def default_phase(self) -> int:
        """Decode (1) when the trace has decode rows, else prefill (0)."""
        return 1 if self.has_phase(1) else 0


@dataclass(frozen=True)
class PassCounts:
    """Per-pass token counts per expert (no token identities).

    Attributes:
        counts: (P, L, E) int64 tokens routed to expert e at MoE layer l in pass p.
        top_k: experts per token, if known (0 otherwise); tokens in a pass = counts[p, 0].sum() / top_k.
        model: model name ("" if unknown).
        source: file name for error messages.
        pass_id: (P,) forward-pass ids.
    """

    counts: np.ndarray
    top_k: int
    model: str = ""
    source: str = "<arrays>"
    pass_id: np.ndarray | None = None

    @property
    def num_experts(self) -> int:
        return int(self.counts.shape[2])

    @property
    def num_layers(self) -> int:
        return int(self.counts.shape[1])

    def batch_sizes(self) -> np.ndarray:
        """(P,) tokens in each pass (layer-0 assignments / top_k). Needs ``top_k``."""
        if self.top_k <= 0:
            raise _err(self.source, "meta.top_k", self.top_k, "a positive top-k to derive batch sizes")
        return (self.counts[:, 0, :].sum(axis=1) // self.top_k).astype(np.int64)


# --------------------------------------------------------------------------------------------
# validation


def _parse_meta(raw: Any, source: str) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        from .._inputs import json_int

        text = str(np.asarray(raw).item()) if not isinstance(raw, str) else raw
        meta = json.loads(text, parse_int=json_int)     # digits counted before int()
    except (ValueError, TypeError, RecursionError) as exc:
        raise _err(source, "meta", str(raw)[:60], f"a JSON object ({exc})") from None
    if not isinstance(meta, dict):
        raise _err(source, "meta", meta, "a JSON object")
    return meta


def _int_meta(meta: Mapping[str, Any], key: str, source: str) -> int | None:
    if key not in meta or meta[key] is None:
        return None
    value = meta[key]
    kind = {"num_experts": "experts", "top_k": "experts", "num_moe_layers": "layers"}.get(key, "experts")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _err(source, f"meta.{key}", value, f"an integer ({BOUNDS[kind].why})")
    if not 1 <= value <= BOUNDS[kind].hi:
        raise _err(source, f"meta.{key}", value, f"a positive integer up to {BOUNDS[kind].hi} ({BOUNDS[kind].why})")
    return value


def _check_ids(ids: np.ndarray, num_experts: int, source: str, fld: str) -> None:
    """Expert ids must be -1 (not recorded) or in [0, num_experts)."""
    if ids.size == 0:
        return
    bad = (ids >= num_experts) | (ids < -1)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        val = int(ids[where])
        if val >= num_experts:
            raise _err(source, f"{fld}{list(where)}", val,
                       f"an expert id < num_experts = {num_experts} (or -1 = not recorded)")
        raise _err(source, f"{fld}{list(where)}", val, "an expert id >= 0, or -1 = not recorded")


def trace_from_arrays(arrays: Mapping[str, Any], *, source: str = "<arrays>",
                      num_experts: int | None = None, top_k: int | None = None) -> TraceData:
    """Validate arrays in the npz trace format and build a :class:`TraceData`.

    ``num_experts`` / ``top_k`` are needed only when the ``meta`` entry lacks them; when both are
    present they must agree. Raises :class:`TraceError` naming ``source`` and the field.
    """
    problems = Problems(source, cls=TraceError)
    meta: dict[str, Any] = {}
    with problems.check():
        meta = _parse_meta(arrays.get("meta"), source)
    ints: dict[str, int | None] = {}
    for key in ("num_experts", "top_k", "num_moe_layers"):
        ints[key] = None
        with problems.check():
            ints[key] = _int_meta(meta, key, source)
    e_meta, k_meta, l_meta = ints["num_experts"], ints["top_k"], ints["num_moe_layers"]
    ids = np.asarray(arrays["topk_ids"]) if "topk_ids" in arrays else None
    with problems.check():
        if ids is None:
            raise _err(source, "topk_ids", None, "an (N, L, K) integer array (missing)")
        if ids.ndim != 3:
            raise _err(source, "topk_ids.shape", ids.shape, "3 dimensions (N tokens, L layers, K)")
        if not np.issubdtype(ids.dtype, np.integer):
            raise _err(source, "topk_ids.dtype", str(ids.dtype), "an integer dtype")
    if ids is None or ids.ndim != 3:  # the other arrays' shapes follow from it
        problems.raise_if_any()
    assert ids is not None
    n, num_layers, k = ids.shape

    def vec(name: str, default: np.ndarray | None) -> np.ndarray | None:
        """The (n,) integer array ``name`` (``default`` when absent); a problem and None when wrong."""
        with problems.check():
            if name not in arrays:
                if default is None:
                    raise _err(source, name, None, f"a ({n},) integer array (missing)")
                return default
            a = np.asarray(arrays[name])
            if a.shape != (n,):
                raise _err(source, f"{name}.shape", a.shape, f"({n},) = one entry per topk_ids row")
            if not np.issubdtype(a.dtype, np.integer):
                raise _err(source, f"{name}.dtype", str(a.dtype), "an integer dtype")
            return a
        return None

    seq_id = vec("seq_id", None)
    pos = vec("pos", None)
    phase = vec("phase", np.ones(n, dtype=np.int8))
    pass_id = vec("pass_id", None) if "pass_id" in arrays else None
    problems.raise_if_any()
    assert seq_id is not None and pos is not None and phase is not None
    seq_id, pos, phase = seq_id.astype(np.int64), pos.astype(np.int64), phase.astype(np.int8)

    # meaning: the counts agree, the ids and indices are in range (every problem, one message)
    if num_experts is not None and e_meta is not None and num_experts != e_meta:
        problems.add("meta.num_experts", e_meta, f"{num_experts} (the model's expert count)")
    if top_k is not None and k_meta is not None and top_k != k_meta:
        problems.add("meta.top_k", k_meta, f"{top_k} (the top-k asked for)")
    e = e_meta if e_meta is not None else num_experts
    kk = k_meta if k_meta is not None else top_k
    if e is None:
        problems.add("meta.num_experts", None, "the routed-expert count (missing)")
    if kk is None:
        kk = k
    if k != kk:
        problems.add("topk_ids.shape[2]", k, f"top_k = {kk}")
    if l_meta is not None and l_meta != num_layers:
        problems.add("topk_ids.shape[1]", num_layers, f"meta.num_moe_layers = {l_meta}")
    if "layer_ids" in arrays and np.shape(arrays["layer_ids"]) != (num_layers,):
        problems.add("layer_ids.shape", np.shape(arrays["layer_ids"]), f"({num_layers},) = one per MoE layer")
    if n == 0:
        problems.add("topk_ids.shape[0]", 0, "at least one token")
    if e is not None:
        with problems.check():
            _check_ids(ids, e, source, "topk_ids")
    for name, arr, bad, expected in (("phase", phase, (phase != 0) & (phase != 1), "0 (prefill) or 1 (decode)"),
                                     ("seq_id", seq_id, seq_id < 0, "a request index >= 0"),
                                     ("pos", pos, pos < 0, "a position >= 0")):
        if np.any(bad):
            i = int(np.argmax(bad))
            problems.add(f"{name}[{i}]", int(arr[i]), expected)
    problems.raise_if_any()
    assert e is not None
    return TraceData(topk_ids=ids, seq_id=seq_id, pos=pos, phase=phase, num_experts=int(e),
                     top_k=int(kk), model=str(meta.get("model", "")), source=source,
                     pass_id=None if pass_id is None else pass_id.astype(np.int64), meta=meta)


def check_model(routing: "TraceData | PassCounts", num_experts: int, top_k: int | None,
                model_name: str = "", num_moe_layers: int | None = None) -> None:
    """Raise :class:`TraceError` when a trace's expert count, top-k or (when given) number of MoE
    layers differ from a model's; every disagreement is named in the one message."""
    what = f" (model {model_name})" if model_name else ""
    problems = []
    if routing.num_experts != num_experts:
        problems.append(f"meta.num_experts = {routing.num_experts!r}: expected {num_experts}, the expert count "
                        f"of the chosen model{what}")
    if top_k is not None and routing.top_k and routing.top_k != top_k:
        problems.append(f"meta.top_k = {routing.top_k!r}: expected {top_k}, the top-k of the chosen model{what}")
    if num_moe_layers is not None and routing.num_layers != num_moe_layers:
        problems.append(f"MoE layers (topk_ids.shape[1]) = {routing.num_layers!r}: expected {num_moe_layers}, "
                        f"the MoE layers of the chosen model{what}")
    if problems:
        raise TraceError(f"{routing.source}: " + "; ".join(problems))


# --------------------------------------------------------------------------------------------
# file readers


#: Most members an ``.npz`` routing file may hold (a trace has 4 or 5 arrays).
MAX_NPZ_MEMBERS = 64


def _npz_array_bytes(path: Any) -> int:
    """Bytes the arrays of an ``.npz`` take once loaded, from their headers (nothing is decompressed),
    and at least the sizes the zip directory declares for its members (a zip bomb declares them)."""
    total = 0
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_NPZ_MEMBERS:
            raise TraceError(f"{getattr(path, 'name', path)}: {len(infos)} members: expected a routing .npz of at "
                             f"most {MAX_NPZ_MEMBERS} arrays")
        declared = sum(info.file_size for info in infos)
        for info in infos:
            if not info.filename.endswith(".npy"):
                continue
            with zf.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            total += math.prod(shape) * max(dtype.itemsize, 1)
    return max(total, declared)


def _open_npz(path: Path) -> dict[str, np.ndarray]:
    from .._inputs import open_input, show_path

    source = show_path(path)
    if not path.exists():
        raise TraceError(f"{source}: file not found")
    try:
        with open_input(path, "routing .npz", "routing") as fh:
            nbytes = _npz_array_bytes(fh)
            check_memory(nbytes, "its arrays", "npz file", source)
            fh.seek(0)
            with np.load(fh, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
    except SievesimError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError, zlib.error,
            NotImplementedError, RuntimeError, UnicodeDecodeError) as exc:
        raise TraceError(f"{source}: not a readable .npz trace ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]}); truncated or wrong format?") from None


def load_trace(path: str | Path, *, num_experts: int | None = None,
               top_k: int | None = None) -> TraceData:
    """Read a per-token trace ``.npz`` (format of ``../shared/traces/README.md``)."""
    p = Path(path)
    arrays = _open_npz(p)
    if "topk_ids" not in arrays:
        raise _err(str(p), "topk_ids", None, "an (N, L, K) array: this file is not a per-token trace")
    return trace_from_arrays(arrays, source=str(p), num_experts=num_experts, top_k=top_k)


def _pass_counts_from_arrays(arrays: Mapping[str, Any], source: str,
                             top_k: int | None) -> PassCounts:
    meta = _parse_meta(arrays.get("meta"), source)
    key = "pass_counts" if "pass_counts" in arrays else "logical_count"
    c = np.asarray(arrays[key])
    if c.ndim != 3 or 0 in c.shape:
        raise _err(source, f"{key}.shape", c.shape, "3 dimensions (passes, layers, experts), none of them 0")
    if not np.issubdtype(c.dtype, np.integer):
        raise _err(source, f"{key}.dtype", str(c.dtype), "an integer dtype")
    if np.any(c < 0):
        where = [int(i) for i in np.argwhere(c < 0)[0]]
        raise _err(source, f"{key}{where}", int(c[tuple(where)]), "a token count >= 0")
    k = _int_meta(meta, "top_k", source)
    if top_k is not None and k is not None and k != top_k:
        raise _err(source, "meta.top_k", k, f"{top_k} (the model's top-k)")
    used = c.reshape(c.shape[0], -1).sum(axis=1) > 0  # stat mode: unused ring-buffer rows are 0
    if not used.any():
        raise _err(source, key, f"all {c.shape[0]} passes with 0 tokens", "at least one pass with a routed token")
    pid = np.asarray(arrays["pass_id"]).astype(np.int64) if "pass_id" in arrays else np.arange(c.shape[0])
    return PassCounts(counts=c[used].astype(np.int64), top_k=int(k or top_k or 0),
                      model=str(meta.get("model", "")), source=source, pass_id=pid[used])


def load_routing(path: str | Path, *, num_experts: int | None = None,
                 top_k: int | None = None) -> "TraceData | PassCounts":
    """Read any supported routing file.

    * ``.npz`` with ``topk_ids``: per-token trace (also what :func:`convert_sglang_dump` writes for
      SGLang ``per_token`` dumps) -> :class:`TraceData`;
    * ``.npz`` with ``pass_counts`` or ``logical_count``: converted SGLang ``per_pass`` / ``stat``
      dumps -> :class:`PassCounts`;
    * ``.pt``: an SGLang expert-distribution-recorder dump, read with torch (optional dependency).
    """
    p = Path(path)
    if p.suffix == ".pt":
        dump = _torch_load(p)
        return sglang_dump_to_routing(dump, source=str(p), top_k=top_k, num_experts=num_experts)
    arrays = _open_npz(p)
    if "topk_ids" in arrays:
        return trace_from_arrays(arrays, source=str(p), num_experts=num_experts, top_k=top_k)
    if "pass_counts" in arrays or "logical_count" in arrays:
        pc = _pass_counts_from_arrays(arrays, str(p), top_k)
        if num_experts is not None and pc.num_experts != num_experts:
            raise _err(str(p), "pass_counts.shape[2]", pc.num_experts, f"{num_experts} experts")
        return pc
    raise TraceError(f"{p}: no routing array found (expected 'topk_ids', 'pass_counts' or "
                     f"'logical_count'; found {sorted(arrays)})")


def _torch_load(path: Path) -> Any:
    try:
        import torch  # noqa: PLC0415  (optional dependency)
    except ImportError:
        raise TraceError(f"{path}: reading SGLang .pt dumps needs torch (pip install "
                         "'sievesim[torch]'); or convert it once where torch is installed with "
                         "`python -m sievesim.workload.convert DUMP.pt OUT.npz`") from None
    from .._inputs import check_input

    if not path.exists():
        raise TraceError(f"{path}: file not found")
    check_input(path, "SGLang dump", "routing")
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for corrupt files
        raise TraceError(f"{path}: torch.load failed ({type(exc).__name__}: {exc})") from None


def _np(x: Any) -> np.ndarray:
    """Tensor, list or array -> numpy array (torch tensors via .cpu().numpy())."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def sglang_dump_to_routing(dump: Mapping[str, Any], *, source: str = "<sglang dump>",
                           top_k: int | None = None,
                           num_experts: int | None = None) -> "TraceData | PassCounts":
    """Convert a loaded SGLang expert-distribution-recorder dump (the dict ``torch.save`` wrote).

    * mode ``stat``/``stat_approx`` (``logical_count`` (buffer, L, E)): -> :class:`PassCounts`
      (all-zero ring-buffer rows dropped);
    * mode ``per_pass`` (records with ``global_physical_count`` (L, E_phys)): physical ids mapped
      to logical with ``last_physical_to_logical_map`` -> :class:`PassCounts`;
    * mode ``per_token`` (records with ``topk_ids_of_layer`` (L, T, 8), -1 padded): ->
      :class:`TraceData`; phase from ``forward_mode`` (EXTEND -> prefill, DECODE -> decode,
      MIXED -> one-token groups decode, longer groups prefill).
      SGLang does not record request ids: in an extend pass, tokens are grouped into sequences
      by ``extend_seq_lens``; every decode token becomes its own one-token sequence (so only the
      ``random``/``consecutive``/``recorded`` batch modes are meaningful for such dumps).
    """
    if not isinstance(dump, Mapping):
        raise TraceError(f"{source}: an SGLang dump must be a dict, got {type(dump).__name__}")
    if "logical_count" in dump:
        arrays = {"logical_count": _np(dump["logical_count"])}
        if top_k is not None:
            arrays["meta"] = json.dumps({"top_k": top_k})
        pc = _pass_counts_from_arrays(arrays, source, top_k)
        if num_experts is not None and pc.num_experts != num_experts:
            raise _err(source, "logical_count.shape[2]", pc.num_experts, f"{num_experts} experts")
        return pc
    records = dump.get("records")
    if not isinstance(records, (list, tuple)) or not records:
        raise _err(source, "records", type(records).__name__ if records is not None else None,
                   "a non-empty list of per_pass/per_token records (or a 'logical_count' tensor)")
    p2l = dump.get("last_physical_to_logical_map")
    p2l_arr = _np(p2l).astype(np.int64) if p2l is not None else None
    if "topk_ids_of_layer" in records[0]:
        return _sglang_per_token(records, p2l_arr, source, top_k, num_experts)
    if "global_physical_count" not in records[0]:
        raise _err(source, "records[0]", sorted(records[0]),
                   "a record with 'global_physical_count' (per_pass) or 'topk_ids_of_layer' (per_token)")
    counts = []
    for i, rec in enumerate(records):
        c = _np(rec["global_physical_count"]).astype(np.int64)
        if c.ndim != 2:
            raise _err(source, f"records[{i}].global_physical_count.shape", c.shape,
                       "(num_layers, num_physical_experts)")
        counts.append(c)
    shapes = {c.shape for c in counts}
    if len(shapes) != 1:
        raise _err(source, "records[*].global_physical_count.shape", sorted(shapes), "one shape for all records")
    phys = np.stack(counts)  # (P, L, Ephys)
    logical = _map_counts_to_logical(phys, p2l_arr, source, num_experts)
    pid = np.array([int(r.get("forward_pass_id", i)) for i, r in enumerate(records)], dtype=np.int64)
    arrays = {"pass_counts": logical, "pass_id": pid}
    if top_k is not None:
        arrays["meta"] = json.dumps({"top_k": top_k})
    return _pass_counts_from_arrays(arrays, source, top_k)


def _map_counts_to_logical(phys: np.ndarray, p2l: np.ndarray | None, source: str,
                           num_experts: int | None) -> np.ndarray:
    p, num_layers, ephys = phys.shape
    if p2l is None:
        return phys
    if p2l.shape != (num_layers, ephys):
        raise _err(source, "last_physical_to_logical_map.shape", p2l.shape, f"({num_layers}, {ephys})")
    e = num_experts if num_experts is not None else int(p2l.max()) + 1
    _check_ids(p2l, e, source, "last_physical_to_logical_map")
    out = np.zeros((p, num_layers, e), dtype=np.int64)
    for layer in range(num_layers):
        np.add.at(out[:, layer, :], (slice(None), p2l[layer]), phys[:, layer, :])
    return out


def _sglang_per_token(records: list, p2l: np.ndarray | None, source: str,
                      top_k: int | None, num_experts: int | None) -> TraceData:
    rows_ids, rows_seq, rows_pos, rows_phase, rows_pass = [], [], [], [], []
    next_seq = 0
    num_layers = None
    for i, rec in enumerate(records):
        t = _np(rec["topk_ids_of_layer"]).astype(np.int64)
        if t.ndim != 3:
            raise _err(source, f"records[{i}].topk_ids_of_layer.shape", t.shape,
                       "(num_layers, num_tokens, 8)")
        if num_layers is None:
            num_layers = t.shape[0]
        elif t.shape[0] != num_layers:
            raise _err(source, f"records[{i}].topk_ids_of_layer.shape[0]", t.shape[0], f"{num_layers} layers")
        ntok = t.shape[1]
        if ntok == 0:
            continue
        ids = np.transpose(t, (1, 0, 2))  # (T, L, 8)
        if p2l is not None:
            if p2l.shape[0] != num_layers:
                raise _err(source, "last_physical_to_logical_map.shape[0]", p2l.shape[0], f"{num_layers}")
            valid = ids >= 0
            if np.any(ids >= p2l.shape[1]):
                raise _err(source, f"records[{i}].topk_ids_of_layer", int(ids.max()),
                           f"a physical id < {p2l.shape[1]}")
            layer_idx = np.broadcast_to(np.arange(num_layers)[None, :, None], ids.shape)
            ids = np.where(valid, p2l[layer_idx, np.where(valid, ids, 0)], -1)
        mode = int(rec.get("forward_mode", SGLANG_FORWARD_MODE_DECODE))
        positions = _np(rec.get("positions", np.arange(ntok))).astype(np.int64).ravel()
        if positions.shape != (ntok,):
            raise _err(source, f"records[{i}].positions", positions.shape, f"({ntok},)")
        if mode == SGLANG_FORWARD_MODE_DECODE:
            seq = next_seq + np.arange(ntok)
            phase = np.ones(ntok, dtype=np.int8)
        else:
            lens = _np(rec.get("extend_seq_lens", [ntok])).astype(np.int64).ravel()
            if lens.sum() != ntok or np.any(lens < 0):
                raise _err(source, f"records[{i}].extend_seq_lens", lens.tolist(),
                           f"non-negative lengths summing to {ntok} tokens")
            seq = next_seq + np.repeat(np.arange(lens.size), lens)
            if mode == SGLANG_FORWARD_MODE_MIXED:  # one-token groups of a mixed pass are decodes
                phase = np.repeat((lens == 1).astype(np.int8), lens)
            else:
                phase = np.zeros(ntok, dtype=np.int8)
        next_seq = int(seq.max()) + 1
        rows_ids.append(ids)
        rows_seq.append(seq)
        rows_pos.append(positions)
        rows_phase.append(phase)
        rows_pass.append(np.full(ntok, int(rec.get("forward_pass_id", i)), dtype=np.int64))
    if not rows_ids:
        raise _err(source, "records", len(records), "at least one record with tokens")
    ids = np.concatenate(rows_ids)
    # SGLang pads to 8 slots with -1 past the model's top-k: keep the used slots only.
    k = top_k if top_k is not None else int((ids[:, 0, :] >= 0).sum(axis=1).max())
    if np.any(ids[:, :, k:] >= 0):
        raise _err(source, "records[*].topk_ids_of_layer", "ids past slot top_k",
                   f"-1 padding after top_k = {k} slots")
    ids = ids[:, :, :k]
    e = num_experts if num_experts is not None else (
        int(p2l.max()) + 1 if p2l is not None else int(ids.max()) + 1)
    arrays = {"topk_ids": ids.astype(np.int32), "seq_id": np.concatenate(rows_seq),
              "pos": np.concatenate(rows_pos), "phase": np.concatenate(rows_phase),
              "pass_id": np.concatenate(rows_pass),
              "meta": json.dumps({"num_experts": e, "top_k": k, "num_moe_layers": num_layers,
                                  "engine": "SGLang per_token dump"})}
    return trace_from_arrays(arrays, source=source)


def save_trace(trace: "TraceData | PassCounts", path: str | Path) -> None:
    """Write routing in the npz format read by :func:`load_routing` (no pickle)."""
    if isinstance(trace, TraceData):
        meta = dict(trace.meta)
        meta.update(num_experts=trace.num_experts, top_k=trace.top_k, num_moe_layers=trace.num_layers)
        arrays: dict[str, Any] = {"topk_ids": trace.topk_ids, "seq_id": trace.seq_id.astype(np.int32),
                                  "pos": trace.pos.astype(np.int32), "phase": trace.phase.astype(np.int8),
                                  "meta": np.array(json.dumps(meta))}
        if trace.pass_id is not None:
            arrays["pass_id"] = trace.pass_id
    else:
        arrays = {"pass_counts": trace.counts.astype(np.int32),
                  "meta": np.array(json.dumps({"top_k": trace.top_k, "model": trace.model,
                                               "num_experts": trace.num_experts}))}
        if trace.pass_id is not None:
            arrays["pass_id"] = trace.pass_id
    from .._outputs import open_output

    target = str(path) if str(path).endswith(".npz") else f"{path}.npz"   # np.savez's own rule for a path
    with open_output(target, "routing .npz") as fh:
        np.savez_compressed(fh, **arrays)


def convert_sglang_dump(pt_path: str | Path, out_path: str | Path, *, top_k: int | None = None,
                        num_experts: int | None = None) -> "TraceData | PassCounts":
    """Read an SGLang ``.pt`` dump (needs torch) and write the torch-free ``.npz`` equivalent."""
    routing = sglang_dump_to_routing(_torch_load(Path(pt_path)), source=str(pt_path),
                                     top_k=top_k, num_experts=num_experts)
    save_trace(routing, out_path)
    return routing
