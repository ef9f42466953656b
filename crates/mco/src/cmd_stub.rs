//! `mco ignition stub`: the pointer Ignition config a machine boots with.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use mco_server::stub::StubOptions;

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
    /// The boot image version the machine tells the server (the aleph `build`, e.g.
    /// 9.6.20251023-0), so a too-old boot image is refused: a request header (spec 3.1+) or a
    /// query parameter (2.2).
    #[arg(long, value_name = "V")]
    boot_image_version: Option<String>,
    /// Seconds Ignition may spend fetching the config, retries included (timeouts.httpTotal);
    /// without it Ignition retries a refused fetch forever.
    #[arg(long, value_name = "SECONDS")]
    http_total_timeout: Option<i64>,
}

pub fn run(args: &StubArgs) -> anyhow::Result<ExitCode> {
    let ca = std::fs::read(&args.ca).with_context(|| format!("reading the CA {}", args.ca.display()))?;
    let options = StubOptions {
        boot_image_version: args.boot_image_version.as_deref(),
        http_total_timeout: args.http_total_timeout,
    };
    match mco_server::stub::pointer_config(&args.url, &args.pool, &ca, &args.version, options) {
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
