//! The node software of a booted lab node's OS image, beside its userland (systemd, runc and the
//! CNI plugins come from Debian): containerd with its runc shim, built by `hack/kube-binaries.sh`
//! (the kubelet, built there too, is the node image's layer: [`crate::images`]), and containerd's unit, enabled in `/usr` as image-based OSes enable
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

/// `ostree-finalize-staged.service`, which the daemon's reboot requires (upstream's
/// `systemd-run -p Requires=ostree-finalize-staged.service`). The lab's deployments are written
/// whole when they are staged, and what finalization does at shutdown (dropping what the new
/// default deployment replaces) the lab's bootloader does at the next power-on (`mco image boot`):
/// here the unit has nothing to do.
const FINALIZE_STAGED_UNIT: &str = "[Unit]
Description=OSTree Finalize Staged Deployment (the lab's bootloader finalizes at boot)
DefaultDependencies=no

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/true
";

/// Where every container's scope takes its drop-ins from (systemd truncates a unit's name after
/// each dash to find them: `cri-containerd-<id>.scope` reads `cri-containerd-.scope.d`).
const CONTAINER_SCOPE_DROP_INS: &str = "cri-containerd-.scope.d";
/// At shutdown, containerd goes before the containers' scopes. On the lab's hybrid cgroup hierarchy
/// systemd learns that a scope it is stopping is empty only by reading the scope's
/// `cgroup.events` once its last process exited; a running containerd sees that exit too and has
/// runc remove the cgroup, and when runc is first, systemd's read fails and it waits out the
/// 90-second stop timeout for a scope that no longer exists (a reboot of 90 s instead of one).
/// With containerd stopped first, only systemd removes the scopes' cgroups.
const CONTAINER_SCOPE_STOP_ORDER: &str = "[Unit]
Before=containerd.service
";

/// Presets of the lab's OS images, ahead of Debian's: the lab configures each machine's network
/// (its address and route, as a cloud's DHCP would), so nothing on the machine manages it or
/// waits for it to come online.
const LAB_PRESETS: &str = "disable systemd-networkd.service
disable systemd-networkd.socket
disable systemd-networkd-wait-online.service
disable systemd-network-generator.service
";

/// The `core` user image-based OSes ship (uid 1000), which Ignition and MachineConfigs configure.
const CORE_USER: [(&str, &str); 4] = [
    ("passwd", "core:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n"),
    ("group", "core:x:1000:\n"),
    ("shadow", "core:*:19000:0:99999:7:::\n"),
    ("gshadow", "core:!::\n"),
];

/// Adds the node software but the kubelet to the OS tree in `tree` (a test tree with the node
/// userland): the lab's node image adds the kubelet in a layer of its own, `FROM` the base image.
#[context("Adding the node software to {}", tree.display())]
pub fn add_node_software(tree: &Path) -> anyhow::Result<()> {
    let bin = tree.join("usr/bin");
    std::fs::create_dir_all(&bin)?;
    let binaries = mco_testenv::find_binaries(CONTAINERD_BINARIES)?;
    for binary in binaries {
        let to = bin.join(binary.file_name().context("a binary has a name")?);
        std::fs::copy(&binary, &to).with_context(|| format!("copying {}", binary.display()))?;
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))?;
    }
    let units = tree.join("usr/lib/systemd/system");
    std::fs::create_dir_all(units.join("multi-user.target.wants"))?;
    std::fs::write(units.join("containerd.service"), CONTAINERD_UNIT)?;
    std::fs::write(units.join("ostree-finalize-staged.service"), FINALIZE_STAGED_UNIT)?;
    let scope_drop_ins = units.join(CONTAINER_SCOPE_DROP_INS);
    std::fs::create_dir_all(&scope_drop_ins)?;
    std::fs::write(scope_drop_ins.join("50-stop-after-containerd.conf"), CONTAINER_SCOPE_STOP_ORDER)?;
    // A machine's first boot has no one at its console to answer systemd-firstboot's prompts
    // (image-based OSes do not ship it): masked.
    let firstboot_wizard = units.join("systemd-firstboot.service");
    if firstboot_wizard.exists() {
        std::fs::remove_file(&firstboot_wizard)?;
    }
    std::os::unix::fs::symlink("/dev/null", &firstboot_wizard).context("masking systemd-firstboot.service")?;
    let presets = tree.join("usr/lib/systemd/system-preset");
    std::fs::create_dir_all(&presets)?;
    std::fs::write(presets.join("40-mco-lab.preset"), LAB_PRESETS)?;
    std::os::unix::fs::symlink("../containerd.service", units.join("multi-user.target.wants/containerd.service"))
        .context("enabling containerd.service")?;
    let config = tree.join("usr/etc/containerd");
    std::fs::create_dir_all(&config)?;
    std::fs::write(config.join("config.toml"), CONTAINERD_CONFIG)?;
    // Debian's netbase would bring it; containerd gives every pod a copy.
    std::fs::write(tree.join("usr/etc/hosts"), "127.0.0.1 localhost\n::1 localhost ip6-localhost\n")?;
    for (file, line) in CORE_USER {
        let path = tree.join("usr/etc").join(file);
        let mut text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        text.push_str(line);
        std::fs::write(&path, text)?;
    }
    // Each machine's first boot applies the presets (Ignition's enable the units a config enables).
    std::fs::write(tree.join("usr/etc/machine-id"), "uninitialized\n")?;
    Ok(())
}

