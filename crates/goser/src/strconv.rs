//! The few pieces of Go's `strconv` package that decide bytes in the serializers' output.
//!
//! * Float formatting (`FormatFloat` with precision -1, i.e. the shortest decimal that reads back
//!   to the same value) in the `'e'`, `'f'` and `'g'` formats. Go picks the fewest digits that
//!   read back to the value and, among those, the digits closest to the exact binary value, an
//!   exact tie going to the even digit. Rust's shortest formatter (`{:e}`) agrees on the length
//!   but breaks exact ties upwards (f32 1324404.25: Go `1324404.2`, Rust `1324404.3`), so the
//!   digits are re-derived with Rust's exact formatter (correctly rounded, ties to even) at that
//!   length and kept when they read back. The layouts are ported from Go's `fmtE`/`fmtF`.
//! * Which strings `ParseInt`/`ParseUint` (base 0 or 2) and `ParseFloat` accept, because yaml.v2
//!   quotes every string that would read back as a number. Only success matters there, never the
//!   value, except that `ParseFloat` fails on overflow to ±Inf.

/// The number of mantissa digits in Rust's exponential form (`1.2345e-7` has 5).
fn significant_digits(exp_form: &str) -> usize {
    exp_form.split('e').next().unwrap_or_default().bytes().filter(u8::is_ascii_digit).count()
}

/// A finite float's shortest decimal form: `0.d1d2d3… × 10^dp`, like Go's `decimalSlice`.
struct Shortest {
    neg: bool,
    /// The significant digits, ASCII, without leading or trailing zeros; empty for zero.
    digits: Vec<u8>,
    /// Position of the decimal point relative to the start of `digits`.
    dp: i32,
}

impl Shortest {
    /// Splits Rust's shortest exponential form (`-1.2345e-7`) into digits and point position.
    fn from_exp_form(neg: bool, exp_form: &str) -> Self {
        let (mantissa, exponent) = exp_form.split_once('e').unwrap_or((exp_form, "0"));
        let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
        let exponent: i32 = exponent.parse().unwrap_or(0);
        if digits.iter().all(|&d| d == b'0') {
            // Go represents zero with no digits at all (nd == 0, dp == 0).
            return Shortest { neg, digits: Vec::new(), dp: 0 };
        }
        Shortest { neg, digits, dp: exponent + 1 }
    }

    fn of_f64(value: f64) -> Self {
        let abs = value.abs();
        let shortest = format!("{abs:e}");
        let exact = format!("{abs:.*e}", significant_digits(&shortest).saturating_sub(1));
        let digits = if exact.parse::<f64>() == Ok(abs) { exact } else { shortest };
        Self::from_exp_form(value.is_sign_negative(), &digits)
    }

    fn of_f32(value: f32) -> Self {
        let abs = value.abs();
        let shortest = format!("{abs:e}");
        let exact = format!("{abs:.*e}", significant_digits(&shortest).saturating_sub(1));
        let digits = if exact.parse::<f32>() == Ok(abs) { exact } else { shortest };
        Self::from_exp_form(value.is_sign_negative(), &digits)
    }

    fn nd(&self) -> i32 {
        // A float's shortest form has at most 17 digits, so this cannot truncate.
        self.digits.len() as i32
    }

    /// Go's `fmtE` with the shortest precision (`nd - 1` digits after the point).
    fn fmt_e(&self, out: &mut String) {
        if self.neg {
            out.push('-');
        }
        out.push(self.digits.first().map_or('0', |&d| char::from(d)));
        if self.digits.len() > 1 {
            out.push('.');
            self.digits[1..].iter().for_each(|&d| out.push(char::from(d)));
        }
        out.push('e');
        // Go special-cases zero to exponent 0 (its dp would say -1).
        let exp = if self.digits.is_empty() { 0 } else { self.dp - 1 };
        out.push(if exp < 0 { '-' } else { '+' });
        let exp = exp.unsigned_abs();
        // At least two exponent digits: 1e+06, 1e-07, 1e+100.
        if exp < 10 {
            out.push('0');
        }
        out.push_str(&exp.to_string());
    }

    /// Go's `fmtF` with the shortest precision (`max(nd - dp, 0)` digits after the point).
    fn fmt_f(&self, out: &mut String) {
        if self.neg {
            out.push('-');
        }
        let nd = self.nd();
        let digit_at =
            |i: i32| -> char { if (0..nd).contains(&i) { char::from(self.digits[i as usize]) } else { '0' } };
        if self.dp > 0 {
            (0..self.dp).for_each(|i| out.push(digit_at(i)));
        } else {
            out.push('0');
        }
        let prec = (nd - self.dp).max(0);
        if prec > 0 {
            out.push('.');
            (1..=prec).for_each(|i| out.push(digit_at(self.dp + i - 1)));
        }
    }

