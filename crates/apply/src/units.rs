//! systemd units and drop-ins under `/etc/systemd/system`, and their enablement through the
//! [`Systemd`] trait: [`HostSystemd`] runs `systemctl`; [`DirSystemd`] makes, in a directory root,
//! the symlinks `systemctl --root` would make from the units' `[Install]` sections and the preset files.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use fn_error_context::context;
use mco_ignition::unit::{Install, is_unit_name};
use mco_ignition::v3;

use crate::files::{Originals, backup_original, remove_stale};
use crate::fsutil::{Fs, host_path, host_path_followed};
use crate::plan::{dropin_path, unit_path};
use crate::runner::{Cmd, Runner};

/// `systemctl is-enabled` states (those the on-disk validation distinguishes, the rest as `Other`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum UnitFileState {
    Enabled,
    EnabledRuntime,
    Disabled,
    Static,
    Masked,
    MaskedRuntime,
    NotFound,
    Other(String),
}

impl UnitFileState {
    pub fn parse(s: &str) -> Self {
        match s.trim() {
            "enabled" => Self::Enabled,
            "enabled-runtime" => Self::EnabledRuntime,
            "disabled" => Self::Disabled,
            "static" => Self::Static,
            "masked" => Self::Masked,
            "masked-runtime" => Self::MaskedRuntime,
            "not-found" | "" => Self::NotFound,
            other => Self::Other(other.to_string()),
        }
    }
}

/// Unit enablement.
pub trait Systemd: Send + Sync {
    fn is_enabled(&self, unit: &str) -> anyhow::Result<UnitFileState>;
    fn enable(&self, units: &[String]) -> anyhow::Result<()>;
    fn disable(&self, units: &[String]) -> anyhow::Result<()>;
    fn preset(&self, unit: &str) -> anyhow::Result<()>;
    /// `systemctl restart` (a post-update action).
    fn restart(&self, unit: &str) -> anyhow::Result<()>;
    /// `systemctl reload` (a post-update action).
    fn reload(&self, unit: &str) -> anyhow::Result<()>;
    /// `systemctl daemon-reload` (a post-update action).
    fn daemon_reload(&self) -> anyhow::Result<()>;
    /// `update-ca-trust`: upstream's fallback when `coreos-update-ca-trust.service` cannot be
    /// restarted (RHEL 8 nodes lack the unit). Kept here, with the service actions it stands in for.
    fn update_ca_trust(&self) -> anyhow::Result<()>;
}

/// The units of `units` that have a unit file (one the config wrote or one already there); the
/// others are logged and left out rather than failing the update. Upstream `writeUnits` skips them
/// the same way (OCPBUGS-56648): a config may say `enabled` for a unit that ships with an extension
/// or a later OS, and a unit with neither contents nor a file cannot be enabled or disabled.
pub fn with_unit_files(systemd: &dyn Systemd, units: &[String], action: &str) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    for unit in units {
        if systemd.is_enabled(unit)? == UnitFileState::NotFound {
            tracing::info!(unit = %unit, "Could not {action} unit {unit}: it has no contents and no unit file, skipping");
        } else {
            found.push(unit.clone());
        }
    }
    Ok(found)
}

/// `systemctl` on this host.
pub struct HostSystemd {
    pub runner: Arc<dyn Runner>,
}

/// The command lines [`HostSystemd`] runs (upstream `enableUnits`, `disableUnits`, `presetUnit`).
pub fn systemctl(verb: &str, units: &[String]) -> Cmd {
    Cmd::new("systemctl", std::iter::once(verb.to_string()).chain(units.iter().cloned()))
}

