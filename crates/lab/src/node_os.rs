//! The node software of a booted lab node's OS image, beside its userland (systemd, runc and the
//! CNI plugins come from Debian): containerd with its runc shim and the kubelet, built by
//! `hack/kube-binaries.sh`, and containerd's unit, enabled in `/usr` as image-based OSes enable
//! theirs, and its configuration. The kubelet's unit and configuration are the pool's rendered
//! config's (`00-<role>`, as upstream's templates write them); what differs from machine to
//! machine ([`kubelet_drop_in`]) is written into the machine's `/etc` at its first boot, as
//! Ignition writes a node's.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use anyhow::Context as _;
use fn_error_context::context;
use serde_json::json;

use crate::machine::CONTAINERD_BINARIES;

/// containerd's unit (upstream's, without `OOMScoreAdjust`: the lab's machines may not lower a
/// score, as they lack CAP_SYS_RESOURCE).
const CONTAINERD_UNIT: &str = "[Unit]
Description=containerd container runtime
After=network.target local-fs.target

[Service]
ExecStart=/usr/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity

[Install]
WantedBy=multi-user.target
";

/// containerd's configuration: runc with systemd's cgroups, the CNI plugins Debian installs,
/// registry hosts in `/etc/containerd/certs.d` and drop-ins in `/etc/containerd/conf.d` (the
/// sandbox image), no lower OOM scores than its own (see [`CONTAINERD_UNIT`]).
const CONTAINERD_CONFIG: &str = r#"version = 3
imports = ["/etc/containerd/conf.d/*.toml"]

[plugins."io.containerd.cri.v1.images".registry]
  config_path = "/etc/containerd/certs.d"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = true

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "/etc/cni/net.d"
"#;

/// Adds the node software to the OS tree in `tree` (a test tree with the node userland).
#[context("Adding the node software to {}", tree.display())]
pub fn add_node_software(tree: &Path) -> anyhow::Result<()> {
    let bin = tree.join("usr/bin");
    std::fs::create_dir_all(&bin)?;
    let binaries = mco_testenv::find_binaries(["kubelet", CONTAINERD_BINARIES[0], CONTAINERD_BINARIES[1]])?;
    for binary in binaries {
        let to = bin.join(binary.file_name().context("a binary has a name")?);
        std::fs::copy(&binary, &to).with_context(|| format!("copying {}", binary.display()))?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))?;
    }
    let units = tree.join("usr/lib/systemd/system");
    std::fs::create_dir_all(units.join("multi-user.target.wants"))?;
    std::fs::write(units.join("containerd.service"), CONTAINERD_UNIT)?;
    std::os::unix::fs::symlink("../containerd.service", units.join("multi-user.target.wants/containerd.service"))
        .context("enabling containerd.service")?;
    let config = tree.join("usr/etc/containerd");
    std::fs::create_dir_all(&config)?;
    std::fs::write(config.join("config.toml"), CONTAINERD_CONFIG)?;
    // Debian's netbase would bring it; containerd gives every pod a copy.
    std::fs::write(tree.join("usr/etc/hosts"), "127.0.0.1 localhost\n::1 localhost ip6-localhost\n")?;
    Ok(())
}

/// The kubelet's settings every lab machine needs, booted or not: on machines with cgroups v1
/// and without CAP_SYS_RESOURCE, no failing on cgroups v1, no node allocatable enforcement, no
/// open-files limit above the hard one, the kernel's settings left as they are; beside other
/// machines on one disk, no eviction (but at the last MiB of memory: every signal, so that none
/// keeps a threshold of the pool's configuration) and no image garbage collection; no serving
/// certificate to wait for.
pub(crate) fn lab_kubelet_settings() -> serde_json::Map<String, serde_json::Value> {
    let settings = json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": false,
        // Not empty: the kubelet merges its drop-ins through JSON, where an empty list or map
        // vanishes and takes the default ("pods", the default thresholds) again.
        "enforceNodeAllocatable": ["none"],
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1Mi",
            "nodefs.inodesFree": "1",
            "imagefs.available": "1Mi",
            "imagefs.inodesFree": "1",
        },
        "failSwapOn": false,
        "imageGCHighThresholdPercent": 100,
        "maxOpenFiles": crate::machine::MAX_OPEN_FILES,
        "serverTLSBootstrap": false,
        "rotateCertificates": false,
        "protectKernelDefaults": false,
    });
    let serde_json::Value::Object(settings) = settings else { unreachable!("a JSON object") };
    settings
}

/// The kubelet's drop-in for booted machine `index` (over the pool's configuration):
/// [`lab_kubelet_settings`], the node's own address, systemd's cgroups and containerd's default
/// socket.
pub fn kubelet_drop_in(index: usize, client_ca: &str) -> serde_json::Value {
    let address = crate::network::node_address(index).to_string();
    let mut settings = lab_kubelet_settings();
    settings.extend([
        ("cgroupDriver".into(), json!("systemd")),
        ("address".into(), json!(address)),
        ("healthzBindAddress".into(), json!(address)),
        ("containerRuntimeEndpoint".into(), json!("unix:///run/containerd/containerd.sock")),
        ("authentication".into(), json!({"x509": {"clientCAFile": client_ca}})),
    ]);
    serde_json::Value::Object(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_runs_under_systemds_cgroups_and_reads_the_nodes_own_settings() {
        let config: toml::Table = CONTAINERD_CONFIG.parse().unwrap();
        let cri = &config["plugins"]["io.containerd.cri.v1.runtime"];
        assert_eq!(cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"].as_bool(), Some(true));
        assert_eq!(cri["restrict_oom_score_adj"].as_bool(), Some(true));
        assert_eq!(config["imports"][0].as_str(), Some("/etc/containerd/conf.d/*.toml"));
        assert!(!CONTAINERD_UNIT.contains("OOMScoreAdjust"));
        let kubelet = kubelet_drop_in(2, "/etc/kubernetes/kubelet-ca.crt");
        assert_eq!(kubelet["cgroupDriver"], "systemd");
        assert_eq!(kubelet["address"], "10.200.0.12");
        assert_eq!(kubelet["containerRuntimeEndpoint"], "unix:///run/containerd/containerd.sock");
    }
}
