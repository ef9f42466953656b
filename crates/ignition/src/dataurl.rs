//! RFC 2397 `data:` URLs, the inline form file contents take in MachineConfigs.

use std::borrow::Cow;

use base64::Engine;

/// A decoded data URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataUrl {
    /// `type/subtype` plus parameters, as written (`text/plain;charset=US-ASCII` when omitted).
    pub media_type: String,
    pub data: Vec<u8>,
}

/// Why a data URL could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DataUrlError {
    #[error("not a data URL (missing \"data:\" prefix)")]
    NotData,
    #[error("data URL has no ',' separating the media type from the data")]
    NoComma,
    #[error("data URL has a malformed media type {0:?}")]
    BadMediaType(String),
    #[error("data URL has an invalid percent-escape")]
    BadEscape,
    #[error("data URL has invalid base64 data: {0}")]
    BadBase64(String),
}

/// Decodes `data:[<media type>][;base64],<data>`.
pub fn decode(url: &str) -> Result<DataUrl, DataUrlError> {
    let rest = url
        .strip_prefix("data:")
        .or_else(|| url.get(..5).filter(|p| p.eq_ignore_ascii_case("data:")).map(|_| &url[5..]))
        .ok_or(DataUrlError::NotData)?;
    let (meta, payload) = rest.split_once(',').ok_or(DataUrlError::NoComma)?;
    let (media, is_base64) = match meta.strip_suffix(";base64") {
        Some(m) => (m, true),
        None => (meta, false),
    };
    let media_type = if media.is_empty() || media.starts_with(';') {
        format!("text/plain{}", if media.is_empty() { ";charset=US-ASCII" } else { media })
    } else {
        let essence = media.split(';').next().unwrap_or_default();
        let valid = essence.split_once('/').is_some_and(|(t, s)| !t.is_empty() && !s.is_empty() && !s.contains('/'));
        if !valid {
            return Err(DataUrlError::BadMediaType(media.to_string()));
        }
        media.to_string()
    };
    let unescaped = percent_decode(payload)?;
    let data = if is_base64 { decode_base64(&unescaped)? } else { unescaped.into_owned() };
    Ok(DataUrl { media_type, data })
}

