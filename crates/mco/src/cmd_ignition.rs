//! `mco ignition`: Ignition config tools.

use std::path::PathBuf;
use std::process::ExitCode;

use mco_goser::Escaping;
use mco_ignition::AnyConfig;

#[derive(Debug, clap::Subcommand)]
pub enum IgnitionCommand {
    /// Convert an Ignition config (spec 2.2 or 3.0-3.5) to another spec version.
    Convert {
        /// Target version: 3.5, 3.4, 3.3, 3.2, 3.1 or 2.2.
        #[arg(long)]
        to: String,
        /// The config file, or - for standard input.
        file: PathBuf,
    },
    /// Upgrade a stub Ignition config (or a *-user-data Secret) from spec 2.2 to spec 3, keeping
    /// every customisation; check its CA and, given one, the server certificate.
    UpgradeStub(crate::cmd_bootimage::UpgradeStubArgs),
    /// Print the stub (pointer) config a machine boots with: it fetches the pool's config from the
    /// server and trusts the server's CA.
    Stub(crate::cmd_stub::StubArgs),
}

pub fn run(cmd: IgnitionCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        IgnitionCommand::Convert { to, file } => {
            let raw = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&file).map_err(|e| anyhow::anyhow!("reading {}: {e}", file.display()))?
            };
            match convert(&raw, &to) {
                Ok(json) => {
                    println!("{json}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(message) => {
                    eprintln!("error: {message}");
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        IgnitionCommand::UpgradeStub(args) => crate::cmd_bootimage::upgrade_stub(&args),
        IgnitionCommand::Stub(args) => crate::cmd_stub::run(&args),
    }
}

/// Parses, validates and converts a config; the result is written as the original writes it.
pub fn convert(raw: &str, to: &str) -> Result<String, String> {
    let target: mco_ignition::convert::Target =
        to.parse().map_err(|e: mco_ignition::convert::ConvertError| e.to_string())?;
    let parsed = mco_ignition::parse(raw.as_bytes()).map_err(|e| e.to_string())?;
    for w in &parsed.warnings {
        eprintln!("warning: {w}");
    }
    let internal = mco_ignition::to_internal(parsed.config).map_err(|e| e.to_string())?;
    let report = mco_ignition::validate::validate(&internal);
    if !report.is_ok() {
        return Err(format!("invalid Ignition config:\n{report}"));
    }
    let converted = mco_ignition::convert::convert(&internal, target).map_err(|e| e.to_string())?;
    let bytes = match &converted {
        AnyConfig::V3(c) => mco_goser::to_go_json(c, Escaping::Legacy),
        AnyConfig::V2(c) => mco_goser::to_go_json(c, Escaping::Modern),
    }
    .map_err(|e| e.to_string())?;
    String::from_utf8(bytes).map_err(|e| e.to_string())
}
