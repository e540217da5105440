"""Parsing of the step's textual options: ``--prefill P:L`` and ``--policy-option KEY=VALUE``."""
from __future__ import annotations

from typing import Any

from ..errors import field_error

__all__ = ["parse_prefill", "parse_policy_options"]


def parse_prefill(value: Any) -> tuple[int, int]:
    """``"P:L"`` (or a pair) -> ``(P prefill requests, L prompt tokens each)``."""
    if value is None:
        return 0, 0
    if isinstance(value, str):
        parts = value.split(":")
        if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() and len(p.strip()) <= 9
                                      for p in parts):
            raise field_error("prefill", value, "P:L with P prefill requests and L prompt tokens, e.g. 2:1024")
        p, length = int(parts[0]), int(parts[1])
    else:
        import numpy as np

        try:
            p, length = value
        except (TypeError, ValueError):
            raise field_error("prefill", value, "a pair (P requests, L tokens)") from None
        if not all(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in (p, length)):
            raise field_error("prefill", value, "a pair of integers (P requests, L tokens)")
        p, length = int(p), int(length)
    if p < 0 or p > 4096:
        raise field_error("prefill requests", p, "an integer in [0, 4096]")
    if p and not 1 <= length <= 1_048_576:
        raise field_error("prefill length", length, "an integer in [1, 1048576] tokens")
    return p, (length if p else 0)


def parse_policy_options(text: str) -> dict[str, Any]:
    """``"key=value,key=value"`` -> keyword arguments of a policy's constructor. Values are JSON
    where they parse (``true``, ``3``, ``0.5``; ``True``/``False`` too), else strings; the policy's
    ``options`` table (:func:`sievesim.policies.options.check_policy_options`) checks them."""
    from ..policies.options import parse_option_text

    return parse_option_text(text)
