//! The edge rules' compiled loops, twins of the numba kernels in
//! `ctda/analysis/intervals.py` and `ctda/analysis/rules/*.py` (see `kernels.rs` for why,
//! and what "twin" demands); the re-weighing loops are in `kernels_whatif.rs`.

use crate::kernels::{at, ix, out, view, In, Out};
use pyo3::prelude::*;

/// `np.searchsorted(a, key, side="right")` the way numba's binary search finds it (which
/// matters only if `a` is not sorted).
fn search_right(a: &[i64], key: i64) -> usize {
    let (mut lo, mut hi) = (0usize, a.len());
    while lo < hi {
        let mid = lo + ((hi - lo) >> 1);
        if a[mid] <= key {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// `np.rint`: to the nearest integer, ties to even. Adding and taking away 2^52 rounds so
/// in SSE2 arithmetic; `round_ties_even` would be a libm call in a build for baseline
/// x86-64 (numba compiles for the host's CPU, whose SSE4.1 rounds in one instruction).
/// Only the sign of a zero result can differ from `rint`, and every caller converts it to
/// an integer.
#[inline]
pub(crate) fn rint(x: f64) -> f64 {
    const BIG: f64 = 4_503_599_627_370_496.0; // 2^52: from here on every float is whole
    if x.abs() < BIG {
        let c = BIG.copysign(x);
        (x + c) - c
    } else {
        x
    }
}

/// `np.int64(x)` of a float as numba's compiled code converts it on x86: truncation, and
/// the minimum integer for NaN and anything out of range (Rust's `as` would saturate).
pub(crate) fn to_i64(x: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if (-LIMIT..LIMIT).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}

// --- intervals.py --------------------------------------------------------------------------

#[pyfunction]
fn intervals_intersect<'py>(
    py: Python<'py>,
    a0: In<'py, i64>,
    a1: In<'py, i64>,
    b0: In<'py, i64>,
    b1: In<'py, i64>,
) -> (Out<'py, i64>, Out<'py, i64>, Out<'py, i64>) {
    let (a0, a1, b0, b1) = (view(&a0), view(&a1), view(&b0), view(&b1));
    let (wa, wb, ov) = py.allow_threads(|| {
        let cap = a0.len() + b0.len() + 16;
        let (mut wa, mut wb, mut ov) = (
            Vec::with_capacity(cap),
            Vec::with_capacity(cap),
            Vec::with_capacity(cap),
        );
        let mut j0 = 0;
        for i in 0..a0.len() {
            while j0 < b0.len() && b1[j0] <= a0[i] {
                j0 += 1;
            }
            let mut j = j0;
            while j < b0.len() && b0[j] < a1[i] {
                let lo = a0[i].max(b0[j]);
                let hi = a1[i].min(b1[j]);
                if hi > lo {
                    wa.push(i as i64);
                    wb.push(j as i64);
                    ov.push(hi.wrapping_sub(lo));
                }
                j += 1;
            }
        }
        (wa, wb, ov)
    });
    (out(py, wa), out(py, wb), out(py, ov))
}

#[pyfunction]
fn intervals_overlap_sums<'py>(
    py: Python<'py>,
    a0: In<'py, i64>,
    a1: In<'py, i64>,
    b0: In<'py, i64>,
    b1: In<'py, i64>,
) -> Out<'py, i64> {
    let (a0, a1, b0, b1) = (view(&a0), view(&a1), view(&b0), view(&b1));
    let sums = py.allow_threads(|| {
        let mut sums = vec![0i64; a0.len()];
        let mut j0 = 0;
        for i in 0..a0.len() {
            while j0 < b0.len() && b1[j0] <= a0[i] {
                j0 += 1;
            }
            let mut j = j0;
            let mut total = 0i64;
            while j < b0.len() && b0[j] < a1[i] {
                let hi = a1[i].min(b1[j]);
                let lo = a0[i].max(b0[j]);
                if hi > lo {
                    total = total.wrapping_add(hi.wrapping_sub(lo));
                }
                j += 1;
            }
            sums[i] = total;
        }
        sums
    });
    out(py, sums)
}

// --- rules/timeline.py, rules/wake.py ------------------------------------------------------

