//! Validation of Ignition configs: Ignition's own rules that matter for MachineConfigs, plus the
//! original's extra rule that file modes may not exceed 0777, plus contents checks the original
//! only discovers on the node (data URLs that do not decode, gzip that does not inflate), and
//! units whose `[Install]` section names something other than units (which enabling would turn
//! into link paths anywhere on the node).

use std::collections::HashSet;
use std::fmt;

use crate::dataurl;
use crate::unit::{Install, UNIT_TYPES};
use crate::v3::{Config, Resource};

/// One problem, located by a JSONPath-like path into the config (`$.storage.files.0.path`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error at {}: {}", self.path, self.message)
    }
}

/// Every problem found in a config; empty means valid.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report(pub Vec<Issue>);

impl Report {
    pub fn is_ok(&self) -> bool {
        self.0.is_empty()
    }

    fn add(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.0.push(Issue { path: path.into(), message: message.into() });
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(Issue::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

/// An invalid config, with the original's wording around Ignition's report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    #[error("invalid ignition V3 config found: {0}")]
    Ignition(Report),
    #[error("invalid mode 0{mode:o} for {path}, cannot exceed 0777")]
    ModeTooWide { mode: i64, path: String },
}

/// Validates a spec 3 config the way the original's `ValidateIgnition` does, then refuses file
/// modes with setuid/setgid/sticky bits. The config's `ignition.version` selects version rules.
pub fn validate_for_machine_config(config: &Config) -> Result<(), ValidationError> {
    let report = validate(config);
    if !report.is_ok() {
        return Err(ValidationError::Ignition(report));
    }
    if let Some(f) = config.storage.files.iter().find(|f| f.mode.is_some_and(|m| m > 0o777)) {
        return Err(ValidationError::ModeTooWide { mode: f.mode.unwrap_or_default(), path: f.path.clone() });
    }
    Ok(())
}

/// Ignition's validation of a spec 3 config.
pub fn validate(config: &Config) -> Report {
    let mut r = Report::default();
    let minor = minor_version(&config.ignition.version);
    let ign = &config.ignition;
    for (i, res) in ign.config.merge.iter().enumerate() {
        resource(&mut r, &format!("$.ignition.config.merge.{i}"), res, true);
    }
    if ign.config.replace != Resource::default() {
        resource(&mut r, "$.ignition.config.replace", &ign.config.replace, true);
    }
    for (i, res) in ign.security.tls.certificate_authorities.iter().enumerate() {
        resource(&mut r, &format!("$.ignition.security.tls.certificateAuthorities.{i}"), res, true);
    }
    for (field, proxy) in [("httpProxy", &ign.proxy.http_proxy), ("httpsProxy", &ign.proxy.https_proxy)] {
        if let Some(p) = proxy
            && !(p.starts_with("http://") || p.starts_with("https://"))
        {
            r.add(format!("$.ignition.proxy.{field}"), "proxies must be http(s)");
        }
    }
    let kargs = &config.kernel_arguments;
    for (i, arg) in kargs.should_not_exist.iter().enumerate() {
        if kargs.should_exist.contains(arg) {
            r.add(
                format!("$.kernelArguments.shouldNotExist.{i}"),
                format!("kernel argument {arg:?} is in both shouldExist and shouldNotExist"),
            );
        }
    }
    duplicates(&mut r, "$.passwd.users", config.passwd.users.iter().map(|u| u.name.as_str()));
    duplicates(&mut r, "$.passwd.groups", config.passwd.groups.iter().map(|g| g.name.as_str()));
    storage(&mut r, config, minor);
    systemd(&mut r, config);
    r
}

fn minor_version(version: &str) -> u64 {
    semver::Version::parse(version).map(|v| v.minor).unwrap_or(5)
}

fn duplicates<'a>(r: &mut Report, list: &str, keys: impl Iterator<Item = &'a str>) {
    let mut seen = HashSet::new();
    for (i, key) in keys.enumerate() {
        if !seen.insert(key) {
            r.add(format!("{list}.{i}"), format!("duplicate entry defined: {key:?}"));
        }
    }
}

fn storage(r: &mut Report, config: &Config, minor: u64) {
    let s = &config.storage;
    let links: HashSet<&str> = s.links.iter().map(|l| l.path.as_str()).collect();
    let unit_paths = systemd_paths(config);
    let mut seen_paths = HashSet::new();
    let nodes = s
        .files
        .iter()
        .enumerate()
        .map(|(i, f)| ("files", i, &f.path, &f.user, &f.group))
        .chain(s.directories.iter().enumerate().map(|(i, d)| ("directories", i, &d.path, &d.user, &d.group)))
        .chain(s.links.iter().enumerate().map(|(i, l)| ("links", i, &l.path, &l.user, &l.group)));
    for (list, i, path, user, group) in nodes {
        let at = format!("$.storage.{list}.{i}");
        if let Some(problem) = path_problem(path) {
            r.add(format!("{at}.path"), problem);
        }
        if !seen_paths.insert(path.as_str()) {
            r.add(format!("{at}.path"), format!("duplicate entry defined: {path:?}"));
        }
        // Each of the path's own ancestors looked up: linear in the config, whatever its size.
        let mut ancestors = path.match_indices('/').map(|(at, _)| &path[..at]).filter(|a| !a.is_empty());
        if let Some(link) = ancestors.find(|a| links.contains(a)) {
            r.add(format!("{at}.path"), format!("path includes link {link} defined in the config"));
        }
        if unit_paths.contains(path.as_str()) {
            r.add(format!("{at}.path"), "path conflicts with systemd unit or dropin");
        }
        for (field, owner) in [("user", user), ("group", group)] {
            // An empty name counts as unset, as in Ignition.
            if owner.id.is_some() && owner.name.as_deref().is_some_and(|n| !n.is_empty()) {
                r.add(format!("{at}.{field}"), "cannot set both id and name");
            }
        }
    }
    for (i, f) in s.files.iter().enumerate() {
        let at = format!("$.storage.files.{i}");
        mode(r, &at, f.mode, minor);
        if f.overwrite == Some(true) && f.contents.source.is_none() {
            r.add(format!("{at}.overwrite"), "overwrite must be false if source is unspecified");
        }
        if f.contents != Resource::default() {
            resource(r, &format!("{at}.contents"), &f.contents, false);
        }
        for (j, a) in f.append.iter().enumerate() {
            resource(r, &format!("{at}.append.{j}"), a, true);
        }
    }
    for (i, d) in s.directories.iter().enumerate() {
        mode(r, &format!("$.storage.directories.{i}"), d.mode, minor);
    }
    for (i, l) in s.links.iter().enumerate() {
        if l.target.as_deref().is_none_or(str::is_empty) {
            r.add(format!("$.storage.links.{i}.target"), "link target is required");
        }
    }
    for (i, d) in s.disks.iter().enumerate() {
        if d.device.is_empty() {
            r.add(format!("$.storage.disks.{i}.device"), "disk device is required");
        }
    }
    duplicates(r, "$.storage.disks", s.disks.iter().map(|d| d.device.as_str()));
    duplicates(r, "$.storage.filesystems", s.filesystems.iter().map(|f| f.device.as_str()));
    for (i, fs) in s.filesystems.iter().enumerate() {
        let known = ["ext4", "btrfs", "xfs", "vfat", "swap", "none"];
        if let Some(format) = &fs.format
            && !format.is_empty()
            && !known.contains(&format.as_str())
        {
            r.add(format!("$.storage.filesystems.{i}.format"), "invalid filesystem format");
        }
        if let Some(p) = &fs.path
            && let Some(problem) = path_problem(p)
        {
            r.add(format!("$.storage.filesystems.{i}.path"), problem);
        }
    }
    duplicates(r, "$.storage.raid", s.raid.iter().map(|x| x.name.as_str()));
    duplicates(r, "$.storage.luks", s.luks.iter().map(|x| x.name.as_str()));
}

/// Go's `path.Clean`-based checks of a node path.
fn path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        Some("path not specified")
    } else if !path.starts_with('/') {
        Some("path not absolute")
    } else if path != "/"
        && (path.ends_with('/') || path.split('/').skip(1).any(|c| c.is_empty() || c == "." || c == ".."))
    {
        Some("path is not fully simplified")
    } else {
        None
    }
}

