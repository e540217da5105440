"""Fuzzing the input contract: every command on malformed inputs.

Two tables drive everything here:

* :data:`FORMATS` -- one entry per input format: a valid document, how to write it to a file, and
  so a corpus of malformed variants generated at run time (values of the wrong type or out of
  range at every field, keys dropped or unknown, bytes truncated, flipped or not UTF-8).
* :data:`COMMANDS` -- one entry per (command, input slot): the argv with ``{file}`` where the file
  goes, and the format it reads. :data:`VALUE_OPTIONS` lists the command-line values to fuzz.

A new command is one more entry in :data:`COMMANDS` (and :data:`VALUE_OPTIONS` for its numeric
options); a new format is one more entry in :data:`FORMATS`. Every case must keep the contract
(tests/contract_helpers.py): exit 0, or exit 2 with one stderr line; no traceback; under a time
limit and an address-space limit. ``pytest -m fuzz_long tests/test_fuzz_inputs.py`` runs the long
profile (more cases per format with a fresh seed, more hypothesis examples); it is skipped otherwise.
"""
from __future__ import annotations

import io
import json
import math
import os
import random
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from conftest import subprocess_env
import tomli_w
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contract_helpers import assert_contract, run_cli_forked

#: Malformed variants per format, and hypothesis examples, in CI and in the long profile.
CASES_PER_FORMAT, CASES_PER_FORMAT_LONG = 60, 1000
VALUE_EXAMPLES, VALUE_EXAMPLES_LONG = 200, 4000
DOCUMENT_EXAMPLES, DOCUMENT_EXAMPLES_LONG = 150, 3000
TIME_LIMIT_S = 20.0
# Commands run with this --max-memory; the address-space limit above it catches any allocation
# that the memory estimates miss (it would show up as an "out of memory" line, which fails).
MAX_MEMORY = "512MiB"
ADDRESS_SPACE_BYTES = 3 * 2**30

# ------------------------------------------------------------------------------------------
# valid documents, one per format


def _dram_toml() -> dict:
    return {"name": "fz", "standard": "hbm3", "base": "hbm3-6400", "org": {"channel": 4, "row": 16384},
            "timing": {"nCL": 24, "nREFI": 6240, "tCK_ps": 625},
            "controller": {"refresh": True, "read_queue_size": 32, "priority_queue_size": 64,
                           "wr_low_watermark": 0.2, "wr_high_watermark": 0.8, "mapper": "RoBaRaCoCh",
                           "row_policy": "open", "end": "completed", "clock_ratio": 1}}


RAMULATOR_YAML = """
Frontend: {impl: LoadStoreTrace, path: trace.txt, clock_ratio: 8, Translation: {impl: NoTranslation, max_addr: 2147483648}}
MemorySystem:
  impl: GenericDRAM
  clock_ratio: 1
  DRAM: {impl: HBM3, org: {preset: HBM3_8Gb, channel: 8}, timing: {preset: HBM3_2Gbps}}
  Controller:
    impl: Generic
    Scheduler: {impl: FRFCFS}
    RefreshManager: {impl: AllBank}
    RowPolicy: {impl: ClosedRowPolicy, cap: 4}
    wr_low_watermark: 0.2
  AddrMapper: {impl: RoBaRaCoCh}
"""


def _ramulator_yaml() -> dict:
    return yaml.safe_load(RAMULATOR_YAML)


def _hardware_toml() -> dict:
    from sievesim.hardware import get_hardware, hardware_to_dict

    return hardware_to_dict(get_hardware("b200"))


def _model_toml() -> dict:
    from sievesim.models import get_model, model_to_dict

    return model_to_dict(get_model("qwen3-30b-a3b"))


def _hf_json() -> dict:
    return {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_hidden_layers": 4,
            "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 96, "intermediate_size": 768,
            "decoder_sparse_step": 1, "mlp_only_layers": [1], "vocab_size": 1000, "torch_dtype": "bfloat16",
            "sliding_window": None, "use_sliding_window": False, "tie_word_embeddings": False}


def _counts_json() -> list:
    return [3, 0, 1, 2] * 32          # qwen3-30b-a3b: 128 experts on one GPU


