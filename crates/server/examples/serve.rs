//! A bootstrap server on loopback for benchmarks (`hack/bench-server.sh`), without the `mco`
//! binary's other subsystems: `serve DIR CERTDIR` creates a certificate in CERTDIR if there is
//! none, then serves DIR on ephemeral HTTPS and HTTP ports (printed on stderr) until SIGTERM.

use std::path::PathBuf;

fn main() -> anyhow::Result<()> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [dir, certs] = args.as_slice() else { anyhow::bail!("usage: serve DIR CERTDIR") };
    if !certs.join(mco_server::certs::TLS_CERT).exists() {
        mco_server::certs::write(certs, &mco_server::certs::generate(&["127.0.0.1".to_string()])?)?;
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(mco_server::run::run(mco_server::run::Options {
        mode: mco_server::run::Mode::Bootstrap {
            dir: dir.clone(),
            kubeconfig: dir.join("kubeconfig"),
            certs: Vec::new(),
        },
        tls_cert: certs.join(mco_server::certs::TLS_CERT),
        tls_key: certs.join(mco_server::certs::TLS_KEY),
        listen: "127.0.0.1:0".parse()?,
        insecure_listen: Some("127.0.0.1:0".parse()?),
        limits: mco_server::Limits::default(),
        cache_bytes: mco_server::cache::DEFAULT_CAPACITY,
        metrics: Default::default(),
    }))
}
