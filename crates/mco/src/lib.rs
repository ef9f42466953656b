//! The `mco` command line: offline tools over the pure crates (render, validate, convert, diff,
//! CRDs). Commands print results on stdout, problems on stderr, and exit 0 (ok), 1 (the input
//! is invalid or would be refused) or 2 (the command itself failed).

mod cmd_bootimage;
mod cmd_certs;
mod cmd_controller;
mod cmd_daemon;
mod cmd_daemon_run;
mod cmd_diff;
mod cmd_docs;
mod cmd_ignition;
mod cmd_image;
mod cmd_lab;
mod cmd_render;
mod cmd_server;
mod cmd_skew;
mod cmd_status;
mod cmd_stub;
mod cmd_validate;
pub mod manifests;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "mco", version, about = "Machine config for image-based Linux nodes on Kubernetes")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Render a pool's MachineConfigs into its rendered-<pool>-<hash> MachineConfig.
    Render(cmd_render::RenderArgs),
    /// Check manifests; print one line per problem (kind, name, field).
    Validate {
        /// Files or directories of manifests (YAML or JSON, multi-document).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// What moving a node from one rendered config to another changes and what the node must do
    /// (reboot, drain, reload, restart or nothing).
    Diff(cmd_diff::DiffArgs),
    /// The node agent: apply a rendered config to a node root, validate a node against a config.
    #[command(subcommand)]
    Daemon(cmd_daemon::DaemonCommand),
    /// Ignition config tools.
    #[command(subcommand)]
    Ignition(cmd_ignition::IgnitionCommand),
    /// OS images on OSTree: test trees, commits, OCI encapsulation (ostree-ext), inspection.
    #[command(subcommand)]
    Image(cmd_image::ImageCommand),
    /// Boot images: plan MachineSet updates from CoreOS stream metadata.
    #[command(subcommand)]
    Bootimage(cmd_bootimage::BootImageCommand),
    /// Boot image skew enforcement: the mode in effect and whether it blocks upgrades.
    #[command(subcommand)]
    Skew(cmd_skew::SkewCommand),
    /// Print the CustomResourceDefinitions of the API types as YAML.
    Crds {
        /// Only the CRDs of this API group (repeatable); deploy/base/crds.yaml holds mco's own
        /// kinds, without the Machine API's MachineSet, which a cloud provider's cluster brings, or
        /// the image configuration kinds OpenShift serves (deploy/components/image-config).
        #[arg(long = "group", value_name = "GROUP")]
        groups: Vec<String>,
        /// Only the CRD of this kind (repeatable; with `--group`: the CRDs of either).
        #[arg(long = "kind", value_name = "KIND")]
        kinds: Vec<String>,
    },
    /// The machine-config controller: render every pool's rendered config (leader-elected).
    Controller(Box<cmd_controller::ControllerArgs>),
    /// The Machine Config Server: serve each pool's config as Ignition over HTTPS.
    Server(cmd_server::ServerArgs),
    /// Certificates for the Machine Config Server.
    #[command(subcommand)]
    Certs(cmd_certs::CertsCommand),
    /// The local lab: a whole cluster with nodes on this machine.
    #[command(subcommand)]
    Lab(cmd_lab::LabCommand),
    /// Pools and nodes: configs, counts, conditions, each node's state and reason.
    Status(cmd_status::StatusArgs),
    /// Write the CLI reference (Markdown and man pages) from these definitions.
    #[command(hide = true)]
    Docs(cmd_docs::DocsArgs),
}

/// Output formats for reports: for people, or for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Report {
    Text,
    Json,
}