/// The kubelet's settings every lab machine needs: on machines with cgroups v1
/// and without CAP_SYS_RESOURCE, no failing on cgroups v1, no node allocatable enforcement, no
/// open-files limit above the hard one, the kernel's settings set (in the machine's own copies of
/// those that are the whole host's: `boot::KUBELET_KERNEL_SETTINGS`); beside other
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

/// The kubelet's drop-in for a booted machine (over the pool's configuration):
/// [`lab_kubelet_settings`], systemd's cgroups and containerd's default socket.
pub fn kubelet_drop_in(client_ca: &str) -> serde_json::Value {
    let mut settings = lab_kubelet_settings();
    settings.extend([
        ("cgroupDriver".into(), json!("systemd")),
        ("containerRuntimeEndpoint".into(), json!("unix:///run/containerd/containerd.sock")),
        ("authentication".into(), json!({"x509": {"clientCAFile": client_ca}})),
    ]);
    serde_json::Value::Object(settings)
}

/// What the lab, as a machine's installer and its cloud, gives each machine besides the pool's
/// config: its name, address, zone and taints, its kubelet's credentials, the cluster's client CA,
/// the lab registry's place and the sandbox image.
#[derive(Debug, Clone)]
pub struct MachineSettings {
    pub name: String,
    /// Picks its address and pod subnet.
    pub index: usize,
    pub zone: String,
    /// `KEY[=VALUE]:EFFECT` taints the kubelet registers its Node with (a control-plane node's).
    pub taints: Vec<String>,
    /// A kubeconfig with the kubelet's client certificate (`system:node:<name>`).
    pub kubeconfig: String,
    /// The CA that signs the API server's clients (PEM).
    pub client_ca: String,
    /// `127.0.0.1:<port>`: the lab registry, plain HTTP, also reachable as [`crate::images::REGISTRY_ALIAS`].
    pub registry: String,
    /// The sandbox ("pause") image, by digest.
    pub sandbox_image: String,
}

/// Where the kubelet finds the client CA ([`MachineSettings::client_ca`]), as upstream's do.
const KUBELET_CA: &str = "/etc/kubernetes/kubelet-ca.crt";

