//! What an update changes, as an ordered list of steps (pure; no IO).
//!
//! The order is upstream's `update()`: files, then units (write, enable, disable, preset), then
//! stale data of the old config, then the core user's SSH keys, then the OS. Every input problem
//! (append entries, unknown compression, undecodable data URL, remote sources, bad paths) is found
//! here, before anything is written.

use std::collections::{BTreeMap, BTreeSet};

use mco_api::MachineConfigSpec;
use mco_ignition::unit::Install;
use mco_ignition::v3;

use crate::fsutil::check_node_path;

/// Where units and their drop-ins live.
pub const SYSTEMD_DIR: &str = "/etc/systemd/system";
/// The core user's SSH key fragment (RHCOS 9 and later).
pub const SSH_KEY_PATH: &str = "/home/core/.ssh/authorized_keys.d/ignition";
/// The single-file key path of RHCOS 8, removed when the fragment is written.
pub const LEGACY_SSH_KEY_PATH: &str = "/home/core/.ssh/authorized_keys";

/// Files the daemon never removes when a config drops them (upstream `deleteStaleData`).
const KEEP_ON_REMOVAL: [&str; 3] = [
    "/etc/kubernetes/kubelet-ca.crt",
    "/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem",
    "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
];
const KEEP_ON_REMOVAL_DIR: &str = "/etc/docker/certs.d/";

/// Why a config cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The change needs a reprovisioned machine (`IsRenderedConfigReconcilable`).
    #[error("can't reconcile config {from} with {to}: {reason}")]
    Unreconcilable { from: String, to: String, reason: String },
    /// A MachineConfig or one of its entries cannot be applied as written.
    #[error("{0}")]
    Invalid(String),
}

/// A file owner as the config names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Id(u32),
    Name(String),
}

/// A file to write, with its contents decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub path: String,
    pub contents: Vec<u8>,
    pub mode: u32,
    /// `None` is root.
    pub user: Option<Owner>,
    pub group: Option<Owner>,
}

/// Kernel arguments: upstream deletes every old argument and appends every new one.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KargsChange {
    pub delete: Vec<String>,
    pub append: Vec<String>,
}

/// Kernel flavours (`spec.kernelType`; "" is `default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KernelType {
    Default,
    Realtime,
    SixtyFourKPages,
}

impl KernelType {
    pub fn parse(s: &str) -> Result<Self, PlanError> {
        match s {
            "" | "default" => Ok(KernelType::Default),
            "realtime" => Ok(KernelType::Realtime),
            "64k-pages" => Ok(KernelType::SixtyFourKPages),
            other => {
                Err(PlanError::Invalid(format!("spec.kernelType {other:?} is not one of default, realtime, 64k-pages")))
            }
        }
    }
}

/// Changes for the OS backend; all `None` means the OS is left alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OsChanges {
    /// Rebase to this image (`osImageURL`, by digest).
    pub image: Option<String>,
    pub kargs: Option<KargsChange>,
    /// The kernel to switch to; set when the image or the kernel type changes.
    pub kernel: Option<KernelType>,
    /// The new config's extensions, when they must be (re)applied.
    pub extensions: Option<Vec<String>>,
}

impl OsChanges {
    pub fn is_empty(&self) -> bool {
        *self == OsChanges::default()
    }
}

/// One step of an update. Each is idempotent and is a failpoint boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    WriteFile(PlannedFile),
    /// Drop-ins, then the unit file or its mask.
    WriteUnit(v3::Unit),
    EnableUnits(Vec<String>),
    DisableUnits(Vec<String>),
    /// `systemctl preset` for units that do not say `enabled`.
    PresetUnits(Vec<String>),
    /// A file of the old config only: restore the OS original or delete it.
    RemoveFile(String),
    /// A drop-in (path) of the old config only.
    RemoveDropin(String),
    /// A unit of the old config only (preset first, then remove or restore).
    RemoveUnit(String),
    /// The core user's authorized keys, one per line.
    WriteSshKeys(String),
    /// Users and the password hashes they get.
    SetPasswordHashes(Vec<(String, String)>),
    Os(OsChanges),
}