def _routing_npz() -> dict:
    rng = np.random.default_rng(0)
    # 3 MoE layers, 8 experts, top-2: the shape of the {hf} model, so `run --trace` can use both
    ids = np.stack([rng.permutation(8)[:2] for _ in range(3 * 16)]).reshape(16, 3, 2).astype(np.int32)
    return {"topk_ids": ids, "seq_id": np.repeat(np.arange(8), 2), "pos": np.tile(np.arange(2), 8),
            "phase": np.ones(16, dtype=np.int8), "meta": {"num_experts": 8, "top_k": 2, "num_moe_layers": 3}}


def _results_jsonl() -> list:
    """Rows of a sweep's results.jsonl, as `sievesim plot` reads them."""
    return [{"point_id": f"p{i}", "model": "m", "policy": p, "pimoe_unit": None, "batch": b, "step_time_s": t,
             "interactivity_tokens_per_s_per_user": 1 / t, "throughput_tokens_per_s_per_gpu": b / t}
            for i, (p, b, t) in enumerate((("sieve", 1, 1e-3), ("sieve", 4, 2e-3), ("noexp", 1, 3e-3)))]
def _serve_grid_toml() -> dict:
    """A serving sweep's grid file: two tiny points."""
    return {"kind": "serve", "model": "qwen3-30b-a3b", "rate": [5.0, 10.0], "requests": 2, "prompt_tokens": 8,
            "output_tokens": 2, "max_batch": 2, "token_budget": 32, "max_model_len": 64, "error_samples": 0,
            "grid": [{"policy": "sieve"}]}


def _request_trace() -> list:
    return ["arrival_s,prompt_tokens,output_tokens"] + [f"{0.25 * i},{8 + i},2" for i in range(4)]


def _measurements_csv() -> list:
    return ["id,model,gpus,batch,context_len,measured_tpot_ms", "a,qwen3-30b-a3b,1,1,16,6.0"]


def _loadstore() -> list:
    return [f"{'ST' if i % 3 == 0 else 'LD'} 0x{i * 64:x}" for i in range(24)]


def _readwrite() -> list:
    return [f"{'W' if i % 3 == 0 else 'R'} 0,{i % 2},0,{i % 4},{i},{i % 8}" for i in range(24)]


# ------------------------------------------------------------------------------------------
# writers: a (possibly malformed) document -> file bytes


def _toml_bytes(doc: Any) -> bytes:
    return tomli_w.dumps(doc).encode()


def _yaml_bytes(doc: Any) -> bytes:
    return yaml.safe_dump(doc, allow_unicode=True).encode()


def _json_bytes(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


def _npz_bytes(doc: dict) -> bytes:
    arrays = {k: (np.array(json.dumps(v, allow_nan=True)) if k == "meta" else np.asarray(v))
              for k, v in doc.items()}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _jsonl_bytes(doc: Any) -> bytes:
    rows = doc if isinstance(doc, list) else [doc]
    return "".join(json.dumps(r, allow_nan=True) + "\n" for r in rows).encode()


def _lines_bytes(doc: list) -> bytes:
    return ("\n".join(str(x) for x in doc) + "\n").encode()


@dataclass(frozen=True)
class Format:
    """One input format: a valid document, its writer, its file suffix."""

    make: Callable[[], Any]
    write: Callable[[Any], bytes]
    suffix: str
    text: bool = True          # byte-level mutations that keep or break UTF-8 apply


FORMATS: dict[str, Format] = {
    "dram_toml": Format(_dram_toml, _toml_bytes, ".toml"),
    "ramulator_yaml": Format(_ramulator_yaml, _yaml_bytes, ".yaml"),
    "hardware_toml": Format(_hardware_toml, _toml_bytes, ".toml"),
    "model_toml": Format(_model_toml, _toml_bytes, ".toml"),
    "hf_json": Format(_hf_json, _json_bytes, ".json"),
    "counts_json": Format(_counts_json, _json_bytes, ".json"),
    "routing_npz": Format(_routing_npz, _npz_bytes, ".npz", text=False),
    "loadstore_trace": Format(_loadstore, _lines_bytes, ".trace"),
    "readwrite_trace": Format(_readwrite, _lines_bytes, ".trace"),
    "results_jsonl": Format(_results_jsonl, _jsonl_bytes, ".jsonl"),
    "request_trace": Format(_request_trace, _lines_bytes, ".csv"),
    "serve_grid_toml": Format(_serve_grid_toml, _toml_bytes, ".toml"),
    "measurements_csv": Format(_measurements_csv, _lines_bytes, ".csv"),
}

# ------------------------------------------------------------------------------------------
# commands x the inputs they read


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]      # "{file}" where the malformed file goes
    format: str


