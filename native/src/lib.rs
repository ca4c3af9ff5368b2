//! One piece of a Kineto trace's event array (`[ev, ..., ev]`) -> per-event column buffers.
//!
//! This is the native twin of ctda's msgspec decode plus column extraction. It is strict
//! on purpose: it accepts only input whose meaning is certain (valid JSON, the field types
//! the typed Python decoder accepts, numbers it converts exactly as the Python path does).
//! Anything else (a syntax error, a wrong type, a timestamp out of range, a string
//! integer in an unusual notation, ...) makes it return `None`, and the caller decodes the
//! piece with the Python path, which then reports the problem in its own words. So the
//! two paths can never disagree on an error message, and agree on every accepted value.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

mod kernels;
mod kernels_path;
mod kernels_rules;
mod kernels_whatif;
mod scan;
mod stack;
mod time;

use scan::{Fail, Loose, Scanner};

/// Integer args in output order: (column, primary key, alias read when the primary is absent).
pub const INT_COLUMNS: [(&str, &str, &str); 17] = [
    ("correlation", "correlation", ""),
    ("external_id", "External id", "external id"),
    ("ev_idx", "Ev Idx", "Profiler Event Index"),
    ("device", "device", "Device Id"),
    ("stream", "stream", "stream_id"),
    ("wait_on_stream", "wait_on_stream", ""),
    (
        "wait_on_event_corr",
        "wait_on_cuda_event_record_corr_id",
        "",
    ),
    ("python_id", "Python id", ""),
    ("python_parent_id", "Python parent id", ""),
    ("fwd_thread_id", "Fwd thread id", ""),
    ("sequence_nr", "Sequence number", ""),
    ("nbytes", "bytes", ""),
    ("coll_seq", "Seq", ""),
    ("in_msg_nelems", "In msg nelems", ""),
    ("mem_bytes", "Bytes", ""),
    ("total_allocated", "Total Allocated", ""),
    ("total_reserved", "Total Reserved", ""),
];
/// String columns in output order (dictionary codes, -1 where the event has no value).
pub const STR_COLUMNS: [&str; 9] = [
    "ph",
    "name",
    "cat",
    "pid",
    "tid",
    "sync_kind",
    "meta_name",
    "pg_name",
    "shapes",
];
const NA: i64 = i64::MIN;

/// A multiplicative word hash (as in rustc's FxHash): no dependency, and much faster than
/// SipHash on these short, trusted-length keys.
#[derive(Default)]
struct WordHash(u64);
impl Hasher for WordHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // eight bytes a step (names are often tens of bytes long)
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let v = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
            h = (h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        for b in words.remainder() {
            h = (h.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
        self.0 = h;
    }
}

/// Dictionary encoding in first-occurrence order (what pyarrow's dictionary_encode gives).
struct Dict {
    code: HashMap<Box<str>, i32, BuildHasherDefault<WordHash>>,
    values: Vec<Box<str>>,
    codes: Vec<i32>,
    last: i32, // the last code pushed (-1: none yet)
}
impl Default for Dict {
    fn default() -> Self {
        Dict {
            code: HashMap::default(),
            values: Vec::new(),
            codes: Vec::new(),
            last: -1,
        }
    }
}
impl Dict {
    fn with_capacity(n: usize) -> Self {
        Dict {
            codes: Vec::with_capacity(n),
            ..Dict::default()
        }
    }

    fn push(&mut self, value: Option<&str>) {
        let code = match value {
            None => -1,
            // neighbours often repeat (same thread, phase, category): skip the hash
            Some(v) if self.last >= 0 && *self.values[self.last as usize] == *v => self.last,
            Some(v) => match self.code.get(v) {
                Some(c) => *c,
                None => {
                    let c = self.values.len() as i32;
                    self.code.insert(v.into(), c);
                    self.values.push(v.into());
                    c
                }
            },
        };
        if code >= 0 {
            self.last = code;
        }
        self.codes.push(code);
    }
}

/// The primary spelling and the alias of every INT_COLUMNS entry, as read.
/// Each slot: whether the key was read (``seen``), whether it is present and not null
/// (``present``: the Python path then takes this spelling over its alias), and its int64
/// value (NA when it is not an integer; only meaningful once seen). Converting at once can
/// only decline more than needed (an alias that is never used), never read a value
/// differently. Bit sets rather than a flag per slot: clearing them for every event costs
/// two words, not the whole array.
// one bit per slot in a u64
const _: () = assert!(2 * INT_COLUMNS.len() <= 64);

struct Ints {
    seen: u64,
    present: u64,
    value: [i64; 2 * INT_COLUMNS.len()],
}
impl Default for Ints {
    fn default() -> Self {
        Ints {
            seen: 0,
            present: 0,
            value: [NA; 2 * INT_COLUMNS.len()],
        }
    }
}
impl Ints {
    fn clear(&mut self) {
        self.seen = 0;
        self.present = 0;
    }

    fn set(&mut self, slot: usize, present: bool, value: i64) {
        self.seen |= 1 << slot;
        self.present = (self.present & !(1 << slot)) | (u64::from(present) << slot);
        self.value[slot] = value;
    }

    /// The column's value: the primary spelling where present, else the alias as read.
    fn column(&self, i: usize) -> i64 {
        let (primary, alias) = (2 * i, 2 * i + 1);
        if self.present & (1 << primary) != 0 {
            self.value[primary]
        } else if self.seen & (1 << alias) != 0 {
            self.value[alias]
        } else {
            NA
        }
    }
}

/// One event's fields as read, before conversion to column values.
#[derive(Default)]
struct Event<'a> {
    ph: Option<std::borrow::Cow<'a, str>>,
    name: Option<std::borrow::Cow<'a, str>>,
    cat: Option<std::borrow::Cow<'a, str>>,
    pid: Loose<'a>,
    tid: Loose<'a>,
    ts: Option<time::Micros>,
    dur: Option<time::Micros>,
    id: Loose<'a>,
    bp_e: bool,
    ints: Ints,
    sync_kind: Option<std::borrow::Cow<'a, str>>,
    meta_name: Option<std::borrow::Cow<'a, str>>,
    labels: Option<std::borrow::Cow<'a, str>>,
    pg_name: Loose<'a>,
    dims: Option<&'a [u8]>,
    types: Option<&'a [u8]>,
    concrete: Option<&'a [u8]>,
}