#[pyfunction]
fn timeline_walk<'py>(
    py: Python<'py>,
    node: In<'py, i64>,
    lane: In<'py, i64>,
) -> (Out<'py, i64>, Out<'py, i64>, Out<'py, i64>, i64) {
    let (node, lane) = (view(&node), view(&lane));
    let (src, dst, owner, partial) = py.allow_threads(|| {
        let m = node.len();
        let (mut src, mut dst, mut owner) = (vec![], vec![], vec![]);
        let mut stack: Vec<i64> = Vec::new();
        let mut partial = 0i64;
        for k in 0..m {
            let v = node[k];
            let ev = v.div_euclid(2);
            if k > 0 && lane[k] != lane[k - 1] {
                stack.clear();
            }
            if v.rem_euclid(2) == 0 {
                stack.push(ev);
            } else if let Some(j) = stack.iter().rposition(|&s| s == ev) {
                // closed below the top: it outlived something opened inside it
                if j + 1 != stack.len() {
                    partial += 1;
                }
                stack.remove(j);
            }
            if k + 1 < m && lane[k + 1] == lane[k] {
                src.push(v);
                dst.push(node[k + 1]);
                owner.push(stack.last().copied().unwrap_or(-1));
            }
        }
        (src, dst, owner, partial)
    });
    (out(py, src), out(py, dst), out(py, owner), partial)
}

#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn wake_match<'py>(
    py: Python<'py>,
    w_ts: In<'py, i64>,
    w_end: In<'py, i64>,
    w_lane: In<'py, i64>,
    w_proc: In<'py, i64>,
    s_time: In<'py, i64>,
    s_lane: In<'py, i64>,
    seg: In<'py, i64>,
) -> Out<'py, i64> {
    let (w_ts, w_end, w_lane, w_proc) = (view(&w_ts), view(&w_end), view(&w_lane), view(&w_proc));
    let (s_time, s_lane, seg) = (view(&s_time), view(&s_lane), view(&seg));
    let pos = py.allow_threads(|| {
        let mut used = vec![false; s_time.len()];
        let mut pos = vec![-1i64; w_ts.len()];
        for k in 0..w_ts.len() {
            let lo = at(&seg, w_proc[k]);
            let hi = at(&seg, w_proc[k] + 1);
            // numba's slice s_time[lo:hi], clamped to the array as Python clamps it
            let (a, b) = (
                lo.clamp(0, s_time.len() as i64),
                hi.clamp(0, s_time.len() as i64),
            );
            let found = if a < b {
                search_right(&s_time[ix(a)..ix(b)], w_end[k])
            } else {
                0
            };
            let mut j = lo + found as i64 - 1;
            while j >= lo && at(&s_time, j) > w_ts[k] {
                if !at(&used, j) && at(&s_lane, j) != w_lane[k] {
                    used[ix(j)] = true;
                    pos[k] = j;
                    break;
                }
                j -= 1;
            }
        }
        pos
    });
    out(py, pos)
}

// --- rules/cross_thread.py -----------------------------------------------------------------

#[pyfunction]
fn cross_thread_deepest_containing<'py>(
    py: Python<'py>,
    ts: In<'py, i64>,
    end: In<'py, i64>,
    depth: In<'py, i64>,
    ids: In<'py, i64>,
    qs: In<'py, i64>,
    qe: In<'py, i64>,
) -> Out<'py, i64> {
    let (ts, end, depth, ids) = (view(&ts), view(&end), view(&depth), view(&ids));
    let (qs, qe) = (view(&qs), view(&qe));
    let found = py.allow_threads(|| {
        let mut found = vec![-1i64; qs.len()];
        for k in 0..qs.len() {
            let mut best_depth = -1i64;
            // walk back over events that started before the probe; stop once far outside
            let mut j = search_right(&ts, qs[k]) as i64 - 1;
            let mut steps = 0;
            while j >= 0 && steps < 256 {
                let (e, d) = (end[ix(j)], depth[ix(j)]);
                if e >= qe[k] && d > best_depth {
                    best_depth = d;
                    found[k] = ids[ix(j)];
                }
                if d == 0 && e >= qe[k] {
                    break;
                }
                j -= 1;
                steps += 1;
            }
        }
        found
    });
    out(py, found)
}

type Handoffs<'py> = (Out<'py, i64>, Out<'py, i64>, Out<'py, f64>, Out<'py, i64>);

