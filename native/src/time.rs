//! Microsecond timestamps -> int64 ns, computed exactly as ctda's ``micros_to_ns`` and
//! ``exact_micros_to_ns`` do (same float operations in the same order), so the two paths
//! give the same nanosecond for every value, including values with more than 3 decimals.

use crate::NA;

/// One ``ts`` or ``dur`` as read: its float64 value, and its exact ns from the decimal text
/// (None when the text has an exponent: left to the Python path if it is needed).
#[derive(Clone, Copy)]
pub struct Micros {
    pub f: f64,
    pub exact: Option<i64>,
}

/// Beyond this float64 cannot hold whole microseconds (the Python path refuses the value).
const LIMIT_US: f64 = 9_007_199_254_740_992.0; // 2**53
/// Below this a float64 with three decimals rounds back to its exact ns.
const FLOAT_EXACT_US: f64 = 4_398_046_511_104.0; // 2**42

/// ``value * 1000`` from a JSON number's text, digits past the third decimal cut (as a
/// decimal128(38, 3) cast does); None for exponent notation or an out-of-range value.
pub fn exact_ns(text: &[u8]) -> Option<i64> {
    if text.iter().any(|c| matches!(c, b'e' | b'E')) {
        return None;
    }
    let (neg, body) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let mut parts = body.splitn(2, |c| *c == b'.');
    let whole = parts.next()?;
    let frac = parts.next().unwrap_or(b"");
    if whole.len() + frac.len() > 30 {
        return None; // beyond what a decimal128(38, 3) cast reads
    }
    let mut v: i64 = 0;
    for c in whole.iter().chain(frac.iter().chain(b"000".iter()).take(3)) {
        v = v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
    }
    Some(if neg { -v } else { v })
}

/// ns per value (NA where missing), or None where the Python path must decide (a value
/// out of range, or exact digits needed but not readable here). ``reparse``: use the exact
/// text when float64 cannot hold some fractional value's ns digits (timestamps).
pub fn to_ns(values: &[Option<Micros>], reparse: bool) -> Option<Vec<i64>> {
    let mut out = vec![NA; values.len()];
    let mut frac_min = f64::INFINITY;
    let mut frac_max_abs: f64 = 0.0;
    let mut any_frac = false;
    for (o, m) in out.iter_mut().zip(values) {
        let Some(m) = m else { continue };
        if !m.f.is_finite() || m.f.abs() >= LIMIT_US {
            return None;
        }
        if m.f == m.f.trunc() {
            *o = (m.f as i64) * 1000;
        } else {
            any_frac = true;
            frac_min = frac_min.min(m.f);
            frac_max_abs = frac_max_abs.max(m.f.abs());
        }
    }
    if !any_frac {
        return Some(out);
    }
    // subtracting an integer base first keeps the scaled remainder small enough for float64
    let base = frac_min.floor();
    for (o, m) in out.iter_mut().zip(values) {
        if let Some(m) = m {
            if m.f != m.f.trunc() {
                *o = (base as i64) * 1000 + ((m.f - base) * 1000.0).round_ties_even() as i64;
            }
        }
    }
    if reparse && frac_max_abs >= FLOAT_EXACT_US {
        for (o, m) in out.iter_mut().zip(values) {
            if let Some(m) = m {
                *o = m.exact?;
            }
        }
    }
    Some(out)
}