impl Systemd for HostSystemd {
    fn is_enabled(&self, unit: &str) -> anyhow::Result<UnitFileState> {
        // Exits non-zero for disabled units; stdout carries the state either way.
        let out = self.runner.output(&systemctl("is-enabled", &[unit.to_string()]))?;
        Ok(UnitFileState::parse(&out.stdout))
    }
    fn enable(&self, units: &[String]) -> anyhow::Result<()> {
        Ok(self.runner.run(&systemctl("enable", units)).map(drop)?)
    }
    fn disable(&self, units: &[String]) -> anyhow::Result<()> {
        Ok(self.runner.run(&systemctl("disable", units)).map(drop)?)
    }
    fn preset(&self, unit: &str) -> anyhow::Result<()> {
        Ok(self.runner.run(&systemctl("preset", &[unit.to_string()])).map(drop)?)
    }
    fn restart(&self, unit: &str) -> anyhow::Result<()> {
        Ok(self.runner.run(&systemctl("restart", &[unit.to_string()])).map(drop)?)
    }
    fn reload(&self, unit: &str) -> anyhow::Result<()> {
        Ok(self.runner.run(&systemctl("reload", &[unit.to_string()])).map(drop)?)
    }
    fn daemon_reload(&self) -> anyhow::Result<()> {
        Ok(self.runner.run(&systemctl("daemon-reload", &[])).map(drop)?)
    }
    fn update_ca_trust(&self) -> anyhow::Result<()> {
        Ok(self.runner.run(&update_ca_trust_command()).map(drop)?)
    }
}

/// The command behind [`Systemd::update_ca_trust`] on a host.
pub fn update_ca_trust_command() -> Cmd {
    Cmd::new("update-ca-trust", Vec::<String>::new())
}

/// Where [`DirSystemd`] records the service actions it was asked to run, one per line.
pub const ACTIONS_LOG: &str = "/run/mco/actions.log";

/// Enablement in a directory root, as `systemctl --root=ROOT` does it.
pub struct DirSystemd {
    pub root: PathBuf,
}

const UNIT_DIRS: [&str; 4] =
    ["/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"];
const PRESET_DIRS: [&str; 4] = [
    "/etc/systemd/system-preset",
    "/run/systemd/system-preset",
    "/usr/lib/systemd/system-preset",
    "/lib/systemd/system-preset",
];

impl DirSystemd {
    fn host(&self, node_path: &str) -> anyhow::Result<PathBuf> {
        host_path(&self.root, node_path)
    }

    /// Appends one executed service action to [`ACTIONS_LOG`].
    fn log_action(&self, line: &str) -> anyhow::Result<()> {
        use std::io::Write;
        let path = self.host(ACTIONS_LOG)?;
        fs::create_dir_all(path.parent().context("log has no parent")?)?;
        let mut log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        log.write_all(format!("{line}\n").as_bytes()).with_context(|| format!("writing {}", path.display()))
    }

    /// Fails like systemctl for a unit the root does not have (a name without a type is a service).
    fn require_unit(&self, unit: &str) -> anyhow::Result<()> {
        let name = if unit.contains('.') { unit.to_string() } else { format!("{unit}.service") };
        if self.find(&name).is_none() {
            bail!("Unit {name} not found.");
        }
        Ok(())
    }

    /// The unit file (node path) that provides `unit`: the unit itself or, for an instance
    /// `a@i.service`, its template `a@.service`.
    fn find(&self, unit: &str) -> Option<String> {
        let template = unit.split_once('@').map(|(prefix, rest)| {
            let suffix = rest.rsplit_once('.').map_or("", |(_, s)| s);
            format!("{prefix}@.{suffix}")
        });
        UNIT_DIRS.iter().find_map(|dir| {
            [Some(unit.to_string()), template.clone()].into_iter().flatten().find_map(|name| {
                let p = format!("{dir}/{name}");
                let exists = host_path_followed(&self.root, &p).is_ok_and(|file| file.exists());
                (exists && !is_masked(&self.host(&p).ok()?)).then_some(p)
            })
        })
    }

    fn install_of(&self, unit_file: &str) -> anyhow::Result<Install> {
        let text = fs::read_to_string(host_path_followed(&self.root, unit_file)?)
            .with_context(|| format!("reading {unit_file}"))?;
        Ok(Install::parse(&text))
    }