impl Event<'_> {
    /// As new, without rewriting the int args' values (their bit sets say none was read).
    /// Every field is named, so a new one cannot be left out.
    fn reset(&mut self) {
        let Event {
            ph,
            name,
            cat,
            pid,
            tid,
            ts,
            dur,
            id,
            bp_e,
            ints,
            sync_kind,
            meta_name,
            labels,
            pg_name,
            dims,
            types,
            concrete,
        } = self;
        (*ph, *name, *cat, *sync_kind, *meta_name, *labels) = (None, None, None, None, None, None);
        (*pid, *tid, *id, *pg_name) = (Loose::Absent, Loose::Absent, Loose::Absent, Loose::Absent);
        (*ts, *dur, *bp_e) = (None, None, false);
        (*dims, *types, *concrete) = (None, None, None);
        ints.clear();
    }
}

struct Columns {
    n: usize,
    strs: Vec<Dict>,
    ts: Vec<Option<time::Micros>>,
    dur: Vec<Option<time::Micros>>,
    flow_id: Vec<i64>,
    bp_e: Vec<i64>,
    ints: Vec<Vec<i64>>,
}

/// Slot of an integer arg key in ``Event::ints`` (2 * column, + 1 for the alias).
fn int_key(key: &str) -> Option<usize> {
    Some(match key {
        "correlation" => 0,
        "External id" => 2,
        "external id" => 3,
        "Ev Idx" => 4,
        "Profiler Event Index" => 5,
        "device" => 6,
        "Device Id" => 7,
        "stream" => 8,
        "stream_id" => 9,
        "wait_on_stream" => 10,
        "wait_on_cuda_event_record_corr_id" => 12,
        "Python id" => 14,
        "Python parent id" => 16,
        "Fwd thread id" => 18,
        "Sequence number" => 20,
        "bytes" => 22,
        "Seq" => 24,
        "In msg nelems" => 26,
        "Bytes" => 28,
        "Total Allocated" => 30,
        "Total Reserved" => 32,
        _ => return None,
    })
}

type ItoaBuf = [u8; 24];
fn itoa_buf() -> ItoaBuf {
    [0; 24]
}

/// A pid/tid label: a string as it is, an int in decimal (missing: "", the typed default).
fn label_text<'b>(v: &'b Loose, buf: &'b mut ItoaBuf) -> &'b str {
    match v {
        Loose::Str(s) => s,
        Loose::Int(n) => {
            // decimal digits from the end of the buffer (no formatting machinery per event)
            let mut at = buf.len();
            let mut m = n.unsigned_abs();
            loop {
                at -= 1;
                buf[at] = b'0' + (m % 10) as u8;
                m /= 10;
                if m == 0 {
                    break;
                }
            }
            if *n < 0 {
                at -= 1;
                buf[at] = b'-';
            }
            std::str::from_utf8(&buf[at..]).unwrap_or("")
        }
        _ => "",
    }
}