/// Output formats for objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Yaml,
    Json,
    /// Only the object's name.
    Name,
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Render(args) => cmd_render::run(&args),
        Command::Controller(args) => cmd_controller::run(*args),
        Command::Validate { paths } => cmd_validate::run(&paths),
        Command::Diff(args) => cmd_diff::run(&args),
        Command::Daemon(cmd) => cmd_daemon::run(cmd),
        Command::Ignition(cmd) => cmd_ignition::run(cmd),
        Command::Image(cmd) => cmd_image::run(cmd),
        Command::Bootimage(cmd) => cmd_bootimage::run(cmd),
        Command::Skew(cmd) => cmd_skew::run(cmd),
        Command::Crds { groups, kinds } => {
            let every = groups.is_empty() && kinds.is_empty();
            let crds: Vec<_> = mco_api::crds()
                .into_iter()
                .filter(|crd| every || groups.contains(&crd.spec.group) || kinds.contains(&crd.spec.names.kind))
                .collect();
            if crds.is_empty() {
                anyhow::bail!("no CRD has any of the groups {groups:?} or kinds {kinds:?}");
            }
            print!("{}", mco_api::crds_yaml(&crds));
            Ok(ExitCode::SUCCESS)
        }
        Command::Server(args) => cmd_server::run(args),
        Command::Certs(cmd) => cmd_certs::run(cmd),
        Command::Lab(cmd) => cmd_lab::run(cmd),
        Command::Status(args) => cmd_status::run(args),
        Command::Docs(args) => cmd_docs::run(&args, Cli::command()),
    }
}

/// The secure metrics port, shared by the components that serve metrics.
#[derive(Debug, clap::Args)]
pub struct SecureMetricsArgs {
    /// Answer `GET /metrics` over HTTPS on this address, to bearer tokens the API server
    /// authenticates and allows to `get` `namespace/metrics` in mco's namespace (what upstream's
    /// kube-rbac-proxy checks on port 9001).
    #[arg(long, value_name = "ADDR", value_parser = listen_address)]
    metrics_secure_listen: Option<std::net::SocketAddr>,
    /// Directory of that port's certificate (`tls.crt`, `tls.key`: a mounted Secret, reloaded when
    /// it changes). Without it, or while it holds neither file: a self-signed certificate.
    #[arg(long, value_name = "DIR", requires = "metrics_secure_listen")]
    metrics_tls_dir: Option<std::path::PathBuf>,
}

impl SecureMetricsArgs {
    pub fn options(&self) -> Option<mco_metrics_auth::SecureListen> {
        let addr = self.metrics_secure_listen?;
        Some(mco_metrics_auth::SecureListen { addr, tls_dir: self.metrics_tls_dir.clone() })
    }
}

/// A listen address, `HOST:PORT`, where HOST may also be a bare IPv6 address (what
/// `$(HOST_IP):PORT` gives on an IPv6 node: `fd00::5:8797`) besides `[fd00::5]:8797` and IPv4.
fn listen_address(value: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(address) = value.parse() {
        return Ok(address);
    }
    let bare_ipv6 = value.rsplit_once(':').and_then(|(host, port)| {
        let host: std::net::Ipv6Addr = host.parse().ok()?;
        Some(std::net::SocketAddr::from((host, port.parse::<u16>().ok()?)))
    });
    bare_ipv6.ok_or_else(|| format!("{value:?} is not an address to listen on (HOST:PORT)"))
}

#[cfg(test)]
mod listen_address_tests {
    use super::listen_address;

    #[test]
    fn ipv4_ipv6_and_bare_ipv6() {
        for (given, want) in [
            ("10.200.0.12:8797", "10.200.0.12:8797"),
            ("0.0.0.0:8798", "0.0.0.0:8798"),
            ("[fd00::5]:8797", "[fd00::5]:8797"),
            ("fd00::5:8797", "[fd00::5]:8797"),
        ] {
            assert_eq!(listen_address(given).unwrap().to_string(), want, "{given}");
        }
        for bad in ["8797", "node-1:8797", "10.0.0.1", "fd00::5:99999", ""] {
            let e = listen_address(bad).unwrap_err();
            assert!(e.contains("is not an address to listen on"), "{bad}: {e}");
        }
    }
}
