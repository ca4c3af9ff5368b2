"""HTA's critical path: networkx' ``dag_longest_path`` with its tie rules, compiled."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ctda.kernels import kernel

I64 = npt.NDArray[np.int64]


def longest_path(n_nodes: int, src: I64, dst: I64, weight: I64) -> tuple[I64, I64, int]:
    """networkx' ``dag_longest_path`` over edges given in insertion order.

    Nodes exist only through edges and are ordered by first appearance; a repeated edge
    keeps its first position and its last weight; the topological order is networkx'
    (generations, FIFO); each node takes its first maximal predecessor; the path ends at
    the first node (in that order) of maximal distance. Returns (path nodes, path edge
    indices into the given arrays, length).
    """
    if len(src) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    flat = np.empty(2 * len(src), dtype=np.int64)
    flat[0::2], flat[1::2] = src, dst
    uniq, first = np.unique(flat, return_index=True)
    ids = uniq[np.argsort(first, kind="stable")]  # compact id -> node, insertion order
    compact = np.full(n_nodes, -1, dtype=np.int64)
    compact[ids] = np.arange(len(ids))
    cs, cd = compact[src], compact[dst]
    key = cs * len(ids) + cd
    order = np.argsort(key, kind="stable")
    ks = key[order]
    grp_first = np.ones(len(ks), dtype=bool)
    grp_first[1:] = ks[1:] != ks[:-1]
    grp_last = np.ones(len(ks), dtype=bool)
    grp_last[:-1] = ks[1:] != ks[:-1]
    keep = np.sort(order[grp_first])  # first position of each distinct edge
    last_of = np.empty(len(ks), dtype=np.int64)
    last_of[grp_first] = order[grp_last]  # edge index carrying the last weight
    rep = np.empty(len(key), dtype=np.int64)
    rep[order[grp_first]] = last_of[grp_first]
    e_src, e_dst, e_w = cs[keep], cd[keep], weight[rep[keep]]
    m = len(ids)
    in_order = np.argsort(e_dst, kind="stable")
    in_ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_dst, minlength=m), out=in_ptr[1:])
    out_order = np.argsort(e_src, kind="stable")
    out_ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(e_src, minlength=m), out=out_ptr[1:])
    path_c, path_e, length, ok = _nx_longest(
        m, e_src, e_dst, e_w.astype(np.int64), in_ptr, in_order, out_ptr, out_order
    )
    if not ok:
        raise ValueError("HTA graph has a cycle")
    return ids[path_c], keep[path_e], int(length)


@kernel(native=False)
def _nx_longest(m, src, dst, w, in_ptr, in_order, out_ptr, out_order):  # type: ignore[no-untyped-def]  # pragma: no cover
    indeg = in_ptr[1:] - in_ptr[:-1]
    deg = indeg.copy()
    topo = np.empty(m, dtype=np.int64)
    tail = 0
    for v in range(m):
        if deg[v] == 0:
            topo[tail] = v
            tail += 1
    head = 0
    while head < tail:
        v = topo[head]
        head += 1
        for j in range(out_ptr[v], out_ptr[v + 1]):
            c = dst[out_order[j]]
            deg[c] -= 1
            if deg[c] == 0:
                topo[tail] = c
                tail += 1
    if tail < m:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0, False
    dist = np.zeros(m, dtype=np.int64)
    via = np.full(m, -1, dtype=np.int64)  # edge taken into the node, -1 at a path start
    for k in range(m):
        v = topo[k]
        best = -1
        best_e = -1
        for j in range(in_ptr[v], in_ptr[v + 1]):
            e = in_order[j]
            d = dist[src[e]] + w[e]
            if best_e < 0 or d > best:
                best = d
                best_e = e
        if best_e >= 0 and best >= 0:
            dist[v] = best
            via[v] = best_e
    end = topo[0]
    for k in range(m):
        if dist[topo[k]] > dist[end]:
            end = topo[k]
    n_path = 1
    v = end
    while via[v] >= 0:
        v = src[via[v]]
        n_path += 1
    nodes = np.empty(n_path, dtype=np.int64)
    edges = np.empty(n_path - 1, dtype=np.int64)
    v = end
    i = n_path - 1
    nodes[i] = v
    while via[v] >= 0:
        edges[i - 1] = via[v]
        v = src[via[v]]
        i -= 1
        nodes[i] = v
    return nodes, edges, dist[end], True
