//! Refusals, with the original's messages word for word, and the problems the original only logs.

use std::fmt;

/// Which list of `spec.registrySources` an invalid scope is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeList {
    Insecure,
    Blocked,
    Allowed,
}

impl fmt::Display for ScopeList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ScopeList::Insecure => "insecure",
            ScopeList::Blocked => "blocked",
            ScopeList::Allowed => "allowed",
        })
    }
}

/// Why registries.conf or policy.json cannot be written for the image configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistriesError {
    /// Both lists set (unless the allowed list is only the payload repository the controller
    /// adds itself).
    #[error("invalid images config: only one of AllowedRegistries or BlockedRegistries may be specified")]
    AllowedAndBlocked,
    /// A scope with a wildcard anywhere but a leading `*.` of a bare domain.
    #[error("invalid entry for {list} registries {}", go_quote(.scope))]
    InvalidScope { list: ScopeList, scope: String },
    /// A mirror source that is neither a repository nor `*.domain`.
    #[error("invalid format for source {}", go_quote(.0))]
    InvalidSource(String),
    /// A mirror that is not a repository.
    #[error("invalid format for mirror {}", go_quote(.0))]
    InvalidMirror(String),
    /// One source with both mirror source policies across the mirror objects.
    #[error(
        "conflicting mirrorSourcePolicy is set for the same source {} in imagedigestmirrorsets, imagetagmirrorsets, or imagecontentsourcepolicies",
        go_quote(.0)
    )]
    ConflictingSourcePolicy(String),
    /// `NeverContactSource` while the source is one of its own mirrors.
    #[error("cannot set mirrorSourcePolicy: NeverContactSource if the source {} is one of the mirrors", go_quote(.0))]
    SourceIsItsOwnMirror(String),
    /// A wildcard mirror source with a registry under it that has no mirrors of its own
    /// (runtime-utils cannot adjust the wildcard's mirrors to it).
    #[error("internal error: mirrorsAdjustedForNestedScope for a wildcard scope {}", go_quote(.0))]
    NestedUnderWildcardSource(String),
    /// The release image is not a canonical image reference.
    #[error("error parsing reference of release image")]
    ReleaseImage,
    /// The base registries.conf is not one (the detail is the TOML parser's, not BurntSushi's).
    #[error("error unmarshalling registries config: {0}")]
    RegistriesConfDecode(String),
    /// The base policy.json is not one this crate can edit (the detail is ours, not c/image's).
    #[error("error decoding policy json: {0}")]
    PolicyDecode(String),
}

/// Why a pool's registries Ignition config cannot be generated (`registriesConfigIgnition`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IgnitionError {
    #[error("could not update registries config with new changes: {0}")]
    RegistriesConf(RegistriesError),
    #[error("could not update policy json with new changes: {0}")]
    PolicyJson(RegistriesError),
}

/// Why a sync of the image configuration fails (`syncImageConfig`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// Before anything is written.
    #[error("error parsing reference of release image")]
    ReleaseImage,
    /// At a pool; the pools before it were written.
    #[error("could not Create/Update MachineConfig: {0}")]
    Generate(#[from] IgnitionError),
}

/// Why the bootstrap generation fails (`RunImageBootstrap`, which returns errors unwrapped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BootstrapError {
    #[error("error parsing reference of release image")]
    ReleaseImage,
    #[error(transparent)]
    Generate(#[from] IgnitionError),
}

/// What the original only logs while deriving the blocked and allowed lists, and goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsWarning {
    /// Blocked scopes dropped because they would block the release payload, which has no usable
    /// mirror.
    #[error(
        "error adding {} to blocked registries, cannot block the repository being used by the payload",
        go_quote_list(.0)
    )]
    PayloadBlocked(Vec<String>),
    /// The payload's mirrors could not be looked up; every blocked and allowed registry was
    /// dropped. The text is c/image's, without the name of the temporary file it loaded and
    /// except for a reference that cannot be rewritten to a mirror.
    #[error("{0}")]
    MirrorLookup(String),
}

/// Go's `%q` of a string (`strconv.Quote`): printable characters as they are, the usual short
/// escapes, `\xNN` for other ASCII control bytes and `\uNNNN`/`\UNNNNNNNN` for other control
/// characters. (Go's notion of printable is approximated by "not a control character".)
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x80 && c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() && (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\U{:08x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
fn go_quote_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_quoting() {
        assert_eq!(go_quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(go_quote("tab\there\u{1}\u{7f}é"), r#""tab\there\x01\x7fé""#);
        assert_eq!(go_quote_list(&["a".into(), "b c".into()]), r#"["a" "b c"]"#);
    }

    #[test]
    fn messages_are_the_originals() {
        let invalid = RegistriesError::InvalidScope { list: ScopeList::Insecure, scope: "*.a/b".into() };
        assert_eq!(invalid.to_string(), r#"invalid entry for insecure registries "*.a/b""#);
        let sync = SyncError::from(IgnitionError::PolicyJson(RegistriesError::AllowedAndBlocked));
        assert_eq!(
            sync.to_string(),
            "could not Create/Update MachineConfig: could not update policy json with new changes: invalid images config: only one of AllowedRegistries or BlockedRegistries may be specified"
        );
    }
}