#: Serving options that keep a case to a few steps (a batch of 2, no memo error samples).
_SERVE_SMALL = ("--max-batch", "2", "--token-budget", "32", "--max-model-len", "64", "--error-samples", "0", "--json")
#: The smallest serving sweep point (as _SERVE_SMALL) in a directory started over each time.
_SWEEP_SERVE = ("--max-batch", "2", "--token-budget", "32", "--max-model-len", "64", "--error-samples", "0",
                "--jobs", "1", "--quiet", "--force", "--out", "{outdir}")

COMMANDS: dict[str, Command] = {
    "dram run --config (toml)": Command(("dram", "run", "synthetic:stream:20", "--config", "{file}"), "dram_toml"),
    "dram run --config (yaml)": Command(("dram", "run", "synthetic:random:20", "--config", "{file}"),
                                        "ramulator_yaml"),
    "dram gen-trace --config": Command(("dram", "gen-trace", "hotrow", "--requests", "20", "--config", "{file}",
                                        "-o", "{out}"), "dram_toml"),
    "dram run TRACE (LD/ST)": Command(("dram", "run", "{file}", "--config", "hbm3-6400"), "loadstore_trace"),
    "dram run TRACE (R/W)": Command(("dram", "run", "{file}", "--config", "hbm2-2000"), "readwrite_trace"),
    "hardware show": Command(("hardware", "show", "{file}", "--json"), "hardware_toml"),
    "hardware save": Command(("hardware", "save", "{file}", "{out}"), "hardware_toml"),
    "pim gemv --hardware": Command(("pim", "gemv", "--d-in", "256", "--d-out", "64", "--hardware", "{file}"),
                                   "hardware_toml"),
    "pim expert --hardware": Command(("pim", "expert", "--model", "{hf}", "--hardware", "{file}"), "hardware_toml"),
    "pim expert --model (json)": Command(("pim", "expert", "--model", "{file}"), "hf_json"),
    "model show (toml)": Command(("model", "show", "{file}", "--json"), "model_toml"),
    "model show (json)": Command(("model", "show", "{file}", "--json"), "hf_json"),
    "model save (json)": Command(("model", "save", "{file}", "{out}"), "hf_json"),
    "policy decide --counts": Command(("policy", "decide", "--model", "qwen3-30b-a3b", "--counts", "{file}",
                                       "--json"), "counts_json"),
    "policy decide --hardware": Command(("policy", "decide", "--model", "qwen3-30b-a3b", "--counts", "{counts}",
                                         "--hardware", "{file}"), "hardware_toml"),
    "policy decide --model": Command(("policy", "decide", "--model", "{file}", "--counts", "{counts8}"), "hf_json"),
    "policy compare --model": Command(("policy", "compare", "--model", "{file}", "--batch", "4"), "hf_json"),
    "trace-stats": Command(("trace-stats", "{file}", "--batch-sizes", "2,4", "--batches", "2", "--json"),
                           "routing_npz"),
    "run --hardware": Command(("run", "--model", "mixtral-8x7b", "--hardware", "{file}", "--batch", "2",
                               "--policy", "allexp", "--warmup", "0", "--context-len", "16", "--json"),
                              "hardware_toml"),
    "run --trace": Command(("run", "--model", "{hf}", "--trace", "{file}", "--batch", "2", "--policy", "sieve",
                            "--warmup", "0", "--context-len", "16", "--json"), "routing_npz"),
    "sweep --hardware": Command(("sweep", "--model", "mixtral-8x7b", "--hardware", "{file}", "--batch", "2",
                                 "--policy", "allexp", "--warmup", "0", "--context-len", "16", "--jobs", "1",
                                 "--quiet", "--force", "--out", "{outdir}"), "hardware_toml"),
    "plot": Command(("plot", "{file}", "--out", "{outdir}.png"), "results_jsonl"),
    "plot --x --y": Command(("plot", "{file}", "--x", "batch", "--y", "step_time_s", "--logy", "--out", "{outdir}.svg"),
                            "results_jsonl"),
    "serve --trace": Command(("serve", "--model", "qwen3-30b-a3b", "--trace", "{file}") + _SERVE_SMALL, "request_trace"),
    "sweep --kind serve --trace": Command(("sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--trace", "{file}")
                                          + _SWEEP_SERVE, "request_trace"),
    "sweep --grid (serve)": Command(("sweep", "--grid", "{file}", "--jobs", "1", "--quiet", "--force", "--out",
                                     "{outdir}"), "serve_grid_toml"),
    "calibrate": Command(("calibrate", "{file}", "--hardware", "h100", "--fit", "kernel_launch_s", "-o",
                          "{outdir}.toml"), "measurements_csv"),
    "reproduce --trace": Command(("reproduce", "fig5", "--quick", "--trace", "{file}", "--out", "{outdir}"),
                                 "routing_npz"),
}

