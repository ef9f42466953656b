//! gopkg.in/yaml.v2 v2.4.0 `resolve.go` (which plain scalars read back as something other than a
//! string), `encode.go`'s `isBase60Float`, and `sorter.go` (the order of map keys).

use std::cmp::Ordering;
use std::sync::LazyLock;

use regex::Regex;

use crate::strconv::{parse_float_ok, parse_int, parse_uint};
use crate::unicode_tables;

/// Plain scalars `resolve()` looks up before anything else (`resolveMapList`), and what they
/// resolve to. The list also has `<<` (merge), but `<` has no entry in the hint table, so
/// `resolve()` never reaches the lookup for it: `<<` stays a string.
const RESOLVE_MAP: &[(&[&str], Resolved)] = &[
    (&["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], Resolved::Bool(true)),
    (&["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], Resolved::Bool(false)),
    (&["", "~", "null", "Null", "NULL"], Resolved::Null),
    (&[".nan", ".NaN", ".NAN"], Resolved::Float(f64::NAN)),
    (&[".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], Resolved::Float(f64::INFINITY)),
    (&["-.inf", "-.Inf", "-.INF"], Resolved::Float(f64::NEG_INFINITY)),
];

/// `yamlStyleFloat` in resolve.go.
static YAML_STYLE_FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
        .unwrap_or_else(|e| unreachable!("constant regex: {e}"))
});

/// `base60float` in encode.go.
static BASE60_FLOAT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
        .unwrap_or_else(|e| unreachable!("constant regex: {e}"))
});

/// Whether `encoder.stringv` may write `s` as a plain scalar: `resolve("", s)` gives `!!str` and
/// `s` is not a YAML 1.1 base-60 float. Otherwise yaml.v2 asks for double quotes.
pub(crate) fn plain_is_string(s: &str) -> bool {
    resolves_to_str(s) && !is_base60_float(s)
}

/// What `resolve("", s)` makes of a plain scalar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Resolved {
    Str,
    Null,
    Bool(bool),
    Int(i64),
    /// Above `i64::MAX`.
    Uint(u64),
    Float(f64),
    /// A timestamp; decoding into `interface{}` keeps it a string (yaml.v2's backward compatibility).
    Timestamp,
}

/// `resolve("", s)` in resolve.go for a plain (unquoted, untagged) scalar.
pub(crate) fn resolve_plain(s: &str) -> Resolved {
    // The hint table is indexed by the first byte; the empty string is looked up directly.
    let hint = match s.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => return Resolved::Str,
    };
    if let Some((_, resolved)) = RESOLVE_MAP.iter().find(|(names, _)| names.contains(&s)) {
        return *resolved;
    }
    match hint {
        // Everything these could be is in the map.
        b'M' | b'N' => Resolved::Str,
        b'.' => float(s).unwrap_or(Resolved::Str),
        // 'D' or 'S': int, float or timestamp.
        _ if parse_timestamp(s) => Resolved::Timestamp,
        _ => number(&s.replace('_', "")).unwrap_or(Resolved::Str),
    }
}

/// `resolve("", s)` returns `yaml_STR_TAG`.
fn resolves_to_str(s: &str) -> bool {
    resolve_plain(s) == Resolved::Str
}

fn float(s: &str) -> Option<Resolved> {
    parse_float_ok(s).then(|| s.replace('_', "").parse().ok().map(Resolved::Float)).flatten()
}

fn int(value: Option<i64>, unsigned: Option<u64>) -> Option<Resolved> {
    value.map(Resolved::Int).or(unsigned.map(Resolved::Uint))
}

/// The int/float attempts of `resolve()` for a sign- or digit-led scalar with `_` removed.
fn number(plain: &str) -> Option<Resolved> {
    if let Some(n) = int(parse_int(plain, 0), parse_uint(plain, 0)) {
        return Some(n);
    }
    if YAML_STYLE_FLOAT.is_match(plain)
        && let Some(f) = float(plain)
    {
        return Some(f);
    }
    // Binary literals base 0 could not read: a sign after the prefix ("0b-101" is -5) or, with
    // "-0b", whatever ParseInt reads after re-attaching the sign.
    if let Some(rest) = plain.strip_prefix("0b") {
        int(parse_int(rest, 2), parse_uint(rest, 2))
    } else if let Some(rest) = plain.strip_prefix("-0b") {
        int(parse_int(&format!("-{rest}"), 2), None)
    } else {
        None
    }
}

/// `isBase60Float` in encode.go ("1:20", "-1_0:30:59.5"): quoted on output for YAML 1.1 readers.
fn is_base60_float(s: &str) -> bool {
    let starts_like_number = s.bytes().next().is_some_and(|c| c == b'+' || c == b'-' || c.is_ascii_digit());
    starts_like_number && s.contains(':') && BASE60_FLOAT.is_match(s)
}