    /// Go's `'g'` format with the shortest precision: `%e` when the exponent is < -4 or >= 6
    /// ("if precision was the shortest possible, use precision 6 for this decision").
    fn fmt_g(&self, out: &mut String) {
        let exp = self.dp - 1;
        if !(-4..6).contains(&exp) {
            self.fmt_e(out);
        } else {
            self.fmt_f(out);
        }
    }
}

/// Go's `strconv.FormatFloat(value, 'g', -1, 64)` for a finite value.
pub(crate) fn format_float_g(value: f64) -> String {
    let mut out = String::new();
    Shortest::of_f64(value).fmt_g(&mut out);
    out
}

/// How Go's encoding/json (and clarketm/json, which has the same code) writes a finite float:
/// "like ES6": `'f'` format unless the magnitude is below 1e-6 or at least 1e21, then `'e'` with
/// a single-digit negative exponent unpadded (`1e-7`, but `1e+21`).
fn format_json_float(shortest: Shortest, use_e: bool) -> String {
    let mut out = String::new();
    if use_e {
        shortest.fmt_e(&mut out);
        let b = out.as_bytes();
        let n = b.len();
        if n >= 4 && b[n - 4] == b'e' && b[n - 3] == b'-' && b[n - 2] == b'0' {
            out.remove(n - 2);
        }
    } else {
        shortest.fmt_f(&mut out);
    }
    out
}

/// Go's encoding/json text for a finite `float64`.
pub(crate) fn format_json_f64(value: f64) -> String {
    let abs = value.abs();
    let use_e = abs != 0.0 && !(1e-6..1e21).contains(&abs);
    format_json_float(Shortest::of_f64(value), use_e)
}

/// Go's encoding/json text for a finite `float32` (cut-offs compared in float32, digits shortest
/// for float32).
pub(crate) fn format_json_f32(value: f32) -> String {
    let abs = value.abs();
    let use_e = abs != 0.0 && !(1e-6f32..1e21f32).contains(&abs);
    format_json_float(Shortest::of_f32(value), use_e)
}

/// Go's `strconv.ParseUint(s, base, 64)` when it succeeds, for base 0 (prefix-detected,
/// underscores allowed as digit separators) or an explicit base 2..=36.
pub(crate) fn parse_uint(s0: &str, base: u32) -> Option<u64> {
    if s0.is_empty() {
        return None;
    }
    let base0 = base == 0;
    let mut s = s0.as_bytes();
    let mut base = u64::from(base);
    if base0 {
        base = 10;
        if s[0] == b'0' {
            let prefix = s.get(1).map(u8::to_ascii_lowercase);
            match prefix {
                Some(b'b') if s.len() >= 3 => (base, s) = (2, &s[2..]),
                Some(b'o') if s.len() >= 3 => (base, s) = (8, &s[2..]),
                Some(b'x') if s.len() >= 3 => (base, s) = (16, &s[2..]),
                // A leading 0 alone means octal ("0" itself leaves nothing, which is 0).
                _ => (base, s) = (8, &s[1..]),
            }
        }
    }
    let mut underscores = false;
    let mut n: u64 = 0;
    for &c in s {
        let d = match c {
            b'_' if base0 => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => u64::from(c - b'0'),
            _ if c.is_ascii_alphabetic() => u64::from(c.to_ascii_lowercase() - b'a') + 10,
            _ => return None,
        };
        if d >= base {
            return None;
        }
        n = n.checked_mul(base)?.checked_add(d)?;
    }
    if underscores && !underscore_ok(s0) {
        return None;
    }
    Some(n)
}

/// Go's `strconv.ParseInt(s, base, 64)` when it succeeds (optional sign, then as `ParseUint`,
/// then the int64 range).
pub(crate) fn parse_int(s: &str, base: u32) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        Some(_) => (false, s),
        None => return None,
    };
    let un = parse_uint(rest, base)?;
    if neg { 0i64.checked_sub_unsigned(un) } else { i64::try_from(un).ok() }
}

