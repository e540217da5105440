"""One opener for every input file, and the readers of text and TOML built on it.

Every file a user names -- a trace, a DRAM/model/hardware config, a grid, a counts file, a routing
file, a hardware ``base``, a sweep's own ``results.jsonl`` and ``grid.json`` -- is opened by
:func:`open_input`, which

* refuses what is not a regular file (a directory, a FIFO, a device such as ``/dev/zero``, a
  socket) before reading a byte: a FIFO would block forever, a device never ends; ``-`` means
  stdin only where the caller allows it (``allow_stdin``);
* refuses a file larger than the limit of its kind (:data:`SIZE_LIMITS`, stated in the error),
  checked on the size the file system reports and again on the bytes read, so a file that grows
  while it is read (or stdin fed from ``/dev/zero``) stops at the limit. Kinds whose size follows
  the work (traces, routing files, result files) take the memory limit (``--max-memory``) as theirs.

Paths in messages are shown with :func:`show_path` (undecodable bytes as ``\\xNN`` escapes).
"""
from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
from typing import IO, Any, Iterator

from .errors import ConfigError, field_error

__all__ = ["open_input", "read_bytes", "read_text", "read_toml", "input_size_limit", "check_input",
           "show_path", "is_int", "json_int", "SIZE_LIMITS"]

#: Largest input of each kind: bytes (an int), or a fraction of the memory limit in force
#: (``--max-memory``; a float) for inputs whose size follows the work they describe. A config of
#: 16 MiB is a thousand times larger than any real one (a model's config.json is a few KB, a DRAM
#: TOML a few hundred bytes). A DRAM trace line (``LD 0x...``, about 12 bytes) becomes about
#: 130 bytes of engine state per request, so a trace may take an eighth of the memory limit.
SIZE_LIMITS: dict[str, int | float] = {
    "config": 16 * 2**20,      # TOML, YAML, Hugging Face config.json, grid files, hardware bases
    "counts": 16 * 2**20,      # --counts JSON (65,536 experts x a few digits)
    "manifest": 256 * 2**20,   # a sweep's grid.json (one entry per point)
    "trace": 1 / 8,            # DRAM request traces, serving request traces (CSV, JSON lines)
    "trace-stream": 1 << 50,   # a DRAM request trace read in pieces (memory stays flat: no practical limit)
    "routing": 1.0,            # routing .npz / SGLang dumps (their arrays are checked from their headers)
    "results": 1.0,            # a sweep's results.jsonl
}


def show_path(path: Any) -> str:
    """A path as text that any terminal can print: undecodable bytes (a non-UTF-8 file name) as
    ``\\xNN`` escapes instead of lone surrogates that would make ``print`` fail."""
    try:
        text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    except TypeError:
        text = str(path)
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def input_size_limit(kind: str) -> int:
    """The size limit of inputs of ``kind`` in force (bytes)."""
    from ._validate import max_memory  # noqa: PLC0415

    limit = SIZE_LIMITS[kind]
    return int(max_memory() * limit) if isinstance(limit, float) else limit


def _limit_text(kind: str) -> str:
    from ._validate import format_bytes  # noqa: PLC0415

    frac = SIZE_LIMITS[kind]
    how = "" if not isinstance(frac, float) else (
        " (the memory limit; raise it with --max-memory)" if frac == 1.0 else
        f" ({frac:g} of the memory limit; raise it with --max-memory)")
    return f"at most {format_bytes(input_size_limit(kind))}{how}"


_KINDS_OF_FILE = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe), which could block forever"),
                  (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                  (stat.S_ISSOCK, "a socket"))


def _not_regular(path: Any, mode: int, what: str) -> ConfigError:
    kind = next((name for test, name in _KINDS_OF_FILE if test(mode)), "not a regular file")
    return ConfigError(f"{show_path(path)}: {kind}: expected a regular file ({what})")


def check_input(path: Any, what: str = "file", kind: str = "config") -> int:
    """``path`` is an existing regular file within the size limit of ``kind``; returns its size.
    (:func:`open_input` does this on the open file; this is for readers that open it themselves.)"""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise field_error("path", show_path(path), f"an existing {what}") from None
    except (OSError, ValueError) as exc:   # ValueError: a NUL byte in the path
        raise ConfigError(f"{show_path(path)}: cannot read {what} ({getattr(exc, 'strerror', None) or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode, what)
    _check_size(path, st.st_size, what, kind)
    return st.st_size


def _check_size(path: Any, size: int, what: str, kind: str, *, stream: bool = False) -> None:
    from ._validate import format_bytes  # noqa: PLC0415

    if size > input_size_limit(kind):
        shown = f"more than {format_bytes(size - 1)}" if stream else format_bytes(size)
        raise ConfigError(f"{show_path(path)}: {shown}: expected a file ({what}) of {_limit_text(kind)}")


class _Bounded(io.RawIOBase):
    """A read-only stream that refuses to give more than ``limit`` bytes (a file growing while it is
    read, stdin fed from a device)."""

    def __init__(self, raw: IO[bytes], limit: int, path: Any, what: str, kind: str) -> None:
        self._raw, self._left, self._path, self._what, self._kind = raw, limit, path, what, kind
        self._limit = limit

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = 0) -> int:
        pos = self._raw.seek(offset, whence)
        self._left = self._limit - pos
        return pos

    def tell(self) -> int:
        return self._raw.tell()

    def fileno(self) -> int:
        return self._raw.fileno()

    def readinto(self, b: Any) -> int:
        want = len(b)
        if self._left < 0:
            return 0
        n = self._raw.readinto(memoryview(b)[:min(want, self._left + 1)]) or 0
        if n > self._left:
            _check_size(self._path, self._limit + 1, self._what, self._kind, stream=True)
        self._left -= n
        return n