/// `parseTimestamp` in resolve.go: `s` starts with 4 digits and `-`, and Go's `time.Parse`
/// accepts it in one of the layouts `2006-1-2T15:4:5.999999999Z07:00`,
/// `2006-1-2t15:4:5.999999999Z07:00`, `2006-1-2 15:4:5.999999999` or `2006-1-2`.
fn parse_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    let year_digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if year_digits != 4 || b.get(4) != Some(&b'-') {
        return false;
    }
    [TimeLayout::ZonedUpper, TimeLayout::ZonedLower, TimeLayout::Spaced, TimeLayout::DateOnly]
        .into_iter()
        .any(|layout| layout.parses(b))
}

/// The four layouts of `allowedTimestampFormats`, in the order yaml.v2 tries them.
#[derive(Clone, Copy)]
enum TimeLayout {
    /// `2006-1-2T15:4:5.999999999Z07:00`
    ZonedUpper,
    /// `2006-1-2t15:4:5.999999999Z07:00`
    ZonedLower,
    /// `2006-1-2 15:4:5.999999999`
    Spaced,
    /// `2006-1-2`
    DateOnly,
}

/// Go's `time.getnum(s, false)`: one or two leading digits.
fn getnum(b: &[u8]) -> Option<(u32, &[u8])> {
    match b {
        [d1 @ b'0'..=b'9', d2 @ b'0'..=b'9', rest @ ..] => {
            Some((u32::from(d1 - b'0') * 10 + u32::from(d2 - b'0'), rest))
        }
        [d1 @ b'0'..=b'9', rest @ ..] => Some((u32::from(d1 - b'0'), rest)),
        _ => None,
    }
}

