"""The nodes a tensor-parallel step has instead of the expert-parallel dispatch (see
:mod:`sievesim.system.parallelism`): every GPU holds every token, so the MoE needs no dispatch,
combine or routing all-gather; the GPUs' partial outputs are all-reduced after the attention's
output projection, after a dense MLP and after the MoE (vLLM's and SGLang's tensor-parallel
decode). Durations in seconds, sizes in bytes."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["add_allreduce", "routing"]


def add_allreduce(b: Any, lb: Any, after: list[int], what: str) -> list[int]:
    """The all-reduce of every GPU's partial outputs (the attention's output projection, a dense
    MLP, or the MoE's experts: the hidden states of the micro-batch's tokens) after all of them;
    returns each GPU's node."""
    sim, m = b.sim, b.sim.model
    nbytes = float(lb.tokens_g[0] * m.hidden_size * m.dtype_bytes)
    t = b.gm.allreduce_s(nbytes, sim.gpus)
    return [b.graph.add(f"L{lb.layer} all-reduce ({what}) g{g}", t, b.r_link[g], after, gpu=g, layer=lb.layer,
                        kind="allreduce", microbatch=lb.mb, bytes=nbytes) for g in range(sim.gpus)]


def routing(b: Any, lb: Any, moe_index: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The routing of one MoE layer when every GPU holds every token: the counts per expert, the
    rows' expert ids (or None), and each GPU's own tokens per expert = all of them (for early loads,
    None when they are off). There is no dispatch volume or link time."""
    sim = b.sim
    G, E = sim.gpus, sim.num_slots
    if b.ids is not None:
        lid = b.ids[lb.rows][:, moe_index, :]
        counts = (b.counts_all[moe_index] if sim.microbatches == 1
                  else np.bincount(lid[lid >= 0].ravel(), minlength=E))
    else:
        lid, counts = None, b.counts_all[moe_index]
    own_counts = np.broadcast_to(counts, (G, E)) if sim.early_loads != "off" else None
    return counts, lid, own_counts