fn read_args<'a>(s: &mut Scanner<'a>, ev: &mut Event<'a>) -> Result<(), Fail> {
    if s.null()? {
        return Ok(());
    }
    s.object(|s, key| {
        if let Some(slot) = int_key(&key) {
            let v = s.loose()?;
            ev.ints.set(slot, v.is_present(), v.as_int()?);
            return Ok(());
        }
        match &*key {
            "cuda_sync_kind" => ev.sync_kind = s.opt_string()?,
            "name" => ev.meta_name = s.opt_string()?,
            "labels" => ev.labels = s.opt_string()?,
            "Process Group Name" => ev.pg_name = s.loose()?,
            "Input Dims" => ev.dims = Some(s.raw()?),
            "Input type" => ev.types = Some(s.raw()?),
            "Concrete Inputs" => ev.concrete = Some(s.raw()?),
            _ => s.skip()?,
        }
        Ok(())
    })
}

/// Read one event into ``ev`` (reset first: the same buffer serves every event of a piece,
/// which saves building and moving a large value per event).
fn read_event<'a>(s: &mut Scanner<'a>, ev: &mut Event<'a>) -> Result<(), Fail> {
    ev.reset();
    s.object(|s, key| {
        match &*key {
            "ph" => ev.ph = Some(s.string()?),
            "name" => ev.name = Some(s.string()?),
            "cat" => ev.cat = Some(s.string()?),
            "ts" => ev.ts = s.micros()?,
            "dur" => ev.dur = s.micros()?,
            "pid" => ev.pid = s.label()?,
            "tid" => ev.tid = s.label()?,
            "id" => ev.id = s.id()?,
            "bp" => ev.bp_e = s.opt_string()?.is_some_and(|v| v == "e"),
            "args" => {
                // a repeated key replaces the whole struct, as in the typed decoder
                ev.ints.clear();
                ev.sync_kind = None;
                ev.meta_name = None;
                ev.labels = None;
                ev.pg_name = Loose::Absent;
                ev.dims = None;
                ev.types = None;
                ev.concrete = None;
                read_args(s, ev)?;
            }
            _ => s.skip()?,
        }
        Ok(())
    })
}

fn shapes(ev: &Event) -> Option<String> {
    let dims = ev.dims?;
    let part = |r: Option<&[u8]>| match r {
        Some(t) if !t.is_empty() => String::from_utf8_lossy(t).into_owned(),
        _ => "[]".to_string(),
    };
    Some(format!(
        "[{},{},{}]",
        String::from_utf8_lossy(dims),
        part(ev.types),
        part(ev.concrete)
    ))
}

fn add_event(cols: &mut Columns, ev: &Event) -> Result<(), Fail> {
    let ph = ev.ph.as_deref().unwrap_or("");
    let is_flow = matches!(ph, "s" | "t" | "f");
    cols.flow_id
        .push(if is_flow { ev.id.flow_id()? } else { NA });
    cols.bp_e.push(i64::from(ev.bp_e));
    cols.strs[0].push(Some(ph));
    cols.strs[1].push(Some(ev.name.as_deref().unwrap_or("")));
    cols.strs[2].push(Some(ev.cat.as_deref().unwrap_or("")));
    let mut buf = itoa_buf();
    cols.strs[3].push(Some(label_text(&ev.pid, &mut buf)));
    let mut buf = itoa_buf();
    cols.strs[4].push(Some(label_text(&ev.tid, &mut buf)));
    cols.strs[5].push(ev.sync_kind.as_deref());
    cols.strs[6].push(ev.meta_name.as_deref().or(ev.labels.as_deref()));
    let pg = ev.pg_name.as_text()?;
    cols.strs[7].push(pg.as_deref());
    cols.strs[8].push(shapes(ev).as_deref());
    cols.ts.push(ev.ts);
    cols.dur.push(ev.dur);
    for (i, out) in cols.ints.iter_mut().enumerate() {
        out.push(ev.ints.column(i));
    }
    cols.n += 1;
    Ok(())
}