fn mode(r: &mut Report, at: &str, mode: Option<i64>, minor: u64) {
    match mode {
        Some(m) if !(0..=0o7777).contains(&m) => r.add(format!("{at}.mode"), "illegal file mode"),
        Some(m) if m > 0o777 && minor < 4 => {
            r.add(format!("{at}.mode"), "setuid/setgid/sticky bits are not supported in spec versions older than 3.4.0")
        }
        _ => {}
    }
}

fn resource(r: &mut Report, at: &str, res: &Resource, source_required: bool) {
    let Some(source) = &res.source else {
        if res.verification.hash.is_some() {
            r.add(format!("{at}.verification.hash"), "source must be specified if verification is specified");
        } else if source_required {
            r.add(format!("{at}.source"), "source is required");
        }
        return;
    };
    let scheme = source.split_once(':').map(|(s, _)| s.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("data") => data_contents(r, at, res),
        Some("http" | "https" | "tftp" | "s3" | "gs" | "arn") => {}
        _ if source.is_empty() => {}
        _ => r.add(format!("{at}.source"), format!("invalid url scheme in {:?}", truncate(source))),
    }
    match res.compression.as_deref() {
        None | Some("" | "gzip") => {}
        Some(other) => r.add(format!("{at}.compression"), format!("invalid compression method {other:?}")),
    }
    if let Some(hash) = &res.verification.hash {
        let ok = match hash.split_once('-') {
            Some(("sha512", sum)) => sum.len() == 128 && sum.bytes().all(|b| b.is_ascii_hexdigit()),
            Some(("sha256", sum)) => sum.len() == 64 && sum.bytes().all(|b| b.is_ascii_hexdigit()),
            _ => false,
        };
        if !ok {
            r.add(format!("{at}.verification.hash"), format!("malformed hash specifier {hash:?}"));
        }
    }
    let http = matches!(scheme.as_deref(), Some("http" | "https"));
    if !res.http_headers.is_empty() && !http {
        r.add(format!("{at}.httpHeaders"), "cannot use HTTP headers with this source scheme");
    }
    for (i, h) in res.http_headers.iter().enumerate() {
        if h.name.is_empty() {
            r.add(format!("{at}.httpHeaders.{i}.name"), "HTTP header name can't be empty");
        }
    }
    duplicates(r, &format!("{at}.httpHeaders"), res.http_headers.iter().map(|h| h.name.as_str()));
}

