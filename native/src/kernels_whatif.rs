//! The re-weighing loops of host contention and the what-ifs, twins of the numba kernels in
//! `ctda/analysis/contention.py` and `ctda/whatif/{scenario,invariant}.py` (see `kernels.rs`
//! for why, and what "twin" demands).

use crate::kernels::{at, ix, out, view, In, Out};
use crate::kernels_rules::{rint, to_i64};
use pyo3::prelude::*;

// --- contention.py -------------------------------------------------------------------------

type Triples<'py> = (In<'py, i64>, In<'py, i64>, In<'py, i64>, In<'py, i64>);
type Loops<'py> = (In<'py, i64>, In<'py, i64>, In<'py, f64>, In<'py, f64>);

#[pyfunction]
fn contention_reweigh<'py>(
    py: Python<'py>,
    weight: In<'py, i64>,
    owner_factor: In<'py, f64>,
    owner: In<'py, i64>,
    triples: Triples<'py>,
    loops: Loops<'py>,
) -> Out<'py, i64> {
    let (weight, owner_factor, owner) = (view(&weight), view(&owner_factor), view(&owner));
    let (wait_edge, hold_edge) = (view(&triples.0), view(&triples.1));
    let (overlap, hold_loop) = (view(&triples.2), view(&triples.3));
    let (loop_edge, loop_of) = (view(&loops.0), view(&loops.1));
    let (loop_busy, loop_idle) = (view(&loops.2), view(&loops.3));
    let res = py.allow_threads(|| {
        let m = weight.len();
        let f_edge: Vec<f64> = (0..m)
            .map(|e| {
                if owner[e] >= 0 {
                    owner_factor[ix(owner[e])]
                } else {
                    1.0
                }
            })
            .collect();
        let k_loops = loop_idle.len();
        let (mut busy, mut busy_new) = (vec![0.0f64; k_loops], vec![0.0f64; k_loops]);
        for i in 0..loop_edge.len() {
            let q = ix(loop_of[i]);
            busy[q] += loop_busy[i];
            busy_new[q] += loop_busy[i] * f_edge[ix(loop_edge[i])];
        }
        let mut share = vec![1.0f64; k_loops];
        for q in 0..k_loops {
            if busy[q] > 0.0 && busy_new[q] + loop_idle[q] > 0.0 {
                share[q] = (busy_new[q] / busy[q])
                    * ((busy[q] + loop_idle[q]) / (busy_new[q] + loop_idle[q]));
            }
        }
        // sums in triple order, as np.bincount adds them
        let (mut waited, mut caused) = (vec![0.0f64; m], vec![0.0f64; m]);
        for k in 0..wait_edge.len() {
            let e = ix(wait_edge[k]);
            waited[e] += overlap[k] as f64;
            let c = if hold_loop[k] >= 0 {
                share[ix(hold_loop[k])]
            } else {
                f_edge[ix(hold_edge[k])]
            };
            caused[e] += overlap[k] as f64 * c;
        }
        (0..m)
            .map(|e| {
                let mut own = weight[e] as f64 - waited[e];
                if own < 0.0 {
                    own = 0.0;
                    if waited[e] > 0.0 {
                        caused[e] *= weight[e] as f64 / waited[e];
                    }
                }
                to_i64(rint(own * f_edge[e] + caused[e]))
            })
            .collect::<Vec<_>>()
    });
    out(py, res)
}

// --- whatif/scenario.py, whatif/invariant.py -----------------------------------------------

#[pyfunction]
fn scenario_scaled<'py>(
    py: Python<'py>,
    weight: In<'py, i64>,
    factor: In<'py, f64>,
    owner: In<'py, i64>,
) -> Out<'py, i64> {
    let (weight, factor, owner) = (view(&weight), view(&factor), view(&owner));
    let res = py.allow_threads(|| {
        (weight.iter().zip(owner.iter()))
            .map(|(&w, &o)| {
                if o >= 0 {
                    to_i64(rint(w as f64 * factor[ix(o)]))
                } else {
                    w
                }
            })
            .collect::<Vec<_>>()
    });
    out(py, res)
}

#[pyfunction]
fn scenario_scaled_total(
    py: Python<'_>,
    weight: In<'_, i64>,
    factor: In<'_, f64>,
    owner: In<'_, i64>,
) -> f64 {
    let (weight, factor, owner) = (view(&weight), view(&factor), view(&owner));
    py.allow_threads(|| {
        // one edge after another, as numba adds them (a reordered sum may differ)
        let mut total = 0.0f64;
        for (&w, &o) in weight.iter().zip(owner.iter()) {
            total += (w as f64).abs() * if o >= 0 { factor[ix(o)] } else { 1.0 };
        }
        total
    })
}

#[pyfunction]
fn invariant_chain_starts<'py>(
    py: Python<'py>,
    p: In<'py, i64>,
    broken: In<'py, i64>,
    launched: In<'py, i64>,
    s: i64,
) -> Out<'py, i64> {
    let (p, broken, launched) = (view(&p), view(&broken), view(&launched));
    let first = py.allow_threads(|| {
        (p.iter().zip(broken.iter()))
            .map(|(&i0, &b)| {
                let mut i = i0;
                while i > b && at(&launched, i) >= s {
                    i -= 1;
                }
                i + 1
            })
            .collect::<Vec<_>>()
    });
    out(py, first)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(contention_reweigh, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_scaled, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_scaled_total, m)?)?;
    m.add_function(wrap_pyfunction!(invariant_chain_starts, m)?)?;
    Ok(())
}
