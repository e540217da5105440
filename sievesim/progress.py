"""Progress bars of the commands that can run longer than a few seconds.

:func:`progress_bar` is a tqdm bar on ``stream`` when it is a terminal and tqdm is installed
(``pip install 'sievesim[progress]'``), else a bar that shows nothing: output that is piped or
redirected stays clean, and ``--quiet`` (``stream=None``) turns it off everywhere.
"""
from __future__ import annotations

from typing import Any

__all__ = ["progress_bar", "is_terminal"]


class _Silent:
    """A bar that shows nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> "_Silent":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal (False for None, files and pipes)."""
    return stream is not None and bool(getattr(stream, "isatty", lambda: False)())


def progress_bar(total: int, desc: str, stream: Any, *, unit: str = "step", force: bool | None = None) -> Any:
    """A tqdm bar of ``total`` units on ``stream`` (a terminal; ``force=True``: any stream), or a
    silent one (``stream`` None or not a terminal, tqdm missing). Use as a context manager or call
    ``update()`` and ``close()``."""
    on = is_terminal(stream) if force is None else (force and stream is not None)
    if not on:
        return _Silent()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Silent()
    return tqdm(total=total, desc=desc, file=stream, unit=unit, leave=False)