#: The smallest serving setup: short requests, a tiny batch, no memo error samples (each case a few steps).
_SERVE = ("serve", "--model", "qwen3-30b-a3b", "--requests", "2", "--prompt-tokens", "8", "--output-tokens", "2")
#: (argv with "{v}" for the fuzzed value): numeric and list options typed on the command line.
VALUE_OPTIONS: tuple[tuple[str, ...], ...] = (
    ("pim", "gemv", "--d-in", "{v}", "--d-out", "64"),
    ("pim", "gemv", "--d-in", "64", "--d-out", "{v}", "--tokens", "2"),
    ("pim", "gemv", "--d-in", "64", "--d-out", "64", "--tokens", "{v}"),
    ("pim", "expert", "--model", "qwen3-30b-a3b", "--tokens", "{v}"),
    ("pim", "table", "--models", "qwen3-30b-a3b", "--tokens", "{v}"),
    ("dram", "run", "synthetic:random:{v}"),
    ("dram", "run", "synthetic:stream:20", "--seed", "{v}"),
    ("dram", "run", "synthetic:stream:20", "--clock-ratio", "{v}"),
    ("dram", "run", "synthetic:stream:20", "--threads", "{v}"),
    ("dram", "gen-trace", "stream", "--requests", "{v}", "-o", "{out}"),
    ("dram", "gen-trace", "random", "--requests", "8", "--write-fraction", "{v}", "-o", "{out}"),
    ("model", "show", "qwen3-30b-a3b", "--top-k", "{v}"),
    ("policy", "decide", "--model", "qwen3-30b-a3b", "--counts", "{counts}", "--batch", "{v}"),
    ("policy", "decide", "--model", "qwen3-30b-a3b", "--counts", "{counts}", "--context-len", "{v}"),
    ("policy", "decide", "--model", "qwen3-30b-a3b", "--counts", "{counts}", "--layer", "{v}"),
    ("policy", "decide", "--model", "qwen3-30b-a3b", "--counts", "{counts}", "--gpus", "{v}"),
    ("policy", "compare", "--model", "qwen3-30b-a3b", "--batch", "{v}"),
    ("policy", "compare", "--model", "qwen3-30b-a3b", "--batch", "4", "--gpus", "{v}"),
    ("policy", "bench", "--experts", "128", "--batch", "{v}", "--repeat", "1", "--inner", "1", "--policies", "noexp"),
    ("policy", "bench", "--experts", "{v}", "--batch", "1", "--repeat", "1", "--inner", "1", "--policies", "noexp"),
    ("policy", "bench", "--policies", "{v}", "--experts", "128", "--batch", "1", "--repeat", "1", "--inner", "1"),
    ("trace-stats", "synthetic:mixtral-8x7b", "--batch-sizes", "{v}", "--batches", "2"),
    ("trace-stats", "synthetic:mixtral-8x7b", "--batch-sizes", "4", "--batches", "{v}"),
    ("trace-stats", "synthetic:mixtral-8x7b", "--batch-sizes", "4", "--batches", "2", "--seed", "{v}"),
    ("--max-memory", "{v}", "hardware", "show", "b200"),
    ("run", "--model", "qwen3-30b-a3b", "--policy", "noexp", "--warmup", "0", "--batch", "{v}"),
    ("run", "--model", "qwen3-30b-a3b", "--policy", "noexp", "--warmup", "0", "--batch", "4", "--top-k", "{v}"),
    ("sweep", "--model", "qwen3-30b-a3b", "--point", "estimate", "--jobs", "1", "--quiet", "--out", "{out}",
     "--batch", "{v}"),
    ("sweep", "--model", "qwen3-30b-a3b", "--point", "estimate", "--jobs", "1", "--quiet", "--out", "{out}",
     "--batch", "4", "--top-k", "{v}"),
    # policy options (issue 26): every value goes through the policy's options table
    ("run", "--model", "qwen3-30b-a3b", "--policy", "sieve", "--warmup", "0", "--batch", "4",
     "--policy-option", "scalar_steps={v}"),
    ("policy", "decide", "--model", "qwen3-30b-a3b", "--counts", "{counts}", "--policy", "sieve",
     "--policy-option", "include_attention={v}"),
    ("policy", "decide", "--model", "qwen3-30b-a3b", "--counts", "{counts}", "--policy", "oracle",
     "--policy-option", "candidates={v}"),
    ("sweep", "--model", "qwen3-30b-a3b", "--point", "estimate", "--jobs", "1", "--quiet", "--out", "{out}",
     "--force", "--batch", "4", "--policy-options", "rel_tol={v}"),
    _SERVE + ("--rate", "{v}") + _SERVE_SMALL,
    _SERVE + ("--rate", "5", "--cv", "{v}") + _SERVE_SMALL,
    _SERVE + ("--rate", "5", "--horizon", "{v}") + _SERVE_SMALL,
    _SERVE + ("--rate", "5", "--tpot-slo", "{v}") + _SERVE_SMALL,
    _SERVE + ("--max-rate", "{v}", "--bisect-steps", "1") + _SERVE_SMALL,
    _SERVE + ("--rate", "5", "--gpus", "2", "--prefill-gpus", "{v}") + _SERVE_SMALL,
    _SERVE + ("--max-rate", "{v}", "--bisect-steps", "1", "--out", "{outdir}") + _SERVE_SMALL,
    ("sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--requests", "2", "--prompt-tokens", "8",
     "--output-tokens", "2", "--rate", "{v}") + _SWEEP_SERVE,
    ("sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--requests", "2", "--prompt-tokens", "8",
     "--output-tokens", "2", "--max-rate", "{v}", "--bisect-steps", "1") + _SWEEP_SERVE,
    ("sweep", "--kind", "serve", "--model", "qwen3-30b-a3b", "--requests", "{v}", "--prompt-tokens", "8",
     "--output-tokens", "2", "--rate", "5") + _SWEEP_SERVE,
)

