//! Which Ignition spec version to serve, from the request's `Accept` header, exactly as the
//! original's `detectSpecVersionFromAcceptHeader` decides
//! (`docs/behaviour.md#the-served-ignition-spec-version`).
//!
//! Ignition asks with `Accept: application/vnd.coreos.ignition+json;version=3.3.0, */*;q=0.1`.
//! Requests without a usable Ignition entry (curl, browsers) get spec 2.2.0, as upstream.

use std::cmp::Ordering;

use semver::Version;

/// The media subtype Ignition asks for; only the subtype is compared, case-sensitively.
const IGNITION_SUBTYPE: &str = "vnd.coreos.ignition+json";

/// The Accept header names an Ignition version the server cannot produce (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported Ignition version in Accept header: {0}")]
pub struct UnsupportedVersion(pub String);

/// One media range of the header with the two parameters the original reads.
#[derive(Debug, Clone, PartialEq)]
struct Entry<'a> {
    subtype: &'a str,
    version: Option<GoSemver>,
    q: f32,
}

/// The version to serve: `X.Y.0` of a supported minor version (2.2, 3.0-3.5). 3.0.0 is
/// negotiated but cannot be produced (there is no conversion path down to it), which the
/// caller reports as a conversion failure, as upstream does.
pub fn negotiate(accept: &str) -> Result<Version, UnsupportedVersion> {
    let entries = sorted_entries(accept);
    let Some(entry) = entries.iter().find(|e| e.subtype == IGNITION_SUBTYPE && e.version.is_some()) else {
        return Ok(Version::new(2, 2, 0));
    };
    let v = entry.version.as_ref().expect("found with a version");
    if v.major == 2 && v.at_least(2, 2, 0) {
        return Ok(Version::new(2, 2, 0));
    }
    let minor = Version::new(v.major, v.minor, 0);
    if let Some(supported) = crate::convert::supported_minor_version(&minor) {
        return Ok(supported);
    }
    if v.major == 3 && v.minor > 5 {
        return Ok(Version::new(3, 5, 0));
    }
    Err(UnsupportedVersion(accept.to_string()))
}

/// Parses the header (`parseAcceptHeader`) and orders it by `q`, highest first, stably.
fn sorted_entries(accept: &str) -> Vec<Entry<'_>> {
    let mut entries: Vec<Entry<'_>> = accept.split(',').filter_map(parse_entry).collect();
    go_stable_sort(&mut entries, |a, b| a.q > b.q);
    entries
}

fn parse_entry(value: &str) -> Option<Entry<'_>> {
    let mut parts = value.trim().split(';').map(str::trim);
    let media = parts.next().unwrap_or_default();
    let (_, subtype) = media.split_once('/')?;
    let mut version = None;
    let mut q = None;
    for ext in parts {
        let Some((key, val)) = ext.split_once('=') else { continue };
        if key == "version" && version.is_none() {
            version = GoSemver::parse(val);
        } else if key == "q" && q.is_none() {
            q = go_parse_float32(val);
        }
    }
    Some(Entry { subtype, version, q: q.unwrap_or(1.0) })
}

/// A version as `github.com/coreos/go-semver` accepts it: `X.Y.Z` with optional `-pre` and
/// `+meta` identifiers; `3`, `3.2` and ` 3.2.0` are not versions. Only what negotiation compares
/// is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GoSemver {
    major: u64,
    minor: u64,
    patch: u64,
    pre_release: bool,
}

impl GoSemver {
    fn parse(s: &str) -> Option<GoSemver> {
        let (rest, metadata) = s.split_once('+').unwrap_or((s, ""));
        let (core, pre) = rest.split_once('-').unwrap_or((rest, ""));
        if !valid_identifiers(pre) || !valid_identifiers(metadata) {
            return None;
        }
        let mut dots = core.splitn(3, '.');
        let mut number = || dots.next().and_then(go_parse_int64);
        let (major, minor, patch) = (number()?, number()?, number()?);
        Some(GoSemver { major, minor, patch, pre_release: !pre.is_empty() })
    }

    /// Semver precedence: a pre-release sorts before its release.
    fn at_least(&self, major: u64, minor: u64, patch: u64) -> bool {
        match (self.major, self.minor, self.patch).cmp(&(major, minor, patch)) {
            Ordering::Greater => true,
            Ordering::Equal => !self.pre_release,
            Ordering::Less => false,
        }
    }
}

/// `^[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*$`, or empty.
fn valid_identifiers(s: &str) -> bool {
    s.is_empty() || s.split('.').all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// `strconv.ParseInt(s, 10, 64)` for what can reach it here (signs were split off as
/// pre-release/metadata): decimal digits, leading zeros allowed, at most `i64::MAX`.
fn go_parse_int64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok().map(|n| n as u64)
}

