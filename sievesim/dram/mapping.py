"""Address mappers: physical byte addresses -> address vectors (one field per level).

The three mappers of Ramulator 2.0 (src/addr_mapper/impl/linear_mappers.cpp), vectorised with
numpy. For power-of-two organisations they slice bits exactly as Ramulator does; levels with other
counts (3 SIDs) are split in mixed radix, which is the same arithmetic with ``divmod``.
"""
from __future__ import annotations

import numpy as np

from ..errors import TraceError
from .spec import DRAMConfig

__all__ = ["ADDRESS_OVERFLOW", "map_addresses"]


#: What to do with an address at or beyond the capacity: ``error`` (refuse it, naming the request)
#: or ``wrap`` (what Ramulator 2.0's linear mappers do: RoBaRaCoCh and ChRaBaRoCo slice the levels
#: from the low bits and drop the bits above the last level, so the address wraps modulo the
#: capacity; MOP4CLXOR keeps every remaining bit in the row, cast to a 32-bit int).
ADDRESS_OVERFLOW = ("error", "wrap")


def map_addresses(config: DRAMConfig, addrs: np.ndarray, *, source: str = "trace",
                  overflow: str = "error", first: int = 0) -> np.ndarray:
    """Map byte addresses (int64, shape (n,)) to address vectors (int32, shape (n, levels)).

    ``overflow``: one of :data:`ADDRESS_OVERFLOW` (default ``error``). ``first``: the index of
    ``addrs[0]`` in the whole trace (a streamed piece), for the request an error names."""
    if overflow not in ADDRESS_OVERFLOW:
        raise TraceError(f"{source}: address overflow = {overflow!r}: expected one of {list(ADDRESS_OVERFLOW)}")
    addrs = np.asarray(addrs, dtype=np.int64)
    if addrs.size and addrs.min() < 0:
        bad = int(np.argmax(addrs < 0))
        raise TraceError(f"{source}: request {first + bad}: address = {int(addrs[bad])}: expected a non-negative byte address")
    tx_shift = int(config.tx_bytes).bit_length() - 1
    capacity = config.capacity_bytes
    if overflow == "error" and addrs.size and addrs.max() >= capacity:
        bad = int(np.argmax(addrs >= capacity))
        raise TraceError(f"{source}: request {first + bad}: address = {hex(int(addrs[bad]))}: expected an address "
                         f"below the capacity of {config.name}, {hex(capacity)} ({capacity} bytes), "
                         "or --address-overflow wrap (as Ramulator 2.0's mappers do)")
    row = config.standard.levels.index("row")
    out = np.empty((addrs.size, len(config.standard.levels)), dtype=np.int32)
    for lo in range(0, addrs.size, _CHUNK):      # in slices: the temporaries stay small
        _map_into(config, addrs[lo:lo + _CHUNK] >> tx_shift, out[lo:lo + _CHUNK])
    if overflow == "wrap" and out.size and out[:, row].min() < 0:  # a row past 2^31: the engine's "closed" mark
        bad = int(np.argmax(out[:, row] < 0))
        raise TraceError(f"{source}: request {first + bad}: address = {hex(int(addrs[bad]))}: expected an address whose "
                         "MOP4CLXOR row fits in 31 bits")
    return out


# requests mapped at a time (bounds the int64 temporaries: 8 bytes per request each)
_CHUNK = 1 << 18

#: The mappers that slice an address's levels from its low bits (``_linear_order`` gives the order).
LINEAR_MAPPERS = ("ChRaBaRoCo", "RoBaRaCoCh")


def _linear_order(config: DRAMConfig) -> np.ndarray:
    """The levels a linear mapper slices from the low bits of a transaction index, in turn."""
    levels = config.standard.levels
    n_lv = len(levels)
    row, col = levels.index("row"), n_lv - 1
    order = (list(range(n_lv - 1, -1, -1)) if config.mapper == "ChRaBaRoCo"
             else [0, col] + list(range(1, row + 1)))
    return np.asarray(order, dtype=np.int64)


def _linear_only(who: str, config: DRAMConfig, overflow: str = "error", source: str = "trace") -> None:
    """Refuse a mapper that is not linear (a caller's bug: ValueError) and an ``overflow`` outside
    :data:`ADDRESS_OVERFLOW` (the user's: TraceError, as :func:`map_addresses` words it)."""
    if config.mapper not in LINEAR_MAPPERS:
        raise ValueError(f"{who}: mapper {config.mapper!r}: expected one of {list(LINEAR_MAPPERS)}")
    if overflow not in ADDRESS_OVERFLOW:
        raise TraceError(f"{source}: address overflow = {overflow!r}: expected one of {list(ADDRESS_OVERFLOW)}")


def linear_key_map(config: DRAMConfig) -> tuple[np.ndarray, np.ndarray, int]:
    """A linear mapper's split as numbers, ``(order, radix, tx_shift)``: the vector of byte address
    ``a`` is ``a >> tx_shift`` sliced into the levels ``order`` in turn by their ``radix`` (what
    :meth:`sievesim._core._engine.Engine.map_keys` takes, to map requests itself, and what
    :func:`map_with_controllers` maps by)."""
    _linear_only("linear_key_map", config)
    return _key_map(config)


