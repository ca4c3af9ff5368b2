//! A strict, allocation-light JSON scanner over one piece's bytes.
//!
//! Every method either consumes one well-formed value of the expected type or returns
//! `Fail`; there is no error detail because the caller's answer to any failure is the same
//! (decode the piece with the Python path, which explains the problem).

use crate::time::Micros;
use std::borrow::Cow;

/// The input is not something this scanner is sure to read exactly as the Python path does.
#[derive(Debug)]
pub struct Fail;

/// Nesting beyond this is left to the Python path (which reports "nested too deeply").
const MAX_DEPTH: u32 = 256;

/// An ``int | float | str | None`` arg as written.
#[derive(Clone, Default)]
pub enum Loose<'a> {
    #[default]
    Absent,
    Null,
    Int(i64),
    Big, // an integer beyond int64
    Float(f64),
    Str(Cow<'a, str>),
}

impl Loose<'_> {
    /// Present and not null: the Python path takes this spelling over its alias.
    pub fn is_present(&self) -> bool {
        !matches!(self, Loose::Absent | Loose::Null)
    }

    /// The int64 value of a loosely typed integer (NA where it is not one).
    pub fn as_int(&self) -> Result<i64, Fail> {
        match self {
            Loose::Absent | Loose::Null => Ok(crate::NA),
            Loose::Int(v) => Ok(*v),
            Loose::Float(f) => Ok(
                if f.fract() == 0.0 && f.abs() < 9_223_372_036_854_775_808.0 {
                    *f as i64
                } else {
                    crate::NA
                },
            ),
            Loose::Str(s) => str_int(s),
            Loose::Big => Err(Fail),
        }
    }

    /// A flow id: ints as they are; strings are hashed by the Python path.
    pub fn flow_id(&self) -> Result<i64, Fail> {
        match self {
            Loose::Absent | Loose::Null => Ok(crate::NA),
            Loose::Int(v) => Ok(*v),
            _ => Err(Fail),
        }
    }

    /// The arg as text (a process group name); float spelling is Python's, so not here.
    pub fn as_text(&self) -> Result<Option<Cow<'_, str>>, Fail> {
        match self {
            Loose::Absent | Loose::Null => Ok(None),
            Loose::Int(v) => Ok(Some(Cow::Owned(v.to_string()))),
            Loose::Str(s) => Ok(Some(Cow::Borrowed(s))),
            _ => Err(Fail),
        }
    }
}

/// Python's ``int(text, 0)`` for the spellings whose outcome is certain: plain decimals and
/// 0x/0o/0b literals (out of int64 range: NA), and ASCII text that cannot start a number (NA).
fn str_int(s: &str) -> Result<i64, Fail> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let plain = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if plain {
        return Ok(s
            .parse::<i64>()
            .ok()
            .filter(|v| *v != i64::MIN)
            .unwrap_or(crate::NA));
    }
    // "0x1f", "0o17", "0b11" (ROCm traces write streams as "0x0"); no underscores or blanks
    let radix = match digits.get(..2) {
        Some("0x" | "0X") => 16,
        Some("0o" | "0O") => 8,
        Some("0b" | "0B") => 2,
        _ => 0,
    };
    let body = digits.get(2..).unwrap_or("");
    if radix > 0 && !body.is_empty() && body.len() <= 64 && body.chars().all(|c| c.is_digit(radix))
    {
        let value = i128::from_str_radix(body, radix).map_err(|_| Fail)?;
        let signed = if s.starts_with('-') { -value } else { value };
        let in_range = signed > i128::from(i64::MIN) && signed <= i128::from(i64::MAX);
        return Ok(if in_range { signed as i64 } else { crate::NA });
    }
    let first = s
        .trim_start_matches(|c: char| c.is_ascii_whitespace())
        .bytes()
        .next();
    match first {
        None if s.is_ascii() => Ok(crate::NA),
        // (a control character may be Python whitespace: left to it)
        Some(b) if s.is_ascii() && b > b' ' && !(b.is_ascii_digit() || b == b'+' || b == b'-') => {
            Ok(crate::NA)
        }
        _ => Err(Fail),
    }
}

pub struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    depth: u32,
}

