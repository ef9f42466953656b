//! Leaving an on-cluster layered OS image on a host whose `/etc` is merged (rpm-ostree, bootc).
//!
//! The layered image holds the rendered config's files and units in its `/usr/etc` (the build
//! baked them in), and the node's `/etc` holds the same bytes. When the node deploys its pool's
//! base image again, ostree's 3-way merge takes those files for unmodified defaults of the old
//! image and drops them: after the reboot the kubelet's configuration, CA files and units would
//! be gone. Upstream re-applies the config after that reboot with
//! `machine-config-daemon-revert.service`; mco keeps a copy of the config's tree under `/etc`
//! (new files, which the merge keeps) and a unit that puts it back before anything else starts,
//! then reboots once so systemd loads the units put back.

use std::path::Path;

use fn_error_context::context;
use mco_api::MachineConfig;

use crate::apply::Node;
use crate::failpoint::Failpoints;
use crate::fsutil::Fs;
use crate::plan::unit_path;

/// Where the config's tree waits for the next boot.
pub const REVERT_DIR: &str = "/etc/mco/revert-layering";
/// The unit that puts it back.
pub const REVERT_UNIT: &str = "mco-revert-layering.service";

fn unit_text() -> String {
    let unit = unit_path(REVERT_UNIT);
    format!(
        "[Unit]\n\
         Description=mco: put back the MachineConfig's files after leaving a layered OS image\n\
         DefaultDependencies=no\n\
         ConditionPathExists={REVERT_DIR}/root\n\
         After=local-fs.target\n\
         Before=sysinit.target shutdown.target\n\
         Conflicts=shutdown.target\n\
         \n\
         [Service]\n\
         Type=oneshot\n\
         ExecStart=/usr/bin/cp -a --remove-destination {REVERT_DIR}/root/. /\n\
         ExecStart=/usr/bin/rm -rf {REVERT_DIR}\n\
         ExecStart=/usr/bin/systemctl disable {REVERT_UNIT}\n\
         ExecStart=/usr/bin/rm -f {unit}\n\
         ExecStart=/usr/bin/systemctl --no-block reboot\n\
         \n\
         [Install]\n\
         WantedBy=sysinit.target\n"
    )
}

/// Before the node leaves its layered image for `config`'s: `config`'s tree (as an image build
/// bakes it) kept under [`REVERT_DIR`], and [`REVERT_UNIT`] written and enabled.
#[context("Keeping the config's files for after leaving the layered image")]
pub fn prepare(node: &Node, config: &MachineConfig) -> anyhow::Result<()> {
    cancel(node)?;
    let failpoints = Failpoints::default();
    let fs = Fs::new(&node.root, &failpoints);
    crate::bake::bake_config(&fs.host(&format!("{REVERT_DIR}/root")), config)?;
    fs.write_atomic(&fs.host(&unit_path(REVERT_UNIT)), unit_text().as_bytes(), 0o644, None)?;
    node.systemd.enable(&[REVERT_UNIT.to_string()])?;
    fs.sync_dirs()
}

/// Undoes [`prepare`] (the update did not happen); nothing prepared is fine.
#[context("Dropping the kept config files")]
pub fn cancel(node: &Node) -> anyhow::Result<()> {
    let failpoints = Failpoints::default();
    let fs = Fs::new(&node.root, &failpoints);
    let unit = fs.host(&unit_path(REVERT_UNIT));
    if unit.exists() {
        node.systemd.disable(&[REVERT_UNIT.to_string()])?;
        fs.remove(&unit)?;
    }
    remove_tree(&fs.host(REVERT_DIR))
}

fn remove_tree(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_configs_tree_and_a_unit_that_puts_it_back_then_nothing_after_cancel() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let node = Node::directory_root(root.clone(), None);
        let config: MachineConfig = serde_json::from_value(json!({
            "metadata": {"name": "rendered-worker-1"},
            "spec": {"config": {"ignition": {"version": "3.5.0"},
                "storage": {"files": [{"path": "/etc/kubernetes/kubelet.conf", "mode": 420, "contents": {"source": "data:,maxPods%3A%2042"}}]},
                "systemd": {"units": [{"name": "site.service", "enabled": true,
                    "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}}
        }))
        .unwrap();
        prepare(&node, &config).unwrap();
        let kept = root.join("etc/mco/revert-layering/root");
        assert_eq!(std::fs::read_to_string(kept.join("etc/kubernetes/kubelet.conf")).unwrap(), "maxPods: 42");
        assert!(kept.join("etc/systemd/system/multi-user.target.wants/site.service").is_symlink());
        let unit = std::fs::read_to_string(root.join("etc/systemd/system/mco-revert-layering.service")).unwrap();
        assert!(unit.contains("ExecStart=/usr/bin/cp -a --remove-destination /etc/mco/revert-layering/root/. /\n"));
        assert!(unit.contains("Before=sysinit.target"), "{unit}");
        let link = root.join("etc/systemd/system/sysinit.target.wants/mco-revert-layering.service");
        assert!(link.is_symlink(), "the unit is enabled");
        // Preparing again starts from nothing.
        prepare(&node, &config).unwrap();
        assert!(kept.join("etc/kubernetes/kubelet.conf").is_file());

        cancel(&node).unwrap();
        assert!(!root.join("etc/mco/revert-layering").exists());
        assert!(!root.join("etc/systemd/system/mco-revert-layering.service").exists());
        assert!(!link.exists() && !link.is_symlink());
        cancel(&node).unwrap();
    }
}
