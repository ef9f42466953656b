//! A MachineConfig baked into a directory tree, for an OS image build (on-cluster layering: the
//! MachineOSBuild's Containerfile `COPY`s the tree onto the base image): what the daemon would
//! write on a node, written with the daemon's own pieces ([`plan::write_steps`], the unit writer,
//! [`DirSystemd`] links) into an empty directory that stands for `/`.
//!
//! What differs from a node, where the tree cannot say it or the image is the wrong place:
//! * owners are the current user's (`COPY` makes files root's; other owners are `COPY --chown`);
//! * units without `enabled` are not preset (there are no preset files in the tree; systemd
//!   presets an image's units on first boot), and a unit enabled or disabled without its unit
//!   file in the config (drop-ins only: the unit ships with the OS) is left as the base image has
//!   it: its `[Install]` section is not in the tree. Neither can a `COPY` remove the base image's
//!   enablement links of a unit the config disables;
//! * SSH keys (under `/home`, which is `/var/home`, a node's own) and OS changes (the image is
//!   the OS change) are not baked;
//! * nor are files under `/var` (or `/home`, `/root`: `/var` on an OSTree system): libostree does
//!   not deploy an image's `/var`, and there they would only carry secrets into the registry
//!   (upstream bakes the cluster's pull secret, `/var/lib/kubelet/config.json`, into every image);
//! * nor is `/etc/machine-config-daemon/currentconfig`, the daemon's own record of the node (a
//!   copy in the image's `/usr/etc` would be taken for an unmodified default by ostree's `/etc`
//!   merge, and dropped with the image when the node leaves it).

use std::path::Path;

use anyhow::bail;
use fn_error_context::context;
use mco_api::MachineConfig;

use crate::failpoint::Failpoints;
use crate::fsutil::Fs;
use crate::plan::{self, Step};
use crate::units::{DirSystemd, Systemd, with_unit_files, write_unit};

/// Writes into the empty (or missing) directory `root` the files (but those under `/var`), units,
/// unit enablement and masks of `config`.
#[context("Baking MachineConfig {:?} into {}", config.metadata.name.as_deref().unwrap_or(""), root.display())]
pub fn bake_config(root: &Path, config: &MachineConfig) -> anyhow::Result<()> {
    std::fs::create_dir_all(root)?;
    if std::fs::read_dir(root)?.next().is_some() {
        bail!("{} is not empty", root.display());
    }
    let ignition = plan::ignition_of(config.metadata.name.as_deref().unwrap_or(""), &config.spec)?;
    let steps = plan::write_steps(&ignition)?;
    let failpoints = Failpoints::default();
    let fs = Fs::new(root, &failpoints);
    let systemd = DirSystemd { root: root.to_path_buf() };
    for step in &steps {
        match step {
            Step::WriteFile(f) if node_owned(&f.path) => tracing::debug!(path = f.path, "not baking a file of /var"),
            Step::WriteFile(f) => fs.write_atomic(&fs.host(&f.path)?, &f.contents, f.mode, None)?,
            Step::WriteUnit(u) => write_unit(&fs, &systemd, u)?,
            Step::EnableUnits(units) => systemd.enable(&with_unit_files(&systemd, units, "enable")?)?,
            Step::DisableUnits(units) => systemd.disable(&with_unit_files(&systemd, units, "disable")?)?,
            Step::PresetUnits(units) => tracing::debug!(?units, "not presetting units in an image"),
            Step::RemoveFile(_)
            | Step::RemoveDropin(_)
            | Step::RemoveUnit(_)
            | Step::WriteSshKeys(_)
            | Step::SetPasswordHashes(_)
            | Step::Os(_) => {
                bail!("unexpected step in a bake: {step:?}")
            }
        }
    }
    Ok(())
}

