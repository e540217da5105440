"""One writer for every output file: an earlier file is never left truncated.

:func:`open_output` writes into a temporary file in the target's folder, flushes and fsyncs it,
then renames it over the target (``os.replace``, atomic on POSIX). If anything fails -- a full
disk (``ENOSPC``), a file-size limit (``EFBIG``), a missing folder, an exception in the code that
writes -- the temporary file is removed, the earlier file (if any) stays exactly as it was, and the
error is one :class:`~sievesim.errors.ConfigError` naming the path and the cause, e.g.
``out.toml: cannot write model TOML (No space left on device); the earlier file is unchanged``.

A target that exists and is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO someone
reads) is written in place: there is nothing to rename over. A symbolic link is followed, so the
file it points to is replaced and the link stays.

Users: ``model save``, ``hardware save``, ``dram gen-trace -o``, ``--log-commands`` (``dram run``,
``pim gemv``, Ramulator ``TraceRecorder``/``CommandCounter`` plugins), ``run --chrome-trace``,
``reproduce`` (CSV and PNG), routing ``.npz`` written by :func:`sievesim.workload.traces.save_trace`,
``serve --requests-csv``/``--timeline-csv``/``--plot``, ``plot --out``, a sweep's ``results.csv``,
``grid.json``, ``max_rate.json`` and its rewritten ``results.jsonl``.
"""
from __future__ import annotations

import contextlib
import os
import stat
from typing import IO, Any, Iterator

from ._inputs import show_path
from .errors import ConfigError

__all__ = ["open_output", "write_output"]


def _cause(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def open_output(path: str | os.PathLike[str], what: str = "output file", *, text: bool = False
                ) -> Iterator[IO[Any]]:
    """A file object to write ``path``'s new content into (``text``: UTF-8 text, else bytes); the
    target is replaced only when the ``with`` block ends without an error."""
    shown = show_path(path)
    target = os.path.realpath(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{shown}: cannot open {what} for writing ({_cause(exc)})") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{shown}: cannot open {what} for writing (Is a directory)")
    if st is not None and not stat.S_ISREG(st.st_mode):   # /dev/null, /dev/stdout, a FIFO: write in place
        try:
            fh = open(target, "w" if text else "wb", **({"encoding": "utf-8"} if text else {}))
        except OSError as exc:
            raise ConfigError(f"{shown}: cannot open {what} for writing ({_cause(exc)})") from None
        try:
            with fh:
                yield fh
        except OSError as exc:
            raise ConfigError(f"{shown}: cannot write {what} ({_cause(exc)})") from None
        return
    import tempfile     # (imported here: a `dram run` that prints to stdout never needs it)

    folder = os.path.dirname(target) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=folder)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{shown}: cannot open {what} for writing ({_cause(exc)})") from None
    try:
        fh = os.fdopen(fd, "w" if text else "wb", **({"encoding": "utf-8"} if text else {}))
    except BaseException:
        os.close(fd)
        _remove(tmp)
        raise
    try:
        with fh:
            os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode) if st is not None else _umask_mode())
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        _remove(tmp)
        kept = "; the earlier file is unchanged" if st is not None else ""
        raise ConfigError(f"{shown}: cannot write {what} ({_cause(exc)}){kept}") from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def write_output(path: str | os.PathLike[str], data: bytes | str, what: str = "output file") -> None:
    """Write ``data`` (bytes, or str as UTF-8) to ``path`` through :func:`open_output`."""
    with open_output(path, what, text=isinstance(data, str)) as fh:
        fh.write(data)


def check_finite(result: Any, what: str = "result") -> None:
    """Refuse to print a result that holds ``inf`` or ``nan`` (a rate or size at the edge of its range
    turned a time into infinity): one :class:`ConfigError` naming the first such entry. Every
    command checks its result with this before printing it, as a table or as JSON."""
    import math  # noqa: PLC0415

    stack: list[tuple[str, Any]] = [(what, result)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) or type(value).__name__ in ("float64", "float32"):
            if not math.isfinite(float(value)):
                raise ConfigError(f"{path} = {float(value)}: expected a finite number; an input is outside the "
                                  "range this result can be computed in (check the rates and sizes of the "
                                  "hardware and the model)")
        elif isinstance(value, dict):
            stack.extend((f"{path}.{k}", v) for k, v in reversed(list(value.items())))
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