def _key_map(config: DRAMConfig) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`linear_key_map` for a mapper already checked to be linear."""
    return (_linear_order(config), np.asarray(config.address_radix, dtype=np.int64),
            int(config.tx_bytes).bit_length() - 1)


def check_linear(config: DRAMConfig, addrs: np.ndarray, is_write: np.ndarray, *, source: str = "trace",
                 overflow: str = "error", first: int = 0) -> tuple[int, int]:
    """For an engine that maps the addresses itself (:func:`linear_key_map`): the errors of
    :func:`map_addresses` for a linear mapper, and ``(reads, wrapped)``, in one compiled pass."""
    from .._core._traceparse import address_counts

    _linear_only("check_linear", config, overflow, source)
    addrs = np.ascontiguousarray(addrs, dtype=np.int64)
    bad, wrapped, reads = address_counts(addrs, np.ascontiguousarray(is_write, dtype=np.bool_).view(np.uint8),
                                         config.capacity_bytes, overflow == "wrap")
    if bad >= 0:
        map_addresses(config, addrs, source=source, overflow=overflow, first=first)   # raises its error
        raise AssertionError(f"address_counts refused request {first + bad}, map_addresses took it")
    return reads, wrapped


def map_with_controllers(config: DRAMConfig, addrs: np.ndarray, is_write: np.ndarray, ctrl_counts: np.ndarray, *,
                         source: str = "trace", overflow: str = "error",
                         first: int = 0) -> tuple[np.ndarray, np.ndarray, int, int]:
    """:func:`map_addresses` for a linear mapper (:data:`LINEAR_MAPPERS`) and each request's
    controller (int32: the flat index of its vector's first ``len(ctrl_counts)`` levels), with
    the number of reads and of addresses at or beyond the capacity, in one compiled pass per
    request: ``(addr_vecs, controllers, reads, wrapped)``. The same results and errors as
    ``map_addresses`` and ``sievesim._core.parallel.controllers_of``."""
    from .._core._traceparse import map_linear

    _linear_only("map_with_controllers", config, overflow, source)
    order, radix, tx_shift = _key_map(config)
    addrs = np.ascontiguousarray(addrs, dtype=np.int64)
    out = np.empty((addrs.size, len(config.standard.levels)), dtype=np.int32)
    ctrl = np.empty(addrs.size, dtype=np.int32)
    bad, wrapped, reads = map_linear(addrs, np.ascontiguousarray(is_write, dtype=np.bool_).view(np.uint8),
                                     tx_shift, config.capacity_bytes, overflow == "wrap", out, ctrl, order,
                                     radix, np.asarray(ctrl_counts, dtype=np.int64))
    if bad >= 0:
        map_addresses(config, addrs, source=source, overflow=overflow, first=first)   # raises its error
        raise AssertionError(f"map_linear refused request {first + bad}, map_addresses took it")
    return out, ctrl, reads, wrapped


def _map_into(config: DRAMConfig, rest: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out`` (int32, (n, levels)) with the address vectors of transaction indices ``rest``
    (byte addresses >> log2(tx bytes)). Every field fits in 32 bits (MOP4CLXOR's row is cast to a
    32-bit int, as Ramulator's ``(int) addr``), so writing int32 directly is exact."""
    radix = config.address_radix
    levels = config.standard.levels
    n_lv = len(levels)
    row, col = levels.index("row"), n_lv - 1

    def take(level: int, r: np.ndarray, base: int | None = None) -> np.ndarray:
        b = radix[level] if base is None else base
        if b & (b - 1) == 0:                     # power of two: bit slicing (faster than divmod)
            shift = b.bit_length() - 1
            out[:, level] = r & (b - 1)
            return r >> shift
        out[:, level] = r % b
        return r // b

    if config.mapper in LINEAR_MAPPERS:
        # the levels sliced from the low bits in the mapper's order, compiled (one pass per request)
        from .._core._traceparse import split_levels
        split_levels(np.ascontiguousarray(rest), out, _linear_order(config), np.asarray(radix, dtype=np.int64))
    elif config.mapper == "MOP4CLXOR":
        col_bits = int(radix[col]).bit_length() - 1
        low = rest % 4
        rest = rest // 4
        for lv in range(0, row):
            rest = take(lv, rest)
        high = rest % (1 << (col_bits - 2))
        rest = rest >> (col_bits - 2)
        out[:, col] = low + (high << 2)
        out[:, row] = rest.astype(np.int32)  # Ramulator: (int) addr
        xor_index = 0
        for lv in range(0, col):
            bits = int(radix[lv]).bit_length() - 1
            if bits > 0:
                mask = (out[:, col] >> xor_index) & ((1 << bits) - 1)
                out[:, lv] ^= mask
                xor_index += bits
    else:  # validated by DRAMConfig
        raise AssertionError(config.mapper)
