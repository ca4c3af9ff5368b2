//! Propagation's, attribution's and a job's path segments' compiled loops, twins of the
//! numba kernels in `ctda/analysis/{propagate,attribution}.py` and `ctda/job/segments.py`
//! (see `kernels.rs` for why, and what "twin" demands).

use crate::kernels::{at, ix, out, view, In, Out};
use numpy::PyReadwriteArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

// --- propagate.py --------------------------------------------------------------------------

#[pyfunction]
fn propagate_rank<'py>(
    py: Python<'py>,
    etype: In<'py, i8>,
    preferred: In<'py, bool>,
    priority: In<'py, i64>,
) -> Out<'py, i64> {
    let (etype, preferred, priority) = (view(&etype), view(&preferred), view(&priority));
    let rank = py.allow_threads(|| {
        let bonus = |p: bool| if p { 1i64 << 20 } else { 0 };
        (etype.iter().zip(preferred.iter()))
            .map(|(&t, &p)| at(&priority, t as i64).wrapping_add(bonus(p)))
            .collect::<Vec<_>>()
    });
    out(py, rank)
}

#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn propagate_forward<'py>(
    py: Python<'py>,
    order: In<'py, i64>,
    in_ptr: In<'py, i64>,
    in_edges: In<'py, i64>,
    src: In<'py, i64>,
    weight: In<'py, i64>,
    rank: In<'py, i64>,
    source: i64,
    t_source: i64,
    mut time: PyReadwriteArray1<'py, i64>,
    mut bind: PyReadwriteArray1<'py, i64>,
    k0: i64,
    k1: i64,
) -> PyResult<()> {
    let (order, in_ptr, in_edges) = (view(&order), view(&in_ptr), view(&in_edges));
    let (src, weight, rank) = (view(&src), view(&weight), view(&rank));
    let not_contiguous = |_| PyValueError::new_err("_forward: time and bind must be contiguous");
    let time = time.as_slice_mut().map_err(not_contiguous)?;
    let bind = bind.as_slice_mut().map_err(not_contiguous)?;
    py.allow_threads(|| {
        for k in k0..k1 {
            let v = at(&order, k);
            if v == source {
                time[ix(v)] = t_source;
                continue;
            }
            let v = ix(v);
            let mut best = i64::MIN;
            let mut best_e: i64 = -1;
            for j in in_ptr[v]..in_ptr[v + 1] {
                let e = in_edges[ix(j)];
                let a = time[ix(src[ix(e)])].wrapping_add(weight[ix(e)]);
                if a > best || (a == best && rank[ix(e)] > at(&rank, best_e)) {
                    best = a;
                    best_e = e;
                }
            }
            time[v] = best;
            bind[v] = best_e;
        }
    });
    Ok(())
}

/// Chain `w` is `edges[start[w]..start[w + 1]]`, latest edge first, with each edge's start
/// and end node times; it stops at an edge starting at or before `not_before[w]`.
fn chains(
    bind: &[i64],
    src: &[i64],
    time: &[i64],
    ends: &[i64],
    not_before: &[i64],
) -> (Vec<i64>, Vec<i64>, Vec<i64>, Vec<i64>) {
    // a chain visits each node at most once: room for one chain of every node
    let cap = bind.len() + 1;
    let (mut e_out, mut t0, mut t1) = (
        Vec::with_capacity(cap),
        Vec::with_capacity(cap),
        Vec::with_capacity(cap),
    );
    let mut start = Vec::with_capacity(ends.len() + 1);
    for (w, &end) in ends.iter().enumerate() {
        start.push(e_out.len() as i64);
        let mut v = end;
        let mut t_v = at(time, v);
        loop {
            let e = at(bind, v);
            if e < 0 {
                break;
            }
            let u = src[ix(e)];
            let t_u = at(time, u);
            e_out.push(e);
            t0.push(t_u);
            t1.push(t_v);
            v = u;
            t_v = t_u;
            if t_u <= not_before[w] {
                break;
            }
        }
    }
    start.push(e_out.len() as i64);
    (e_out, t0, t1, start)
}

#[pyfunction]
fn propagate_backtrack_chains<'py>(
    py: Python<'py>,
    bind: In<'py, i64>,
    src: In<'py, i64>,
    time: In<'py, i64>,
    ends: In<'py, i64>,
    not_before: In<'py, i64>,
) -> (Out<'py, i64>, Out<'py, i64>, Out<'py, i64>, Out<'py, i64>) {
    let (bind, src, time) = (view(&bind), view(&src), view(&time));
    let (ends, not_before) = (view(&ends), view(&not_before));
    let (e, t0, t1, start) = py.allow_threads(|| chains(&bind, &src, &time, &ends, &not_before));
    (out(py, e), out(py, t0), out(py, t1), out(py, start))
}