impl<'a> Scanner<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Scanner { b, i: 0, depth: 0 }
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.i) {
            if !matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                break;
            }
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&mut self) -> Result<u8, Fail> {
        self.ws();
        self.b.get(self.i).copied().ok_or(Fail)
    }

    #[inline]
    fn expect(&mut self, c: u8) -> Result<(), Fail> {
        if self.peek()? != c {
            return Err(Fail);
        }
        self.i += 1;
        Ok(())
    }

    /// Only blanks remain.
    pub fn end(&mut self) -> Result<(), Fail> {
        self.ws();
        if self.i == self.b.len() {
            Ok(())
        } else {
            Err(Fail)
        }
    }

    /// ``[v, ...]``, calling ``each`` to consume every element.
    pub fn array(
        &mut self,
        mut each: impl FnMut(&mut Self) -> Result<(), Fail>,
    ) -> Result<(), Fail> {
        self.expect(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(());
        }
        loop {
            each(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Fail),
            }
        }
    }

    /// ``{"k": v, ...}``, calling ``each`` with every key to consume its value.
    pub fn object(
        &mut self,
        mut each: impl FnMut(&mut Self, Cow<'a, str>) -> Result<(), Fail>,
    ) -> Result<(), Fail> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            each(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(Fail),
            }
        }
    }

    /// ``null`` (consumed: true) or anything else (not consumed: false).
    pub fn null(&mut self) -> Result<bool, Fail> {
        if self.peek()? != b'n' {
            return Ok(false);
        }
        self.literal(b"null")?;
        Ok(true)
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), Fail> {
        if self.b.get(self.i..self.i + word.len()) != Some(word) {
            return Err(Fail);
        }
        self.i += word.len();
        Ok(())
    }

    pub fn string(&mut self) -> Result<Cow<'a, str>, Fail> {
        self.expect(b'"')?;
        let start = self.i;
        let mut high = 0u8; // any byte >= 0x80: the text needs a UTF-8 check
        self.plain_words();
        while let Some(&c) = self.b.get(self.i) {
            match c {
                b'"' => {
                    let bytes = &self.b[start..self.i];
                    let s = if high < 0x80 {
                        // SAFETY: every byte is ASCII, which is valid UTF-8
                        unsafe { std::str::from_utf8_unchecked(bytes) }
                    } else {
                        std::str::from_utf8(bytes).map_err(|_| Fail)?
                    };
                    self.i += 1;
                    return Ok(Cow::Borrowed(s));
                }
                b'\\' => return self.escaped(start).map(Cow::Owned),
                0..=0x1f => return Err(Fail),
                _ => {
                    high |= c;
                    self.i += 1;
                }
            }
        }
        Err(Fail)
    }

    /// Skip 8 bytes at a time while none is a quote, a backslash, a control byte or non-ASCII
    /// (the byte loop then handles the word that has one).
    #[inline]
    fn plain_words(&mut self) {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGHS: u64 = 0x8080_8080_8080_8080;
        let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
        while let Some(chunk) = self.b.get(self.i..self.i + 8) {
            let w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            let special = zero(w ^ (ONES * u64::from(b'"')))
                | zero(w ^ (ONES * u64::from(b'\\')))
                | (w.wrapping_sub(ONES * 0x20) & !w & HIGHS) // a byte below 0x20
                | (w & HIGHS);
            if special != 0 {
                return;
            }
            self.i += 8;
        }
    }

    /// The rest of a string that has escapes, from its first one.
    fn escaped(&mut self, start: usize) -> Result<String, Fail> {
        let mut out: Vec<u8> = self.b[start..self.i].to_vec();
        while let Some(&c) = self.b.get(self.i) {
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).map_err(|_| Fail),
                b'\\' => {
                    let e = *self.b.get(self.i).ok_or(Fail)?;
                    self.i += 1;
                    let simple = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => 0,
                        _ => return Err(Fail),
                    };
                    if e != b'u' {
                        out.push(simple);
                        continue;
                    }
                    let mut code = self.hex4()?;
                    if (0xD800..0xDC00).contains(&code) {
                        self.literal(b"\\u")?;
                        let low = self.hex4()?;
                        if !(0xDC00..0xE000).contains(&low) {
                            return Err(Fail);
                        }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    } else if (0xDC00..0xE000).contains(&code) {
                        return Err(Fail);
                    }
                    let ch = char::from_u32(code).ok_or(Fail)?;
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1f => return Err(Fail),
                _ => out.push(c),
            }
        }
        Err(Fail)
    }

    fn hex4(&mut self) -> Result<u32, Fail> {
        let digits = self.b.get(self.i..self.i + 4).ok_or(Fail)?;
        let text = std::str::from_utf8(digits).map_err(|_| Fail)?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Fail);
        }
        self.i += 4;
        u32::from_str_radix(text, 16).map_err(|_| Fail)
    }

    pub fn opt_string(&mut self) -> Result<Option<Cow<'a, str>>, Fail> {
        if self.null()? {
            return Ok(None);
        }
        self.string().map(Some)
    }

    /// A JSON number's text (strict grammar) and whether it is an integer literal.
    fn number(&mut self) -> Result<(&'a [u8], bool), Fail> {
        self.ws();
        let b = self.b;
        let start = self.i;
        let mut i = start;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            _ => return Err(Fail),
        }
        let mut int = true;
        if b.get(i) == Some(&b'.') {
            int = false;
            i += 1;
            let d = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == d {
                return Err(Fail);
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            int = false;
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let d = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == d {
                return Err(Fail);
            }
        }
        self.i = i;
        Ok((&b[start..i], int))
    }

    fn int_or_big(text: &[u8]) -> Loose<'a> {
        // the grammar is checked: the text is ASCII digits with an optional sign
        // SAFETY: `number` checked the grammar: ASCII digits with an optional sign
        match unsafe { std::str::from_utf8_unchecked(text) }
            .parse::<i64>()
            .ok()
        {
            Some(v) => Loose::Int(v),
            None => Loose::Big,
        }
    }

    fn float(text: &[u8]) -> Result<f64, Fail> {
        // SAFETY: `number` checked the grammar: ASCII only
        let f: f64 = unsafe { std::str::from_utf8_unchecked(text) }
            .parse()
            .map_err(|_| Fail)?;
        if f.is_finite() {
            Ok(f)
        } else {
            Err(Fail)
        }
    }

    /// ``int | float | str | None``.
    pub fn loose(&mut self) -> Result<Loose<'a>, Fail> {
        match self.peek()? {
            b'"' => Ok(Loose::Str(self.string()?)),
            b'n' => self.literal(b"null").map(|_| Loose::Null),
            b'-' | b'0'..=b'9' => {
                let (text, int) = self.number()?;
                if int {
                    Ok(Self::int_or_big(text))
                } else {
                    Ok(Loose::Float(Self::float(text)?))
                }
            }
            _ => Err(Fail),
        }
    }

    /// ``int | str | None`` (an event's flow id).
    pub fn id(&mut self) -> Result<Loose<'a>, Fail> {
        match self.loose()? {
            Loose::Float(_) => Err(Fail),
            other => Ok(other),
        }
    }

    /// ``int | str`` (pid and tid: 7 and "7" are one label, so ints are kept as text later).
    pub fn label(&mut self) -> Result<Loose<'a>, Fail> {
        match self.loose()? {
            v @ (Loose::Str(_) | Loose::Int(_)) => Ok(v),
            _ => Err(Fail),
        }
    }

    /// ``int | float | None`` microseconds.
    pub fn micros(&mut self) -> Result<Option<Micros>, Fail> {
        if self.null()? {
            return Ok(None);
        }
        let (text, int) = self.number()?;
        if let Some(m) = crate::time::plain_decimal(text) {
            return Ok(Some(m));
        }
        let f = if int {
            match Self::int_or_big(text) {
                Loose::Int(v) => v as f64,
                _ => return Err(Fail),
            }
        } else {
            Self::float(text)?
        };
        Ok(Some(Micros {
            f,
            exact: crate::time::exact_ns(text),
        }))
    }

    /// Any value's exact text.
    pub fn raw(&mut self) -> Result<&'a [u8], Fail> {
        self.ws();
        let start = self.i;
        self.skip()?;
        Ok(&self.b[start..self.i])
    }

    /// Consume any well-formed value.
    pub fn skip(&mut self) -> Result<(), Fail> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return Err(Fail);
                }
                if self.b[self.i] == b'{' {
                    self.object(|s, _| s.skip())?;
                } else {
                    self.array(|s| s.skip())?;
                }
                self.depth -= 1;
                Ok(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(|_| ()),
        }
    }
}
