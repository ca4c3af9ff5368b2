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

/// Powers of ten that float64 holds exactly.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];
/// Mantissas below this are whole numbers float64 holds exactly.
const EXACT_MANTISSA: u64 = 1 << 53;

/// A JSON number without exponent whose digits, read as one integer, stay below 2^53 (16
/// digits: epoch microseconds with three decimals have 16), read in one pass: its float64
/// and its exact ns (as `exact_ns`). The float is that integer divided by a power of ten;
/// both are exact in float64, so the one IEEE division rounds the true decimal value once,
/// to nearest: the float a correctly rounded parse gives (Clinger's fast path). None for
/// anything else (the caller parses it the general way).
pub fn plain_decimal(text: &[u8]) -> Option<Micros> {
    let (neg, body) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if body.len() > 19 {
        return None;
    }
    let mut mantissa: u64 = 0;
    let mut whole: u64 = 0;
    let mut frac3: u64 = 0; // the first three decimals, as ns
    let mut decimals: i32 = -1; // -1: no point yet
    for &c in body {
        if c == b'.' {
            whole = mantissa;
            decimals = 0;
            continue;
        }
        let d = u64::from(c.wrapping_sub(b'0'));
        if d > 9 {
            return None; // an exponent
        }
        mantissa = mantissa * 10 + d;
        if decimals >= 0 {
            decimals += 1;
            if decimals <= 3 {
                frac3 = frac3 * 10 + d;
            }
        }
    }
    if decimals < 0 {
        whole = mantissa;
        decimals = 0;
    }
    if mantissa >= EXACT_MANTISSA || decimals > 22 {
        return None;
    }
    let f = mantissa as f64 / POW10[decimals as usize];
    for _ in decimals.min(3)..3 {
        frac3 *= 10;
    }
    let exact = i64::try_from(whole)
        .ok()
        .and_then(|w| w.checked_mul(1000))
        .and_then(|w| w.checked_add(frac3 as i64));
    Some(Micros {
        f: if neg { -f } else { f },
        exact: exact.map(|v| if neg { -v } else { v }),
    })
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