/// Go's `time.getnum(s, true)` on a two-byte field: exactly two digits.
fn two_digits(b: &[u8]) -> Option<u32> {
    match b {
        [d1 @ b'0'..=b'9', d2 @ b'0'..=b'9'] => Some(u32::from(d1 - b'0') * 10 + u32::from(d2 - b'0')),
        _ => None,
    }
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl TimeLayout {
    /// Whether `time.Parse(layout, value)` succeeds. Only success matters, so each field is
    /// checked as Go's `parse` consumes it (ranges included) and any failure is final.
    fn parses(self, value: &[u8]) -> bool {
        self.parse(value).is_some()
    }

    fn parse(self, v: &[u8]) -> Option<()> {
        // stdLongYear: exactly four bytes, all digits (checked by the caller's quick check).
        let year = std::str::from_utf8(v.get(..4)?).ok()?.parse::<u32>().ok()?;
        let v = v.get(4..)?.strip_prefix(b"-")?;
        // stdNumMonth: one or two digits, 1..=12.
        let (month, v) = getnum(v)?;
        if !(1..=12).contains(&month) {
            return None;
        }
        let v = v.strip_prefix(b"-")?;
        // stdDay: one or two digits; validated against the month once everything parsed.
        let (day, v) = getnum(v)?;
        let v = match self {
            TimeLayout::DateOnly => v,
            TimeLayout::ZonedUpper => Self::time_of_day(v.strip_prefix(b"T")?)?,
            TimeLayout::ZonedLower => Self::time_of_day(v.strip_prefix(b"t")?)?,
            // A space in the layout matches one or more spaces (Go's `skip` cuts them all).
            TimeLayout::Spaced => {
                if v.first() != Some(&b' ') {
                    return None;
                }
                let spaces = v.iter().take_while(|&&c| c == b' ').count();
                Self::time_of_day(&v[spaces..])?
            }
        };
        let v = match self {
            TimeLayout::ZonedUpper | TimeLayout::ZonedLower => Self::zone(v)?,
            TimeLayout::Spaced | TimeLayout::DateOnly => v,
        };
        // Anything left over is "extra text".
        (v.is_empty() && (1..=days_in(month, year)).contains(&day)).then_some(())
    }

    /// `15:4:5.999999999`: hour < 24, minute < 60, second < 60, then an optional fraction: `.`
    /// or `,` followed by at least one digit, consuming every digit that follows.
    fn time_of_day(v: &[u8]) -> Option<&[u8]> {
        let (hour, v) = getnum(v)?;
        let (minute, v) = getnum(v.strip_prefix(b":")?)?;
        let (second, v) = getnum(v.strip_prefix(b":")?)?;
        if hour >= 24 || minute >= 60 || second >= 60 {
            return None;
        }
        match v {
            [b'.' | b',', b'0'..=b'9', ..] => {
                let digits = v[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                Some(&v[1 + digits..])
            }
            _ => Some(v),
        }
    }

    /// `Z07:00`: `Z`, or a sign, two hour digits (≤ 24), `:`, two minute digits (≤ 60).
    fn zone(v: &[u8]) -> Option<&[u8]> {
        if let Some(rest) = v.strip_prefix(b"Z") {
            return Some(rest);
        }
        if v.len() < 6 || v[3] != b':' {
            return None;
        }
        let hour = two_digits(&v[1..3])?;
        let minute = two_digits(&v[4..6])?;
        (hour <= 24 && minute <= 60 && matches!(v[0], b'+' | b'-')).then_some(&v[6..])
    }
}

fn in_table(table: &[(u32, u32)], c: char) -> bool {
    let c = u32::from(c);
    table
        .binary_search_by(|&(lo, hi)| {
            if hi < c {
                Ordering::Less
            } else if lo > c {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        })
        .is_ok()
}

/// Go's `unicode.IsLetter`.
fn is_letter(c: char) -> bool {
    in_table(unicode_tables::LETTER, c)
}

/// Go's `unicode.IsDigit` (general category Nd, not just ASCII).
fn is_digit(c: char) -> bool {
    in_table(unicode_tables::DIGIT, c)
}

/// The numeric value Go accumulates for a digit run: `an*10 + int64(r - '0')`, wrapping like Go's
/// int64 (non-ASCII digits contribute their code point minus 0x30, as in Go).
fn digit_run(chars: &[char], start: usize, mut n: i64) -> (i64, usize) {
    let mut i = start;
    while i < chars.len() && is_digit(chars[i]) {
        n = n.wrapping_mul(10).wrapping_add(i64::from(u32::from(chars[i])) - i64::from(u32::from('0')));
        i += 1;
    }
    (n, i)
}

/// `keyList.Less` of sorter.go for two string keys: a "natural" order in which runs of digits
/// compare by value, and letters sort after every non-letter.
pub(crate) fn key_less(a: &str, b: &str) -> bool {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    for i in 0..ar.len().min(br.len()) {
        if ar[i] == br[i] {
            continue;
        }
        let al = is_letter(ar[i]);
        let bl = is_letter(br[i]);
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return bl;
        }
        // A digit run is compared by value; a '0' after non-zero digits of the same run counts
        // as part of a larger number (an = bn = 1 seed), so "a10" vs "a1x" compares 10 to 1.
        let mut seed = 0;
        if ar[i] == '0' || br[i] == '0' {
            for j in (0..i).rev() {
                if !is_digit(ar[j]) {
                    break;
                }
                if ar[j] != '0' {
                    seed = 1;
                    break;
                }
            }
        }
        let (an, ai) = digit_run(&ar, i, seed);
        let (bn, bi) = digit_run(&br, i, seed);
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}

/// Sorts map entries by key with [`key_less`].
///
/// Go sorts with `sort.Sort` over the keys in random map order, so when `Less` is a strict total
/// order (any set of keys without a 20+ digit run, whose value wraps around) every correct sort
/// gives Go's result. A merge sort is used because it never panics, whatever the comparator does.
pub(crate) fn sort_entries<K: AsRef<str>, T>(entries: Vec<(K, T)>) -> Vec<(K, T)> {
    if entries.len() <= 1 {
        return entries;
    }
    let mut left = entries;
    let right = left.split_off(left.len() / 2);
    let (left, right) = (sort_entries(left), sort_entries(right));
    let mut merged = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_right = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => key_less(r.0.as_ref(), l.0.as_ref()),
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => break,
        };
        let next = if take_right { right.next() } else { left.next() };
        merged.extend(next);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        for s in [
            "2024-01-02",
            "2024-1-2",
            "2024-02-29",
            "2024-1-2 10:00:00",
            "2024-1-2    1:2:3",
            "2024-1-2 1:2:3.5",
            "2024-1-2 1:2:3,123456789123",
            "2024-01-02T10:00:00Z",
            "2024-01-02t10:00:00+24:60",
            "2024-01-02T10:00:00.123-07:00",
        ] {
            assert!(parse_timestamp(s), "{s}");
        }
        for s in [
            "2023-02-29",
            "2024-13-01",
            "2024-00-01",
            "2024-01-00",
            "2024-01-32",
            "2024-001-02",
            "2024-1-2 24:00:00",
            "2024-1-2 1:60:00",
            "2024-1-2 1:2:60",
            "2024-1-2T10:00:00",
            "2024-1-2 10:00:00Z",
            "2024-01-02T10:00:00+25:00",
            "2024-01-02T10:00:00+0700",
            "2024-1-2 1:2:3.",
            "2024-1-2x",
            "02024-1-2",
            "2024/1/2",
        ] {
            assert!(!parse_timestamp(s), "{s}");
        }
    }
}