fn read_piece(text: &[u8]) -> Result<Columns, Fail> {
    let guess = text.len() / 160 + 16; // events are 200-300 bytes of JSON in real traces
    let mut cols = Columns {
        n: 0,
        strs: (0..STR_COLUMNS.len())
            .map(|_| Dict::with_capacity(guess))
            .collect(),
        ts: Vec::with_capacity(guess),
        dur: Vec::with_capacity(guess),
        flow_id: Vec::with_capacity(guess),
        bp_e: Vec::with_capacity(guess),
        ints: (0..INT_COLUMNS.len())
            .map(|_| Vec::with_capacity(guess))
            .collect(),
    };
    let mut s = Scanner::new(text);
    let mut ev = Event::default();
    s.array(|s| {
        read_event(s, &mut ev)?;
        add_event(&mut cols, &ev)
    })?;
    s.end()?;
    if cols.n == 0 {
        return Err(Fail);
    }
    Ok(cols)
}

fn i64_bytes<'py>(py: Python<'py>, values: &[i64]) -> Bound<'py, PyBytes> {
    // SAFETY: any i64 slice is a valid byte slice of 8x its length (native endianness)
    let raw = unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    };
    PyBytes::new(py, raw)
}

/// Columns of one piece, or None when the Python decoder must handle it.
///
/// Returns ``(n, ts_ns, dur_ns, flow_id, flow_enclosing, ints, strs)``: int64 buffers
/// (``ints`` in :data:`INT_COLUMNS` order), and per string column ``(codes, values)``
/// with int32 codes (-1: no value) into values in first-occurrence order.
#[pyfunction]
fn piece_columns<'py>(py: Python<'py>, text: &[u8]) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let read = py.allow_threads(|| {
        let cols = read_piece(text).ok()?;
        let ts = time::to_ns(&cols.ts, true)?;
        let dur = time::to_ns(&cols.dur, false)?;
        Some((cols, ts, dur))
    });
    let Some((cols, ts, dur)) = read else {
        return Ok(None);
    };
    let ints = PyList::empty(py);
    for col in &cols.ints {
        ints.append(i64_bytes(py, col))?;
    }
    let strs = PyList::empty(py);
    for d in &cols.strs {
        // SAFETY: as in i64_bytes
        let raw = unsafe {
            std::slice::from_raw_parts(
                d.codes.as_ptr().cast::<u8>(),
                std::mem::size_of_val(&d.codes[..]),
            )
        };
        let values = PyList::new(py, d.values.iter().map(|v| PyString::new(py, v)))?;
        strs.append((PyBytes::new(py, raw), values))?;
    }
    let out = (
        cols.n,
        i64_bytes(py, &ts),
        i64_bytes(py, &dur),
        i64_bytes(py, &cols.flow_id),
        i64_bytes(py, &cols.bp_e),
        ints,
        strs,
    );
    Ok(Some(out.into_pyobject(py)?))
}

fn i32_bytes<'py>(py: Python<'py>, values: &[i32]) -> Bound<'py, PyBytes> {
    // SAFETY: as in i64_bytes
    let raw = unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    };
    PyBytes::new(py, raw)
}

/// The call-stack walk over CPU slices in walk order (by lane, start, longer first).
///
/// Takes ``start`` and ``end`` (int64) and ``lane`` (int32) as native-endian byte strings;
/// returns ``(up, depth)`` as int32 byte strings: per position its parent's position (-1:
/// none) and its number of ancestors.
#[pyfunction]
fn stack_walk<'py>(
    py: Python<'py>,
    start: &[u8],
    end: &[u8],
    lane: &[u8],
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let n = start.len() / 8;
    if start.len() != 8 * n || end.len() != 8 * n || lane.len() != 4 * n {
        return Err(PyValueError::new_err(
            "stack_walk: start, end (int64) and lane (int32) must have one value per slice",
        ));
    }
    let (up, depth) = py.allow_threads(|| {
        let start = stack::values(start, i64::from_ne_bytes);
        let end = stack::values(end, i64::from_ne_bytes);
        let lane = stack::values(lane, i32::from_ne_bytes);
        stack::walk(&start, &end, &lane)
    });
    Ok((i32_bytes(py, &up), i32_bytes(py, &depth)))
}

#[pymodule]
fn ctda_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(piece_columns, m)?)?;
    m.add_function(wrap_pyfunction!(stack_walk, m)?)?;
    kernels::register(m)?;
    kernels_path::register(m)?;
    kernels_rules::register(m)?;
    kernels_whatif::register(m)?;
    // ctda/kernels.py uses these kernels only when this matches its own: a build whose
    // kernels mean something else must not be mistaken for the current one
    m.add("KERNELS_VERSION", 1)?;
    m.add(
        "INT_COLUMNS",
        INT_COLUMNS.iter().map(|c| c.0).collect::<Vec<_>>(),
    )?;
    m.add("STR_COLUMNS", STR_COLUMNS.to_vec())?;
    Ok(())
}