@contextlib.contextmanager
def open_input(path: Any, what: str = "file", kind: str = "config", *,
               allow_stdin: bool = False) -> Iterator[IO[bytes]]:
    """A binary stream of the input file ``path`` (``-``: stdin, where ``allow_stdin``), after the
    checks of this module: a regular file, within the size limit of ``kind``."""
    limit = input_size_limit(kind)
    if allow_stdin and isinstance(path, str) and path == "-":
        stdin = sys.stdin.buffer if sys.stdin is not None and hasattr(sys.stdin, "buffer") else None
        if stdin is None or getattr(sys.stdin, "closed", False):
            raise ConfigError(f"-: stdin is closed: expected {what} on stdin")
        yield io.BufferedReader(_Bounded(stdin, limit, "<stdin>", what, kind))
        return
    if isinstance(path, str) and path == "-":
        raise field_error("path", "-", f"a {what} path (this input does not read stdin)")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise field_error("path", show_path(path), f"an existing {what}") from None
    except IsADirectoryError:
        raise ConfigError(f"{show_path(path)}: a directory: expected a regular file ({what})") from None
    except (OSError, ValueError) as exc:   # ValueError: a NUL byte in the path
        raise ConfigError(f"{show_path(path)}: cannot read {what} "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _not_regular(path, st.st_mode, what)
        _check_size(path, st.st_size, what, kind)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        raw = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    with raw:
        yield io.BufferedReader(_Bounded(raw, limit, path, what, kind))


def read_bytes(path: Any, what: str = "file", kind: str = "config", *, allow_stdin: bool = False) -> bytes:
    """The whole input (see :func:`open_input`)."""
    with open_input(path, what, kind, allow_stdin=allow_stdin) as fh:
        chunks = []
        try:
            st = os.fstat(fh.fileno())
            first = st.st_size + 1 if stat.S_ISREG(st.st_mode) else 1 << 24
        except (OSError, ValueError, io.UnsupportedOperation):
            first = 1 << 24
        try:
            size = first
            while True:     # a regular file in one read (its size + 1), a stream 16 MiB at a time
                chunk = fh.read(size)
                size = 1 << 24
                if not chunk:
                    break
                chunks.append(chunk)
        except OSError as exc:
            raise ConfigError(f"{show_path(path)}: cannot read {what} ({exc.strerror or exc})") from None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _not_utf8(path: Any, exc: UnicodeDecodeError) -> ConfigError:
    return ConfigError(f"{show_path(path)}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
                       f"{exc.start}); expected a UTF-8 file")


def read_text(path: Any, what: str = "file", kind: str = "config", *, allow_stdin: bool = False) -> str:
    """The file as UTF-8 text; a missing, unreadable, special, oversized or non-UTF-8 file is a
    :class:`ConfigError`."""
    data = read_bytes(path, what, kind, allow_stdin=allow_stdin)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None


def _toml() -> Any:
    """The TOML reader, imported when first needed (a Ramulator YAML run never is)."""
    try:  # Python >= 3.11
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib


def read_toml(path: Any, what: str = "TOML file") -> dict[str, Any]:
    """The parsed TOML file; a missing, unreadable, non-UTF-8 or malformed file is a :class:`ConfigError`."""
    text = read_text(path, what, "config")
    shown = show_path(path)
    toml = _toml()
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise ConfigError(f"{shown}: not valid TOML: {exc}") from None
    except (ValueError, RecursionError) as exc:  # an integer of thousands of digits, deep nesting
        raise ConfigError(f"{shown}: not valid TOML: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None


def json_int(text: str) -> int:
    """``parse_int`` hook of ``json.loads``: the digit count is checked before the conversion
    (Python's ``int`` refuses 4,300 digits with a ValueError that names no file)."""
    from ._validate import MAX_DIGITS  # noqa: PLC0415

    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ConfigError(f"a number of {len(text.lstrip('-'))} digits ({text[:20]}...): expected at most "
                          f"{MAX_DIGITS} digits")
    return int(text)


def is_int(value: Any) -> bool:
    """An integer that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)