/// `strconv.ParseFloat(s, 32)`: decimal and `inf`/`infinity`/`nan` forms; a finite literal out
/// of float32 range is an error. (Go also reads hexadecimal floats such as `0x1p-2`; those are
/// treated as invalid here, so such an entry keeps the default q of 1.)
fn go_parse_float32(s: &str) -> Option<f32> {
    let value: f32 = s.parse().ok()?;
    let literal_infinity = s.trim_start_matches(['+', '-']).to_ascii_lowercase().starts_with("inf");
    (value.is_finite() || literal_infinity || value.is_nan()).then_some(value)
}

/// Go's `sort.SliceStable` (insertion sort on blocks of 20, then in-place symmerge). Any
/// stable sort agrees with it for a strict weak order, but `q=NaN` compares neither greater
/// nor smaller than anything, and then only the same algorithm gives the same order.
fn go_stable_sort<T>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let n = v.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        insertion_sort(v, a, b, &less);
        a = b;
        b += block;
    }
    insertion_sort(v, a, n, &less);
    while block < n {
        let (mut a, mut b) = (0, 2 * block);
        while b <= n {
            sym_merge(v, a, a + block, b, &less);
            a = b;
            b += 2 * block;
        }
        if a + block < n {
            sym_merge(v, a, a + block, n, &less);
        }
        block *= 2;
    }
}