/// An update from one config to another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub steps: Vec<Step>,
}

/// One side of an update: the MachineConfig spec and its Ignition config at spec 3.5.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// The MachineConfig's name (for messages).
    pub name: &'a str,
    pub spec: &'a MachineConfigSpec,
    pub ignition: &'a v3::Config,
}

/// The Ignition config of a MachineConfig at spec 3.5 (no config is the empty config).
pub fn ignition_of(name: &str, spec: &MachineConfigSpec) -> Result<v3::Config, PlanError> {
    let mc = mco_api::MachineConfig::new(name, spec.clone());
    match mco_render::merge::validate_machine_config(&mc) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => Ok(v3::Config::new(v3::MAX_VERSION)),
        Err(e) => Err(PlanError::Invalid(e.to_string())),
    }
}

/// Plans the update from `old` to `new`. `force` (the force file) rewrites every file and unit
/// and re-applies the OS image.
pub fn plan(old: Side<'_>, new: Side<'_>, force: bool) -> Result<Plan, PlanError> {
    mco_render::reconcile::check(
        old.ignition,
        old.spec.fips,
        new.ignition,
        new.spec.fips,
        mco_render::StorageOverrides::default(),
    )
    .map_err(|reason| PlanError::Unreconcilable { from: old.name.into(), to: new.name.into(), reason })?;
    let mut steps = Vec::new();
    let old_files: BTreeMap<&str, &v3::File> =
        old.ignition.storage.files.iter().map(|f| (f.path.as_str(), f)).collect();
    for f in &new.ignition.storage.files {
        if force || old_files.get(f.path.as_str()) != Some(&f) {
            steps.push(Step::WriteFile(decode_file(f)?));
        }
    }

    let old_units: BTreeMap<&str, &v3::Unit> =
        old.ignition.systemd.units.iter().map(|u| (u.name.as_str(), u)).collect();
    for u in &new.ignition.systemd.units {
        check_unit_name(&u.name)?;
    }
    let changed = new.ignition.systemd.units.iter().filter(|u| force || old_units.get(u.name.as_str()) != Some(u));
    steps.extend(unit_steps(changed)?);

    let new_paths: BTreeSet<&str> = new.ignition.storage.files.iter().map(|f| f.path.as_str()).collect();
    for f in &old.ignition.storage.files {
        let kept = KEEP_ON_REMOVAL.contains(&f.path.as_str()) || f.path.starts_with(KEEP_ON_REMOVAL_DIR);
        if !new_paths.contains(f.path.as_str()) && !kept {
            check_node_path(&f.path).map_err(|e| PlanError::Invalid(e.to_string()))?;
            steps.push(Step::RemoveFile(f.path.clone()));
        }
    }
    let new_dropins = dropin_paths(new.ignition);
    let new_unit_names: BTreeSet<&str> = new.ignition.systemd.units.iter().map(|u| u.name.as_str()).collect();
    for u in &old.ignition.systemd.units {
        check_unit_name(&u.name)?;
        for d in &u.dropins {
            check_unit_name(&d.name)?;
            let path = dropin_path(&u.name, &d.name);
            if !new_dropins.contains(&path) {
                steps.push(Step::RemoveDropin(path));
            }
        }
        if !new_unit_names.contains(u.name.as_str()) {
            steps.push(Step::RemoveUnit(u.name.clone()));
        }
    }

    if old.ignition.passwd != new.ignition.passwd || force {
        let keys: String =
            new.ignition.passwd.users.iter().flat_map(|u| &u.ssh_authorized_keys).map(|k| format!("{k}\n")).collect();
        if !(keys.is_empty() && old.ignition.passwd.users.is_empty()) {
            steps.push(Step::WriteSshKeys(keys));
        }
        let hashes = crate::shadow::password_hashes(&old.ignition.passwd.users, &new.ignition.passwd.users);
        if let Some((user, why)) =
            hashes.iter().find_map(|(user, hash)| Some((user, crate::shadow::unusable_hash(hash)?)))
        {
            return Err(PlanError::Invalid(format!("passwordHash of user {user} {why}")));
        }
        if !hashes.is_empty() {
            steps.push(Step::SetPasswordHashes(hashes));
        }
    }

    let os = os_changes(old.spec, new.spec, force)?;
    if !os.is_empty() {
        steps.push(Step::Os(os));
    }
    Ok(Plan { steps })
}