# ------------------------------------------------------------------------------------------
# the corpus: malformed variants of each document, generated at run time

BAD_VALUES: tuple[Any, ...] = (
    "", "x", "\u0663", "no", True, False, 0, -1, 1, 2**31, 2**63 - 1, 10**30, 0.5, -0.0, 1e308, -1e308,
    math.nan, math.inf, [], [1], ["x"], {"a": 1}, {},
)
SCALAR_BAD_VALUES = tuple(v for v in BAD_VALUES if not isinstance(v, (list, dict)))


def _leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    """Paths of every value (dict keys, list indices), the containers included."""
    out = [path] if path else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _leaves(v, path + (k,))
    elif isinstance(doc, list) and len(doc) <= 8:
        for i, v in enumerate(doc):
            out += _leaves(v, path + (i,))
    elif isinstance(doc, list):
        out += [path + (0,), path + (len(doc) - 1,)]
    return out


def _set(doc: Any, path: tuple, value: Any, *, delete: bool = False) -> Any:
    import copy

    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


def _npz_leaf_value(value: Any, old: Any) -> Any:
    """np.savez cannot store every Python value as given; keep what numpy can represent."""
    if isinstance(old, np.ndarray):
        try:
            return np.asarray(value)
        except (ValueError, OverflowError):
            return np.asarray(str(value))
    return value


