//! What the node's systemd reads from a unit: its `[Install]` section, and which names are unit
//! names. Enabling a unit turns its `[Install]` names into link paths, so a name that is not a
//! unit name is refused wherever a config is checked (`systemctl enable` refuses them too).

/// The unit types systemd knows (`systemd.unit(5)`), and `snapshot`, which Ignition still takes.
pub(crate) const UNIT_TYPES: &[&str] = &[
    "service",
    "socket",
    "device",
    "mount",
    "automount",
    "swap",
    "target",
    "path",
    "timer",
    "snapshot",
    "slice",
    "scope",
];

/// Whether `name` is a unit name as systemd's `unit_name_is_valid` judges one: at most 255
/// characters of letters, digits and `:-_.\\`, one optional `@` (template or instance), and a
/// known type after the last dot.
pub fn is_unit_name(name: &str) -> bool {
    let Some((stem, kind)) = name.rsplit_once('.') else { return false };
    let prefix = stem.split_once('@').map_or(stem, |(prefix, _)| prefix);
    name.len() <= 255
        && UNIT_TYPES.contains(&kind)
        && !prefix.is_empty()
        && name.matches('@').count() <= 1
        && name.chars().all(|c| c.is_ascii_alphanumeric() || ":-_.\\@".contains(c))
}

/// The `[Install]` section of a unit file.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Install {
    pub wanted_by: Vec<String>,
    pub required_by: Vec<String>,
    pub alias: Vec<String>,
    pub default_instance: Option<String>,
}

impl Install {
    /// Reads `WantedBy=`, `RequiredBy=`, `Alias=` and `DefaultInstance=` (space-separated lists,
    /// an empty assignment resets the list) from the `[Install]` section.
    pub fn parse(unit_text: &str) -> Self {
        let mut install = Install::default();
        let mut in_install = false;
        for line in unit_text.lines().map(str::trim) {
            if line.starts_with('[') {
                in_install = line == "[Install]";
                continue;
            }
            let Some((key, value)) = line.split_once('=').filter(|_| in_install) else { continue };
            let list = match key.trim() {
                "WantedBy" => &mut install.wanted_by,
                "RequiredBy" => &mut install.required_by,
                "Alias" => &mut install.alias,
                "DefaultInstance" => {
                    install.default_instance = Some(value.trim().to_string()).filter(|v| !v.is_empty());
                    continue;
                }
                _ => continue,
            };
            if value.trim().is_empty() {
                list.clear();
            }
            list.extend(value.split_whitespace().map(str::to_string));
        }
        install
    }
}

impl Install {
    /// The first name the section gives that is not a unit name, as `Key=name`.
    pub fn bad_name(&self) -> Option<String> {
        let named = [("WantedBy", &self.wanted_by), ("RequiredBy", &self.required_by), ("Alias", &self.alias)];
        named
            .into_iter()
            .find_map(|(key, names)| names.iter().find(|n| !is_unit_name(n)).map(|n| format!("{key}={n:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_sections_parse_like_systemd() {
        let text = "[Unit]\nWantedBy=ignored.target\n[Install]\nWantedBy=multi-user.target  a.target\nRequiredBy=b.target\n\
                    Alias=x.service\nWantedBy=\nWantedBy=c.target\nDefaultInstance=one\n";
        let i = Install::parse(text);
        assert_eq!(i.wanted_by, ["c.target"]);
        assert_eq!(i.required_by, ["b.target"]);
        assert_eq!(i.alias, ["x.service"]);
        assert_eq!(i.default_instance.as_deref(), Some("one"));
        assert_eq!(Install::parse("[Service]\nExecStart=/bin/true\n"), Install::default());
    }

    #[test]
    fn unit_names_are_judged_as_systemd_does() {
        let cases = [
            ("sshd.service", true),
            ("getty@tty1.service", true),
            ("getty@.service", true),
            ("multi-user.target", true),
            ("dev-disk-by\\x2dlabel-root.device", true),
            ("a:b_c.socket", true),
            ("", false),
            ("service", false),
            (".service", false),
            ("@x.service", false),
            ("a.unknown", false),
            ("a@b@c.service", false),
            ("../../etc/passwd", false),
            ("/etc/x.service", false),
            ("a b.service", false),
            ("a/b.target", false),
            (&"x".repeat(250), false),
        ];
        for (name, valid) in cases {
            assert_eq!(is_unit_name(name), valid, "{name:?}");
        }
        assert!(is_unit_name(&format!("{}.service", "x".repeat(247))), "255 characters");
        assert!(!is_unit_name(&format!("{}.service", "x".repeat(248))), "256 characters");
    }
}
