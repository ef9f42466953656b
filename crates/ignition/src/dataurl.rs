//! RFC 2397 `data:` URLs, the inline form file contents take in MachineConfigs.

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
    let data = if is_base64 {
        let compact: Vec<u8> = unescaped.into_iter().filter(|b| !b.is_ascii_whitespace()).collect();
        base64::engine::general_purpose::STANDARD.decode(compact).map_err(|e| DataUrlError::BadBase64(e.to_string()))?
    } else {
        unescaped
    };
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
}

/// The bytes a file resource writes: its data URL decoded and, for `compression: gzip`,
/// inflated. A resource without a source is an empty file.
pub fn decode_contents(resource: &crate::v3::Resource) -> Result<Vec<u8>, ContentsError> {
    let Some(source) = resource.source.as_deref() else { return Ok(Vec::new()) };
    let data = decode(source)?.data;
    match resource.compression.as_deref() {
        None | Some("") => Ok(data),
        Some("gzip") => {
            let mut inflated = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(data.as_slice()), &mut inflated)
                .map_err(ContentsError::Gzip)?;
            Ok(inflated)
        }
        Some(other) => Err(ContentsError::Compression(other.to_string())),
    }
}

fn percent_decode(s: &str) -> Result<Vec<u8>, DataUrlError> {
    // Reject malformed escapes: Go's url.PathUnescape does, percent-encoding would pass them through.
    let bytes = s.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(DataUrlError::BadEscape)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(DataUrlError::BadEscape);
            }
        }
    }
    Ok(percent_encoding::percent_decode(bytes).collect())
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
            ("data:notamediatype,x", DataUrlError::BadMediaType("notamediatype".into())),
        ];
        for (url, want) in cases {
            assert_eq!(decode(url).unwrap_err(), want, "{url}");
        }
        assert!(matches!(decode("data:;base64,a!b="), Err(DataUrlError::BadBase64(_))));
    }
}
