"""Independent checker for exported DRAM command logs.

Written apart from the engine: it does not import sievesim's standards, tables or compiler. It reads
the CSV log (``# timings:`` line, header, rows), replays every command and checks it against timing
and bank-state rules written out here by hand from JESD238/JESD235 (family ``jedec``) and from
Ramulator 2.0's HBM3/HBM2 tables (family ``ramulator2``). It returns a list of violations.
"""
from __future__ import annotations

import collections
import csv
import json
from dataclasses import dataclass

RD, WR = ("RD", "RDA"), ("WR", "WRA")


@dataclass
class Log:
    timings: dict
    config: dict
    rows: list[tuple]   # (cycle, ch, pc, sid, bg, bank, row, col, cmd)


def read_log(path) -> Log:
    with open(path) as fh:
        first = fh.readline()
        assert first.startswith("# timings: "), first
        timings = json.loads(first[len("# timings: "):])
        second = fh.readline()
        config = json.loads(second[len("# config: "):]) if second.startswith("# config: ") else {}
        reader = csv.reader(fh)
        header = next(reader)
        assert header == ["cycle", "channel", "pseudo_channel", "sid", "bankgroup", "bank", "row", "column",
                          "command"], header
        rows = [tuple(int(x) for x in r[:8]) + (r[8],) for r in reader]
    return Log(timings, config, rows)


def _pim_rules(t: dict, single_buffer: bool) -> list[tuple[tuple, tuple, str, int]]:
    """PIM all-bank commands act on a whole pseudo-channel (docs/pim.md)."""
    nBL, nCWL = t["nBL"], t["nCWL"]
    rows = [
        (("MACAB",), ("ACTAB",), "pc", t["nRCDRD"]),
        (("PREAB",), ("ACTAB",), "pc", t["nRAS"]),
        (("ACTAB",), ("ACTAB",), "pc", t["nRC"]),
        (("ACTAB",), ("PREAB",), "pc", t["nRP"]),
        (("MACAB",), ("MACAB",), "pc", t["nCCDAB"]),
        (("PREAB",), ("MACAB",), "pc", t["nRTPL"]),
        (("RDRES",), ("MACAB",), "pc", t["nCCDAB"]),
        (("ACTAB",), ("ACT",), "pc", t["nRRDS"]), (("ACT",), ("ACTAB",), "pc", t["nRRDS"]),
        (("ACT", "PRE", "PREA", "REFab", "PREAB"), ("ACTAB",), "pc", 2),
        (("GWRITE",), ("GWRITE", "WR", "WRA"), "pc", nBL), (("WR", "WRA"), ("GWRITE",), "pc", nBL),
        (("MACAB",), ("GWRITE",), "pc", nCWL + nBL),
        (("GWRITE",), ("RD", "RDA", "RDRES"), "pc", t["nRTW"]),
        (("RD", "RDA", "RDRES"), ("GWRITE", "WR", "WRA"), "pc", nCWL + nBL + t["nWTRS"]),
        (("RDRES",), ("RDRES", "RD", "RDA"), "pc", nBL), (("RD", "RDA"), ("RDRES",), "pc", nBL),
        (("WR", "WRA"), ("RDRES",), "pc", t["nRTW"]),
        (("REFab",), ("ACTAB",), "pc", t["nRC"]), (("REFab",), ("PREAB",), "pc", t["nRP"]),
        (("ACTAB",), ("REFab",), "pc", t["nRFC"]),
    ]
    if single_buffer:
        rows += [
            (("ACT",), ("PREAB",), "pc", t["nRP"]),
            (("ACTAB",), ("PRE", "PREA"), "pc", t["nRP"]),
            (("ACTAB",), ("RD",), "pc", t["nRTPL"] + t["nRP"]),
            (("ACTAB",), ("WR",), "pc", nCWL + nBL + t["nWR"] + t["nRP"]),
        ]
    return rows


