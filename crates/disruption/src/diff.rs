//! What differs between the config a node runs and the one it should run
//! (`newMachineConfigDiff`, `CalculateConfigFileDiffs`, `GetChangedConfigUnitsByType`).

use std::collections::BTreeMap;

use mco_api::constants::OCL_OS_IMAGE_URL_ANNOTATION;
use mco_api::machineconfiguration::MachineConfig;
use mco_ignition::v3;

/// A rendered config whose Ignition cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("parsing the Ignition config of MachineConfig {name}: {source}")]
pub struct DiffError {
    pub name: String,
    #[source]
    pub source: mco_ignition::Error,
}

/// Names that were added, removed, or changed in any field, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

impl Changes {
    /// Compares two lists keyed by name; an entry counts as changed when any field differs.
    fn between<'a, T: PartialEq + 'a>(
        old: impl IntoIterator<Item = (&'a str, &'a T)>,
        new: impl IntoIterator<Item = (&'a str, &'a T)>,
    ) -> Self {
        let old: BTreeMap<&str, &T> = old.into_iter().collect();
        let new: BTreeMap<&str, &T> = new.into_iter().collect();
        let mut changes = Changes::default();
        for (name, entry) in &new {
            match old.get(name) {
                None => changes.added.push(name.to_string()),
                Some(before) if before != entry => changes.changed.push(name.to_string()),
                Some(_) => {}
            }
        }
        changes.removed = old.keys().filter(|name| !new.contains_key(*name)).map(|name| name.to_string()).collect();
        changes
    }

    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }

    /// Every affected name, sorted: what the disruption policies are matched against.
    pub fn all(&self) -> Vec<&str> {
        let mut all: Vec<&str> =
            self.added.iter().chain(&self.removed).chain(&self.changed).map(String::as_str).collect();
        all.sort_unstable();
        all
    }
}

/// File changes by path.
pub type FileChanges = Changes;
/// systemd unit changes by unit name (contents, dropins, enabled and mask all count).
pub type UnitChanges = Changes;

/// The differences that decide what a node must do. Both Ignition configs are kept, parsed and at
/// spec 3.5.0, because later steps (the registries.conf check, writing files) need them.
#[derive(Debug, Clone)]
pub struct ConfigDiff {
    /// The OS image changes (or the force file asks for a full re-apply).
    pub os_update: bool,
    pub kargs: bool,
    pub fips: bool,
    /// Anything in Ignition's passwd section (in practice: the core user's SSH keys or password).
    pub passwd: bool,
    pub files: FileChanges,
    pub units: UnitChanges,
    pub kernel_type: bool,
    pub extensions: bool,
    /// The force file (`/run/machine-config-daemon-force`) is present.
    pub force: bool,
    pub old_ignition: v3::Config,
    pub new_ignition: v3::Config,
}

impl ConfigDiff {
    /// Compares two rendered configs; `old` is `None` on a node that never had one (upstream's
    /// synthetic empty `mco-empty-mc`).
    pub fn between(old: Option<&MachineConfig>, new: &MachineConfig, force: bool) -> Result<Self, DiffError> {
        let empty = MachineConfig::default();
        let old = old.unwrap_or(&empty);
        let old_ignition = ignition_of(old)?;
        let new_ignition = ignition_of(new)?;
        let (o, n) = (&old.spec, &new.spec);
        let kargs = {
            let (ok, nk) =
                (o.kernel_arguments.as_deref().unwrap_or_default(), n.kernel_arguments.as_deref().unwrap_or_default());
            ok != nk
        };
        let kernel_type = canonical_kernel_type(&o.kernel_type) != canonical_kernel_type(&n.kernel_type);
        let extensions = o.extensions.as_deref().unwrap_or_default() != n.extensions.as_deref().unwrap_or_default();
        let os_update = force || os_image_changes(old, new, kargs || kernel_type || extensions);
        Ok(Self {
            os_update,
            kargs,
            fips: o.fips != n.fips,
            passwd: old_ignition.passwd != new_ignition.passwd,
            files: Changes::between(
                old_ignition.storage.files.iter().map(|f| (f.path.as_str(), f)),
                new_ignition.storage.files.iter().map(|f| (f.path.as_str(), f)),
            ),
            units: Changes::between(
                old_ignition.systemd.units.iter().map(|u| (u.name.as_str(), u)),
                new_ignition.systemd.units.iter().map(|u| (u.name.as_str(), u)),
            ),
            kernel_type,
            extensions,
            force,
            old_ignition,
            new_ignition,
        })
    }