/// The steps writing every file and unit of `config` onto nothing (a new root, an image): what a
/// forced update writes, without removals, SSH keys and OS changes.
pub fn write_steps(config: &v3::Config) -> Result<Vec<Step>, PlanError> {
    let files = config.storage.files.iter().map(|f| decode_file(f).map(Step::WriteFile));
    let mut steps = files.collect::<Result<Vec<_>, _>>()?;
    steps.extend(unit_steps(&config.systemd.units)?);
    Ok(steps)
}

/// Writing `units`, then enabling those that say `enabled: true`, disabling those that say
/// `false` and presetting the rest (upstream `writeUnits`).
fn unit_steps<'a>(units: impl IntoIterator<Item = &'a v3::Unit>) -> Result<Vec<Step>, PlanError> {
    let (mut steps, mut enable, mut disable, mut preset) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for u in units {
        check_unit_name(&u.name)?;
        for d in &u.dropins {
            check_unit_name(&d.name)?;
        }
        steps.push(Step::WriteUnit(u.clone()));
        match u.enabled {
            Some(true) => enable.push(u.name.clone()),
            Some(false) => disable.push(u.name.clone()),
            None => preset.push(u.name.clone()),
        }
    }
    for (list, step) in
        [(enable, Step::EnableUnits as fn(_) -> _), (disable, Step::DisableUnits), (preset, Step::PresetUnits)]
    {
        if !list.is_empty() {
            steps.push(step(list));
        }
    }
    Ok(steps)
}

/// The OS part of an update (upstream `newMachineConfigDiff` and `applyOSChanges`).
pub fn os_changes(old: &MachineConfigSpec, new: &MachineConfigSpec, force: bool) -> Result<OsChanges, PlanError> {
    let image_changed = old.os_image_url != new.os_image_url || force;
    let image = (image_changed && !new.os_image_url.is_empty()).then(|| new.os_image_url.clone());
    let old_kargs = old.kernel_arguments.clone().unwrap_or_default();
    let new_kargs = new.kernel_arguments.clone().unwrap_or_default();
    let kargs = (old_kargs != new_kargs)
        .then(|| KargsChange { delete: split_kargs(&old_kargs), append: split_kargs(&new_kargs) });
    let (old_kernel, new_kernel) = (KernelType::parse(&old.kernel_type)?, KernelType::parse(&new.kernel_type)?);
    let kernel = (image.is_some() || old_kernel != new_kernel).then_some(new_kernel);
    let old_ext = old.extensions.clone().unwrap_or_default();
    let new_ext = new.extensions.clone().unwrap_or_default();
    let skip_ext = (old_ext.is_empty() && new_ext.is_empty()) || (old_ext == new_ext && image.is_none());
    Ok(OsChanges { image, kargs, kernel, extensions: (!skip_ext).then_some(new_ext) })
}

