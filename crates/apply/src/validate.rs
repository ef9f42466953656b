//! On-disk validation: the node's files, units, kernel arguments and OS image must be what
//! the current config says. Used before every update, on start, and by `mco daemon validate`.
//! Every mismatch is reported, not only the first.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mco_api::MachineConfigSpec;
use mco_ignition::v3;

use crate::fsutil::{host_path, host_path_followed};
use crate::os::OsBackend;
use crate::plan::{decode_file, dropin_path, split_kargs, unit_path};
use crate::units::{Systemd, UnitFileState};

/// Files the original does not validate: they are rewritten by other components.
const SKIPPED: [&str; 3] = [
    "/etc/kubernetes/kubelet-ca.crt",
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
    "/etc/mco/internal-registry-pull-secret.json",
];

/// Checks the node under `root` against a config; `Err` lists every mismatch.
pub fn validate(
    root: &Path,
    systemd: &dyn Systemd,
    os: Option<&dyn OsBackend>,
    spec: &MachineConfigSpec,
    ignition: &v3::Config,
) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    if let Some(os) = os {
        check_os(os, spec, &mut problems);
    }
    for f in ignition.storage.files.iter().filter(|f| !SKIPPED.contains(&f.path.as_str())) {
        match decode_file(f) {
            Ok(planned) => check_file(root, &f.path, &planned.contents, planned.mode, &mut problems),
            Err(e) => problems.push(e.to_string()),
        }
    }
    for u in &ignition.systemd.units {
        check_unit(root, systemd, u, &mut problems);
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

fn check_os(os: &dyn OsBackend, spec: &MachineConfigSpec, problems: &mut Vec<String>) {
    let status = match os.status() {
        Ok(s) => s,
        Err(e) => return problems.push(format!("reading the OS status: {e:#}")),
    };
    if !spec.os_image_url.is_empty() && status.booted_image.as_deref() != Some(spec.os_image_url.as_str()) {
        problems.push(format!(
            "expected target osImageURL {:?}, have {:?}",
            spec.os_image_url,
            status.booted_image.unwrap_or_default()
        ));
    }
    let missing: Vec<String> = split_kargs(spec.kernel_arguments.as_deref().unwrap_or_default())
        .into_iter()
        .filter(|k| !status.kargs.contains(k))
        .collect();
    if !missing.is_empty() {
        problems.push(format!("missing expected kernel arguments: [{}]", missing.join(" ")));
    }
}

/// Go's `os.FileMode` string of a regular file with these permission bits (`-rw-r--r--`).
pub fn go_file_mode(mode: u32) -> String {
    let mut s = String::from("-");
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

fn check_file(root: &Path, path: &str, contents: &[u8], mode: u32, problems: &mut Vec<String>) {
    let host = match host_path(root, path) {
        Ok(host) => host,
        Err(e) => return problems.push(format!("could not resolve file {path:?}: {e:#}")),
    };
    let meta = match fs::symlink_metadata(&host) {
        Ok(m) => m,
        Err(e) => return problems.push(format!("could not stat file {path:?}: {e}")),
    };
    let have = meta.permissions().mode() & 0o7777;
    if !meta.is_file() || have != mode {
        let have = if meta.is_file() { go_file_mode(have) } else { format!("{:?}", meta.file_type()) };
        problems.push(format!("mode mismatch for file: {path:?}; expected: {}; received: {have}", go_file_mode(mode)));
        return;
    }
    match fs::read(&host) {
        Ok(data) if data == contents => {}
        Ok(_) => problems.push(format!("content mismatch for file {path:?}")),
        Err(e) => problems.push(format!("could not read file {path:?}: {e}")),
    }
}

fn check_unit(root: &Path, systemd: &dyn Systemd, u: &v3::Unit, problems: &mut Vec<String>) {
    for d in &u.dropins {
        let path = dropin_path(&u.name, &d.name);
        match d.contents.as_deref() {
            None | Some("") => {
                if host_path_followed(root, &path).is_ok_and(|p| fs::metadata(p).is_ok_and(|m| m.len() > 0)) {
                    problems.push(format!("drop-in {path:?} should be empty or absent"));
                }
            }
            Some(c) => check_file(root, &path, c.as_bytes(), 0o644, problems),
        }
    }
    let path = unit_path(&u.name);
    if u.mask == Some(true) {
        let target = host_path(root, &path).ok().and_then(|p| fs::read_link(p).ok());
        if target.as_deref() != Some(Path::new("/dev/null")) {
            problems.push(format!("unit {:?} should be masked ({path} -> /dev/null), found {target:?}", u.name));
        }
        return;
    }
    if let Some(c) = u.contents.as_deref().filter(|c| !c.is_empty()) {
        check_file(root, &path, c.as_bytes(), 0o644, problems);
    }
    let Some(enabled) = u.enabled else { return };
    match systemd.is_enabled(&u.name) {
        Err(e) => problems.push(format!("unit {:?}: {e:#}", u.name)),
        Ok(state) => {
            use UnitFileState::*;
            // A unit with no file is never enabled (`with_unit_files`); a missing file the config
            // has contents for is reported above.
            let consistent = if enabled {
                !matches!(state, Disabled | Masked | MaskedRuntime)
            } else {
                !matches!(state, Enabled | EnabledRuntime)
            };
            if !consistent {
                problems.push(format!("unit {:?} expected enabled={enabled}, systemd reports {state:?}", u.name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_modes_print_like_go() {
        assert_eq!(go_file_mode(0o644), "-rw-r--r--");
        assert_eq!(go_file_mode(0o755), "-rwxr-xr-x");
        assert_eq!(go_file_mode(0o600), "-rw-------");
    }
}