def _structural_mutations(fmt: Format, rng: random.Random, n: int) -> list[tuple[str, Any]]:
    doc = fmt.make()
    cases: list[tuple[str, Any]] = []
    if isinstance(doc, dict) and "topk_ids" in doc:   # npz: mutate whole arrays and the meta entries
        paths = [(k,) for k in doc] + [("meta", k) for k in doc["meta"]]
        array_values = (np.zeros((0, 2, 2), np.int32), np.full((16, 2, 2), 9, np.int32),
                        np.full((16, 2, 2), -7, np.int64), np.zeros((16, 2), np.int32),
                        np.zeros((16, 2, 2), np.float64), np.zeros((16, 2, 3), np.int32), np.array("x"),
                        np.zeros(3, np.int64), np.full(16, 2**40, np.int64), np.array([True] * 16))
        for p in paths:
            cases.append((f"delete {p}", _set(doc, p, None, delete=True)))
        for _ in range(n):
            p = rng.choice(paths)
            value = rng.choice(array_values if p[0] != "meta" else BAD_VALUES)
            cases.append((f"{p} = {value!r:.40}", _set(doc, p, value)))
        return cases
    paths = _leaves(doc)
    for _ in range(n):
        p = rng.choice(paths)
        op = rng.random()
        if op < 0.12 and isinstance(p[-1], str):
            cases.append((f"delete {p}", _set(doc, p, None, delete=True)))
        elif op < 0.18 and isinstance(p[-1], str):
            cases.append((f"unknown key beside {p}", _set(doc, p[:-1] + ("zz_unknown",), 1)))
        else:
            value = rng.choice(BAD_VALUES)
            cases.append((f"{p} = {value!r:.40}", _set(doc, p, value)))
    if not isinstance(doc, dict):
        cases.append(("not a table", {"a": doc} if fmt.suffix == ".json" else doc))
    return cases