/// Splits MachineConfig kernel arguments into single arguments: entries may hold several,
/// separated by whitespace outside double quotes (the kernel's `next_arg` rules; quotes are kept
/// because rpm-ostree takes the argument as it appears on the command line).
pub fn split_kargs(entries: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for entry in entries {
        let mut current = String::new();
        let mut quoted = false;
        for c in entry.chars() {
            match c {
                '"' => {
                    quoted = !quoted;
                    current.push(c);
                }
                c if c.is_whitespace() && !quoted => {
                    if !current.is_empty() {
                        out.push(std::mem::take(&mut current));
                    }
                }
                c => current.push(c),
            }
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

pub fn dropin_path(unit: &str, dropin: &str) -> String {
    format!("{SYSTEMD_DIR}/{unit}.d/{dropin}")
}

pub fn unit_path(unit: &str) -> String {
    format!("{SYSTEMD_DIR}/{unit}")
}

/// Every path under `/etc` a config puts there: its files, its units and their drop-ins, and
/// the links that enable its units: those its `[Install]` section names (`WantedBy=`,
/// `RequiredBy=`, `Alias=`), or, for a unit the config has no contents of (its file is the OS
/// image's), those of the usual targets (pure).
pub fn etc_paths(config: &v3::Config) -> Vec<String> {
    let files = config.storage.files.iter().map(|f| f.path.clone());
    let units = config.systemd.units.iter().flat_map(|unit| {
        let name = &unit.name;
        let links: Vec<String> = match unit.contents.as_deref() {
            Some(text) => {
                let install = Install::parse(text);
                let wants = install.wanted_by.iter().map(|t| format!("{SYSTEMD_DIR}/{t}.wants/{name}"));
                let requires = install.required_by.iter().map(|t| format!("{SYSTEMD_DIR}/{t}.requires/{name}"));
                let aliases = install.alias.iter().map(|a| format!("{SYSTEMD_DIR}/{a}"));
                // A config naming a non-unit is refused by validation; none of its names is a path.
                if install.bad_name().is_none() { wants.chain(requires).chain(aliases).collect() } else { Vec::new() }
            }
            None => ["multi-user.target", "default.target", "basic.target"]
                .map(|target| format!("{SYSTEMD_DIR}/{target}.wants/{name}"))
                .into(),
        };
        let dropins = unit.dropins.iter().map(|d| dropin_path(name, &d.name));
        std::iter::once(unit_path(name)).chain(dropins).chain(links)
    });
    files.chain(units).filter(|path| path.starts_with("/etc/")).collect()
}

/// Paths of every drop-in a config declares.
pub fn dropin_paths(config: &v3::Config) -> BTreeSet<String> {
    config.systemd.units.iter().flat_map(|u| u.dropins.iter().map(move |d| dropin_path(&u.name, &d.name))).collect()
}

fn check_unit_name(name: &str) -> Result<(), PlanError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(PlanError::Invalid(format!("systemd unit or drop-in name {name:?} is not a file name")));
    }
    Ok(())
}

/// Decodes one Ignition file entry as upstream's `writeFiles` does.
pub fn decode_file(f: &v3::File) -> Result<PlannedFile, PlanError> {
    let fail = |msg: String| PlanError::Invalid(format!("file {:?}: {msg}", f.path));
    check_node_path(&f.path).map_err(|e| fail(e.to_string()))?;
    if !f.append.is_empty() {
        return Err(fail("append is not supported".into()));
    }
    let contents = mco_ignition::dataurl::decode_contents(&f.contents).map_err(|e| {
        use mco_ignition::dataurl::ContentsError;
        fail(match e {
            ContentsError::DataUrl(e) => format!("contents.source: only data URLs are supported: {e}"),
            ContentsError::Gzip(e) => format!("contents: gzip: {e}"),
            ContentsError::Compression(other) => {
                format!("contents.compression {other:?} is not supported (only gzip)")
            }
            e @ ContentsError::TooLarge => format!("contents: {e}"),
        })
    })?;
    let mode = match f.mode {
        None => 0o644,
        Some(m) if (0..=0o7777).contains(&m) => m as u32,
        Some(m) => return Err(fail(format!("mode {m} is not a file mode"))),
    };
    Ok(PlannedFile {
        path: f.path.clone(),
        contents,
        mode,
        user: owner(&f.user, &fail)?,
        group: owner(&f.group, &fail)?,
    })
}

fn owner(o: &v3::NodeOwner, fail: &dyn Fn(String) -> PlanError) -> Result<Option<Owner>, PlanError> {
    match (o.id, &o.name) {
        (Some(id), _) => u32::try_from(id).map(|id| Some(Owner::Id(id))).map_err(|_| fail(format!("owner id {id}"))),
        (None, Some(name)) if !name.is_empty() => Ok(Some(Owner::Name(name.clone()))),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests;