def _rules(family: str, t: dict, single_buffer: bool = False) -> list[tuple[tuple, tuple, str, int]]:
    """(following commands, preceding commands, relation, latency) rows."""
    nBL, nCL, nCWL = t["nBL"], t["nCL"], t["nCWL"]
    wr_rec = nCWL + nBL + t["nWR"]
    if family == "jedec":
        pim = _pim_rules(t, single_buffer) if "nCCDAB" in t else []
        return pim + [
            # same pseudo-channel
            (("ACT", "PRE", "PREA", "REFab"), ("ACT",), "pc", 2),
            (("ACT",), ("ACT",), "pc", t["nRRDS"]),
            (RD, RD, "pc", nBL), (WR, WR, "pc", nBL),
            (WR, RD, "pc", t["nRTW"]),
            (RD, WR, "pc", nCWL + nBL + t["nWTRS"]),
            (("PRE", "PREA"), ("PRE", "PREA"), "pc", t["nPPD"]),
            (("ACT", "PREA", "REFab"), ("REFab",), "pc", t["nRFC"]),
            # SID (stack id) — column-to-column
            (RD, RD, "sid", t["nCCDS"]), (WR, WR, "sid", t["nCCDS"]),
            (RD, RD, "sid_other", t.get("nCCDR", 0)),
            # bank group
            (RD, RD, "bg", t["nCCDL"]), (WR, WR, "bg", t["nCCDL"]),
            (RD, WR, "bg", nCWL + nBL + t["nWTRL"]),
            (("ACT",), ("ACT",), "bg", t["nRRDL"]),
            # bank (PREA/REFab apply to every bank of the pseudo-channel)
            (("ACT",), ("ACT",), "bank", t["nRC"]),
            (RD, ("ACT",), "bank", t["nRCDRD"]),
            (WR, ("ACT",), "bank", t["nRCDWR"]),
            (("PRE", "PREA"), ("ACT",), "bank", t["nRAS"]),
            (("ACT",), ("PRE", "PREA"), "bank", t["nRP"]),
            (("PRE", "PREA"), ("RD",), "bank", t["nRTPL"]),
            (("PRE", "PREA"), ("WR",), "bank", wr_rec),
            (("ACT",), ("RDA",), "bank", t["nRTPL"] + t["nRP"]),
            (("ACT",), ("WRA",), "bank", wr_rec + t["nRP"]),
            (("REFab",), ("ACT",), "bank", t["nRC"]),
            (("REFab",), ("PRE", "PREA"), "bank", t["nRP"]),
            (("REFab",), ("RDA",), "bank", t["nRTPL"] + t["nRP"]),
            (("REFab",), ("WRA",), "bank", wr_rec + t["nRP"]),
        ]
    if family == "ramulator2":
        return [
            (("ACT", "PRE", "PREA", "REFab"), ("ACT",), "channel", 2),
            (("ACT",), ("ACT",), "pc", t["nRRDS"]),
            (RD, RD, "pc", max(nBL, t["nCCDS"])), (WR, WR, "pc", max(nBL, t["nCCDS"])),
            (WR, RD, "pc", nCL + nBL + 2 - nCWL),
            (RD, WR, "pc", nCWL + nBL + t["nWTRS"]),
            (("ACT",), ("PREA",), "pc", t["nRP"]),
            (RD, RD, "bg", t["nCCDL"]), (WR, WR, "bg", t["nCCDL"]),
            (RD, WR, "bg", nCWL + nBL + t["nWTRL"]),
            (("ACT",), ("ACT",), "bg", t["nRRDL"]),
            (("ACT",), ("ACT",), "bank", t["nRC"]),
            (RD, ("ACT",), "bank", t["nRCDRD"]),
            (WR, ("ACT",), "bank", t["nRCDWR"]),
            (("PRE",), ("ACT",), "bank", t["nRAS"]),
            (("ACT",), ("PRE",), "bank", t["nRP"]),
            (("PRE",), ("RD",), "bank", max(t["nRTPS"], t["nRTPL"])),
            (("PRE",), ("WR",), "bank", wr_rec),
            (("ACT",), ("RDA",), "bank", t["nRTPL"] + t["nRP"]),
            (("ACT",), ("WRA",), "bank", wr_rec + t["nRP"]),
        ]
    raise ValueError(family)


