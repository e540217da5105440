"""Docs that cannot go stale: run the command blocks of a Markdown file and compare what they print
with what the file shows.

A fenced block is executed when an HTML comment (invisible in the rendered page) right before it
says so::

    <!-- docs-test: run -->            the next block is shell commands (bash; `sievesim` is this
                                       checkout's `python -m sievesim`); they must exit 0
    <!-- docs-test: run+output -->     ... and the block after it is what they print on stdout
    <!-- docs-test: python -->         the next block is Python, run as a script
    <!-- docs-test: python+output -->  ... and the block after it is what it prints
    <!-- docs-test: file PATH -->      the next block is written to PATH (a config, a grid, a module)
    <!-- docs-test: skip REASON -->    not run (installs, clusters); the reason is required

Options after the kind: ``tolerance=0.01`` (relative, per number; default :data:`TOLERANCE`).

Every block of one file runs in order in one temporary directory, so a later block sees the files
an earlier one wrote. An output block is compared line by line: a line ``...`` stands for any
number of lines; runs of spaces count as one (columns widen with their numbers); every number
must agree within the tolerance (relative) or half a unit of its last printed digit, whichever is
larger; everything else must be the same text. In a checked file every ``bash``, ``sh``, ``python``
and ``toml`` block must carry a marker (so a new command cannot go unchecked).

Regenerate the shown outputs after a change of the simulator's numbers::

    python tests/docblocks.py --update docs/usage.md README.md

(``--update`` rewrites each output block with what the commands print now, keeping its ``...``
lines; without it the script checks and lists the differences.) ``tests/test_docs_blocks.py``
runs the check for every file of :data:`CHECKED` (marked slow; CI runs it). To check another
doc, add markers to its blocks and its path to :data:`CHECKED`.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: The files whose blocks the docs test runs (paths relative to the repository root).
CHECKED = ("README.md", "docs/usage.md", "docs/energy.md")
#: Relative tolerance of a shown number (1 %), beside its printed precision.
TOLERANCE = 0.01
#: Seconds one block may run.
TIMEOUT_S = 900

_MARK = re.compile(r"<!--\s*docs-test:\s*(?P<kind>[a-z+]+)\s*(?P<rest>.*?)\s*-->")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<lang>[\w+-]*)\s*$")
_NUM = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_CODE_LANGS = ("bash", "sh", "shell", "console", "python", "py", "toml")


@dataclasses.dataclass
class Block:
    lang: str
    start: int                 # index of the first line inside the fence
    end: int                   # index of the closing fence
    text: str
    mark: tuple[str, str] | None = None     # (kind, rest) of the marker before it


def parse(lines: list[str]) -> list[Block]:
    """The fenced blocks of a Markdown file (as lines), with the marker right before each."""
    blocks: list[Block] = []
    i = 0
    pending: tuple[str, str] | None = None
    while i < len(lines):
        m = _MARK.search(lines[i])
        if m:
            pending = (m["kind"], m["rest"])
            i += 1
            continue
        f = _FENCE.match(lines[i])
        if f:
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(f["fence"]):
                j += 1
            indent = len(f["indent"])
            body = [ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines[i + 1:j]]
            blocks.append(Block(f["lang"].lower(), i + 1, j, "\n".join(body) + ("\n" if body else ""), pending))
            pending = None
            i = j + 1
            continue
        if lines[i].strip():
            pending = None
        i += 1
    return blocks


def _options(rest: str) -> tuple[list[str], dict[str, str]]:
    words, opts = [], {}
    for w in shlex.split(rest):
        k, sep, v = w.partition("=")
        if sep and k.isidentifier():
            opts[k] = v
        else:
            words.append(w)
    return words, opts


# ------------------------------------------------------------------------------------------------
# comparing
# ------------------------------------------------------------------------------------------------
def _key(line: str) -> str:
    return " ".join(_NUM.sub("#", line).split())


def _numbers_agree(shown: str, got: str, tol: float) -> bool:
    a, b = float(shown), float(got)
    frac = shown.split("e")[0].split("E")[0]
    digits = len(frac.split(".")[1]) if "." in frac else 0
    exp = int(shown.lower().split("e")[1]) if "e" in shown.lower() else 0
    half_unit = 0.5 * 10.0 ** (exp - digits)
    return abs(a - b) <= max(tol * max(abs(a), abs(b)), half_unit * (1 + 1e-9))


def _line_problem(shown: str, got: str, tol: float) -> str | None:
    if _key(shown) != _key(got):
        return "text differs"
    for a, b in zip(_NUM.findall(shown), _NUM.findall(got)):
        if not _numbers_agree(a, b, tol):
            return f"{a} shown, {b} now"
    return None


def align(shown: list[str], got: list[str]) -> list[tuple[int, int | None]]:
    """Pairs (shown line, actual line or None) with ``...`` lines skipping actual lines; lines are
    matched on their text with the numbers left out."""
    pairs: list[tuple[int, int | None]] = []
    j = 0
    skipping = False
    for i, line in enumerate(shown):
        if line.strip() == "...":
            skipping = True
            pairs.append((i, None))
            continue
        k = j
        if skipping:
            while k < len(got) and _key(got[k]) != _key(line):
                k += 1
        if k < len(got) and (_key(got[k]) == _key(line) or not skipping):
            pairs.append((i, k))
            j = k + 1
        else:
            pairs.append((i, None))
        skipping = False
    return pairs


def compare(shown_text: str, got_text: str, tol: float) -> list[str]:
    """What differs between a shown output and the actual one (empty: they agree)."""
    shown = [ln.rstrip() for ln in shown_text.rstrip("\n").split("\n")]
    got = [ln.rstrip() for ln in got_text.rstrip("\n").split("\n")]
    problems = []
    pairs = align(shown, got)
    for i, k in pairs:
        if shown[i].strip() == "...":
            continue
        if k is None:
            problems.append(f"shown line not printed now: {shown[i]!r}")
            continue
        why = _line_problem(shown[i], got[k], tol)
        if why:
            problems.append(f"{why}:\n      shown: {shown[i]!r}\n      now:   {got[k]!r}")
    last = max((k for _, k in pairs if k is not None), default=-1)
    if shown and shown[-1].strip() != "..." and last < len(got) - 1:
        problems.append(f"printed now but not shown: {got[last + 1]!r} ...")
    return problems


def updated(shown_text: str, got_text: str) -> str:
    """The shown output rewritten with the actual lines (``...`` lines kept)."""
    shown = [ln.rstrip() for ln in shown_text.rstrip("\n").split("\n")]
    got = [ln.rstrip() for ln in got_text.rstrip("\n").split("\n")]
    if not any(s.strip() == "..." for s in shown):
        return got_text if got_text.endswith("\n") else got_text + "\n"
    out = []
    for i, k in align(shown, got):
        out.append(shown[i] if k is None else got[k])
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------------------
def _env(work: pathlib.Path) -> dict[str, str]:
    bin_dir = work / ".docs-bin"
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "sievesim"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m sievesim "$@"\n')
    wrapper.chmod(0o755)
    path = os.pathsep.join([str(bin_dir), str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")])
    import sievesim   # the one this process imported (site-packages after pip install .)
    pkg = str(pathlib.Path(sievesim.__file__).resolve().parent.parent)
    pythonpath = os.pathsep.join(p for p in (pkg, str(work), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PATH": path, "PYTHONPATH": pythonpath, "COLUMNS": "120", "TQDM_DISABLE": "1"}


def _execute(block: Block, kind: str, work: pathlib.Path, env: dict[str, str], n: int) -> tuple[int, str, str]:
    if kind.startswith("python"):
        script = work / f".docs-block-{n}.py"
        script.write_text(block.text)
        cmd = [sys.executable, str(script)]
    else:
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    return proc.returncode, proc.stdout, proc.stderr


@dataclasses.dataclass
class Result:
    file: str
    line: int                  # 1-based line of the block
    kind: str
    problems: list[str]


def check_file(path: pathlib.Path, *, update: bool = False, work: pathlib.Path | None = None) -> list[Result]:
    """Run the marked blocks of ``path``; returns one :class:`Result` per block run (and per
    unmarked code block). With ``update``, output blocks are rewritten in place."""
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks = parse(lines)
    results: list[Result] = []
    rewrites: list[tuple[Block, str]] = []
    own = work is None
    tmp = tempfile.TemporaryDirectory(prefix="docs-test-") if own else None
    work = pathlib.Path(tmp.name) if tmp is not None else work
    try:
        env = _env(work)
        consumed: set[int] = set()
        for n, block in enumerate(blocks):
            if n in consumed:
                continue
            where = block.start          # 1-based line of the opening fence
            if block.mark is None:
                if block.lang in _CODE_LANGS:
                    results.append(Result(str(path), where, "unmarked",
                                          [f"a {block.lang} block without a docs-test marker"]))
                continue
            kind, rest = block.mark
            words, opts = _options(rest)
            tol = float(opts.get("tolerance", TOLERANCE))
            if kind == "skip":
                if not words:
                    results.append(Result(str(path), where, kind, ["skip without a reason"]))
                continue
            if kind == "file":
                if len(words) != 1:
                    results.append(Result(str(path), where, kind, ["file needs one PATH"]))
                    continue
                target = work / words[0]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.text)
                continue
            if kind not in ("run", "run+output", "python", "python+output"):
                results.append(Result(str(path), where, kind, [f"unknown docs-test kind {kind!r}"]))
                continue
            rc, out, err = _execute(block, kind, work, env, n)
            problems = []
            if rc != 0:
                problems.append(f"exit status {rc}; stderr:\n{err[-2000:]}")
            elif kind.endswith("+output"):
                if n + 1 >= len(blocks) or blocks[n + 1].mark is not None:
                    problems.append("no output block after it")
                else:
                    shown = blocks[n + 1]
                    consumed.add(n + 1)
                    if update:
                        rewrites.append((shown, updated(shown.text, out)))
                    else:
                        problems.extend(compare(shown.text, out, tol))
            results.append(Result(str(path), where, kind, problems))
    finally:
        if tmp is not None:
            tmp.cleanup()
    if update and rewrites:
        for shown, text in sorted(rewrites, key=lambda r: -r[0].start):
            body = text.rstrip("\n").split("\n")
            lines[shown.start:shown.end] = body
        path.write_text("\n".join(lines), encoding="utf-8")
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", help=f"Markdown files (default: {', '.join(CHECKED)})")
    p.add_argument("--update", action="store_true", help="rewrite the output blocks with today's output")
    args = p.parse_args(argv)
    bad = 0
    for name in args.files or CHECKED:
        path = pathlib.Path(name) if pathlib.Path(name).exists() else ROOT / name
        for r in check_file(path, update=args.update):
            status = "ok " if not r.problems else "BAD"
            print(f"{status} {r.file}:{r.line} {r.kind}")
            for problem in r.problems:
                print(f"    {problem}")
            bad += bool(r.problems)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