/// Inline contents must decode, and gzip contents must inflate: otherwise the node fails
/// half-way through an update. (An unknown compression is reported on its own field.)
fn data_contents(r: &mut Report, at: &str, res: &Resource) {
    match dataurl::check_contents(res) {
        Err(dataurl::ContentsError::Compression(_)) | Ok(_) => {}
        Err(e) => r.add(format!("{at}.source"), e.to_string()),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

fn systemd_paths(config: &Config) -> HashSet<String> {
    let mut paths = HashSet::new();
    for u in &config.systemd.units {
        if u.contents.as_deref().is_some_and(|c| !c.is_empty()) {
            paths.insert(format!("/etc/systemd/system/{}", u.name));
        }
        for d in &u.dropins {
            if d.contents.as_deref().is_some_and(|c| !c.is_empty()) {
                paths.insert(format!("/etc/systemd/system/{}.d/{}", u.name, d.name));
            }
        }
    }
    paths
}

fn systemd(r: &mut Report, config: &Config) {
    let units = &config.systemd.units;
    duplicates(r, "$.systemd.units", units.iter().map(|u| u.name.as_str()));
    for (i, u) in units.iter().enumerate() {
        let at = format!("$.systemd.units.{i}");
        match u.name.rsplit_once('.') {
            None => r.add(format!("{at}.name"), "no systemd unit extension"),
            Some((_, ext)) if !UNIT_TYPES.contains(&ext) => {
                r.add(format!("{at}.name"), format!("invalid systemd unit extension {ext:?}"))
            }
            _ => {}
        }
        if let Some(contents) = &u.contents {
            if let Err(e) = unit_file(contents) {
                r.add(format!("{at}.contents"), format!("invalid unit content: {e}"));
            }
            if let Some(bad) = Install::parse(contents).bad_name() {
                r.add(format!("{at}.contents"), format!("[Install] {bad} is not a unit name"));
            }
        }
        duplicates(r, &format!("{at}.dropins"), u.dropins.iter().map(|d| d.name.as_str()));
        for (j, d) in u.dropins.iter().enumerate() {
            if !d.name.ends_with(".conf") {
                r.add(format!("{at}.dropins.{j}.name"), "invalid systemd drop-in extension");
            }
            if let Some(contents) = &d.contents
                && let Err(e) = unit_file(contents)
            {
                r.add(format!("{at}.dropins.{j}.contents"), format!("invalid unit content: {e}"));
            }
        }
    }
}

/// The structure go-systemd's unit deserializer insists on: `[Section]` headers closed, lines in
/// a section that are neither comments nor headers carry `=` (what precedes the first section
/// is skipped).
fn unit_file(contents: &str) -> Result<(), String> {
    let mut in_section = false;
    let mut continued = false;
    for (n, raw) in contents.lines().enumerate() {
        let line = raw.trim();
        let was_continued = continued;
        continued = line.ends_with('\\');
        if was_continued || line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            if !line.ends_with(']') || line.len() < 3 {
                return Err(format!("line {}: section header {line:?} is not closed", n + 1));
            }
            in_section = true;
        } else if !in_section {
            // go-systemd's lexer looks for the first `[` and skips what comes before it (systemd
            // ignores such lines too): the original accepts such a unit.
            continue;
        } else if !line.contains('=') {
            return Err(format!("line {}: {line:?} is not of the form Key=Value", n + 1));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn issues(v: Value) -> Vec<String> {
        let mut base = json!({"ignition": {"version": "3.5.0"}});
        base.as_object_mut().unwrap().extend(v.as_object().unwrap().clone());
        let cfg: Config = serde_json::from_value(base).unwrap();
        validate(&cfg).0.into_iter().map(|i| i.to_string()).collect()
    }

    fn gzip_data_url(bytes: &[u8]) -> String {
        use base64::Engine;
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(bytes).unwrap();
        let gz = enc.finish().unwrap();
        format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(gz))
    }

    #[test]
    fn valid_configs_have_no_issues() {
        let ok = json!({
            "storage": {
                "files": [
                    {"path": "/etc/a", "mode": 420, "overwrite": true, "contents": {"source": "data:,x"}},
                    {"path": "/etc/e", "user": {"id": 0, "name": ""}, "group": {"id": 0, "name": ""}},
                    {"path": "/etc/b.gz", "contents": {"source": gzip_data_url(b"hello"), "compression": "gzip"}},
                    {"path": "/etc/c", "contents": {"source": "https://example.com/c", "httpHeaders": [{"name": "A", "value": "b"}],
                        "verification": {"hash": format!("sha256-{}", "a".repeat(64))}}}
                ],
                "directories": [{"path": "/etc/d", "mode": 493}],
                "links": [{"path": "/etc/l", "target": "/etc/a"}]
            },
            "systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "[Unit]\nDescription=x\n# c\n[Service]\nExecStart=/bin/true \\\n  --flag\n[Install]\nWantedBy=multi-user.target\n",
                "dropins": [{"name": "10-x.conf", "contents": "[Service]\nEnvironment=A=B\n"}]},
                // Text before the first section is skipped, as go-systemd's lexer skips it.
                {"name": "b.service", "contents": "This unit has a preface\nKey=before any section\n[Service]\nExecStart=/bin/true\n"}]},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]}
        });
        assert_eq!(issues(ok), Vec::<String>::new());
    }

    #[test]
    fn each_rule_names_the_field() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({"storage": {"files": [{"path": "etc/a"}]}}), "error at $.storage.files.0.path: path not absolute"),
            (json!({"storage": {"files": [{"path": ""}]}}), "error at $.storage.files.0.path: path not specified"),
            (
                json!({"storage": {"files": [{"path": "/etc//a"}]}}),
                "error at $.storage.files.0.path: path is not fully simplified",
            ),
            (
                json!({"storage": {"files": [{"path": "/a"}, {"path": "/a"}]}}),
                "error at $.storage.files.1.path: duplicate entry defined: \"/a\"",
            ),
            (
                json!({"storage": {"files": [{"path": "/a"}], "directories": [{"path": "/a"}]}}),
                "error at $.storage.directories.0.path: duplicate entry defined: \"/a\"",
            ),
            (
                json!({"storage": {"files": [{"path": "/a", "mode": 8192}]}}),
                "error at $.storage.files.0.mode: illegal file mode",
            ),
            (
                json!({"storage": {"files": [{"path": "/a", "overwrite": true}]}}),
                "error at $.storage.files.0.overwrite: overwrite must be false if source is unspecified",
            ),
            (
                json!({"storage": {"files": [{"path": "/a", "contents": {"source": "data:,%zz"}}]}}),
                "error at $.storage.files.0.contents.source: data URL has an invalid percent-escape",
            ),
            (
                json!({"storage": {"files": [{"path": "/a", "contents": {"source": "data:,notgzip", "compression": "gzip"}}]}}),
                "error at $.storage.files.0.contents.source: contents are not valid gzip data",
            ),
            (
                json!({"storage": {"files": [{"path": "/a", "contents": {"source": "data:,x", "compression": "xz"}}]}}),
                "error at $.storage.files.0.contents.compression: invalid compression method \"xz\"",
            ),
            (
                json!({"storage": {"files": [{"path": "/a", "contents": {"source": "ftp://x/y"}}]}}),
                "error at $.storage.files.0.contents.source: invalid url scheme",
            ),
            (
                json!({"storage": {"files": [{"path": "/a", "contents": {"source": "data:,x", "verification": {"hash": "md5-abc"}}}]}}),
                "error at $.storage.files.0.contents.verification.hash: malformed hash specifier",
            ),
            (
                json!({"storage": {"files": [{"path": "/a", "user": {"id": 0, "name": "root"}}]}}),
                "error at $.storage.files.0.user: cannot set both id and name",
            ),
            (
                json!({"storage": {"links": [{"path": "/l"}]}}),
                "error at $.storage.links.0.target: link target is required",
            ),
            (
                json!({"storage": {"links": [{"path": "/l", "target": "/t"}], "files": [{"path": "/l/f"}]}}),
                "error at $.storage.files.0.path: path includes link /l defined in the config",
            ),
            (
                json!({"storage": {"files": [{"path": "/etc/systemd/system/a.service"}]}, "systemd": {"units": [{"name": "a.service", "contents": "[Unit]"}]}}),
                "error at $.storage.files.0.path: path conflicts with systemd unit or dropin",
            ),
            (
                json!({"systemd": {"units": [{"name": "a.bogus"}]}}),
                "error at $.systemd.units.0.name: invalid systemd unit extension \"bogus\"",
            ),
            (
                json!({"systemd": {"units": [{"name": "a"}]}}),
                "error at $.systemd.units.0.name: no systemd unit extension",
            ),
            (
                json!({"systemd": {"units": [{"name": "a.service", "contents": "[Install]\nAlias=../../etc/cron.d/x.service\n"}]}}),
                "error at $.systemd.units.0.contents: [Install] Alias=\"../../etc/cron.d/x.service\" is not a unit name",
            ),
            (
                json!({"systemd": {"units": [{"name": "a.service"}, {"name": "a.service"}]}}),
                "error at $.systemd.units.1: duplicate entry defined: \"a.service\"",
            ),
            (
                json!({"systemd": {"units": [{"name": "a.service", "dropins": [{"name": "x.txt"}]}]}}),
                "error at $.systemd.units.0.dropins.0.name: invalid systemd drop-in extension",
            ),
            (
                json!({"passwd": {"users": [{"name": "core"}, {"name": "core"}]}}),
                "error at $.passwd.users.1: duplicate entry defined: \"core\"",
            ),
            (
                json!({"kernelArguments": {"shouldExist": ["a"], "shouldNotExist": ["a"]}}),
                "error at $.kernelArguments.shouldNotExist.0: kernel argument \"a\" is in both shouldExist and shouldNotExist",
            ),
            (
                json!({"ignition": {"version": "3.5.0", "proxy": {"httpProxy": "socks5://x"}}}),
                "error at $.ignition.proxy.httpProxy: proxies must be http(s)",
            ),
        ];
        for (input, want) in cases {
            let got = issues(input.clone());
            assert!(got.iter().any(|g| g.starts_with(want)), "{input}: want {want:?}, got {got:?}");
        }
    }

    /// Tens of thousands of files and links: each path checks its own ancestors against the
    /// links (linear), where comparing every path with every link took about a minute.
    #[test]
    fn links_inside_a_large_config_are_found_by_ancestor() {
        let n = 30_000;
        let links: Vec<Value> = (0..n).map(|i| json!({"path": format!("/l/{i}"), "target": "/t"})).collect();
        let mut files: Vec<Value> = (0..n).map(|i| json!({"path": format!("/f/{i}/x")})).collect();
        files.push(json!({"path": format!("/l/{}/deep/x", n - 1)}));
        let found = issues(json!({"storage": {"links": links, "files": files}}));
        assert_eq!(
            found,
            [format!("error at $.storage.files.{n}.path: path includes link /l/{} defined in the config", n - 1)]
        );
    }

    #[test]
    fn special_mode_bits_need_spec_3_4_and_are_refused_for_machineconfigs() {
        let cfg = |version: &str| -> Config {
            serde_json::from_value(json!({"ignition": {"version": version}, "storage": {"files": [{"path": "/usr/local/bin/x", "mode": 0o4755, "contents": {"source": "data:,x"}}]}})).unwrap()
        };
        assert!(validate(&cfg("3.2.0")).0[0].message.starts_with("setuid/setgid/sticky"));
        assert!(validate(&cfg("3.4.0")).is_ok());
        let err = validate_for_machine_config(&cfg("3.4.0")).unwrap_err();
        assert_eq!(err.to_string(), "invalid mode 04755 for /usr/local/bin/x, cannot exceed 0777");
    }
}