def check(log: Log, family: str, single_buffer: bool = False) -> list[str]:
    """Replay ``log``; return human-readable violations (empty list = clean).

    ``single_buffer``: PIM and normal rows share each bank's row buffer (else PIM rows have their own).
    """
    t = log.timings
    rules = _rules(family, t, single_buffer)
    pim_row = {}                  # (ch, pc) -> open PIM row
    by_following = collections.defaultdict(list)
    for fol, pre, rel, lat in rules:
        for f in fol:
            by_following[f].append((pre, rel, lat))
    last = {}                     # (cmd, relation key) -> last cycle
    open_row = {}                 # bank key -> row
    faw = collections.defaultdict(lambda: collections.deque(maxlen=4))
    per_cycle = set()
    bad: list[str] = []
    prev_cycle = -1
    broadcast = {"PREA", "REFab", "ACTAB", "PREAB", "MACAB", "GWRITE", "RDRES"}
    for i, (cyc, ch, pc, sid, bg, bank, row, col, cmd) in enumerate(log.rows):
        where = f"row {i + 1}: {cmd} at cycle {cyc} (ch {ch} pc {pc} sid {sid} bg {bg} bank {bank} row {row})"
        if cyc < prev_cycle:
            bad.append(f"{where}: log not in cycle order")
        prev_cycle = cyc
        bus = (ch, pc) if family == "jedec" else (ch,)
        if (bus, cyc) in per_cycle:
            bad.append(f"{where}: second command on the same command bus in one cycle")
        per_cycle.add((bus, cyc))
        keys = {"channel": (ch,), "pc": (ch, pc), "sid": (ch, pc, sid), "bg": (ch, pc, sid, bg),
                "bank": (ch, pc, sid, bg, bank)}
        bk = keys["bank"]
        # bank-state rules
        if cmd == "ACT" and bk in open_row:
            bad.append(f"{where}: ACT to an open bank (row {open_row[bk]} open)")
        if cmd in RD + WR and open_row.get(bk) != row:
            bad.append(f"{where}: column command but bank holds row {open_row.get(bk)}")
        if cmd == "REFab" and any(k[:2] == (ch, pc) for k in open_row):
            bad.append(f"{where}: REFab with open banks in the pseudo-channel")
        if cmd == "REFab" and (ch, pc) in pim_row:
            bad.append(f"{where}: REFab with the PIM row {pim_row[(ch, pc)]} open")
        if cmd == "ACTAB" and (ch, pc) in pim_row:
            bad.append(f"{where}: ACTAB with the PIM row {pim_row[(ch, pc)]} already open")
        if cmd == "MACAB" and pim_row.get((ch, pc)) != row:
            bad.append(f"{where}: MACAB but the PIM row buffer holds {pim_row.get((ch, pc))}")
        if single_buffer and cmd == "ACT" and (ch, pc) in pim_row:
            bad.append(f"{where}: ACT while the shared row buffer holds PIM row {pim_row[(ch, pc)]}")
        if single_buffer and cmd == "ACTAB" and any(k[:2] == (ch, pc) for k in open_row):
            bad.append(f"{where}: ACTAB while normal rows are open in the shared row buffer")
        # timing rules
        for pre, rel, lat in by_following[cmd]:
            for p in pre:
                if rel == "sid_other":
                    cands = [v for (c, k), v in last.items() if c == p and len(k) == 3 and k[:2] == (ch, pc)
                             and k[2] != sid]
                elif cmd in broadcast and rel in ("bank", "bg", "sid"):
                    depth = len(keys[rel])
                    cands = [v for (c, k), v in last.items() if c == p and len(k) == depth and k[:2] == (ch, pc)]
                else:
                    cands = [last.get((p, keys[rel]), None)]
                    if rel in ("bank", "bg", "sid"):
                        cands.append(last.get((p, ("pcwide", ch, pc)), None))
                for v in cands:
                    if v is not None and cyc - v < lat:
                        bad.append(f"{where}: {cyc - v} cycles after {p} ({rel}), needs {lat}")
        if cmd == "ACT":
            q = faw[(ch, pc)]
            if len(q) == 4 and cyc - q[0] < t["nFAW"]:
                bad.append(f"{where}: fifth ACT within nFAW={t['nFAW']} (window start {q[0]})")
            q.append(cyc)
        # record
        for rel, key in keys.items():
            if cmd in broadcast and rel in ("bank", "bg", "sid"):
                continue
            last[(cmd, key)] = cyc
        if cmd in broadcast:
            last[(cmd, ("pcwide", ch, pc))] = cyc
        if cmd == "ACTAB":
            pim_row[(ch, pc)] = row
        elif cmd == "PREAB":
            pim_row.pop((ch, pc), None)
        if cmd == "ACT":
            open_row[bk] = row
        elif cmd in ("PRE", "RDA", "WRA"):
            open_row.pop(bk, None)
        elif cmd == "PREA":
            scope = (ch, pc) if family == "jedec" else (ch,)
            for k in [k for k in open_row if k[:len(scope)] == scope]:
                del open_row[k]
    return bad