#[pyfunction]
fn propagate_backtrack_until<'py>(
    py: Python<'py>,
    bind: In<'py, i64>,
    src: In<'py, i64>,
    time: In<'py, i64>,
    end_node: i64,
    not_before: i64,
) -> Out<'py, i64> {
    let (bind, src, time) = (view(&bind), view(&src), view(&time));
    let edges = py.allow_threads(|| {
        let mut e = chains(&bind, &src, &time, &[end_node], &[not_before]).0;
        e.reverse();
        e
    });
    out(py, edges)
}

#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn propagate_slack<'py>(
    py: Python<'py>,
    order: In<'py, i64>,
    out_ptr: In<'py, i64>,
    out_edges: In<'py, i64>,
    dst: In<'py, i64>,
    weight: In<'py, i64>,
    time: In<'py, i64>,
    anchors: In<'py, i64>,
) -> Out<'py, i64> {
    let (order, out_ptr, out_edges) = (view(&order), view(&out_ptr), view(&out_edges));
    let (dst, weight, time, anchors) = (view(&dst), view(&weight), view(&time), view(&anchors));
    let slack = py.allow_threads(|| {
        let n = order.len();
        let mut latest = vec![i64::MAX; n];
        for &a in anchors.iter() {
            let a = if a < 0 { n as i64 + a } else { a };
            latest[ix(a)] = time[ix(a)];
        }
        for k in (0..n).rev() {
            let v = ix(order[k]);
            for j in out_ptr[v]..out_ptr[v + 1] {
                let e = ix(out_edges[ix(j)]);
                let cand = latest[ix(dst[e])].wrapping_sub(weight[e]);
                if cand < latest[v] {
                    latest[v] = cand;
                }
            }
        }
        (latest.iter().zip(time.iter()))
            .map(|(&l, &t)| l.wrapping_sub(t))
            .collect::<Vec<_>>()
    });
    out(py, slack)
}

// --- attribution.py ------------------------------------------------------------------------

type Columns<'py> = (
    Out<'py, i64>,
    Out<'py, i64>,
    Out<'py, i64>,
    Out<'py, i64>,
    Out<'py, i8>,
    Out<'py, i16>,
    Out<'py, i64>,
    Out<'py, i8>,
    Out<'py, i64>,
);

#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn attribution_clip_chains<'py>(
    py: Python<'py>,
    edges: In<'py, i64>,
    t0: In<'py, i64>,
    t1: In<'py, i64>,
    start: In<'py, i64>,
    lo: In<'py, i64>,
    hi: In<'py, i64>,
    etype: In<'py, i8>,
    rule: In<'py, i16>,
    owner: In<'py, i64>,
    event_cls: In<'py, i8>,
    gap_cls: In<'py, i8>,
) -> Columns<'py> {
    let (edges, t0, t1, start) = (view(&edges), view(&t0), view(&t1), view(&start));
    let (lo, hi, etype, rule) = (view(&lo), view(&hi), view(&etype), view(&rule));
    let (owner, event_cls, gap_cls) = (view(&owner), view(&event_cls), view(&gap_cls));
    let cols = py.allow_threads(|| {
        let n_win = start.len().saturating_sub(1);
        let kept = |w: usize, q: usize| t1[q].min(hi[w]).wrapping_sub(t0[q].max(lo[w])) > 0;
        // counted first, so that each column is allocated once
        let k = (0..n_win)
            .map(|w| {
                (ix(start[w])..ix(start[w + 1]))
                    .filter(|&q| kept(w, q))
                    .count()
            })
            .sum();
        let (mut win, mut edge) = (Vec::with_capacity(k), Vec::with_capacity(k));
        let (mut c_t0, mut c_t1) = (Vec::with_capacity(k), Vec::with_capacity(k));
        let (mut et, mut rl) = (Vec::with_capacity(k), Vec::with_capacity(k));
        let (mut ev, mut cl, mut ns) = (
            Vec::with_capacity(k),
            Vec::with_capacity(k),
            Vec::with_capacity(k),
        );
        for w in 0..n_win {
            // each chain is stored latest edge first: walk it backwards for time order
            for q in (ix(start[w])..ix(start[w + 1])).rev() {
                let clipped = t1[q].min(hi[w]).wrapping_sub(t0[q].max(lo[w]));
                if clipped <= 0 {
                    continue;
                }
                let e = edges[q];
                let o = at(&owner, e);
                win.push(w as i64);
                edge.push(e);
                c_t0.push(t0[q]);
                c_t1.push(t1[q]);
                et.push(at(&etype, e));
                rl.push(at(&rule, e));
                ev.push(o);
                cl.push(if o >= 0 {
                    at(&event_cls, o)
                } else {
                    at(&gap_cls, at(&etype, e) as i64)
                });
                ns.push(clipped);
            }
        }
        (win, edge, c_t0, c_t1, et, rl, ev, cl, ns)
    });
    let (win, edge, c_t0, c_t1, et, rl, ev, cl, ns) = cols;
    (
        out(py, win),
        out(py, edge),
        out(py, c_t0),
        out(py, c_t1),
        out(py, et),
        out(py, rl),
        out(py, ev),
        out(py, cl),
        out(py, ns),
    )
}