    /// The symlinks enabling `unit` would create: (link node path, target node path).
    fn links(&self, unit: &str) -> anyhow::Result<Vec<(String, String)>> {
        let Some(file) = self.find(unit) else { bail!("Unit file {unit} does not exist.") };
        let install = self.install_of(&file)?;
        let name = match (unit.split_once('@'), &install.default_instance) {
            (Some((prefix, rest)), Some(inst)) if rest.starts_with('.') => format!("{prefix}@{inst}{rest}"),
            _ => unit.to_string(),
        };
        let named = install.wanted_by.iter().chain(&install.required_by).chain(&install.alias);
        if let Some(bad) = named.into_iter().find(|n| !is_unit_name(n)) {
            bail!("Unit {file} has an invalid name in its [Install] section: {bad:?}");
        }
        let mut links = Vec::new();
        for (targets, kind) in [(&install.wanted_by, "wants"), (&install.required_by, "requires")] {
            for t in targets {
                links.push((format!("/etc/systemd/system/{t}.{kind}/{name}"), file.clone()));
            }
        }
        for a in &install.alias {
            links.push((format!("/etc/systemd/system/{a}"), file.clone()));
        }
        Ok(links)
    }

    /// The preset policy for `unit`: the first matching line of the preset files (sorted by file
    /// name, `/etc` overriding `/usr/lib` for the same name); no match enables.
    fn preset_enables(&self, unit: &str) -> anyhow::Result<bool> {
        let mut files: Vec<(String, PathBuf)> = Vec::new();
        for dir in PRESET_DIRS {
            let Ok(entries) = fs::read_dir(host_path_followed(&self.root, dir)?) else { continue };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".preset") && !files.iter().any(|(n, _)| *n == name) {
                    files.push((name, e.path()));
                }
            }
        }
        files.sort();
        for (_, path) in files {
            let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            for line in text.lines().map(str::trim) {
                let mut words = line.split_whitespace();
                match (words.next(), words.next()) {
                    (Some("enable"), Some(pattern)) if glob_match(pattern, unit) => return Ok(true),
                    (Some("disable"), Some(pattern)) if glob_match(pattern, unit) => return Ok(false),
                    _ => {}
                }
            }
        }
        Ok(true)
    }
}

fn is_masked(host: &Path) -> bool {
    fs::read_link(host).is_ok_and(|t| t == Path::new("/dev/null"))
}

/// `fnmatch` with `*` and `?`, as preset files use it.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

impl Systemd for DirSystemd {
    fn is_enabled(&self, unit: &str) -> anyhow::Result<UnitFileState> {
        if is_masked(&self.host(&unit_path(unit))?) {
            return Ok(UnitFileState::Masked);
        }
        if self.find(unit).is_none() {
            return Ok(UnitFileState::NotFound);
        }
        let links = self.links(unit)?;
        if links.is_empty() {
            return Ok(UnitFileState::Static);
        }
        let enabled = links.iter().any(|(link, _)| self.host(link).is_ok_and(|l| fs::symlink_metadata(l).is_ok()));
        Ok(if enabled { UnitFileState::Enabled } else { UnitFileState::Disabled })
    }

    #[context("Enabling {units:?} under {}", self.root.display())]
    fn enable(&self, units: &[String]) -> anyhow::Result<()> {
        for unit in units {
            if is_masked(&self.host(&unit_path(unit))?) {
                bail!("Unit file {unit} is masked.");
            }
            for (link, target) in self.links(unit)? {
                let host = self.host(&link)?;
                if fs::read_link(&host).is_ok_and(|t| t == Path::new(&target)) {
                    continue;
                }
                fs::create_dir_all(host.parent().context("link has no parent")?)?;
                let _ = fs::remove_file(&host);
                std::os::unix::fs::symlink(&target, &host).with_context(|| format!("linking {link}"))?;
            }
        }
        Ok(())
    }

