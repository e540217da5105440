"""The compiled LoadStoreTrace parser (digits through a table) against a plain Python reading of
the same bytes: equal arrays when it accepts; when it stops, the lines before agree, and the line
it stops at is one the plain reading refuses or one of more than 15 digits (left to the strict
parser, which names the line)."""
from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings, strategies as st

from sievesim._core._traceparse import parse_loadstore

LINE = re.compile(rb"(LD|ST) (0[xX][0-9a-fA-F]{1,15}|[0-9]{1,15})\r?")

digits = st.one_of(
    st.integers(0, 2**60 - 1).map(lambda v: hex(v).encode()),
    st.integers(0, 2**60 - 1).map(lambda v: ("0X%X" % v).encode()),
    st.integers(0, 10**15 - 1).map(lambda v: str(v).encode()),
    st.text("0123456789abcdefABCDEFgxX:/@`G ", min_size=0, max_size=18).map(str.encode),
    # `0x` then 0 to 17 digits of either case, maybe a stray byte next to a digit range after
    # them (the hex loop's own path: a shift per digit, a table value above 15 ends it)
    st.tuples(st.text("0123456789abcdefABCDEF", min_size=0, max_size=17),
              st.sampled_from(["", "g", "G", ":", "/", "@", "`", "\x7f", "\x80", "\xb0"]))
    .map(lambda t: b"0x" + t[0].encode() + t[1].encode("latin-1")),
)
lines = st.tuples(st.sampled_from([b"LD ", b"ST ", b"LD", b"XX ", b"st "]), digits, st.sampled_from([b"", b"\r"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(lines, min_size=0, max_size=30), st.booleans())
def test_parser_agrees_with_a_plain_reading(parts, final_newline):
    text = b"\n".join(op + num + cr for op, num, cr in parts) + (b"\n" if final_newline and parts else b"")
    is_write, addrs, bad = parse_loadstore(text)
    rows = text.split(b"\n")
    if rows and rows[-1] == b"":
        rows.pop()
    ref = []
    for row in rows:
        m = LINE.fullmatch(row)
        if m is None:
            break
        tok = m.group(2)
        ref.append((m.group(1) == b"ST", int(tok, 16) if tok[:2] in (b"0x", b"0X") else int(tok)))
    if bad < 0:
        assert len(ref) == len(rows) == len(addrs)
        assert [(bool(w), int(a)) for w, a in zip(is_write, addrs)] == ref
    else:
        assert bad <= len(ref)
        assert [(bool(w), int(a)) for w, a in zip(is_write[:bad], addrs[:bad])] == ref[:bad]
        if bad < len(ref):               # accepted by the plain reading: only the digit limit stops it
            assert len(rows[bad].split(b" ")[1].rstrip(b"\r").removeprefix(b"0x").removeprefix(b"0X")) > 15
