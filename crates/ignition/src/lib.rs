//! Ignition configs the way the Machine Config Operator handles them.
//!
//! Everything here is pure: parse spec 2.x and 3.0-3.5 ([`parse`]), bring any of them to the
//! internal spec 3.5 ([`to_internal`]), convert down to older versions ([`convert`]), merge
//! ([`merge::merge`]), validate ([`validate`]) and choose the version a client asks for in its
//! `Accept` header ([`accept`]). The types keep Go's field order and `omitempty` rules so that
//! serialized configs are byte-identical to the original's.

mod goempty;

pub mod accept;
pub mod convert;
pub mod dataurl;
pub mod merge;
pub mod parse;
pub mod spec2;
pub mod unit;
pub mod v2;
mod v2_older;
pub mod v3;
pub mod validate;

pub use convert::{ConvertError, Target, Unsupported, convert};
pub use goempty::GoEmpty;
pub use parse::{AnyConfig, ParseError, Parsed, parse, parse_value};

/// Why a config could not be brought to the internal spec version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error(transparent)]
    Spec2(#[from] spec2::Spec2Error),
    #[error(transparent)]
    Invalid(#[from] validate::ValidationError),
}

/// Brings a parsed config to spec 3.5.0, the version the original renders and merges in
/// (`ParseAndConvertConfig`): 3.x configs only change their version, spec 2 configs are
/// de-duplicated and translated.
pub fn to_internal(config: AnyConfig) -> Result<v3::Config, spec2::Spec2Error> {
    match config {
        AnyConfig::V3(mut c) => {
            c.ignition.version = v3::MAX_VERSION.to_string();
            Ok(c)
        }
        AnyConfig::V2(c) => {
            let translated = spec2::translate(&spec2::dedupe(c)?, v3::MAX_VERSION)?;
            let report = validate::validate(&translated);
            if report.is_ok() { Ok(translated) } else { Err(spec2::Spec2Error::Untranslatable(report.to_string())) }
        }
    }
}

/// Parses and converts in one step.
pub fn parse_and_convert(value: &serde_json::Value) -> Result<v3::Config, Error> {
    Ok(to_internal(parse_value(value)?.config)?)
}

/// Validates a parsed config as the original's `ValidateIgnition` does before it accepts a
/// MachineConfig (Ignition's rules for the config's own version, then no file mode above 0777)
/// and brings it to spec 3.5.0, in one pass.
pub fn validate_and_convert(config: AnyConfig) -> Result<v3::Config, Error> {
    let internal = match config {
        AnyConfig::V3(c) => {
            validate::validate_for_machine_config(&c)?;
            to_internal(AnyConfig::V3(c))?
        }
        v2 @ AnyConfig::V2(_) => {
            let internal = to_internal(v2)?;
            validate::validate_for_machine_config(&internal)?;
            internal
        }
    };
    Ok(internal)
}