def _byte_mutations(fmt: Format, rng: random.Random, n: int) -> list[tuple[str, bytes]]:
    good = fmt.write(fmt.make())
    cases = [("empty file", b""), ("truncated to half", good[: len(good) // 2]),
             ("not UTF-8", good[:10] + b"\xff\xfe\x80" + good[10:]),
             ("NUL bytes", good.replace(b"\n", b"\x00\n", 3)),
             ("5000-digit integer", good.replace(b"4", b"4" * 5000, 1) if b"4" in good else good + b"9" * 5000)]
    if fmt.text:
        opener = {".json": (b"[", b"]"), ".yaml": (b"[", b"]"), ".toml": (b"a = [", b"]")}.get(fmt.suffix)
        if opener:
            cases.append(("nested 100000 deep", opener[0] * 100_000 + opener[1] * 100_000))
    for _ in range(max(1, n // 4)):
        b = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        cases.append(("bit flips", bytes(b)))
    return cases


def corpus(name: str, n: int = CASES_PER_FORMAT, seed: int = 15) -> list[tuple[str, bytes]]:
    """(description, file bytes) of malformed variants of format ``name`` (deterministic)."""
    fmt = FORMATS[name]
    rng = random.Random(f"{name}:{seed}")
    out = []
    for what, doc in _structural_mutations(fmt, rng, n):
        try:
            data = fmt.write(doc)
        except (TypeError, ValueError, OverflowError, yaml.YAMLError):
            continue          # the writer cannot express it (e.g. TOML has no null)
        out.append((what, data))
    return out + _byte_mutations(fmt, rng, n)


# ------------------------------------------------------------------------------------------
# running one case


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="sievesim-fuzz-") as d:
        d = Path(d)
        (d / "counts.json").write_text(json.dumps(_counts_json()))
        (d / "counts8.json").write_text(json.dumps([1, 0, 2, 1, 0, 0, 3, 1]))
        (d / "hf.json").write_text(json.dumps(_hf_json()))
        _warm_up(d)
        yield d


def _warm_up(workdir: Path) -> None:
    """Run every command once in this process on its valid document: each must succeed (the seed
    documents are valid), and the forked cases then start with the modules imported and the
    engine's caches filled, as one long-lived process would."""
    from contract_helpers import run_cli

    for name, cmd in COMMANDS.items():
        fmt = FORMATS[cmd.format]
        path = workdir / ("valid" + fmt.suffix if cmd.format != "hf_json" else "valid/config.json")
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(fmt.write(fmt.make()))
        res = run_cli(_argv(cmd.argv, workdir, file=str(path)), timeout_s=TIME_LIMIT_S)
        assert res.rc == 0, f"{name}: the valid document is refused: {res.err}"


def _argv(template: tuple[str, ...], workdir: Path, **extra: str) -> list[str]:
    fill = {"out": str(workdir / "out.file"), "outdir": str(workdir / "out.dir"), "counts": str(workdir / "counts.json"),
            "counts8": str(workdir / "counts8.json"), "hf": str(workdir / "hf.json"), **extra}
    return ["--max-memory", MAX_MEMORY] + [a.format(**fill) if "{" in a else a for a in template]


def _run_case(argv: list[str], what: str) -> None:
    res = run_cli_forked(argv, timeout_s=TIME_LIMIT_S, memory_bytes=ADDRESS_SPACE_BYTES)
    try:
        assert_contract(res)
    except AssertionError as exc:
        raise AssertionError(f"{what}: {' '.join(argv)}: {exc}") from None


@pytest.fixture
def long_profile(request):
    """Skip unless the long profile was asked for (``pytest -m fuzz_long``)."""
    if "fuzz_long" not in (request.config.getoption("markexpr") or "").replace("not fuzz_long", ""):
        pytest.skip("long fuzz profile: run with -m fuzz_long")


def _malformed_files(command: str, workdir: Path, n: int, seed: int) -> None:
    cmd = COMMANDS[command]
    fmt = FORMATS[cmd.format]
    refused = 0
    for i, (what, data) in enumerate(corpus(cmd.format, n, seed)):
        path = workdir / f"in{i}{fmt.suffix}"
        if cmd.format == "hf_json":  # a model directory holding config.json
            path = workdir / f"m{i}" / "config.json"
            path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        argv = _argv(cmd.argv, workdir, file=str(path))
        res = run_cli_forked(argv, timeout_s=TIME_LIMIT_S, memory_bytes=ADDRESS_SPACE_BYTES)
        try:
            assert_contract(res)
        except AssertionError as exc:
            raise AssertionError(f"{command} (corpus seed {seed}): {what}: {exc}") from None
        refused += res.rc == 2
    assert refused > 0, "no malformed variant was refused: the corpus does not reach this reader"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_on_malformed_files(command, workdir):
    """Every command x malformed variants of the format it reads."""
    _malformed_files(command, workdir, CASES_PER_FORMAT, seed=15)


@pytest.mark.fuzz_long
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_on_malformed_files_long(command, workdir, long_profile):
    seed = int(os.environ.get("SIEVESIM_FUZZ_SEED", random.randrange(2**32)))  # named in any failure
    _malformed_files(command, workdir, CASES_PER_FORMAT_LONG, seed=seed)


_ANY_TEXT = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.lists(st.integers(min_value=-5, max_value=300), min_size=0, max_size=5).map(lambda xs: ",".join(map(str, xs))),
    st.text(alphabet=st.sampled_from("0123456789,-+. e_x\u0663\u00b2\u2167KMGiB"), max_size=12),
    st.text(max_size=8),
)


def _command_line_value(workdir: Path, template: tuple[str, ...], value: str) -> None:
    value = value.replace("\x00", "")   # a process argument cannot hold NUL
    _run_case(_argv(template, workdir, v=value), f"value {value!r}")


_HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@settings(max_examples=VALUE_EXAMPLES, deadline=None, suppress_health_check=_HEALTH)
@given(template=st.sampled_from(VALUE_OPTIONS), value=_ANY_TEXT)
def test_command_line_values(workdir, template, value):
    """Any text in a numeric or list option: a result or a one-line refusal."""
    _command_line_value(workdir, template, value)


@pytest.mark.fuzz_long
@settings(max_examples=VALUE_EXAMPLES_LONG, deadline=None, suppress_health_check=_HEALTH, derandomize=False)
@given(template=st.sampled_from(VALUE_OPTIONS), value=_ANY_TEXT)
def test_command_line_values_long(workdir, long_profile, template, value):
    _command_line_value(workdir, template, value)


_JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                                  st.floats(), st.text(max_size=6)),
                        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                        max_leaves=6)