/// Why a file's inline contents cannot be produced.
#[derive(Debug, thiserror::Error)]
pub enum ContentsError {
    #[error(transparent)]
    DataUrl(#[from] DataUrlError),
    #[error("contents are not valid gzip data: {0}")]
    Gzip(std::io::Error),
    #[error("unsupported compression {0:?}")]
    Compression(String),
    #[error("contents inflate to more than {} MiB", MAX_INFLATED_BYTES >> 20)]
    TooLarge,
}

/// The most a file's gzip contents may inflate to: a few hundred compressed bytes must not
/// become gigabytes in memory (a compression bomb).
pub const MAX_INFLATED_BYTES: u64 = 128 << 20;

/// The bytes a file resource writes: its data URL decoded and, for `compression: gzip`,
/// inflated. A resource without a source is an empty file.
pub fn decode_contents(resource: &crate::v3::Resource) -> Result<Vec<u8>, ContentsError> {
    let mut inflated = Vec::new();
    match decode_resource(resource)? {
        (data, false) => Ok(data),
        (data, true) => inflate(&data, &mut inflated).map(|()| inflated),
    }
}

/// Whether [`decode_contents`] would succeed, without keeping the inflated bytes.
pub fn check_contents(resource: &crate::v3::Resource) -> Result<(), ContentsError> {
    match decode_resource(resource)? {
        (_, false) => Ok(()),
        (data, true) => inflate(&data, &mut std::io::sink()),
    }
}

/// The decoded data URL and whether it is gzip-compressed.
fn decode_resource(resource: &crate::v3::Resource) -> Result<(Vec<u8>, bool), ContentsError> {
    let Some(source) = resource.source.as_deref() else { return Ok((Vec::new(), false)) };
    let gzip = match resource.compression.as_deref() {
        None | Some("") => false,
        Some("gzip") => true,
        Some(other) => return Err(ContentsError::Compression(other.to_string())),
    };
    Ok((decode(source)?.data, gzip))
}

fn inflate(data: &[u8], out: &mut impl std::io::Write) -> Result<(), ContentsError> {
    use std::io::Read as _;
    let mut bounded = flate2::read::GzDecoder::new(data).take(MAX_INFLATED_BYTES + 1);
    let inflated = std::io::copy(&mut bounded, out).map_err(ContentsError::Gzip)?;
    if inflated > MAX_INFLATED_BYTES {
        return Err(ContentsError::TooLarge);
    }
    Ok(())
}

/// Base64 as Go's decoder in Ignition reads it: line breaks and spaces are ignored. Whitespace is
/// rare, so it is only filtered out when a first strict attempt fails.
fn decode_base64(text: &[u8]) -> Result<Vec<u8>, DataUrlError> {
    let engine = &base64::engine::general_purpose::STANDARD;
    engine.decode(text).or_else(|first| {
        if !text.iter().any(u8::is_ascii_whitespace) {
            return Err(DataUrlError::BadBase64(first.to_string()));
        }
        let compact: Vec<u8> = text.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
        engine.decode(compact).map_err(|e| DataUrlError::BadBase64(e.to_string()))
    })
}

/// Unescapes `%XX`; rejects malformed escapes as Go's `url.PathUnescape` does (the
/// percent-encoding crate would pass them through). Borrows when there is nothing to unescape,
/// the common case for base64 data.
fn percent_decode(s: &str) -> Result<Cow<'_, [u8]>, DataUrlError> {
    // `str::find` with a char uses memchr; escapes are ASCII, so every split is a char boundary.
    let Some(first) = s.find('%') else { return Ok(Cow::Borrowed(s.as_bytes())) };
    let mut out = Vec::with_capacity(s.len());
    out.extend_from_slice(&s.as_bytes()[..first]);
    let mut rest = &s[first..];
    while !rest.is_empty() {
        if let Some(escaped) = rest.strip_prefix('%') {
            let hex = escaped.get(..2).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
            let hex = hex.ok_or(DataUrlError::BadEscape)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| DataUrlError::BadEscape)?);
            rest = &escaped[2..];
        } else {
            let run = rest.find('%').unwrap_or(rest.len());
            out.extend_from_slice(&rest.as_bytes()[..run]);
            rest = &rest[run..];
        }
    }
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_forms_machineconfigs_use() {
        let cases: &[(&str, &str, &[u8])] = &[
            ("data:,hello%20world%0A", "text/plain;charset=US-ASCII", b"hello world\n"),
            ("data:text/plain;charset=utf-8;base64,aGk=", "text/plain;charset=utf-8", b"hi"),
            ("data:;base64,aGk=", "text/plain;charset=US-ASCII", b"hi"),
            ("data:application/octet-stream;base64,", "application/octet-stream", b""),
            ("data:,", "text/plain;charset=US-ASCII", b""),
            ("DATA:,x", "text/plain;charset=US-ASCII", b"x"),
            ("data:,%41b%42%43d%e2%9c%93", "text/plain;charset=US-ASCII", "AbBCd\u{2713}".as_bytes()),
            ("data:;base64,a%47k=", "text/plain;charset=US-ASCII", b"hi"),
            ("data:;base64,a G\nk=", "text/plain;charset=US-ASCII", b"hi"),
        ];
        for (url, media, data) in cases {
            let d = decode(url).unwrap();
            assert_eq!((d.media_type.as_str(), d.data.as_slice()), (*media, *data), "{url}");
        }
    }

    #[test]
    fn rejects_malformed_urls() {
        let cases = [
            ("https://example.com/x", DataUrlError::NotData),
            ("data:text/plain", DataUrlError::NoComma),
            ("data:,bad%zz", DataUrlError::BadEscape),
            ("data:,bad%2", DataUrlError::BadEscape),
            ("data:,bad%", DataUrlError::BadEscape),
            ("data:,%+1", DataUrlError::BadEscape),
            ("data:notamediatype,x", DataUrlError::BadMediaType("notamediatype".into())),
        ];
        for (url, want) in cases {
            assert_eq!(decode(url).unwrap_err(), want, "{url}");
        }
        assert!(matches!(decode("data:;base64,a!b="), Err(DataUrlError::BadBase64(_))));
    }

    #[test]
    fn contents_inflate_gzip() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"inflated").unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap());
        let resource = |source: &str, compression: Option<&str>| crate::v3::Resource {
            source: Some(source.to_string()),
            compression: compression.map(str::to_string),
            ..Default::default()
        };
        let gzip = resource(&format!("data:;base64,{b64}"), Some("gzip"));
        assert_eq!(decode_contents(&gzip).unwrap(), b"inflated");
        assert!(check_contents(&gzip).is_ok());
        let not_gzip = resource("data:,plain", Some("gzip"));
        assert!(matches!(decode_contents(&not_gzip), Err(ContentsError::Gzip(_))));
        assert!(matches!(check_contents(&not_gzip), Err(ContentsError::Gzip(_))));
        assert!(matches!(decode_contents(&resource("data:,x", Some("xz"))), Err(ContentsError::Compression(_))));
        assert_eq!(decode_contents(&crate::v3::Resource::default()).unwrap(), b"");
    }

    #[test]
    fn a_compression_bomb_is_refused_at_the_limit() {
        use std::io::Write;
        // 129 MiB of zeros: about 130 KiB compressed. Inflation stops one byte past the limit.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..129 {
            gz.write_all(&zeros).unwrap();
        }
        let compressed = gz.finish().unwrap();
        assert!(compressed.len() < 200 << 10, "{}", compressed.len());
        let bomb = crate::v3::Resource {
            source: Some(format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(&compressed))),
            compression: Some("gzip".into()),
            ..Default::default()
        };
        for refused in [decode_contents(&bomb).map(|_| ()), check_contents(&bomb)] {
            let err = refused.unwrap_err();
            assert!(matches!(err, ContentsError::TooLarge), "{err}");
            assert_eq!(err.to_string(), "contents inflate to more than 128 MiB");
        }
    }
}
