//! `mco certs`: certificates for the Machine Config Server.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum CertsCommand {
    /// Create a CA (ca.crt, ca.key) and a serving certificate it signed (tls.crt, tls.key) whose
    /// subjectAltName holds every given name; existing files are never replaced.
    Create {
        /// Output directory (created if missing).
        #[arg(long)]
        dir: PathBuf,
        /// Host names and IP addresses the server is reached by, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        san: Vec<String>,
    },
}

pub fn run(cmd: CertsCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CertsCommand::Create { dir, san } => {
            let generated = match mco_server::certs::generate(&san) {
                Ok(g) => g,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            mco_server::certs::write(&dir, &generated)?;
            for name in [
                mco_server::certs::CA_CERT,
                mco_server::certs::CA_KEY,
                mco_server::certs::TLS_CERT,
                mco_server::certs::TLS_KEY,
            ] {
                println!("{}", dir.join(name).display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
