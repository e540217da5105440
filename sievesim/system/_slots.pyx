# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Integer counts over a step's routing ids in one pass each: ids of experts to ids of the slots that
hold their replicas with the tokens per slot (:meth:`sievesim.system.eplb.Placement.to_slots` and
``counts_from_ids``), and the dispatch's token vectors per GPU (``routing_volumes._sparse_volumes``).
The numpy functions named are the reference; integers only, so the same values."""
import numpy as np

cimport numpy as cnp

cnp.import_array()


def slots_and_counts(const cnp.int32_t[:, :, ::1] ids, const cnp.int64_t[:, ::1] replicas,
                     const cnp.int64_t[:, :, ::1] slot_table, Py_ssize_t num_slots):
    """``(slots, counts)``: the slot of every routing id ``(T, L, K)`` (int64; a replicated
    expert's tokens round robin over its replicas by token, ``-1`` stays ``-1``) and the tokens
    per slot and layer ``(L, num_slots)`` (int64)."""
    cdef Py_ssize_t t_n = ids.shape[0], layers = ids.shape[1], k = ids.shape[2], experts = replicas.shape[1]
    cdef Py_ssize_t t, layer, i, e, slot
    slots_out = np.empty((t_n, layers, k), dtype=np.int64)
    counts_out = np.zeros((layers, num_slots), dtype=np.int64)
    cdef cnp.int64_t[:, :, ::1] slots = slots_out
    cdef cnp.int64_t[:, ::1] counts = counts_out
    cdef Py_ssize_t bad = -1
    with nogil:
        for t in range(t_n):
            for layer in range(layers):
                for i in range(k):
                    e = ids[t, layer, i]
                    if e < 0:
                        slots[t, layer, i] = -1
                        continue
                    if e >= experts:
                        bad = e
                        break
                    slot = replicas[layer, e]       # numpy's t % 0 is 0
                    slot = slot_table[layer, e, t % slot if slot > 0 else 0]
                    slots[t, layer, i] = slot
                    if slot >= 0:
                        counts[layer, slot] += 1
                if bad >= 0:
                    break
            if bad >= 0:
                break
    if bad >= 0:
        raise IndexError(f"expert id {bad} out of range for {experts} experts")
    return slots_out, counts_out


ctypedef fused routing_id:
    cnp.int32_t
    cnp.int64_t


def dispatch_counts(const routing_id[:, :, ::1] ids, const cnp.int64_t[::1] own, Py_ssize_t gpus,
                    Py_ssize_t per_gpu, Py_ssize_t nodes, Py_ssize_t own_experts=0):
    """``(send, recv, send_inter, recv_inter, own_counts)``: per layer and GPU ``(L, G)`` as float64
    counts, each row's token once to every distinct GPU (``id // per_gpu``) other than its owner
    ``own[r]``; the ``*_inter`` pair counts the GPUs of another node (None on one node);
    ``own_counts`` (with ``own_experts`` > 0, else None) each GPU's own tokens per expert ``(L, G,
    own_experts)`` int64. The integers that ``routing_volumes._sparse_volumes`` and the own-count
    bincount of ``routing_volumes.of_microbatch`` count over numpy arrays."""
    cdef Py_ssize_t rows = ids.shape[0], layers = ids.shape[1], k = ids.shape[2], per_node = gpus // nodes
    cdef Py_ssize_t r, layer, i, m, d, o, e, n_dest, far = nodes > 1, with_own = own_experts > 0
    cdef cnp.int64_t dest[64]
    if k > 64:
        raise ValueError(f"top-k {k} above the 64 this kernel counts")
    send_out = np.zeros((layers, gpus), dtype=np.int64)
    recv_out = np.zeros((layers, gpus), dtype=np.int64)
    send_far_out = np.zeros((layers, gpus), dtype=np.int64)
    recv_far_out = np.zeros((layers, gpus), dtype=np.int64)
    own_out = np.zeros((layers, gpus, own_experts if with_own else 1), dtype=np.int64)
    cdef cnp.int64_t[:, ::1] send = send_out, recv = recv_out, send_far = send_far_out, recv_far = recv_far_out
    cdef cnp.int64_t[:, :, ::1] own_counts = own_out
    cdef Py_ssize_t limit = gpus * per_gpu, bad = -1, bad_owner = -1
    if with_own and own_experts != limit:
        raise ValueError(f"own_experts = {own_experts}: expected gpus x per_gpu = {limit}")
    with nogil:
        for r in range(rows):
            o = own[r]
            if o < 0 or o >= gpus:
                bad_owner = o
                break
            for layer in range(layers):
                n_dest = 0
                for i in range(k):
                    e = ids[r, layer, i]
                    if e < 0:
                        continue
                    if e >= limit:
                        bad = e
                        break
                    if with_own:
                        own_counts[layer, o, e] += 1
                    d = e // per_gpu
                    if d == o:
                        continue
                    for m in range(n_dest):
                        if dest[m] == d:
                            break
                    else:
                        dest[n_dest] = d
                        n_dest += 1
                        send[layer, o] += 1
                        recv[layer, d] += 1
                        if far and d // per_node != o // per_node:
                            send_far[layer, o] += 1
                            recv_far[layer, d] += 1
                if bad >= 0:
                    break
            if bad >= 0:
                break
    if bad >= 0:
        raise IndexError(f"slot id {bad} out of range for {gpus} GPUs of {per_gpu} slots")
    if bad_owner != -1:
        raise IndexError(f"owner GPU {bad_owner} out of range for {gpus} GPUs")
    own_result = own_out if with_own else None
    if not far:
        return send_out.astype(np.float64), recv_out.astype(np.float64), None, None, own_result
    return (send_out.astype(np.float64), recv_out.astype(np.float64), send_far_out.astype(np.float64),
            recv_far_out.astype(np.float64), own_result)
