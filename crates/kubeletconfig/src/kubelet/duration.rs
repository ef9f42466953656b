//! Go's `time.ParseDuration` and `time.Duration.String`, which decide how every duration of a
//! kubelet config is read and written (`5m` is written `5m0s`).

/// `time.ParseDuration`: nanoseconds, or Go's error message.
pub(crate) fn parse(text: &str) -> Result<i64, String> {
    const MAX: u64 = 1 << 63;
    let invalid = || format!("time: invalid duration {}", quote(text));
    let (neg, mut s) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s.starts_with('.') || s.as_bytes()[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for c in s[..digits].bytes() {
            if whole > MAX / 10 {
                return Err(invalid());
            }
            whole = whole * 10 + u64::from(c - b'0');
            if whole > MAX {
                return Err(invalid());
            }
        }
        s = &s[digits..];
        let (mut fraction, mut scale, mut fraction_digits) = (0u64, 1f64, 0);
        if let Some(rest) = s.strip_prefix('.') {
            fraction_digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for c in rest[..fraction_digits].bytes() {
                if overflow || fraction > (MAX - 1) / 10 {
                    overflow = true;
                    continue;
                }
                fraction = fraction * 10 + u64::from(c - b'0');
                scale *= 10.0;
            }
            s = &rest[fraction_digits..];
        }
        if digits == 0 && fraction_digits == 0 {
            return Err(invalid());
        }
        let unit_len = s.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(s.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(text)));
        }
        let unit = match &s[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            other => return Err(format!("time: unknown unit {} in duration {}", quote(other), quote(text))),
        };
        s = &s[unit_len..];
        if whole > MAX / unit {
            return Err(invalid());
        }
        let mut value = whole * unit;
        if fraction > 0 {
            // Go computes this in float64 and truncates.
            value += (fraction as f64 * (unit as f64 / scale)) as u64;
            if value > MAX {
                return Err(invalid());
            }
        }
        total += value;
        if total > MAX {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((total as i64).wrapping_neg());
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// `time.Duration.String`: `0s`, `1.5s`, `100ms`, `1m0s`, `4h0m0s`, `-2µs`.
pub(crate) fn format(nanos: i64) -> String {
    let mut u = nanos.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        let (unit, precision) = match u {
            0 => return "0s".into(),
            1..1_000 => ("ns", 0),
            1_000..1_000_000 => ("\u{b5}s", 3),
            _ => ("ms", 6),
        };
        let fraction = fraction(&mut u, precision);
        out = format!("{u}{fraction}{unit}");
    } else {
        let fraction = fraction(&mut u, 9);
        let seconds = u % 60;
        u /= 60;
        if u > 0 {
            let minutes = u % 60;
            u /= 60;
            if u > 0 {
                out.push_str(&format!("{u}h"));
            }
            out.push_str(&format!("{minutes}m"));
        }
        out.push_str(&format!("{seconds}{fraction}s"));
    }
    if nanos < 0 { format!("-{out}") } else { out }
}

/// Go's `fmtFrac`: the last `precision` digits of `v` as `.123` without trailing zeros (nothing
/// when they are all zero); `v` keeps the rest.
fn fraction(v: &mut u64, precision: u32) -> String {
    let digits = *v % 10u64.pow(precision);
    *v /= 10u64.pow(precision);
    if digits == 0 {
        return String::new();
    }
    let text = format!("{digits:0width$}", width = precision as usize);
    format!(".{}", text.trim_end_matches('0'))
}

/// Go's `time.quote`.
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_go_does() {
        let cases: &[(&str, Result<i64, &str>)] = &[
            ("0", Ok(0)),
            ("10s", Ok(10_000_000_000)),
            ("5m", Ok(300_000_000_000)),
            ("1h30m", Ok(5_400_000_000_000)),
            ("1.5h", Ok(5_400_000_000_000)),
            ("+300ms", Ok(300_000_000)),
            ("-1.5us", Ok(-1_500)),
            ("1µs", Ok(1_000)),
            (".5s", Ok(500_000_000)),
            ("1.s", Ok(1_000_000_000)),
            ("2562047h47m16.854775807s", Ok(i64::MAX)),
            ("", Err("time: invalid duration \"\"")),
            ("ten seconds", Err("time: invalid duration \"ten seconds\"")),
            ("10", Err("time: missing unit in duration \"10\"")),
            ("1d", Err("time: unknown unit \"d\" in duration \"1d\"")),
            (".s", Err("time: invalid duration \".s\"")),
            ("2562047h47m16.854775808s", Err("time: invalid duration \"2562047h47m16.854775808s\"")),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), want.map_err(str::to_string), "{text}");
        }
    }

    #[test]
    fn formats_as_go_does() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1\u{b5}s"),
            (2_200_000, "2.2ms"),
            (1_500_000_000, "1.5s"),
            (10_000_000_000, "10s"),
            (60_000_000_000, "1m0s"),
            (90_000_000_000, "1m30s"),
            (300_000_000_000, "5m0s"),
            (14_400_000_000_000, "4h0m0s"),
            (-5_000_000_000, "-5s"),
            (i64::MAX, "2562047h47m16.854775807s"),
        ];
        for (nanos, want) in cases {
            assert_eq!(format(*nanos), *want, "{nanos}");
            assert_eq!(parse(want), Ok(*nanos), "{want} reads back");
        }
    }
}