/// Paths an OSTree system keeps in `/var`, which an image does not deploy.
fn node_owned(path: &str) -> bool {
    ["/var/", "/home/", "/root/"].iter().any(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    use base64::Engine;
    use mco_api::MachineConfigSpec;
    use serde_json::json;

    use super::*;
    use crate::fsutil::host_path;
    use crate::state;

    fn machine_config(files: serde_json::Value, units: serde_json::Value) -> MachineConfig {
        let config =
            json!({"ignition": {"version": "3.5.0"}, "storage": {"files": files}, "systemd": {"units": units}});
        MachineConfig::new("rendered-worker-abc", MachineConfigSpec { config: Some(config), ..Default::default() })
    }

    fn gzip_data_url(text: &str) -> String {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(gz.finish().unwrap()))
    }

    /// What is at a node path of the tree: file contents and mode, or a link's target.
    #[derive(Debug, PartialEq)]
    enum Entry {
        File(String, u32),
        Link(String),
        Missing,
    }

    fn entry(root: &Path, path: &str) -> Entry {
        let host = host_path(root, path).unwrap();
        match std::fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                Entry::Link(std::fs::read_link(&host).unwrap().display().to_string())
            }
            Ok(m) => Entry::File(std::fs::read_to_string(&host).unwrap(), m.permissions().mode() & 0o7777),
            Err(_) => Entry::Missing,
        }
    }

    #[test]
    fn a_config_is_baked_as_the_daemon_writes_it() {
        let hello = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n";
        let mc = machine_config(
            json!([
                {"path": "/etc/hello", "mode": 0o600, "contents": {"source": "data:,hello%0A"}},
                {"path": "/usr/local/bin/tool", "mode": 0o755,
                 "contents": {"source": gzip_data_url("#!/bin/sh\n"), "compression": "gzip"}},
                {"path": "/etc/default-mode", "contents": {"source": "data:,x"}},
                {"path": "/var/lib/kubelet/config.json", "contents": {"source": "data:,secret"}},
                {"path": "/root/.docker/config.json", "contents": {"source": "data:,secret"}},
            ]),
            json!([
                {"name": "hello.service", "enabled": true, "contents": hello},
                {"name": "off.service", "enabled": false, "contents": hello},
                {"name": "crio.service", "enabled": true, "dropins": [{"name": "10-mco.conf", "contents": "[Service]\nNice=1\n"}]},
                {"name": "kubelet.service", "dropins": [{"name": "20-x.conf", "contents": "[Unit]\n"}]},
                {"name": "bad.service", "mask": true},
            ]),
        );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("machineconfig");
        bake_config(&root, &mc).unwrap();
        let unit_link = Entry::Link("/etc/systemd/system/hello.service".into());
        let cases = [
            ("/etc/hello", Entry::File("hello\n".into(), 0o600)),
            ("/usr/local/bin/tool", Entry::File("#!/bin/sh\n".into(), 0o755)),
            ("/etc/default-mode", Entry::File("x".into(), 0o644)),
            ("/etc/systemd/system/hello.service", Entry::File(hello.into(), 0o644)),
            ("/etc/systemd/system/multi-user.target.wants/hello.service", unit_link),
            ("/etc/systemd/system/off.service", Entry::File(hello.into(), 0o644)),
            ("/etc/systemd/system/multi-user.target.wants/off.service", Entry::Missing),
            ("/etc/systemd/system/crio.service.d/10-mco.conf", Entry::File("[Service]\nNice=1\n".into(), 0o644)),
            ("/etc/systemd/system/crio.service", Entry::Missing),
            ("/etc/systemd/system/kubelet.service.d/20-x.conf", Entry::File("[Unit]\n".into(), 0o644)),
            ("/etc/systemd/system/bad.service", Entry::Link("/dev/null".into())),
        ];
        for (path, want) in cases {
            assert_eq!(entry(&root, path), want, "{path}");
        }
        assert_eq!(state::read_current_config(&root).unwrap(), None, "the daemon's record is the node's own");
        // Nothing but what the config says (no temp files, no backups of originals, nothing of /var).
        let mut top: Vec<String> =
            std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        top.sort();
        assert_eq!(top, ["etc", "usr"]);
        assert!(!root.join("etc/machine-config-daemon").exists());
    }

    #[test]
    fn refused_configs_name_the_problem() {
        let file = |path: &str| json!([{"path": path, "contents": {"source": "data:,x"}}]);
        let cases = [
            (machine_config(file("../x"), json!([])), "$.storage.files.0.path: path not absolute"),
            (machine_config(file("/etc/../x"), json!([])), "$.storage.files.0.path: path is not fully simplified"),
            (
                machine_config(json!([]), json!([{"name": "../a.service", "contents": "[Unit]\n"}])),
                "systemd unit or drop-in name \"../a.service\" is not a file name",
            ),
            (
                machine_config(json!([{"path": "/etc/x", "contents": {"source": "https://example.com/x"}}]), json!([])),
                "file \"/etc/x\": contents.source: only data URLs are supported",
            ),
        ];
        for (mc, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            let err = format!("{:#}", bake_config(dir.path(), &mc).unwrap_err());
            assert!(err.starts_with("Baking MachineConfig \"rendered-worker-abc\" into "), "{err}");
            assert!(err.contains(want), "{err}");
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written: {want}");
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x"), "").unwrap();
        let err = format!("{:#}", bake_config(dir.path(), &machine_config(json!([]), json!([]))).unwrap_err());
        assert!(err.ends_with("is not empty"), "{err}");
    }
}