/// Go's `underscoreOK`: underscores only between digits, or between a base prefix and a digit.
fn underscore_ok(s: &str) -> bool {
    let mut s = s.as_bytes();
    if let Some(b'+' | b'-') = s.first() {
        s = &s[1..];
    }
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if s.len() >= 2 && s[0] == b'0' && matches!(s[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = s[1].eq_ignore_ascii_case(&b'x');
    }
    for &c in &s[i..] {
        if c.is_ascii_digit() || hex && matches!(c.to_ascii_lowercase(), b'a'..=b'f') {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

/// Go's `strconv.ParseFloat(s, 64)` succeeds, for the decimal syntax (optional sign, digits with
/// `_` separators and at most one `.`, optional exponent). yaml.v2 only calls it on strings that
/// start with `.` or match its float regex, so Go's other syntaxes (`inf`, `nan`, hex floats)
/// never reach it.
///
/// Go fails on syntax and on overflow to ±Inf (underflow to zero is fine). Like Go, the exponent
/// stops accumulating once it reaches 10000; the value is then the correctly rounded decimal,
/// which Rust's parser computes too.
pub(crate) fn parse_float_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let mut normalized = String::new();
    if let Some(&sign @ (b'+' | b'-')) = b.first() {
        normalized.push(char::from(sign));
        i += 1;
    }
    let mut underscores = false;
    let mut saw_dot = false;
    let mut saw_digits = false;
    while let Some(&c) = b.get(i) {
        match c {
            b'_' => underscores = true,
            b'.' if saw_dot => break,
            b'.' => {
                saw_dot = true;
                normalized.push('.');
            }
            b'0'..=b'9' => {
                saw_digits = true;
                normalized.push(char::from(c));
            }
            _ => break,
        }
        i += 1;
    }
    if !saw_digits {
        return false;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        let negative = match b.get(i) {
            Some(b'+') => {
                i += 1;
                false
            }
            Some(b'-') => {
                i += 1;
                true
            }
            _ => false,
        };
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return false;
        }
        let mut e: u32 = 0;
        while let Some(&c) = b.get(i) {
            match c {
                b'_' => underscores = true,
                b'0'..=b'9' if e < 10000 => e = e * 10 + u32::from(c - b'0'),
                b'0'..=b'9' => {}
                _ => break,
            }
            i += 1;
        }
        normalized.push_str(&format!("e{}{e}", if negative { "-" } else { "" }));
    }
    if i != b.len() || underscores && !underscore_ok(s) {
        return false;
    }
    normalized.parse::<f64>().is_ok_and(f64::is_finite)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected strings from Go 1.26 strconv (FormatFloat/ParseInt/ParseUint/ParseFloat); the
    // broad random cross-check against Go lives in tests/it/go_json.rs.
    #[test]
    fn float_g() {
        for (v, want) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1000.0, "1000"),
            (1e6, "1e+06"),
            (123456.7, "123456.7"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e21, "1e+21"),
            (1e100, "1e+100"),
            (-2.5, "-2.5"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
        ] {
            assert_eq!(format_float_g(v), want, "{v:e}");
        }
    }

    #[test]
    fn json_floats() {
        for (v, want) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (3.0, "3"),
            (1e20, "100000000000000000000"),
            (1e21, "1e+21"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (1.5e-10, "1.5e-10"),
            (-1e-7, "-1e-7"),
            (123.456, "123.456"),
        ] {
            assert_eq!(format_json_f64(v), want, "{v:e}");
        }
        assert_eq!(format_json_f32(0.1), "0.1");
        // Exact ties between two shortest candidates go to the even digit, as in Go.
        assert_eq!(format_json_f32(f32::from_bits(0xc9a1_aba2)), "-1324404.2"); // -1324404.25
        assert_eq!(format_json_f64(f64::from_bits(0x4310_0000_0000_0001)), "1125899906842624.2"); // …624.25
        assert_eq!(format_json_f64(f64::from_bits(0x4310_0000_0000_0003)), "1125899906842624.8"); // …624.75
        assert_eq!(format_json_f32(1e21), "1e+21");
        assert_eq!(format_json_f32(1e-7), "1e-7");
    }

    #[test]
    fn ints() {
        for s in ["0", "017", "0x1F", "0X1f", "0o17", "0b101", "1_000", "0x_1F", "+5", "-5"] {
            assert!(parse_int(s, 0).is_some(), "{s}");
        }
        for s in ["", "08", "0x", "0b", "0o", "_1", "1_", "1__0", "--1", "+", "0x1G", "1.0"] {
            assert!(parse_int(s, 0).is_none(), "{s}");
        }
        assert!(parse_int("9223372036854775807", 0).is_some());
        assert!(parse_int("9223372036854775808", 0).is_none());
        assert!(parse_int("-9223372036854775808", 0).is_some());
        assert!(parse_int("-9223372036854775809", 0).is_none());
        assert!(parse_uint("18446744073709551615", 0).is_some());
        assert!(parse_uint("18446744073709551616", 0).is_none());
        assert!(parse_uint("+1", 0).is_none());
        assert!(parse_int("-101", 2).is_some());
        assert!(parse_int("102", 2).is_none());
    }

    #[test]
    fn floats() {
        for s in [".5", ".5e3", "1.", "1e5", "-1.5E-3", ".5_5", "1_0.5", "1e1_0", "1e-400"] {
            assert!(parse_float_ok(s), "{s}");
        }
        for s in [".", ".e5", "1e", "1e+", "1e_5", "._5", ".5_", "1..2", "1e400", ".5e99999999"] {
            assert!(!parse_float_ok(s), "{s}");
        }
    }
}
