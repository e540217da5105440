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
                    Py_ssize_t per_gpu, Py_ssize_t nodes):
    """``(send, recv, send_inter, recv_inter)`` per layer and GPU ``(L, G)`` as float64 counts: each
    row's token once to every distinct GPU (``id // per_gpu``) other than its owner ``own[r]``; the
    ``*_inter`` pair counts the GPUs of another node (None on one node). The integers that
    ``routing_volumes._sparse_volumes`` counts over numpy arrays."""
    cdef Py_ssize_t rows = ids.shape[0], layers = ids.shape[1], k = ids.shape[2], per_node = gpus // nodes
    cdef Py_ssize_t r, layer, i, m, d, o, n_dest, far = nodes > 1
    cdef cnp.int64_t dest[64]
    if k > 64:
        raise ValueError(f"top-k {k} above the 64 this kernel counts")
    send_out = np.zeros((layers, gpus), dtype=np.int64)
    recv_out = np.zeros((layers, gpus), dtype=np.int64)
    send_far_out = np.zeros((layers, gpus), dtype=np.int64)
    recv_far_out = np.zeros((layers, gpus), dtype=np.int64)
    cdef cnp.int64_t[:, ::1] send = send_out, recv = recv_out, send_far = send_far_out, recv_far = recv_far_out
    with nogil:
        for r in range(rows):
            o = own[r]
            for layer in range(layers):
                n_dest = 0
                for i in range(k):
                    if ids[r, layer, i] < 0:
                        continue
                    d = ids[r, layer, i] // per_gpu
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
    if not far:
        return send_out.astype(np.float64), recv_out.astype(np.float64), None, None
    return (send_out.astype(np.float64), recv_out.astype(np.float64), send_far_out.astype(np.float64),
            recv_far_out.astype(np.float64))