    /// Removes every enablement link named like the unit (whatever its current `[Install]` says,
    /// so a rollback also removes links a newer unit file made), and `.wants`/`.requires`
    /// directories that become empty, so a rolled-back root is left as it was.
    #[context("Disabling {units:?} under {}", self.root.display())]
    fn disable(&self, units: &[String]) -> anyhow::Result<()> {
        let etc = host_path_followed(&self.root, "/etc/systemd/system")?;
        for unit in units {
            let aliases = match self.find(unit) {
                Some(file) => self.install_of(&file)?.alias,
                None => Vec::new(),
            };
            // An alias that is not a unit name was never linked (see `links`).
            for a in aliases.iter().filter(|a| is_unit_name(a)) {
                let host = self.host(&format!("/etc/systemd/system/{a}"))?;
                if fs::symlink_metadata(&host).is_ok_and(|m| m.file_type().is_symlink()) {
                    fs::remove_file(&host)?;
                }
            }
            let Ok(entries) = fs::read_dir(&etc) else { continue };
            for dir in entries.flatten() {
                let name = dir.file_name().to_string_lossy().into_owned();
                if !(name.ends_with(".wants") || name.ends_with(".requires")) {
                    continue;
                }
                // Resolved in the root: the `.wants` directory may be a link the root holds.
                let wants = format!("/etc/systemd/system/{name}");
                let link = self.host(&format!("{wants}/{unit}"))?;
                if fs::symlink_metadata(&link).is_ok() {
                    fs::remove_file(&link)?;
                    let dir = self.host(&wants)?;
                    let empty =
                        fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) && fs::read_dir(&dir)?.next().is_none();
                    if empty {
                        fs::remove_dir(&dir)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn preset(&self, unit: &str) -> anyhow::Result<()> {
        if self.find(unit).is_none() {
            bail!("Unit file {unit} does not exist.");
        }
        let units = [unit.to_string()];
        if self.preset_enables(unit)? { self.enable(&units) } else { self.disable(&units) }
    }

    fn restart(&self, unit: &str) -> anyhow::Result<()> {
        self.require_unit(unit)?;
        self.log_action(&format!("restart {unit}"))
    }

    fn reload(&self, unit: &str) -> anyhow::Result<()> {
        self.require_unit(unit)?;
        self.log_action(&format!("reload {unit}"))
    }

    fn daemon_reload(&self) -> anyhow::Result<()> {
        self.log_action("daemon-reload")
    }

    fn update_ca_trust(&self) -> anyhow::Result<()> {
        self.log_action("update-ca-trust")
    }
}

/// Writes one unit as upstream's `writeUnit`: drop-ins (empty contents delete), then the unit
/// file (disabled first if enabled, so links of its old `[Install]` go) or its mask.
#[context("Writing systemd unit {:?}", u.name)]
pub fn write_unit(fs: &Fs<'_>, systemd: &dyn Systemd, u: &v3::Unit) -> anyhow::Result<()> {
    for d in &u.dropins {
        let path = dropin_path(&u.name, &d.name);
        match d.contents.as_deref() {
            None | Some("") => fs.remove(&fs.host(&path)?)?,
            Some(contents) => write_unit_file(fs, &path, contents)?,
        }
    }
    let path = unit_path(&u.name);
    let host = fs.host(&path)?;
    if u.mask == Some(true) {
        fs.symlink_atomic(&host, Path::new("/dev/null"), None)?;
    } else if let Some(contents) = u.contents.as_deref().filter(|c| !c.is_empty()) {
        if systemd.is_enabled(&u.name)? == UnitFileState::Enabled {
            systemd.disable(std::slice::from_ref(&u.name))?;
        }
        write_unit_file(fs, &path, contents)?;
    } else if u.mask == Some(false) && is_masked(&host) {
        fs.remove(&host)?;
    }
    Ok(())
}

fn write_unit_file(fs: &Fs<'_>, path: &str, contents: &str) -> anyhow::Result<()> {
    let usr = fs.host(&format!("/usr{path}"))?;
    if usr.exists() {
        backup_original(fs, path, Some(&usr))?;
    }
    fs.write_atomic(&fs.host(path)?, contents.as_bytes(), 0o644, None)
}

/// Removes a unit the new config no longer has (preset first, as upstream, so its links go).
#[context("Removing systemd unit {unit:?}")]
pub fn remove_unit(fs: &Fs<'_>, systemd: &dyn Systemd, originals: &Originals, unit: &str) -> anyhow::Result<()> {
    if let Err(e) = systemd.preset(unit) {
        tracing::info!("Did not restore preset for {unit} (may not exist): {e:#}");
    }
    remove_stale(fs, originals, &unit_path(unit), false, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_like_fnmatch() {
        let cases = [
            ("*", "a.service", true),
            ("kubelet*", "kubelet.service", true),
            ("kubelet*", "crio.service", false),
            ("a?c.service", "abc.service", true),
            ("a?c.service", "ac.service", false),
            ("*.socket", "a.service", false),
            ("*-*.service", "a-b.service", true),
        ];
        for (p, n, want) in cases {
            assert_eq!(glob_match(p, n), want, "{p} {n}");
        }
    }

    #[test]
    fn unit_file_states_parse_systemctl_output() {
        assert_eq!(UnitFileState::parse("enabled\n"), UnitFileState::Enabled);
        assert_eq!(UnitFileState::parse("masked-runtime"), UnitFileState::MaskedRuntime);
        assert_eq!(UnitFileState::parse("indirect"), UnitFileState::Other("indirect".into()));
    }

    #[test]
    fn dir_systemd_links_like_systemctl_and_follows_presets() {
        let dir = tempfile::tempdir().unwrap();
        let sd = DirSystemd { root: dir.path().to_path_buf() };
        let write = |p: &str, text: &str| {
            let host = host_path(dir.path(), p).unwrap();
            fs::create_dir_all(host.parent().unwrap()).unwrap();
            fs::write(host, text).unwrap();
        };
        let install = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\nRequiredBy=b.target\n";
        write("/usr/lib/systemd/system/a.service", install);
        write("/usr/lib/systemd/system/b.service", install);
        write("/usr/lib/systemd/system/getty@.service", "[Install]\nWantedBy=getty.target\nDefaultInstance=tty1\n");
        write("/usr/lib/systemd/system/static.service", "[Service]\nExecStart=/bin/true\n");
        write("/usr/lib/systemd/system-preset/90-default.preset", "disable *\n");
        write("/usr/lib/systemd/system-preset/10-a.preset", "# ours\nenable a.service\n");
        write("/etc/systemd/system-preset/10-a.preset", "enable b.service\n");
        let link = |p: &str| fs::read_link(host_path(dir.path(), p).unwrap()).ok();

        sd.preset("a.service").unwrap();
        sd.preset("b.service").unwrap();
        assert_eq!(
            sd.is_enabled("a.service").unwrap(),
            UnitFileState::Disabled,
            "/etc/.../10-a.preset overrides /usr's"
        );
        assert_eq!(sd.is_enabled("b.service").unwrap(), UnitFileState::Enabled);
        assert_eq!(
            link("/etc/systemd/system/multi-user.target.wants/b.service"),
            Some("/usr/lib/systemd/system/b.service".into())
        );
        assert_eq!(
            link("/etc/systemd/system/b.target.requires/b.service"),
            Some("/usr/lib/systemd/system/b.service".into())
        );
        sd.enable(&["getty@.service".to_string()]).unwrap();
        assert_eq!(
            link("/etc/systemd/system/getty.target.wants/getty@tty1.service"),
            Some("/usr/lib/systemd/system/getty@.service".into())
        );
        assert_eq!(sd.is_enabled("static.service").unwrap(), UnitFileState::Static);
        assert_eq!(sd.is_enabled("nope.service").unwrap(), UnitFileState::NotFound);

        sd.disable(&["b.service".to_string()]).unwrap();
        assert_eq!(sd.is_enabled("b.service").unwrap(), UnitFileState::Disabled);
        assert!(
            !host_path(dir.path(), "/etc/systemd/system/b.target.requires").unwrap().exists(),
            "emptied directory removed"
        );
        fs::create_dir_all(host_path(dir.path(), "/etc/systemd/system").unwrap()).unwrap();
        std::os::unix::fs::symlink("/dev/null", host_path(dir.path(), "/etc/systemd/system/a.service").unwrap())
            .unwrap();
        assert_eq!(sd.is_enabled("a.service").unwrap(), UnitFileState::Masked);
        assert_eq!(
            sd.enable(&["a.service".to_string()]).unwrap_err().root_cause().to_string(),
            "Unit file a.service is masked."
        );
    }

    #[test]
    fn host_systemctl_command_lines() {
        let units = ["a.service".to_string(), "b.service".to_string()];
        assert_eq!(systemctl("enable", &units).to_string(), "systemctl enable a.service b.service");
        assert_eq!(systemctl("disable", &units[..1]).to_string(), "systemctl disable a.service");
        assert_eq!(systemctl("restart", &units[..1]).to_string(), "systemctl restart a.service");
        assert_eq!(systemctl("reload", &["crio".to_string()]).to_string(), "systemctl reload crio");
        assert_eq!(systemctl("daemon-reload", &[]).to_string(), "systemctl daemon-reload");
        assert_eq!(update_ca_trust_command().to_string(), "update-ca-trust");
    }
}