#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn cross_thread_handoffs<'py>(
    py: Python<'py>,
    node: In<'py, i64>,
    lane: In<'py, i64>,
    time: In<'py, i64>,
    proc: In<'py, i64>,
    release: In<'py, bool>,
    blocks: In<'py, bool>,
    min_gap: i64,
    max_lag: i64,
) -> Handoffs<'py> {
    let (node, lane, time, proc) = (view(&node), view(&lane), view(&time), view(&proc));
    let (release, blocks) = (view(&release), view(&blocks));
    let (src, dst, late, since) = py.allow_threads(|| {
        let n = node.len();
        let nl = lane.iter().max().map_or(0, |&l| l + 1);
        // per position: the next boundary of another thread of the process (a resume could
        // come as late as that and still be linked to the same release)
        let mut nxt = vec![-1i64; n];
        for k in (0..n.saturating_sub(1)).rev() {
            if proc[k + 1] == proc[k] {
                nxt[k] = if lane[k + 1] != lane[k] {
                    k as i64 + 1
                } else {
                    nxt[k + 1]
                };
            }
        }
        const NEVER: i64 = -(1i64 << 62);
        let mut last_time = vec![NEVER; ix(nl)];
        let mut last_blocks = vec![false; ix(nl)];
        let (mut src, mut dst, mut late, mut since) = (vec![], vec![], vec![], vec![]);
        for k in 0..n {
            let v = node[k];
            let ln = ix(lane[k]);
            let prev = last_time[ln];
            if v.rem_euclid(2) == 0 && prev > NEVER && time[k].wrapping_sub(prev) >= min_gap {
                // the latest boundary of another thread of this process inside our gap
                let mut j = k as i64 - 1;
                while j >= 0 && proc[ix(j)] == proc[k] && time[ix(j)] > prev {
                    let jj = ix(j);
                    if lane[jj] != lane[k] {
                        let lag = time[k].wrapping_sub(time[jj]);
                        if lag <= max_lag || (release[jj] && !last_blocks[ln]) {
                            src.push(node[jj]);
                            dst.push(v);
                            since.push(prev);
                            let mut frac = -1.0;
                            if lag > max_lag {
                                // where the resume fell in the range a late one could take
                                let mut span = time[k].wrapping_sub(prev);
                                let to_next = |q: i64| time[ix(q)].wrapping_sub(time[jj]);
                                if nxt[k] >= 0 && to_next(nxt[k]) < span {
                                    span = to_next(nxt[k]);
                                }
                                let x = lag.wrapping_sub(max_lag) as f64
                                    / span.wrapping_sub(max_lag).max(1) as f64;
                                frac = if x < 1.0 { x } else { 1.0 };
                            }
                            late.push(frac);
                        }
                        break;
                    }
                    j -= 1;
                }
            }
            last_time[ln] = time[k];
            last_blocks[ln] = blocks[k];
        }
        (src, dst, late, since)
    });
    (out(py, src), out(py, dst), out(py, late), out(py, since))
}

#[pyfunction]
fn cross_thread_lock_pairs<'py>(
    py: Python<'py>,
    ids: In<'py, i64>,
    ts: In<'py, i64>,
    end: In<'py, i64>,
    lane: In<'py, i64>,
    lookback: i64,
) -> (Out<'py, i64>, Out<'py, i64>) {
    let (ids, ts, end, lane) = (view(&ids), view(&ts), view(&end), view(&lane));
    let (src, dst) = py.allow_threads(|| {
        let (mut src, mut dst) = (vec![], vec![]);
        for k in 0..ids.len() {
            let stop = (k as i64 - 1).wrapping_sub(lookback).max(-1);
            let mut j = k as i64 - 1;
            while j > stop {
                let jj = ix(j);
                if lane[jj] != lane[k] && ts[jj] < ts[k] && ts[k] < end[jj] && end[jj] < end[k] {
                    src.push(ids[jj]);
                    dst.push(ids[k]);
                    break;
                }
                j -= 1;
            }
        }
        (src, dst)
    });
    (out(py, src), out(py, dst))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(intervals_intersect, m)?)?;
    m.add_function(wrap_pyfunction!(intervals_overlap_sums, m)?)?;
    m.add_function(wrap_pyfunction!(timeline_walk, m)?)?;
    m.add_function(wrap_pyfunction!(wake_match, m)?)?;
    m.add_function(wrap_pyfunction!(cross_thread_deepest_containing, m)?)?;
    m.add_function(wrap_pyfunction!(cross_thread_handoffs, m)?)?;
    m.add_function(wrap_pyfunction!(cross_thread_lock_pairs, m)?)?;
    Ok(())
}
