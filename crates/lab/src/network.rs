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

/// The lowest port the lab's namespace hands out for port 0: above every fixed port the lab's
/// components listen on (kubelet 10248-10250, the Machine Config Server's 22623/22624).
const LOWEST_EPHEMERAL_PORT: u16 = 24000;
/// The fewest ports the lab's namespace may hand out for port 0.
const MIN_EPHEMERAL_PORTS: u32 = 4096;

/// The ephemeral port range of the lab's namespace: disjoint from the host's, so the ports bound
/// in the host's namespace and forwarded to the same number inside are never what a component
/// of the lab gets for port 0 (the Machine Config Server once failed to listen on its forwarded
/// port because kube-controller-manager had been given it). The larger gap beside the host's
/// range, or `None` when neither holds [`MIN_EPHEMERAL_PORTS`].
fn lab_ephemeral_ports(host: (u16, u16)) -> Option<(u16, u16)> {
    let (low, high) = host;
    let gaps = [(LOWEST_EPHEMERAL_PORT, low.saturating_sub(1)), (high.saturating_add(1), u16::MAX)];
    let size = |&(from, to): &(u16, u16)| (u32::from(to) + 1).saturating_sub(u32::from(from));
    gaps.into_iter().filter(|gap| size(gap) >= MIN_EPHEMERAL_PORTS).max_by_key(size)
}

/// Parses `/proc/sys/net/ipv4/ip_local_port_range` ("32768\t60999").
fn parse_port_range(text: &str) -> anyhow::Result<(u16, u16)> {
    let mut words = text.split_whitespace().map(str::parse::<u16>);
    match (words.next(), words.next(), words.next()) {
        (Some(Ok(low)), Some(Ok(high)), None) if low <= high => Ok((low, high)),
        _ => anyhow::bail!("not a port range: {text:?}"),
    }
}

const PORT_RANGE: &str = "/proc/sys/net/ipv4/ip_local_port_range";

/// Binds `N` free loopback ports in the host's network namespace, then moves this process into a
/// new network namespace whose ephemeral ports are disjoint from the host's. Must be called before
/// the process starts any other thread: only the calling thread moves, and the threads it starts
/// afterwards follow it.
pub fn enter_lab_namespace<const N: usize>() -> anyhow::Result<[TcpListener; N]> {
    let host_range = std::fs::read_to_string(PORT_RANGE).with_context(|| format!("reading {PORT_RANGE}"))?;
    let host_range = parse_port_range(&host_range).with_context(|| format!("reading {PORT_RANGE}"))?;
    let (low, high) = lab_ephemeral_ports(host_range).with_context(|| {
        format!(
            "the host's ephemeral ports ({}-{}) leave no {MIN_EPHEMERAL_PORTS} ports between {LOWEST_EPHEMERAL_PORT} and {} for the lab's namespace",
            host_range.0,
            host_range.1,
            u16::MAX
        )
    })?;
    let mut listeners = Vec::with_capacity(N);
    for _ in 0..N {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a loopback port")?;
        listener.set_nonblocking(true)?;
        listeners.push(listener);
    }
    // SAFETY: only NEWNET, which leaves file descriptors shared; no other thread exists yet.
    unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNET) }
        .context("creating the lab's network namespace (needs root)")?;
    // /proc/sys/net is the namespace of the thread that opens it: the new one.
    std::fs::write(PORT_RANGE, format!("{low} {high}"))
        .with_context(|| format!("setting the lab namespace's ephemeral ports to {low}-{high}"))?;
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

/// The name of a booted machine's end of its cable on the lab's side (at most 15 bytes).
fn cable(index: usize) -> String {
    format!("mco-node{index}")
}

/// Removes node `index`'s cable if there is one: left by a supervisor that died, or by the
/// machine's previous boot, whose namespace (and the cable with it) the kernel tears down in the
/// background, so it may vanish between a look and `ip link del` (a reboot once failed so).
#[context("Unplugging node {index} from the lab's bridge")]
pub async fn unplug(index: usize, log: &Path) -> anyhow::Result<()> {
    let ip = Path::new("ip");
    let cable = cable(index);
    match run_tool(ip, ["link", "del", &cable], &[], log).await {
        Err(_) if run_tool(ip, ["link", "show", &cable], &[], log).await.is_err() => Ok(()),
        deleted => deleted.map(drop),
    }
}

