//! The analysis engine's compiled loops (graph, calibration, classes), and what all the
//! kernel files share: twins of the numba kernels in `ctda/analysis/*.py`.
//!
//! With these, a process that analyses a trace never imports numba: its import and the
//! loading of its cached machine code cost every fresh process about half a second. Each
//! function must give exactly what its Python twin gives (`ctda/kernels.py` picks one or
//! the other, and the tests run the engine both ways and compare): the same integer
//! wrap-around, the same order of floating-point sums, the same output dtypes. Numba
//! indexes with a negative integer from the end, so where a kernel can do that on purpose
//! or by accident, `at` does the same.

use numpy::{Element, IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use std::borrow::Cow;

pub(crate) type In<'py, T> = PyReadonlyArray1<'py, T>;
pub(crate) type Out<'py, T> = Bound<'py, PyArray1<T>>;

/// The array's values without a copy when it is contiguous (the engine's always are);
/// a strided view, which numba also accepts, is copied.
pub(crate) fn view<'a, T: Element + Copy>(a: &'a In<'_, T>) -> Cow<'a, [T]> {
    match a.as_slice() {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => Cow::Owned(a.as_array().iter().copied().collect()),
    }
}

pub(crate) fn out<T: Element>(py: Python<'_>, v: Vec<T>) -> Out<'_, T> {
    v.into_pyarray(py)
}

/// `a[i]` as numba reads it: a negative index counts from the end.
#[inline]
pub(crate) fn at<T: Copy>(a: &[T], i: i64) -> T {
    if i < 0 {
        a[(a.len() as i64 + i) as usize]
    } else {
        a[i as usize]
    }
}

pub(crate) fn ix(i: i64) -> usize {
    i as usize
}

// --- graph.py ------------------------------------------------------------------------------

#[pyfunction]
fn graph_counting_sort<'py>(
    py: Python<'py>,
    keys: In<'py, i64>,
    n: i64,
) -> (Out<'py, i64>, Out<'py, i64>) {
    let keys = view(&keys);
    let (ptr, order) = py.allow_threads(|| {
        let mut ptr = vec![0i64; ix(n + 1)];
        for &k in keys.iter() {
            ptr[ix(k + 1)] += 1;
        }
        for v in 0..ix(n) {
            ptr[v + 1] = ptr[v + 1].wrapping_add(ptr[v]);
        }
        let mut fill = ptr[..ix(n)].to_vec();
        let mut order = vec![0i64; keys.len()];
        for (i, &k) in keys.iter().enumerate() {
            order[ix(fill[ix(k)])] = i as i64;
            fill[ix(k)] += 1;
        }
        (ptr, order)
    });
    (out(py, ptr), out(py, order))
}

#[pyfunction]
fn graph_first_pairs<'py>(
    py: Python<'py>,
    by_src: In<'py, i64>,
    src: In<'py, i64>,
    dst: In<'py, i64>,
) -> Out<'py, bool> {
    let (by_src, src, dst) = (view(&by_src), view(&src), view(&dst));
    let keep = py.allow_threads(|| {
        let m = by_src.len();
        let mut keep = vec![false; m];
        let mut i = 0;
        while i < m {
            let s = src[ix(by_src[i])];
            let mut j = i;
            while j < m && src[ix(by_src[j])] == s {
                j += 1;
            }
            if j - i <= 16 {
                for a in i..j {
                    let e = ix(by_src[a]);
                    let dup = (i..a).any(|b| dst[ix(by_src[b])] == dst[e]);
                    keep[e] = !dup;
                }
            } else {
                // a stable sort by dst: the first of each run is the group's earliest edge
                let mut grp: Vec<usize> = by_src[i..j].iter().map(|&e| ix(e)).collect();
                grp.sort_by_key(|&e| dst[e]);
                keep[grp[0]] = true;
                for a in 1..grp.len() {
                    if dst[grp[a]] != dst[grp[a - 1]] {
                        keep[grp[a]] = true;
                    }
                }
            }
            i = j;
        }
        keep
    });
    out(py, keep)
}

