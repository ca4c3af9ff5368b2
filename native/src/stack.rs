//! The call-stack walk of one trace's CPU slices: parent and depth of each, in one pass.
//!
//! The same answer as ctda's vectorised closed form (``ctda/ingest/nesting.py``): slices come
//! ordered by lane, start, longer first; a slice's parent is the latest earlier slice of its
//! lane that has not ended when it starts. A stack holds exactly the candidates: a slice
//! popped because it ended by some start has ended by every later one (starts only grow
//! within a lane), so after popping what has ended, the top is that latest open slice.

/// ``up`` (position of the parent, -1 for none) and ``depth`` (ancestors) per position.
pub fn walk(start: &[i64], end: &[i64], lane: &[i32]) -> (Vec<i32>, Vec<i32>) {
    let n = start.len();
    let mut up = vec![-1i32; n];
    let mut depth = vec![0i32; n];
    let mut stack: Vec<usize> = Vec::new();
    for k in 0..n {
        if k > 0 && lane[k] != lane[k - 1] {
            stack.clear();
        }
        while let Some(&j) = stack.last() {
            if end[j] > start[k] {
                break;
            }
            stack.pop();
        }
        if let Some(&j) = stack.last() {
            up[k] = j as i32;
            depth[k] = depth[j] + 1;
        }
        stack.push(k);
    }
    (up, depth)
}

/// Native-endian values of ``T`` from a byte string (its length a multiple of ``W``).
pub fn values<T, const W: usize>(raw: &[u8], from: fn([u8; W]) -> T) -> Vec<T> {
    raw.chunks_exact(W)
        .map(|c| from(c.try_into().unwrap_or([0; W])))
        .collect()
}
