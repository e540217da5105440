# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Integer counts over a step's routing ids in one pass each: ids of experts to ids of the slots that
hold their replicas with the tokens per slot (:meth:`sievesim.system.eplb.Placement.to_slots` and
``counts_from_ids``), and the dispatch's token vectors per GPU (``routing_volumes._sparse_volumes``).
The numpy functions named are the reference; integers only, so the same values."""
import numpy as np

cimport numpy as cnp

cnp.import_array()


cdef Py_ssize_t _map_slots(const cnp.int32_t[:, :, ::1] ids, const cnp.int64_t[:, ::1] replicas,
                           const cnp.int64_t[:, :, ::1] slot_table, cnp.int64_t[:, :, ::1] slots,
                           cnp.int64_t[:, ::1] counts) noexcept nogil:
    """:func:`slots_and_counts`'s pass: -1, or the first expert id past the experts (then stops)."""
    cdef Py_ssize_t t, layer, i, e, slot, experts = replicas.shape[1]
    for t in range(ids.shape[0]):
        for layer in range(ids.shape[1]):
            for i in range(ids.shape[2]):
                e = ids[t, layer, i]
                if e < 0:
                    slots[t, layer, i] = -1
                    continue
                if e >= experts:
                    return e
                slot = replicas[layer, e]       # numpy's t % 0 is 0
                slot = slot_table[layer, e, t % slot if slot > 0 else 0]
                slots[t, layer, i] = slot
                if slot >= 0:
                    counts[layer, slot] += 1
    return -1


def slots_and_counts(const cnp.int32_t[:, :, ::1] ids, const cnp.int64_t[:, ::1] replicas,
                     const cnp.int64_t[:, :, ::1] slot_table, Py_ssize_t num_slots):
    """``(slots, counts)``: the slot of every routing id ``(T, L, K)`` (int64; a replicated
    expert's tokens round robin over its replicas by token, ``-1`` stays ``-1``) and the tokens
    per slot and layer ``(L, num_slots)`` (int64)."""
    cdef Py_ssize_t t_n = ids.shape[0], layers = ids.shape[1], k = ids.shape[2], experts = replicas.shape[1]
    slots_out = np.empty((t_n, layers, k), dtype=np.int64)
    counts_out = np.zeros((layers, num_slots), dtype=np.int64)
    cdef cnp.int64_t[:, :, ::1] slots = slots_out
    cdef cnp.int64_t[:, ::1] counts = counts_out
    cdef Py_ssize_t bad
    with nogil:
        bad = _map_slots(ids, replicas, slot_table, slots, counts)
    if bad >= 0:
        raise IndexError(f"expert id {bad} out of range for {experts} experts")
    return slots_out, counts_out


ctypedef fused routing_id:
    cnp.int32_t
    cnp.int64_t


cdef Py_ssize_t _count_dispatch(const routing_id[:, :, ::1] ids, const cnp.int64_t[::1] own, Py_ssize_t per_gpu,
                                Py_ssize_t per_node, bint far, bint with_own, cnp.int64_t[:, :, ::1] sends,
                                cnp.int64_t[:, :, ::1] own_counts) noexcept nogil:
    """:func:`dispatch_counts`'s pass: -1, or the first slot id past the GPUs' slots (then stops)."""
    cdef Py_ssize_t r, layer, i, m, d, o, e, n_dest, limit = sends.shape[2] * per_gpu
    cdef cnp.int64_t dest[64]
    for r in range(ids.shape[0]):
        o = own[r]
        for layer in range(ids.shape[1]):
            n_dest = 0
            for i in range(ids.shape[2]):
                e = ids[r, layer, i]
                if e < 0:
                    continue
                if e >= limit:
                    return e
                if with_own:
                    own_counts[layer, o, e] += 1
                d = e // per_gpu
                if d == o:
                    continue
                for m in range(n_dest):         # each GPU once per token
                    if dest[m] == d:
                        break
                else:
                    dest[n_dest] = d
                    n_dest += 1
                    sends[0, layer, o] += 1
                    sends[1, layer, d] += 1
                    if far and d // per_node != o // per_node:
                        sends[2, layer, o] += 1
                        sends[3, layer, d] += 1
    return -1


def dispatch_counts(const routing_id[:, :, ::1] ids, const cnp.int64_t[::1] own, Py_ssize_t gpus,
                    Py_ssize_t per_gpu, Py_ssize_t nodes, Py_ssize_t own_experts=0):
    """``(send, recv, send_inter, recv_inter, own_counts)``: per layer and GPU ``(L, G)`` as float64
    counts, each row's token once to every distinct GPU (``id // per_gpu``) other than its owner
    ``own[r]``; the ``*_inter`` pair counts the GPUs of another node (None on one node);
    ``own_counts`` (with ``own_experts`` > 0, else None) each GPU's own tokens per expert ``(L, G,
    own_experts)`` int64. The integers that ``routing_volumes._sparse_volumes`` and the own-count
    bincount of ``routing_volumes.of_microbatch`` count over numpy arrays."""
    cdef Py_ssize_t layers = ids.shape[1], k = ids.shape[2], limit = gpus * per_gpu, bad
    if k > 64:
        raise ValueError(f"top-k {k} above the 64 this kernel counts")
    if own_experts > 0 and own_experts != limit:
        raise ValueError(f"own_experts = {own_experts}: expected gpus x per_gpu = {limit}")
    owners = np.asarray(own)
    if owners.size and not (0 <= owners.min() and owners.max() < gpus):
        raise IndexError(f"owner GPU {owners.min() if owners.min() < 0 else owners.max()} out of range for {gpus} GPUs")
    sends_out = np.zeros((4, layers, gpus), dtype=np.int64)      # send, recv, send_inter, recv_inter
    own_out = np.zeros((layers, gpus, max(own_experts, 1)), dtype=np.int64)
    cdef cnp.int64_t[:, :, ::1] sends = sends_out, own_counts = own_out
    with nogil:
        bad = _count_dispatch(ids, own, per_gpu, gpus // nodes, nodes > 1, own_experts > 0, sends, own_counts)
    if bad >= 0:
        raise IndexError(f"slot id {bad} out of range for {gpus} GPUs of {per_gpu} slots")
    own_result = own_out if own_experts > 0 else None
    send, recv, send_far, recv_far = sends_out.astype(np.float64)
    if nodes <= 1:
        return send, recv, None, None, own_result
    return send, recv, send_far, recv_far, own_result

