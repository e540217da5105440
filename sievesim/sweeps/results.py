"""Result files of sweeps (and of any command that writes rows): JSON lines and CSV, written so that
a kill at any moment loses at most the row being written, read so that a damaged file never ends
in a traceback.

* :func:`read_results` reads a sweep directory, a ``results.jsonl`` or a ``results.csv`` into a
  list of dicts (one per finished point), the input of :mod:`sievesim.sweeps.plotting` and of pandas
  (``pandas.DataFrame(read_results(DIR))``).
* A JSON-lines file may end in a line cut short by a kill (no newline): it is left out (and, when
  a sweep resumes, cut from the file). Any other damaged line (not UTF-8, not JSON, JSON that is
  not an object, a ``point_id`` that is not a string) is skipped with a warning that names the
  file and the line; a sweep then runs that point again.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import pathlib
import warnings
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import ConfigError

__all__ = ["read_results", "read_jsonl", "read_csv_rows", "csv_bytes", "json_line", "append_durable",
           "write_atomic", "locked_directory", "RESULTS_JSONL", "RESULTS_CSV", "MAX_LINE_BYTES", "LOCK_FILE"]

RESULTS_JSONL = "results.jsonl"
RESULTS_CSV = "results.csv"


def json_line(obj: Mapping[str, Any]) -> bytes:
    """One compact JSON object and a newline, as bytes."""
    return (json.dumps(obj, separators=(",", ":"), allow_nan=True) + "\n").encode()


def append_durable(path: pathlib.Path, data: bytes) -> None:
    """Append ``data`` with one ``write`` and make it durable (a kill leaves all of it or a tail
    that :func:`read_jsonl` drops)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: pathlib.Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` at once (a temporary file of its own in the same folder, fsync,
    rename): a full disk or a kill leaves the earlier file as it was
    (:func:`sievesim._outputs.write_output`)."""
    from .._outputs import write_output

    write_output(path, data, "sweep result file")


#: The longest line of a result file that is read [bytes]: a point's row is a few KB; a longer line
#: (a file padded with NUL bytes, a damaged write) is skipped with a warning, never held whole.
MAX_LINE_BYTES = 1 << 20


def _lines(fh: Any, limit: int) -> Iterator[tuple[int, bytes | None, bool, int]]:
    """(line number, its bytes without the newline or None when longer than ``limit``, whether it
    ended in a newline, bytes read so far) of a binary stream, one line in memory at a time."""
    n = pos = 0
    while True:
        chunk = fh.readline(limit + 1)
        if not chunk:
            return
        n += 1
        pos += len(chunk)
        if chunk.endswith(b"\n"):
            yield n, chunk[:-1], True, pos
            continue
        if len(chunk) <= limit:      # the end of the file, without a newline
            yield n, chunk, False, pos
            return
        while True:                  # too long: read past the rest of the line
            more = fh.readline(limit)
            pos += len(more)
            if not more or more.endswith(b"\n"):
                break
        yield n, None, bool(more), pos
        if not more:
            return


def _line_problem(line: bytes, key: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(row, None) for a good line, (None, what is wrong) for a damaged one."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 (byte 0x{line[exc.start]:02x} at column {exc.start + 1})"
    if "\x00" in text:
        return None, f"not JSON (a NUL byte at column {text.index(chr(0)) + 1})"
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):   # JSONDecodeError, an integer of thousands of digits, deep nesting
        return None, "not JSON"
    if not isinstance(obj, dict):
        kind = "null" if obj is None else type(obj).__name__
        return None, f"JSON but not an object (a {kind})"
    if key is not None and not isinstance(obj.get(key), str):
        value = obj.get(key)
        kind = "missing" if key not in obj else f"a {'null' if value is None else type(value).__name__}"
        return None, f"an object whose {key} is {kind}, not a string"
    return obj, None


def read_jsonl(path: str | os.PathLike[str], *, repair: bool = False, key: str | None = "point_id",
               damaged: str = "skipped", check: Callable[[dict[str, Any]], "str | None"] | None = None
               ) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file, read one line at a time (at most :data:`MAX_LINE_BYTES` each).

    A last line without its newline (a write cut short) is left out with a warning, and with
    ``repair`` cut from the file. Any other damaged line (longer than the bound, not UTF-8, not
    JSON, not a JSON object, ``key`` not a string, or a row ``check`` finds a problem in: it
    returns what is wrong) is skipped with a :class:`UserWarning` naming the file, the line and
    the problem (``damaged`` ends the message: what happens to it)."""
    path = pathlib.Path(path)
    if not path.exists():
        return []
    from .._inputs import open_input, show_path

    shown = show_path(path)
    rows, keep, cut = [], 0, None
    with open_input(path, "sweep result file", "results") as fh:     # a regular file of bounded size
        for n, line, ended, pos in _lines(fh, MAX_LINE_BYTES):
            if not ended:
                cut = n
                break
            keep = pos
            if line is None:
                problem: str | None = f"longer than {MAX_LINE_BYTES} bytes"
            elif not line.strip():
                continue
            else:
                row, problem = _line_problem(line, key)
                if problem is None and check is not None:
                    problem = check(row)    # type: ignore[arg-type]
            if problem is not None:
                warnings.warn(f"{shown}: line {n} is {problem}; {damaged}", stacklevel=2)
                continue
            rows.append(row)
    if cut is not None:
        warnings.warn(f"{shown}: line {cut} has no newline at its end (a write cut short); "
                      f"{'cut from the file' if repair else 'skipped'}", stacklevel=2)
        if repair:
            with open(path, "r+b") as out:
                out.truncate(keep)
                out.flush()
                os.fsync(out.fileno())
    return rows


@contextlib.contextmanager
def locked_directory(folder: str | os.PathLike[str], what: str = "--out") -> Iterator[None]:
    """Hold the write lock of a sweep's output directory (``.sievesim.lock`` in it, an ``flock``)
    for the ``with`` block: a sweep of another process that starts into the same directory meanwhile
    is refused with a :class:`ConfigError` naming the directory, instead of both writing its files.
    Re-entrant within a process (a search runs one sweep per round); forked workers do not hold it."""
    key = os.path.realpath(folder)
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    try:
        import fcntl
    except ImportError:        # pragma: no cover - Windows: no flock; the directory is not locked
        yield
        return
    lock = os.path.join(key, LOCK_FILE)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise ConfigError(f"{what} = {str(folder)!r}: cannot create its lock file {LOCK_FILE} "
                          f"({exc.strerror}): expected a writable directory") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            by = f" (process {holder})" if holder.isdigit() else ""
            raise ConfigError(f"{what} = {str(folder)!r}: another sweep is writing into this directory{by}: "
                              "expected a directory no other sweep is using; wait for it to end, or give "
                              "another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[key], _FDS[key] = 1, fd
        try:
            yield
        finally:
            del _HELD[key], _FDS[key]
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)     # closing the descriptor releases the lock


#: The lock file of a sweep directory (:func:`locked_directory`).
LOCK_FILE = ".sievesim.lock"
_HELD: dict[str, int] = {}
_FDS: dict[str, int] = {}


def _forget_locks_in_child() -> None:
    """A forked child (a process pool's worker) shares the parent's lock descriptors, and an
    ``flock`` lasts until every copy is closed: the child closes its copies, so that the lock ends
    when the parent lets it go, not when the pool's last worker exits."""
    for fd in _FDS.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    _FDS.clear()
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_locks_in_child)


# Columns that are text whatever they look like: a point id is 12 hex digits, and "123456789012"
# or "56619e299086" would otherwise come back as a number.
TEXT_COLUMNS = frozenset({"point_id"})


def _number(text: str) -> Any:
    """A CSV cell as the value it was written from (:func:`csv_bytes`): empty -> None, true/false,
    integers, floats, JSON lists/objects; anything else stays text."""
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        pass
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def read_csv_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows of a CSV file with a header (numbers, booleans, JSON cells and empty cells converted back)."""
    from .._inputs import read_bytes

    path = pathlib.Path(path)
    if not path.exists():
        raise ConfigError(f"file not found: {path}")
    try:
        text = read_bytes(path, "CSV result file", "results").decode("utf-8")  # a regular file of bounded size
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (offset {exc.start}); expected a CSV file") from None
    try:
        reader = csv.DictReader(io.StringIO(text))
        return [{k: (v if k in TEXT_COLUMNS else _number(v or "")) for k, v in r.items() if k is not None}
                for r in reader]
    except csv.Error as exc:
        raise ConfigError(f"{path}: not a CSV file ({exc})") from None


def read_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The result rows of a sweep: ``path`` is its output directory (``results.jsonl`` in it, else
    ``results.csv``), a ``.jsonl`` file or a ``.csv`` file.

    One dict per finished point, in the file's order (grid order once the sweep is complete):
    ``point_id``, the settings that produced it, then the point function's results, with units in
    the column names (``step_time_s``, ``throughput_tokens_per_s_per_gpu``, ...); see
    docs/usage.md, section 7. Damaged lines of a JSON-lines file are skipped with a warning.
    ``pandas.DataFrame(read_results(path))`` makes a data frame of it.
    """
    p = pathlib.Path(path)
    if p.is_dir():
        if (p / RESULTS_JSONL).exists() or not (p / RESULTS_CSV).exists():
            return read_jsonl(p / RESULTS_JSONL, key=None, damaged="skipped")
        return read_csv_rows(p / RESULTS_CSV)
    if not p.exists():
        raise ConfigError(f"file not found: {p}")
    if p.suffix.lower() == ".csv":
        return read_csv_rows(p)
    return read_jsonl(p, key=None, damaged="skipped")


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"))
    return value


def csv_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """Rows as CSV text (the union of their keys as columns, lists and dicts as compact JSON)."""
    columns: list[str] = []
    for r in rows:
        columns.extend(k for k in r if k not in columns)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for r in rows:
        writer.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue().encode()