def _document(workdir: Path, data: Any) -> None:
    command = data.draw(st.sampled_from(sorted(c for c in COMMANDS if COMMANDS[c].format != "routing_npz")))
    cmd = COMMANDS[command]
    fmt = FORMATS[cmd.format]
    doc = fmt.make()
    path_ = data.draw(st.sampled_from(_leaves(doc)))
    value = data.draw(_JSONISH)
    try:
        raw = fmt.write(_set(doc, path_, value))
    except (TypeError, ValueError, OverflowError, yaml.YAMLError):
        return
    f = workdir / ("config.json" if cmd.format == "hf_json" else f"doc{fmt.suffix}")
    f.write_bytes(raw)
    _run_case(_argv(cmd.argv, workdir, file=str(f)), f"{command}: {path_} = {value!r}")


@settings(max_examples=DOCUMENT_EXAMPLES, deadline=None, suppress_health_check=_HEALTH)
@given(data=st.data())
def test_documents_with_any_value_anywhere(workdir, data):
    """Hypothesis picks a command, a field of its input and any JSON-like value for it."""
    _document(workdir, data)


@pytest.mark.fuzz_long
@settings(max_examples=DOCUMENT_EXAMPLES_LONG, deadline=None, suppress_health_check=_HEALTH, derandomize=False)
@given(data=st.data())
def test_documents_with_any_value_anywhere_long(workdir, long_profile, data):
    _document(workdir, data)


def test_every_format_and_command_is_covered():
    """The tables stay complete: each format is read by some command, each command's format exists."""
    assert {c.format for c in COMMANDS.values()} == set(FORMATS)
    from sievesim.cli import build_parser

    top = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001
    covered = {c.argv[0] for c in COMMANDS.values()} | {t[0] for t in VALUE_OPTIONS} | {"models", "--max-memory"}
    # listing commands that take no input beyond flags need no corpus
    missing = set(top) - covered - {"models"}
    assert not missing, (f"commands {sorted(missing)} are not fuzzed: add them to COMMANDS / VALUE_OPTIONS "
                         "(docs/architecture.md, 'Adding a command')")


@pytest.mark.parametrize("command, data", [
    ("dram run --config (toml)", b'standard = ["hbm3"]\n'),
    ("hardware show", b"name = \xff\n"),
    ("trace-stats", b"PK\x03\x04 not a zip"),
])
def test_through_a_process(command, data, workdir):
    """A few cases through `python -m sievesim`: the real exit status and stderr."""
    cmd = COMMANDS[command]
    f = workdir / f"proc{FORMATS[cmd.format].suffix}"
    f.write_bytes(data)
    argv = _argv(cmd.argv, workdir, file=str(f))
    p = subprocess.run([sys.executable, "-m", "sievesim", *argv], capture_output=True, text=True, timeout=60,
                       env=subprocess_env())
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert str(f) in p.stderr


# ------------------------------------------------------------------------------------------
# special files (issue 26): every input slot of every command, given what is not a regular file


def _special(workdir: Path, kind: str, fmt: Format) -> Path:
    if kind == "/dev/zero":
        return Path("/dev/zero")
    d = workdir / f"special-{kind}"
    d.mkdir(exist_ok=True)
    path = d / ("config.json" if fmt.suffix == ".json" else f"input{fmt.suffix}")
    if kind == "fifo" and not path.exists():
        os.mkfifo(path)
    if kind == "directory":
        path.mkdir(exist_ok=True)
    return path


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_on_special_files(command, kind, workdir):
    """A FIFO (which would block forever), a device that never ends, a directory: refused by the one
    opener (sievesim/_inputs.py) before a byte is read, naming the path."""
    from contract_helpers import assert_refused

    cmd = COMMANDS[command]
    path = _special(workdir, kind, FORMATS[cmd.format])
    argv = _argv(cmd.argv, workdir, file=str(path))
    res = run_cli_forked(argv, timeout_s=TIME_LIMIT_S, memory_bytes=ADDRESS_SPACE_BYTES)
    line = assert_refused(res)
    assert str(path) in line or str(path / "config.json") in line, line
