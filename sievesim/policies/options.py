"""The options of the policies, declared in one table per policy and checked in one place.

Each :class:`~sievesim.policies.Policy` subclass lists its constructor's options in its
``options`` class attribute: a mapping of name to :class:`Option` (type, default, bounds, what it
does). :func:`check_policy_options` checks a mapping of options against that table -- unknown keys
(with "did you mean" and the full list), the type (``true``/``false`` only for a boolean: the
string ``"no"`` is not true; an integer is not a float that happens to be whole), then the range --
and returns the values the constructor should get. Every door uses it: ``get_policy`` (and so
``simulate_step(policy_options=...)``), ``sievesim run --policy-option``, ``sievesim policy decide
--policy-option``, ``sievesim sweep --policy-options`` and a grid file's ``policy_options``.

:func:`parse_option_text` reads the command-line form ``KEY=VALUE[,KEY=VALUE]``: values are JSON
where they parse (``true``, ``3``, ``0.5``), else strings, which the table then refuses where a
number or a boolean is expected. A value longer than :data:`MAX_VALUE_CHARS` is refused before it
is converted (Python's ``int`` refuses 4,300 digits with a traceback).
"""
from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import ConfigError, field_error

__all__ = ["Option", "check_policy_options", "parse_option_text", "MAX_VALUE_CHARS", "describe_options"]

#: Longest text of one option value on the command line (characters).
MAX_VALUE_CHARS = 100
_KINDS = ("bool", "int", "number", "choice", "unit", "callable")


@dataclass(frozen=True)
class Option:
    """One constructor option of a policy.

    ``kind``: ``"bool"`` (true or false), ``"int"`` (an integer in ``[lo, hi]``), ``"number"`` (a
    finite real in ``[lo, hi]``), ``"choice"`` (one of ``choices``), ``"unit"`` (a PIM placement unit:
    ``pseudo_channel``, ``channel``, ``stack`` or a group ``BASE*S``; ``None`` where the default is
    ``None``) or ``"callable"`` (Python API
    only: a function; the command line cannot give one). ``help`` says what it does, with its unit.
    """

    kind: str
    default: Any
    help: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ConfigError(f"Option kind {self.kind!r}: expected one of {', '.join(_KINDS)}")

    def expected(self) -> str:
        """What a value must be, in words."""
        if self.kind == "bool":
            return "true or false"
        if self.kind == "int":
            return f"an integer from {self.lo:g} to {self.hi:g}"
        if self.kind == "number":
            return f"a finite number from {self.lo:g} to {self.hi:g}"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "unit":
            return "pseudo_channel, channel, stack, or a group BASE*S such as channel*4"
        return "a callable (Python API only)"

    def default_text(self) -> str:
        """The default as the command line writes it (``true``, ``8``, ``'stack'``)."""
        return json.dumps(self.default) if isinstance(self.default, bool) or self.default is None else repr(self.default)

    def check(self, field: str, value: Any) -> Any:
        """``value`` as the constructor should get it; else a :class:`ConfigError` naming ``field``."""
        import numpy as np  # noqa: PLC0415

        why = f"{self.expected()} ({self.help})"
        if self.kind == "bool":
            if isinstance(value, (bool, np.bool_)):
                return bool(value)
        elif self.kind == "int":
            if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
                if self.lo <= value <= self.hi:
                    return int(value)
        elif self.kind == "number":
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
                try:
                    v = float(value)
                except OverflowError:
                    v = math.inf
                if math.isfinite(v) and self.lo <= v <= self.hi:
                    return v
        elif self.kind == "choice":
            if isinstance(value, str) and value in self.choices:
                return value
        elif self.kind == "unit":
            from .._units import split_unit  # noqa: PLC0415

            if value is None and self.default is None:
                return None
            if isinstance(value, str):
                try:
                    split_unit(value)
                    return value
                except ConfigError:
                    pass
        elif value is None or (callable(value) and not isinstance(value, (str, bytes, type))):
            return value
        raise field_error(field, value, why)


def describe_options(options: Mapping[str, Option] | None) -> str:
    """``name (expected)`` for each option, or ``none``."""
    if not options:
        return "none"
    return "; ".join(f"{k} ({o.expected()}, default {o.default_text()})" for k, o in options.items())


def _table(cls: type) -> Mapping[str, Option] | None:
    table = getattr(cls, "options", None)
    return table if isinstance(table, Mapping) else None


def _signature_names(cls: type) -> list[str]:
    """A policy without an ``options`` table: its constructor's keyword names (no type checks)."""
    import inspect  # noqa: PLC0415

    params = inspect.signature(cls.__init__).parameters
    return [n for n, p in params.items() if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def option_names(cls: type) -> list[str]:
    """The options policy class ``cls`` takes (its table, else its constructor's keywords)."""
    table = _table(cls)
    return list(table) if table is not None else _signature_names(cls)


def check_policy_options(cls: type, options: Any, *, prefix: str = "policy option ",
                         cli: bool = False) -> dict[str, Any]:
    """``options`` checked against policy class ``cls``'s table; returns the checked values.

    ``prefix`` starts each field name (``"--policy-option "`` on the command line). ``cli``: the
    options came from text, so Python-only options (a callable) are refused. An unknown key names
    the closest option and lists them all; a policy without options says so.
    """
    name = getattr(cls, "name", cls.__name__)
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise TypeError(f"policy_options = {options!r:.80}: expected a mapping of option names to values "
                        f"(e.g. {{'include_attention': False}}), got {type(options).__name__}")
    table = _table(cls)
    names = list(table) if table is not None else _signature_names(cls)
    if cli and table is not None:
        names = [k for k in names if table[k].kind != "callable"]
    out: dict[str, Any] = {}
    for key, value in options.items():
        if not isinstance(key, str) or key not in names:
            if not names:
                raise field_error(f"{prefix}{key}", value, f"no option: policy {name} takes none")
            close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            listing = (describe_options({k: table[k] for k in names}) if table is not None else ", ".join(names))
            raise field_error(prefix.rstrip(), key, f"an option of policy {name}{hint}: {listing}")
        out[key] = table[key].check(f"{prefix}{key}", value) if table is not None else value
    return out


def parse_option_text(text: str, *, field: str = "policy option") -> dict[str, Any]:
    """``"key=value,key=value"`` -> ``{key: value}``. A value is JSON where it parses (``true``,
    ``3``, ``0.5``; ``True``/``False`` too), else the string itself; the policy's table checks it."""
    if not isinstance(text, str):
        raise field_error(field, text, "text KEY=VALUE[,KEY=VALUE]")
    out: dict[str, Any] = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key.isidentifier():
            raise field_error(field, item, "KEY=VALUE with a Python identifier as KEY")
        if key in out:
            raise field_error(field, item, f"each key once ({key} is given twice)")
        if len(value) > MAX_VALUE_CHARS:
            raise field_error(f"{field} {key}", value, f"a value of at most {MAX_VALUE_CHARS} characters")
        low = value.lower()
        try:
            out[key] = json.loads(low if low in ("true", "false") else value)
        except ValueError:   # not JSON (JSONDecodeError is a ValueError): the text itself
            out[key] = value
    return out