    /// Changes that only a reboot applies (the OS image, kernel, FIPS mode).
    pub fn needs_reboot_by_itself(&self) -> bool {
        self.os_update || self.kargs || self.fips || self.kernel_type || self.extensions
    }

    /// Nothing at all changes.
    pub fn is_empty(&self) -> bool {
        !self.needs_reboot_by_itself() && !self.passwd && self.files.is_empty() && self.units.is_empty()
    }
}

fn ignition_of(mc: &MachineConfig) -> Result<v3::Config, DiffError> {
    match &mc.spec.config {
        None => Ok(v3::Config::new(v3::MAX_VERSION)),
        Some(raw) => mco_ignition::parse_and_convert(raw)
            .map_err(|source| DiffError { name: mc.metadata.name.clone().unwrap_or_default(), source }),
    }
}

/// `""` and `"default"` are the same kernel.
fn canonical_kernel_type(kernel_type: &str) -> &str {
    if kernel_type.is_empty() { "default" } else { kernel_type }
}

/// With on-cluster layering (either config carries the built image in an annotation) the built
/// image is what is compared, but only when the change needs a new build: a files-only change
/// keeps the running image (`RequiresRebuild`).
fn os_image_changes(old: &MachineConfig, new: &MachineConfig, rebuild_inputs_change: bool) -> bool {
    let built_image =
        |mc: &MachineConfig| mc.metadata.annotations.as_ref().and_then(|a| a.get(OCL_OS_IMAGE_URL_ANNOTATION)).cloned();
    let (old_built, new_built) = (built_image(old), built_image(new));
    let layered = old_built.is_some() || new_built.is_some();
    let requires_rebuild = rebuild_inputs_change || old.spec.os_image_url != new.spec.os_image_url;
    if layered && requires_rebuild { old_built != new_built } else { old.spec.os_image_url != new.spec.os_image_url }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn mc(name: &str, spec: serde_json::Value) -> MachineConfig {
        serde_json::from_value(json!({
            "apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
            "metadata": {"name": name}, "spec": spec,
        }))
        .unwrap()
    }

    fn file(path: &str, data: &str) -> serde_json::Value {
        json!({"path": path, "contents": {"source": format!("data:,{data}")}, "mode": 420})
    }

    fn ign(files: Vec<serde_json::Value>, units: serde_json::Value) -> serde_json::Value {
        json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}, "systemd": {"units": units}})
    }

    #[test]
    fn os_level_fields() {
        let base = json!({"osImageURL": "quay.io/os@sha256:aa", "kernelArguments": ["a=1"], "extensions": ["usbguard"],
                          "fips": false, "kernelType": ""});
        type Case = (&'static str, serde_json::Value, fn(&ConfigDiff) -> bool);
        let cases: &[Case] = &[
            ("image", json!({"osImageURL": "quay.io/os@sha256:bb"}), |d| d.os_update),
            ("kargs", json!({"kernelArguments": ["a=2"]}), |d| d.kargs),
            ("kargs order", json!({"kernelArguments": ["b", "a=1"]}), |d| d.kargs),
            ("extensions", json!({"extensions": []}), |d| d.extensions),
            ("fips", json!({"fips": true}), |d| d.fips),
            ("kernel", json!({"kernelType": "realtime"}), |d| d.kernel_type),
        ];
        for (what, change, field) in cases {
            let mut spec = base.clone();
            spec.as_object_mut().unwrap().extend(change.as_object().unwrap().clone());
            let d = ConfigDiff::between(Some(&mc("a", base.clone())), &mc("b", spec), false).unwrap();
            assert!(field(&d), "{what}: {d:?}");
            assert!(d.needs_reboot_by_itself(), "{what}");
        }
        let same = ConfigDiff::between(Some(&mc("a", base.clone())), &mc("b", base.clone()), false).unwrap();
        assert!(same.is_empty(), "{same:?}");
    }

    #[test]
    fn equivalent_spellings_are_no_change() {
        let d = ConfigDiff::between(
            Some(&mc("a", json!({"kernelType": "", "kernelArguments": null, "extensions": null}))),
            &mc("b", json!({"kernelType": "default", "kernelArguments": [], "extensions": []})),
            false,
        )
        .unwrap();
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn force_file_means_os_update() {
        let d = ConfigDiff::between(Some(&mc("a", json!({}))), &mc("b", json!({})), true).unwrap();
        assert!(d.os_update && d.force);
    }

    #[test]
    fn files_and_units_by_name() {
        let old = mc(
            "a",
            json!({"config": ign(
                vec![file("/etc/keep", "x"), file("/etc/change", "1"), file("/etc/gone", "x")],
                json!([{"name": "a.service", "enabled": true}, {"name": "b.service", "contents": "[Unit]"}])
            )}),
        );
        let new = mc(
            "b",
            json!({"config": ign(
                vec![file("/etc/new", "x"), file("/etc/keep", "x"), file("/etc/change", "2")],
                json!([{"name": "a.service", "enabled": false}, {"name": "c.service", "mask": true}])
            )}),
        );
        let d = ConfigDiff::between(Some(&old), &new, false).unwrap();
        assert_eq!(d.files.added, ["/etc/new"]);
        assert_eq!(d.files.removed, ["/etc/gone"]);
        assert_eq!(d.files.changed, ["/etc/change"]);
        assert_eq!(d.files.all(), ["/etc/change", "/etc/gone", "/etc/new"]);
        assert_eq!(d.units.added, ["c.service"]);
        assert_eq!(d.units.removed, ["b.service"]);
        assert_eq!(d.units.changed, ["a.service"]);
        assert!(!d.passwd && !d.needs_reboot_by_itself());
    }

    #[test]
    fn mode_alone_is_a_change_and_spec2_equals_spec3() {
        // Spec 2 files overwrite by default; translated, that is an explicit `overwrite: true`.
        let mut overwriting = file("/etc/f", "x");
        overwriting["overwrite"] = json!(true);
        let v3 = mc("a", json!({"config": ign(vec![overwriting.clone()], json!([]))}));
        let v2 = mc(
            "b",
            json!({"config": {"ignition": {"version": "2.2.0"}, "storage": {"files": [
                {"filesystem": "root", "path": "/etc/f", "contents": {"source": "data:,x"}, "mode": 420}]}}}),
        );
        let d = ConfigDiff::between(Some(&v3), &v2, false).unwrap();
        assert!(d.files.is_empty(), "{:?}", d.files);
        let mut chmod = overwriting;
        chmod["mode"] = json!(384);
        let d =
            ConfigDiff::between(Some(&v3), &mc("c", json!({"config": ign(vec![chmod], json!([]))})), false).unwrap();
        assert_eq!(d.files.changed, ["/etc/f"]);
    }

    #[test]
    fn ssh_keys_are_passwd() {
        let keys = |k: &str| json!({"config": {"ignition": {"version": "3.2.0"}, "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [k]}]}}});
        let d =
            ConfigDiff::between(Some(&mc("a", keys("ssh-ed25519 A"))), &mc("b", keys("ssh-ed25519 B")), false).unwrap();
        assert!(d.passwd && d.files.is_empty());
    }

    #[test]
    fn no_old_config_is_empty_config() {
        let d =
            ConfigDiff::between(None, &mc("b", json!({"config": ign(vec![file("/etc/f", "x")], json!([]))})), false)
                .unwrap();
        assert_eq!(d.files.added, ["/etc/f"]);
    }

    #[test]
    fn layered_images_compared_only_when_a_rebuild_is_needed() {
        let layered = |url: &str, built: &str, kargs: serde_json::Value| {
            let mut m = mc("x", json!({"osImageURL": url, "kernelArguments": kargs}));
            m.metadata.annotations = Some([(OCL_OS_IMAGE_URL_ANNOTATION.to_string(), built.to_string())].into());
            m
        };
        let files_only = ConfigDiff::between(
            Some(&layered("base@sha256:1", "built@sha256:1", json!([]))),
            &layered("base@sha256:1", "built@sha256:2", json!([])),
            false,
        )
        .unwrap();
        assert!(!files_only.os_update);
        let kargs = ConfigDiff::between(
            Some(&layered("base@sha256:1", "built@sha256:1", json!([]))),
            &layered("base@sha256:1", "built@sha256:2", json!(["x"])),
            false,
        )
        .unwrap();
        assert!(kargs.os_update);
    }

    #[test]
    fn unreadable_ignition_names_the_config() {
        let err =
            ConfigDiff::between(None, &mc("broken", json!({"config": {"ignition": {"version": "9.9.9"}}})), false)
                .unwrap_err();
        assert!(err.to_string().starts_with("parsing the Ignition config of MachineConfig broken: "), "{err}");
    }
}