#[pyfunction]
fn graph_kahn<'py>(
    py: Python<'py>,
    out_ptr: In<'py, i64>,
    out_edges: In<'py, i64>,
    dst: In<'py, i64>,
    indeg: In<'py, i64>,
    time: In<'py, i64>,
    by_time: In<'py, i64>,
) -> (Out<'py, i64>, i64) {
    let (out_ptr, out_edges, dst) = (view(&out_ptr), view(&out_edges), view(&dst));
    let (indeg, time, by_time) = (view(&indeg), view(&time), view(&by_time));
    let (order, placed) = py.allow_threads(|| {
        let n = indeg.len();
        let mut deg = indeg.to_vec();
        // numba leaves the unplaced tail (a cycle) uninitialised; it is never read
        let mut order = vec![0i64; n];
        let mut ready = vec![0i64; n];
        let (mut r_head, mut r_tail, mut placed, mut k) = (0usize, 0usize, 0usize, 0usize);
        while placed < n {
            let v;
            if r_head < r_tail {
                v = ready[r_head];
                r_head += 1;
            } else {
                let mut found = None;
                while k < n {
                    let c = by_time[k];
                    k += 1;
                    if deg[ix(c)] == 0 {
                        deg[ix(c)] = -1;
                        found = Some(c);
                        break;
                    }
                }
                match found {
                    Some(c) => v = c,
                    None => break,
                }
            }
            order[placed] = v;
            placed += 1;
            for e in out_ptr[ix(v)]..out_ptr[ix(v) + 1] {
                let w = ix(dst[ix(out_edges[ix(e)])]);
                deg[w] -= 1;
                if deg[w] == 0 && time[w] <= time[ix(v)] {
                    deg[w] = -1;
                    ready[r_tail] = w as i64;
                    r_tail += 1;
                }
            }
        }
        (order, placed as i64)
    });
    (out(py, order), placed)
}

// --- calibrate.py, classify.py -------------------------------------------------------------

#[pyfunction]
fn calibrate_last_arrivals<'py>(
    py: Python<'py>,
    in_ptr: In<'py, i64>,
    in_edges: In<'py, i64>,
    arrive: In<'py, i64>,
    prio: In<'py, i64>,
) -> Out<'py, bool> {
    let (in_ptr, in_edges) = (view(&in_ptr), view(&in_edges));
    let (arrive, prio) = (view(&arrive), view(&prio));
    let binding = py.allow_threads(|| {
        let mut binding = vec![false; arrive.len()];
        for v in 0..in_ptr.len().saturating_sub(1) {
            let mut best: i64 = -1;
            for j in in_ptr[v]..in_ptr[v + 1] {
                let e = in_edges[ix(j)];
                let later = best < 0 || {
                    let (ae, ab) = (arrive[ix(e)], arrive[ix(best)]);
                    let (pe, pb) = (prio[ix(e)], prio[ix(best)]);
                    ae > ab || (ae == ab && (pe > pb || (pe == pb && e > best)))
                };
                if later {
                    best = e;
                }
            }
            if best >= 0 {
                binding[ix(best)] = true;
            }
        }
        binding
    });
    out(py, binding)
}

#[pyfunction]
fn classify_inherit_levels<'py>(
    py: Python<'py>,
    flag: In<'py, bool>,
    parent: In<'py, i64>,
    depth: In<'py, i64>,
) -> Out<'py, bool> {
    let (flag, parent, depth) = (view(&flag), view(&parent), view(&depth));
    let res = py.allow_threads(|| {
        let n = flag.len();
        let mut res = flag.to_vec();
        let top = depth.iter().fold(0i64, |t, &d| t.max(d));
        let counted = |i: usize| depth[i] >= 1 && parent[i] >= 0;
        let mut ptr = vec![0i64; ix(top + 2)];
        for i in (0..n).filter(|&i| counted(i)) {
            ptr[ix(depth[i] + 1)] += 1;
        }
        for d in 1..ix(top + 2) {
            ptr[d] += ptr[d - 1];
        }
        let mut at_ = vec![0usize; ix(ptr[ix(top + 1)])];
        let mut fill = ptr.clone();
        for i in (0..n).filter(|&i| counted(i)) {
            at_[ix(fill[ix(depth[i])])] = i;
            fill[ix(depth[i])] += 1;
        }
        let mut got = vec![false; at_.len()];
        for d in 1..=ix(top) {
            let (lo, hi) = (ix(ptr[d]), ix(ptr[d + 1]));
            // a level reads its parents as they stood after the level above, then writes
            for k in lo..hi {
                got[k] = res[ix(parent[at_[k]])];
            }
            for k in lo..hi {
                if got[k] {
                    res[at_[k]] = true;
                }
            }
        }
        res
    });
    out(py, res)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(graph_counting_sort, m)?)?;
    m.add_function(wrap_pyfunction!(graph_first_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(graph_kahn, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate_last_arrivals, m)?)?;
    m.add_function(wrap_pyfunction!(classify_inherit_levels, m)?)?;
    Ok(())
}