// --- job/segments.py ------------------------------------------------------------------------

/// Index `i` of an array of `n` as numba takes it (a negative index counts from the end).
fn wrap(n: usize, i: i64) -> usize {
    if i < 0 {
        (n as i64 + i) as usize
    } else {
        ix(i)
    }
}

#[pyfunction]
fn segments_junctions<'py>(
    py: Python<'py>,
    bind: In<'py, i64>,
    src: In<'py, i64>,
    starts: In<'py, i64>,
    stop: In<'py, bool>,
) -> Out<'py, bool> {
    let (bind, src, starts, stop) = (view(&bind), view(&src), view(&starts), view(&stop));
    let junction = py.allow_threads(|| {
        let n = bind.len();
        let (mut seen, mut junction) = (vec![false; n], vec![false; n]);
        for &start in starts.iter() {
            let mut v = start;
            loop {
                let e = at(&bind, v);
                if e < 0 {
                    break;
                }
                let u = at(&src, e);
                if at(&stop, u) {
                    break;
                }
                let w = wrap(n, u);
                if seen[w] {
                    junction[w] = true;
                    break;
                }
                seen[w] = true;
                v = u;
            }
        }
        junction
    });
    out(py, junction)
}

type Walked<'py> = (
    Out<'py, i64>,
    Out<'py, i64>,
    Out<'py, i64>,
    Out<'py, i64>,
    Out<'py, i64>,
);

#[pyfunction]
fn segments_walk<'py>(
    py: Python<'py>,
    bind: In<'py, i64>,
    src: In<'py, i64>,
    time: In<'py, i64>,
    starts: In<'py, i64>,
    stop: In<'py, bool>,
    single: In<'py, bool>,
) -> Walked<'py> {
    let (bind, src, time) = (view(&bind), view(&src), view(&time));
    let (starts, stop, single) = (view(&starts), view(&stop), view(&single));
    let (e_out, t0, t1, ptr, end) = py.allow_threads(|| {
        // disjoint chains: at most one edge per node
        let cap = bind.len() + starts.len() + 1;
        let (mut e_out, mut t0, mut t1) = (Vec::new(), Vec::new(), Vec::new());
        let mut ptr = vec![0i64; starts.len() + 1];
        let mut end = vec![0i64; starts.len()];
        for (k, &start) in starts.iter().enumerate() {
            let mut v = start;
            loop {
                let e = at(&bind, v);
                if e < 0 || e_out.len() >= cap {
                    break;
                }
                let u = at(&src, e);
                e_out.push(e);
                t0.push(at(&time, u));
                t1.push(at(&time, v));
                v = u;
                if at(&stop, u) || single[k] {
                    break;
                }
            }
            end[k] = v;
            ptr[k + 1] = e_out.len() as i64;
        }
        (e_out, t0, t1, ptr, end)
    });
    (
        out(py, e_out),
        out(py, t0),
        out(py, t1),
        out(py, ptr),
        out(py, end),
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(propagate_rank, m)?)?;
    m.add_function(wrap_pyfunction!(propagate_forward, m)?)?;
    m.add_function(wrap_pyfunction!(propagate_backtrack_chains, m)?)?;
    m.add_function(wrap_pyfunction!(propagate_backtrack_until, m)?)?;
    m.add_function(wrap_pyfunction!(propagate_slack, m)?)?;
    m.add_function(wrap_pyfunction!(attribution_clip_chains, m)?)?;
    m.add_function(wrap_pyfunction!(segments_junctions, m)?)?;
    m.add_function(wrap_pyfunction!(segments_walk, m)?)?;
    Ok(())
}