fn insertion_sort<T>(v: &mut [T], a: usize, b: usize, less: &impl Fn(&T, &T) -> bool) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && less(&v[j], &v[j - 1]) {
            v.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sym_merge<T>(v: &mut [T], a: usize, m: usize, b: usize, less: &impl Fn(&T, &T) -> bool) {
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if less(&v[h], &v[a]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i - 1 {
            v.swap(k, k + 1);
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !less(&v[m], &v[h]) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in (i + 1..=m).rev() {
            v.swap(k, k - 1);
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !less(&v[p - c], &v[c]) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        v[start..end].rotate_left(m - start);
    }
    if a < start && start < mid {
        sym_merge(v, a, start, mid, less);
    }
    if mid < end && end < b {
        sym_merge(v, mid, end, b, less);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_vectors() {
        // pkg/server/api_test.go TestAcceptHeaders, plus the edges of the rules in
        // docs/behaviour.md.
        let ign = "application/vnd.coreos.ignition+json";
        let mut cases: Vec<(String, Result<&str, ()>)> = vec![
            (format!("{ign}; version=2.4.0, {ign}; version=1; q=0.5, */*; q=0.1"), Ok("2.2.0")),
            (ign.to_string(), Ok("2.2.0")),
            ("text/plain".to_string(), Ok("2.2.0")),
            ("an-invalid-accept-header".to_string(), Ok("2.2.0")),
            (String::new(), Ok("2.2.0")),
            (format!("{ign};version=3.99.0, */*;q=0.1"), Ok("3.5.0")),
            (format!("{ign};version=4.0.0, */*;q=0.1"), Err(())),
            (format!("{ign};version=3.0.0, */*;q=0.1"), Ok("3.0.0")),
            (format!("{ign};version=2.1.0"), Err(())),
            (format!("{ign};version=1.0.0"), Err(())),
            (format!("{ign};version=2.2.0"), Ok("2.2.0")),
            (format!("{ign};version=2.2.0-rc.1"), Ok("2.2.0")),
            (format!("{ign};version=3.2.1"), Ok("3.2.0")),
            (format!("{ign};version=3.2.0-experimental"), Ok("3.2.0")),
            (format!("{ign};version=3.4.0-experimental+build.5"), Ok("3.4.0")),
            // Not semver: ignored, so no Ignition entry has a version.
            (format!("{ign};version=3"), Ok("2.2.0")),
            (format!("{ign};version=3.2"), Ok("2.2.0")),
            (format!("{ign};version= 3.2.0"), Ok("2.2.0")),
            (format!("{ign};version=3.2.0.1"), Ok("2.2.0")),
            // go-semver accepts an empty pre-release.
            (format!("{ign};version=3.2.0-"), Ok("3.2.0")),
            (format!("{ign};version=3.2.0-a..b"), Ok("2.2.0")),
            (format!("{ign};version=99999999999999999999.0.0"), Ok("2.2.0")),
            (format!("{ign};version=03.02.00"), Ok("3.2.0")),
            // The first valid version parameter counts; an invalid one does not block a later one.
            (format!("{ign};version=1;version=3.1.0"), Ok("3.1.0")),
            (format!("{ign};version=3.1.0;version=3.2.0"), Ok("3.1.0")),
            // Parameter names are case-sensitive and not trimmed around '='.
            (format!("{ign};Version=3.1.0"), Ok("2.2.0")),
            (format!("{ign};version =3.1.0"), Ok("2.2.0")),
            // Only the subtype is compared, case-sensitively.
            ("foo/vnd.coreos.ignition+json;version=3.3.0".to_string(), Ok("3.3.0")),
            ("application/VND.coreos.ignition+json;version=3.3.0".to_string(), Ok("2.2.0")),
            // Highest q wins; q=0 can still be chosen; ties keep header order.
            (format!("{ign};version=3.1.0;q=0.2, {ign};version=3.3.0;q=0.9"), Ok("3.3.0")),
            (format!("{ign};version=3.1.0;q=0"), Ok("3.1.0")),
            (format!("{ign};version=3.2.0, {ign};version=3.4.0"), Ok("3.2.0")),
            (format!("{ign};version=3.2.0;q=0.5, {ign};version=3.4.0;q=bogus"), Ok("3.4.0")),
            (format!("{ign};version=3.2.0;q=0.5;q=0.9, {ign};version=3.4.0;q=0.7"), Ok("3.4.0")),
            // Only the first Ignition entry with a version decides, even if a later one would work.
            (format!("{ign};version=4.0.0, {ign};version=3.1.0;q=0.5"), Err(())),
            // Entries without '/' are skipped.
            (format!("garbage;version=3.1.0, {ign};version=3.2.0"), Ok("3.2.0")),
            (";;;,,,".to_string(), Ok("2.2.0")),
        ];
        for x in 1..=5 {
            cases.push((
                format!("{ign};version=3.{x}.0, */*;q=0.1"),
                Ok(["", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"][x]),
            ));
        }
        for (header, want) in cases {
            let got = negotiate(&header).map(|v| v.to_string()).map_err(|_| ());
            assert_eq!(got, want.map(str::to_string), "Accept: {header:?}");
        }
    }

    #[test]
    fn error_names_the_header() {
        let header = "application/vnd.coreos.ignition+json;version=4.0.0";
        assert_eq!(
            negotiate(header).unwrap_err().to_string(),
            format!("unsupported Ignition version in Accept header: {header}")
        );
    }

    #[test]
    fn q_values_parse_like_go() {
        for (s, want) in [
            ("1", Some(1.0)),
            ("0.5", Some(0.5)),
            (".5", Some(0.5)),
            ("1e-1", Some(0.1)),
            ("inf", Some(f32::INFINITY)),
            ("-Infinity", Some(f32::NEG_INFINITY)),
            ("1e50", None),
            ("", None),
            ("abc", None),
            ("1_0", None),
            (" 1", None),
        ] {
            assert_eq!(go_parse_float32(s), want, "{s:?}");
        }
        assert!(go_parse_float32("NaN").is_some_and(f32::is_nan));
    }

    #[test]
    fn nan_q_blocks_insertion_like_go() {
        // Go: sort.SliceStable([1, NaN, 2], greater) leaves the slice unchanged, because 2
        // cannot move past NaN in the insertion sort.
        let mut v = vec![1.0, f32::NAN, 2.0];
        go_stable_sort(&mut v, |a, b| a > b);
        assert_eq!(v[0], 1.0);
        assert!(v[1].is_nan());
        assert_eq!(v[2], 2.0);
        let ign = "application/vnd.coreos.ignition+json";
        assert_eq!(
            negotiate(&format!("{ign};version=3.1.0;q=0.1, */*;q=NaN, {ign};version=3.3.0;q=0.9")).unwrap(),
            Version::new(3, 1, 0)
        );
    }

    #[test]
    fn stable_sort_matches_std_for_total_orders() {
        // Past 20 entries the block merges run; compare with std's stable sort on a total order.
        for n in [0, 1, 2, 19, 20, 21, 39, 40, 41, 100, 257] {
            let mut v: Vec<(u32, usize)> = (0..n).map(|i| (((i * 7919) % 13) as u32, i)).collect();
            let mut want = v.clone();
            want.sort_by_key(|x| std::cmp::Reverse(x.0));
            go_stable_sort(&mut v, |a, b| a.0 > b.0);
            assert_eq!(v, want, "n={n}");
        }
    }

    #[test]
    fn huge_headers_are_linear() {
        // 100k entries parse and sort without trouble (the HTTP layer caps header size anyway).
        let header = "text/plain;q=0.5, ".repeat(100_000) + "application/vnd.coreos.ignition+json;version=3.3.0";
        assert_eq!(negotiate(&header).unwrap(), Version::new(3, 3, 0));
    }
}