/// Plugs the booted machine whose PID 1 is `init` (in a network namespace of its own) into the lab
/// bridge as node `index`, as a cloud's network and DHCP would: a veth pair, its end inside named
/// `eth0` with the node's address, loopback up, the default route through the lab's side (which
/// routes between the nodes and their pods and has no way out), and the lab's route to the node's
/// pod subnet through it.
#[context("Plugging node {index} into the lab's bridge")]
pub async fn plug_in(init: rustix::process::Pid, index: usize, log: &Path) -> anyhow::Result<()> {
    let ip = Path::new("ip");
    let cable = cable(index);
    let pid = init.as_raw_nonzero().to_string();
    unplug(index, log).await?;
    run_tool(ip, ["link", "add", &cable, "type", "veth", "peer", "name", "eth0", "netns", &pid], &[], log).await?;
    run_tool(ip, ["link", "set", &cable, "master", BRIDGE, "up"], &[], log).await?;
    let address = format!("{}/24", node_address(index));
    let gateway = APISERVER_ADDRESS.to_string();
    for args in [
        &["link", "set", "lo", "up"][..],
        &["addr", "add", &address, "dev", "eth0"],
        &["link", "set", "eth0", "up"],
        &["route", "add", "default", "via", &gateway],
    ] {
        let inside = ["--net", "--target", &pid, "ip"].into_iter().chain(args.iter().copied());
        run_tool(Path::new("nsenter"), inside, &[], log).await?;
    }
    // The lab routes the node's pods through it, as a cloud's network routes a node's pod subnet.
    let via = node_address(index).to_string();
    run_tool(ip, ["route", "replace", &pod_subnet(index), "via", &via], &[], log).await?;
    Ok(())
}

/// Listens on `ports` of the loopback of the network namespace of the process `pid` (a booted
/// machine's) and forwards every connection to the same port on this namespace's loopback (the
/// lab's), as [`forward`] does from the host: the lab's `127.0.0.1:PORT` addresses (the API
/// server's in every kubeconfig, the registry's in every image name) work on the machine too. The
/// forwarding stops when the returned tasks are aborted (the machine's power-off).
#[context("Forwarding ports {ports:?} of the machine with PID 1 {pid}")]
pub fn forward_into(pid: rustix::process::Pid, ports: &[u16]) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let namespace = std::fs::File::open(format!("/proc/{pid}/ns/net", pid = pid.as_raw_nonzero()))?;
    let ports = ports.to_vec();
    // A thread of its own enters the machine's namespace: sockets keep the namespace they were made in.
    let listeners = std::thread::spawn(move || -> anyhow::Result<Vec<TcpListener>> {
        rustix::thread::move_into_link_name_space(
            std::os::fd::AsFd::as_fd(&namespace),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )?;
        ports
            .iter()
            .map(|port| {
                let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, *port))?;
                listener.set_nonblocking(true)?;
                Ok(listener)
            })
            .collect()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the thread binding the machine's ports panicked"))??;
    listeners
        .into_iter()
        .map(|listener| {
            let port = listener.local_addr()?.port();
            balance(listener, vec![SocketAddr::from((Ipv4Addr::LOCALHOST, port))])
        })
        .collect()
}

/// Forwards every connection to `listener` (a host loopback port) to the same port on the lab's
/// loopback, until the runtime stops.
pub fn forward(listener: TcpListener) -> anyhow::Result<()> {
    let port = listener.local_addr()?.port();
    balance(listener, vec![SocketAddr::from((Ipv4Addr::LOCALHOST, port))]).map(drop)
}

/// Forwards every connection to `listener` to the first of `backends` that accepts it, as a
/// cloud's TCP load balancer in front of the control plane does, until the runtime stops or the
/// returned task is aborted.
pub fn balance(listener: TcpListener, backends: Vec<SocketAddr>) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let backends = std::sync::Arc::new(backends);
    Ok(tokio::spawn(async move {
        loop {
            let (mut outside, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(?backends, "accepting a connection to forward: {e}");
                    // Out of file descriptors, say: not a reason to spin.
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
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
    }))
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

    #[test]
    fn the_lab_namespace_hands_out_ports_the_host_never_does() {
        for (host, lab) in [
            // Linux's default: the gap below is the larger.
            ((32768, 60999), Some((24000, 32767))),
            // A host range starting low leaves the gap above.
            ((1024, 50000), Some((50001, 65535))),
            ((24000, 60000), Some((60001, 65535))),
            // Both gaps too small.
            ((26000, 63000), None),
            ((1024, 65535), None),
        ] {
            assert_eq!(lab_ephemeral_ports(host), lab, "host range {host:?}");
            if let Some((low, high)) = lab {
                assert!(high < host.0 || low > host.1, "{lab:?} overlaps {host:?}");
                assert!(low >= LOWEST_EPHEMERAL_PORT);
            }
        }
    }

    #[test]
    fn port_ranges_are_read_as_the_kernel_writes_them() {
        assert_eq!(parse_port_range("32768\t60999\n").unwrap(), (32768, 60999));
        for bad in ["", "32768", "60999 32768", "1 2 3", "a b", "70000 80000"] {
            let error = parse_port_range(bad).unwrap_err().to_string();
            assert!(error.contains("not a port range"), "{bad:?}: {error}");
        }
    }
}
