"""The plot boilerplate every figure shares: lay out, save the PNG without a timestamp, close."""
from __future__ import annotations

import pathlib
from typing import Any


def save(fig: Any, path: pathlib.Path, *, rect: tuple[float, float, float, float] | None = None) -> None:
    """Tight-lay out matplotlib figure ``fig`` (within ``rect``, figure fractions), write it to
    ``path`` at 120 dpi without the Software tag (the matplotlib version), close it."""
    import matplotlib.pyplot as plt

    from .._outputs import open_output

    fig.tight_layout(rect=rect)
    try:
        with open_output(path, "figure PNG") as fh:   # a full disk leaves an earlier PNG intact
            fig.savefig(fh, format=pathlib.Path(path).suffix.lstrip(".") or "png", dpi=120, metadata={"Software": None})
    finally:
        plt.close(fig)
