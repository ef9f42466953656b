//! `mco server`: the Machine Config Server (bootstrap mode: serves from a directory).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Directory in the upstream bootstrap layout: machine-pools/<pool>.yaml (status.configuration.name
    /// names the rendered config), machine-configs/<name>.yaml,
    /// controller-config/machine-config-controller.yaml.
    #[arg(long, value_name = "DIR")]
    bootstrap_dir: PathBuf,
    /// Kubeconfig served to machines as /etc/kubernetes/kubeconfig.
    #[arg(long, value_name = "FILE")]
    bootstrap_kubeconfig: PathBuf,
    /// Registry CA served as /etc/docker/certs.d/HOST/ca.crt; FILE is relative to the directory.
    #[arg(long = "bootstrap-certs", value_name = "HOST=FILE")]
    bootstrap_certs: Vec<String>,
    /// Serving certificate (PEM chain); re-read when it changes.
    #[arg(long, value_name = "FILE")]
    tls_cert: PathBuf,
    /// Key of the serving certificate (PEM); re-read when it changes.
    #[arg(long, value_name = "FILE")]
    tls_key: PathBuf,
    /// Address of the HTTPS listener.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:22623")]
    listen: SocketAddr,
    /// Address of an additional plain HTTP listener (upstream: port 22624).
    #[arg(long, value_name = "ADDR")]
    insecure_listen: Option<SocketAddr>,
}

pub fn run(args: ServerArgs) -> anyhow::Result<ExitCode> {
    mco_server::run::run(mco_server::run::Options {
        bootstrap_dir: args.bootstrap_dir,
        bootstrap_kubeconfig: args.bootstrap_kubeconfig,
        bootstrap_certs: args.bootstrap_certs,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        listen: args.listen,
        insecure_listen: args.insecure_listen,
        limits: mco_server::Limits::default(),
    })?;
    Ok(ExitCode::SUCCESS)
}
