//! `mco ignition stub`: the pointer Ignition config a machine boots with.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct StubArgs {
    /// Pool whose config the machine fetches.
    #[arg(long)]
    pool: String,
    /// The server, e.g. https://api-int.example.com:22623.
    #[arg(long)]
    url: String,
    /// The server's CA certificate (PEM), embedded in the stub.
    #[arg(long, value_name = "FILE")]
    ca: PathBuf,
    /// Spec version of the stub: 3.5.0 (as upstream), 3.1.0-3.4.0 or 2.2.0 for older boot images.
    #[arg(long, default_value = "3.5.0")]
    version: String,
}

pub fn run(args: &StubArgs) -> anyhow::Result<ExitCode> {
    let ca = std::fs::read(&args.ca).with_context(|| format!("reading the CA {}", args.ca.display()))?;
    match mco_server::stub::pointer_config(&args.url, &args.pool, &ca, &args.version) {
        Ok(stub) => {
            println!("{stub}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}
