//! The lab's network: a network namespace of its own, with no route out of it, holding every
//! address of the cluster (the API server's, the nodes', the pods' bridges, the Service IPs that
//! kube-proxy translates). A connection from the host's namespace to an address nothing answers
//! may leave the machine by its default route; inside the lab's namespace it cannot.
//!
//! The supervisor binds the loopback ports the host reaches the lab by (API server, registry,
//! Machine Config Server) in the host's namespace, moves into the new namespace, and forwards
//! each of them to the same port on the lab's loopback, where the service listens: the same
//! `127.0.0.1:PORT` works on both sides, so one kubeconfig serves `kubectl` and the kubelets.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;

use anyhow::Context as _;
use fn_error_context::context;
use rustix::thread::UnshareFlags;

use crate::process::run_tool;

/// The bridge that holds the API server's and the nodes' addresses.
const BRIDGE: &str = "mco-lab";
/// Where pods reach the API server (the endpoint of the `kubernetes` Service).
pub const APISERVER_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
/// The pods of every node; each node has one /24 of it ([`pod_subnet`]).
pub const CLUSTER_CIDR: &str = "10.244.0.0/16";
/// Lab nodes a network can hold (addresses 10.200.0.10 and up, pod subnets 10.244.1.0/24 and up).
pub const MAX_NODES: usize = 240;

/// Node `index`'s address.
pub fn node_address(index: usize) -> Ipv4Addr {
    assert!(index < MAX_NODES, "the lab network holds {MAX_NODES} nodes");
    Ipv4Addr::new(10, 200, 0, 10 + index as u8)
}

/// Node `index`'s pod subnet.
pub fn pod_subnet(index: usize) -> String {
    assert!(index < MAX_NODES, "the lab network holds {MAX_NODES} nodes");
    format!("10.244.{}.0/24", index + 1)
}

/// Binds `N` free loopback ports in the host's network namespace, then moves this process into a
/// new network namespace. Must be called before the process starts any other thread: only the
/// calling thread moves, and the threads it starts afterwards follow it.
pub fn enter_lab_namespace<const N: usize>() -> anyhow::Result<[TcpListener; N]> {
    let mut listeners = Vec::with_capacity(N);
    for _ in 0..N {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a loopback port")?;
        listener.set_nonblocking(true)?;
        listeners.push(listener);
    }
    // SAFETY: only NEWNET, which leaves file descriptors shared; no other thread exists yet.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }
        .context("creating the lab's network namespace (needs root)")?;
    Ok(listeners.try_into().unwrap_or_else(|_| unreachable!("N listeners were bound")))
}

/// Brings up loopback and the lab bridge with the API server's address and the default route, and
/// lets the namespace route between the nodes' pod bridges.
#[context("Setting up the lab's network namespace")]
pub async fn set_up(log: &Path) -> anyhow::Result<()> {
    let ip = Path::new("ip");
    run_tool(ip, ["link", "set", "lo", "up"], &[], log).await?;
    run_tool(ip, ["link", "add", BRIDGE, "type", "bridge"], &[], log).await?;
    run_tool(ip, ["addr", "add", &format!("{APISERVER_ADDRESS}/24"), "dev", BRIDGE], &[], log).await?;
    run_tool(ip, ["link", "set", BRIDGE, "up"], &[], log).await?;
    // A node's host network has a default route, which is what lets its host-network pods (mco's
    // daemons) reach Service IPs: kube-proxy rewrites them after the kernel found a route. Here it
    // ends on the lab's bridge, which has no way out.
    run_tool(ip, ["route", "add", "default", "dev", BRIDGE], &[], log).await?;
    // /proc/sys/net is the namespace of the process that writes it: this one.
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1").context("enabling IP forwarding")
}

/// Gives node `index` its address on the lab bridge (once: a rebooted node keeps it).
pub async fn add_node_address(index: usize, log: &Path) -> anyhow::Result<()> {
    let address = format!("{}/24", node_address(index));
    let shown = run_tool(Path::new("ip"), ["-o", "addr", "show", "dev", BRIDGE], &[], log).await?;
    if !shown.split_whitespace().any(|word| word == address) {
        run_tool(Path::new("ip"), ["addr", "add", &address, "dev", BRIDGE], &[], log).await?;
    }
    Ok(())
}

/// Forwards every connection to `listener` (a host loopback port) to the same port on the lab's
/// loopback, until the runtime stops.
pub fn forward(listener: TcpListener) -> anyhow::Result<()> {
    let port = listener.local_addr()?.port();
    balance(listener, vec![SocketAddr::from((Ipv4Addr::LOCALHOST, port))])
}

/// Forwards every connection to `listener` to the first of `backends` that accepts it, as a
/// cloud's TCP load balancer in front of the control plane does, until the runtime stops.
pub fn balance(listener: TcpListener, backends: Vec<SocketAddr>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let backends = std::sync::Arc::new(backends);
    tokio::spawn(async move {
        loop {
            let (mut outside, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(?backends, "accepting a connection to forward: {e}");
                    continue;
                }
            };
            let backends = backends.clone();
            tokio::spawn(async move {
                for backend in backends.iter() {
                    match tokio::net::TcpStream::connect(backend).await {
                        Ok(mut inside) => {
                            let _ = tokio::io::copy_bidirectional(&mut outside, &mut inside).await;
                            return;
                        }
                        Err(e) => tracing::debug!(%backend, "nothing answers inside the lab: {e}"),
                    }
                }
            });
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_get_distinct_addresses_and_pod_subnets_off_the_api_servers() {
        assert_eq!(node_address(0), Ipv4Addr::new(10, 200, 0, 10));
        assert_eq!(node_address(MAX_NODES - 1), Ipv4Addr::new(10, 200, 0, 249));
        assert_eq!(pod_subnet(0), "10.244.1.0/24");
        assert_eq!(pod_subnet(2), "10.244.3.0/24");
        assert!((0..MAX_NODES).all(|i| node_address(i) != APISERVER_ADDRESS));
    }
}