/// The files each machine has of its own, by their path on the machine (pure).
pub fn machine_files(settings: &MachineSettings) -> Vec<(String, String)> {
    let mut drop_in = kubelet_drop_in(KUBELET_CA);
    let taints: Vec<serde_json::Value> = settings.taints.iter().map(|taint| taint_of(taint)).collect();
    drop_in["registerWithTaints"] = json!(taints);
    let env = format!(
        "KUBELET_NODE_NAME={}\nKUBELET_NODE_IP={}\nCUSTOM_KUBELET_LABELS=topology.kubernetes.io/zone={}\n",
        settings.name,
        crate::network::node_address(settings.index),
        settings.zone
    );
    let cni = json!({
        "cniVersion": "0.4.0",
        "name": "mco-lab",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "hairpinMode": true,
                // Pods reach the other nodes' pods and Service addresses through the machine's
                // default route (the lab routes each pod subnet to its node).
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": crate::network::pod_subnet(settings.index)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    });
    let hosts = format!("server = \"http://{}\"\n", settings.registry);
    let sandbox = format!(
        "[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = \"{}\"\n",
        settings.sandbox_image
    );
    let mut files = vec![
        (crate::manifests::KUBELET_ENV.to_string(), env),
        (format!("{}/50-lab-machine.conf", crate::manifests::KUBELET_CONFIG_DIR), drop_in.to_string()),
        (KUBELET_CA.to_string(), settings.client_ca.clone()),
        (crate::manifests::NODE_KUBECONFIG.to_string(), settings.kubeconfig.clone()),
        ("/etc/cni/net.d/10-mco-lab.conflist".to_string(), cni.to_string()),
        ("/etc/containerd/conf.d/50-sandbox.toml".to_string(), sandbox),
    ];
    for host in [settings.registry.as_str(), crate::images::REGISTRY_ALIAS] {
        files.push((format!("/etc/containerd/certs.d/{host}/hosts.toml"), hosts.clone()));
    }
    files
}

/// A `KEY[=VALUE]:EFFECT` taint as the kubelet's configuration has it (pure).
fn taint_of(taint: &str) -> serde_json::Value {
    let (key_value, effect) = taint.rsplit_once(':').unwrap_or((taint, ""));
    let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
    json!({"key": key, "value": value, "effect": effect})
}

/// Writes what a machine needs before its first boot on its disk, the OSTree sysroot `sysroot`
/// that `mco image install` made: its own files ([`machine_files`]) in the installed deployment
/// (`/var` in its stateroot's), and the Ignition config it boots with and the first-boot stamp
/// on `/boot`, where coreos-installer leaves them.
#[context("Writing machine {}'s settings into {}", settings.name, sysroot.display())]
pub fn install_machine(sysroot: &Path, settings: &MachineSettings, ignition: &str) -> anyhow::Result<()> {
    let status = mco_os::sysroot::status(sysroot, &mco_os::sysroot::default_cmdline(sysroot))?;
    let deployment = status.booted().context("the sysroot has no default deployment")?;
    let stateroot_var = sysroot.join("ostree/deploy").join(&deployment.stateroot).join("var");
    let root = sysroot.join(&deployment.path);
    for (path, contents) in machine_files(settings) {
        let file = match path.strip_prefix("/var/") {
            Some(in_var) => stateroot_var.join(in_var),
            None => root.join(path.trim_start_matches('/')),
        };
        std::fs::create_dir_all(file.parent().context("a file has a directory")?)?;
        std::fs::write(&file, contents).with_context(|| format!("writing {}", file.display()))?;
    }
    let config = sysroot.join(crate::boot::IGNITION_CONFIG);
    std::fs::create_dir_all(config.parent().context("a file has a directory")?)?;
    std::fs::write(&config, ignition).with_context(|| format!("writing {}", config.display()))?;
    std::fs::write(sysroot.join(crate::boot::FIRSTBOOT_STAMP), "")?;
    Ok(())
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
        let kubelet = kubelet_drop_in("/etc/kubernetes/kubelet-ca.crt");
        assert_eq!(kubelet["cgroupDriver"], "systemd");
        assert_eq!(kubelet["containerRuntimeEndpoint"], "unix:///run/containerd/containerd.sock");
    }

    #[test]
    fn each_machine_has_its_name_address_zone_taints_and_credentials() {
        let settings = MachineSettings {
            name: "master-0".into(),
            index: 0,
            zone: "lab-a".into(),
            taints: vec!["node-role.kubernetes.io/master:NoSchedule".into(), "k=v:NoExecute".into()],
            kubeconfig: "kubeconfig".into(),
            client_ca: "ca".into(),
            registry: "127.0.0.1:5000".into(),
            sandbox_image: "127.0.0.1:5000/lab/pause@sha256:00".into(),
        };
        let files: std::collections::BTreeMap<String, String> = machine_files(&settings).into_iter().collect();
        assert_eq!(
            files["/etc/kubernetes/kubelet-env"],
            "KUBELET_NODE_NAME=master-0\nKUBELET_NODE_IP=10.200.0.10\nCUSTOM_KUBELET_LABELS=topology.kubernetes.io/zone=lab-a\n"
        );
        let drop_in: serde_json::Value =
            serde_json::from_str(&files["/etc/kubernetes/kubelet.conf.d/50-lab-machine.conf"]).unwrap();
        assert_eq!(
            drop_in["registerWithTaints"],
            json!([
                {"key": "node-role.kubernetes.io/master", "value": "", "effect": "NoSchedule"},
                {"key": "k", "value": "v", "effect": "NoExecute"},
            ])
        );
        assert_eq!(drop_in["authentication"]["x509"]["clientCAFile"], KUBELET_CA);
        assert_eq!(files[KUBELET_CA], "ca");
        assert_eq!(files["/var/lib/kubelet/kubeconfig"], "kubeconfig");
        let cni: serde_json::Value = serde_json::from_str(&files["/etc/cni/net.d/10-mco-lab.conflist"]).unwrap();
        assert_eq!(cni["plugins"][0]["ipam"]["ranges"][0][0]["subnet"], "10.244.1.0/24");
        assert_eq!(cni["plugins"][0]["ipam"]["routes"], json!([{"dst": "0.0.0.0/0"}]));
        for host in ["127.0.0.1:5000", "lab-registry.local"] {
            assert_eq!(
                files[&format!("/etc/containerd/certs.d/{host}/hosts.toml")],
                "server = \"http://127.0.0.1:5000\"\n"
            );
        }
        let sandbox: toml::Table = files["/etc/containerd/conf.d/50-sandbox.toml"].parse().unwrap();
        assert_eq!(
            sandbox["plugins"]["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"].as_str(),
            Some("127.0.0.1:5000/lab/pause@sha256:00")
        );
    }
}
