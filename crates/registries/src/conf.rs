//! registries.conf(5) as containers/image `sysregistriesv2.V2RegistriesConf` holds it, read the
//! way BurntSushi/toml decodes it into that struct and written exactly as BurntSushi/toml v1.5.0
//! encodes it: keys in struct order with plain values before tables, `prefix` always written,
//! the other registry fields only when set, two spaces of indentation per table level, a blank
//! line before each table, Go maps sorted.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::error::RegistriesError;

/// `pull-from-mirror` of the mirrors of digest mirror sets.
pub(crate) const MIRROR_BY_DIGEST_ONLY: &str = "digest-only";
/// `pull-from-mirror` of the mirrors of tag mirror sets.
pub(crate) const MIRROR_BY_TAG_ONLY: &str = "tag-only";

/// A remote location: a registry's own endpoint or one of its mirrors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    pub location: String,
    pub insecure: bool,
    /// `all`, `digest-only`, `tag-only` or empty (mirrors only).
    pub pull_from_mirror: String,
}

/// One `[[registry]]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    /// Matched against references; empty means `location`. Wildcards (`*.domain`) live here.
    pub prefix: String,
    pub endpoint: Endpoint,
    /// `None` and `Some([])` are written alike (nothing); kept apart only as Go does.
    pub mirrors: Option<Vec<Endpoint>>,
    pub blocked: bool,
    pub mirror_by_digest_only: bool,
}

impl Registry {
    /// `registryScope`: the scope the entry is matched by.
    pub fn scope(&self) -> &str {
        if self.prefix.is_empty() { &self.endpoint.location } else { &self.prefix }
    }

    pub(crate) fn mirrors(&self) -> &[Endpoint] {
        self.mirrors.as_deref().unwrap_or_default()
    }
}

/// A registries.conf. Lists and maps are `None` when absent, as Go's nil: the encoder skips nil
/// ones and writes empty ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistriesConf {
    pub registries: Option<Vec<Registry>>,
    pub unqualified_search_registries: Option<Vec<String>>,
    pub credential_helpers: Option<Vec<String>>,
    pub short_name_mode: String,
    pub additional_layer_store_auth_helper: String,
    pub aliases: Option<BTreeMap<String, String>>,
}

impl RegistriesConf {
    /// Reads `text` as BurntSushi/toml fills a `V2RegistriesConf`: known keys only (others are
    /// ignored), a type mismatch is an error.
    pub fn parse(text: &str) -> Result<Self, RegistriesError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| decode_error(e.message()))?;
        let mut conf = RegistriesConf::default();
        for (key, value) in &table {
            match key.as_str() {
                "registry" => {
                    let items = value.as_array().ok_or_else(|| type_error(key, "array of tables"))?;
                    let registries = items.iter().map(read_registry).collect::<Result<_, _>>()?;
                    conf.registries = Some(registries);
                }
                "unqualified-search-registries" => conf.unqualified_search_registries = Some(strings(key, value)?),
                "credential-helpers" => conf.credential_helpers = Some(strings(key, value)?),
                "short-name-mode" => conf.short_name_mode = string(key, value)?,
                "additional-layer-store-auth-helper" => conf.additional_layer_store_auth_helper = string(key, value)?,
                "aliases" => {
                    let aliases = value.as_table().ok_or_else(|| type_error(key, "table"))?;
                    let aliases =
                        aliases.iter().map(|(k, v)| Ok((k.clone(), string(k, v)?))).collect::<Result<_, _>>()?;
                    conf.aliases = Some(aliases);
                }
                _ => {}
            }
        }
        Ok(conf)
    }

    /// The TOML BurntSushi/toml's encoder writes for this config.
    pub fn to_toml(&self) -> String {
        let mut out = Encoder::default();
        // Plain values first, in field order; a list of tables is plain while it is empty.
        if let Some(registries) = self.registries.as_ref().filter(|r| r.is_empty()) {
            out.key_value(&["registry"], &array(registries.iter().map(|_| String::new())));
        }
        if let Some(search) = &self.unqualified_search_registries {
            out.key_value(&["unqualified-search-registries"], &array(search.iter().map(|s| quoted(s))));
        }
        if let Some(helpers) = &self.credential_helpers {
            out.key_value(&["credential-helpers"], &array(helpers.iter().map(|s| quoted(s))));
        }
        out.key_value(&["short-name-mode"], &quoted(&self.short_name_mode));
        out.key_value(&["additional-layer-store-auth-helper"], &quoted(&self.additional_layer_store_auth_helper));
        // Then the tables.
        for registry in self.registries.iter().flatten() {
            out.table_header(&["registry"], true);
            out.registry(registry);
        }
        if let Some(aliases) = &self.aliases {
            out.table_header(&["aliases"], false);
            for (name, target) in aliases {
                out.key_value(&["aliases", name], &quoted(target));
            }
        }
        out.text
    }
}

fn decode_error(message: &str) -> RegistriesError {
    RegistriesError::RegistriesConfDecode(message.to_string())
}

fn type_error(key: &str, want: &str) -> RegistriesError {
    decode_error(&format!("{key}: expected {want}"))
}

fn string(key: &str, value: &toml::Value) -> Result<String, RegistriesError> {
    value.as_str().map(str::to_string).ok_or_else(|| type_error(key, "string"))
}

fn boolean(key: &str, value: &toml::Value) -> Result<bool, RegistriesError> {
    value.as_bool().ok_or_else(|| type_error(key, "boolean"))
}

fn strings(key: &str, value: &toml::Value) -> Result<Vec<String>, RegistriesError> {
    let items = value.as_array().ok_or_else(|| type_error(key, "array"))?;
    items.iter().map(|v| string(key, v)).collect()
}

/// The fields of an `Endpoint` in `table` (a registry's, flattened into it, or a mirror's).
fn read_endpoint(key: &str, value: &toml::Value, endpoint: &mut Endpoint) -> Result<bool, RegistriesError> {
    match key {
        "location" => endpoint.location = string(key, value)?,
        "insecure" => endpoint.insecure = boolean(key, value)?,
        "pull-from-mirror" => endpoint.pull_from_mirror = string(key, value)?,
        _ => return Ok(false),
    }
    Ok(true)
}

fn read_registry(value: &toml::Value) -> Result<Registry, RegistriesError> {
    let table = value.as_table().ok_or_else(|| type_error("registry", "table"))?;
    let mut registry = Registry::default();
    for (key, value) in table {
        if read_endpoint(key, value, &mut registry.endpoint)? {
            continue;
        }
        match key.as_str() {
            "prefix" => registry.prefix = string(key, value)?,
            "blocked" => registry.blocked = boolean(key, value)?,
            "mirror-by-digest-only" => registry.mirror_by_digest_only = boolean(key, value)?,
            "mirror" => {
                let items = value.as_array().ok_or_else(|| type_error(key, "array of tables"))?;
                let mut mirrors = Vec::new();
                for item in items {
                    let table = item.as_table().ok_or_else(|| type_error("mirror", "table"))?;
                    let mut mirror = Endpoint::default();
                    for (key, value) in table {
                        read_endpoint(key, value, &mut mirror)?;
                    }
                    mirrors.push(mirror);
                }
                registry.mirrors = Some(mirrors);
            }
            _ => {}
        }
    }
    Ok(registry)
}

/// BurntSushi's `[a, b]`.
fn array(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.collect::<Vec<_>>().join(", "))
}

/// A basic string with BurntSushi's escapes (`\"`, `\\`, the short control escapes, `\uXXXX`
/// for the other control bytes and DEL); everything else is written as is.
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A key part, bare when it is only `A-Za-z0-9_-`.
fn key_part(part: &str) -> String {
    if part.is_empty() {
        "\"\"".to_string()
    } else if part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        part.to_string()
    } else {
        quoted(part)
    }
}

/// The encoder's output and its "written anything yet" state (no leading blank line).
#[derive(Default)]
struct Encoder {
    text: String,
}

impl Encoder {
    fn newline(&mut self) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
    }

    fn indent(key: &[&str]) -> String {
        "  ".repeat(key.len() - 1)
    }

    fn key_value(&mut self, key: &[&str], value: &str) {
        let last = key_part(key[key.len() - 1]);
        let _ = write!(self.text, "{}{last} = {value}", Self::indent(key));
        self.newline();
    }

    /// `[key]` or `[[key]]`, after a blank line (a table of the top level, or any array entry).
    fn table_header(&mut self, key: &[&str], array: bool) {
        self.newline();
        let name = key.iter().map(|k| key_part(k)).collect::<Vec<_>>().join(".");
        let (open, close) = if array { ("[[", "]]") } else { ("[", "]") };
        let _ = write!(self.text, "{}{open}{name}{close}", Self::indent(key));
        self.newline();
    }

    fn endpoint(&mut self, key: &[&str], endpoint: &Endpoint) {
        if !endpoint.location.is_empty() {
            self.key_value(&[key, &["location"]].concat(), &quoted(&endpoint.location));
        }
        if endpoint.insecure {
            self.key_value(&[key, &["insecure"]].concat(), "true");
        }
        if !endpoint.pull_from_mirror.is_empty() {
            self.key_value(&[key, &["pull-from-mirror"]].concat(), &quoted(&endpoint.pull_from_mirror));
        }
    }

    fn registry(&mut self, registry: &Registry) {
        let key = ["registry"];
        self.key_value(&["registry", "prefix"], &quoted(&registry.prefix));
        self.endpoint(&key, &registry.endpoint);
        if registry.blocked {
            self.key_value(&["registry", "blocked"], "true");
        }
        if registry.mirror_by_digest_only {
            self.key_value(&["registry", "mirror-by-digest-only"], "true");
        }
        for mirror in registry.mirrors() {
            self.table_header(&["registry", "mirror"], true);
            self.endpoint(&["registry", "mirror"], mirror);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_round_trips_in_burntsushi_form() {
        let conf =
            RegistriesConf::parse("unqualified-search-registries = ['registry.access.redhat.com', 'docker.io']\n")
                .unwrap();
        assert_eq!(
            conf.to_toml(),
            "unqualified-search-registries = [\"registry.access.redhat.com\", \"docker.io\"]\n\
             short-name-mode = \"\"\nadditional-layer-store-auth-helper = \"\"\n"
        );
    }

    #[test]
    fn registries_mirrors_and_aliases_are_tables() {
        let conf = RegistriesConf::parse(
            r#"
            unknown = 1
            credential-helpers = []
            short-name-mode = "enforcing"
            [aliases]
            "a/b" = "q.io/a/b"
            zz = "z.io/z"
            [[registry]]
            location = "q.io"
            insecure = true
            mirror-by-digest-only = true
            [[registry.mirror]]
            location = "m.io"
            pull-from-mirror = "all"
            [[registry]]
            prefix = "*.w.io"
            blocked = true
            mirror = []
            "#,
        )
        .unwrap();
        let want = r#"credential-helpers = []
short-name-mode = "enforcing"
additional-layer-store-auth-helper = ""

[[registry]]
  prefix = ""
  location = "q.io"
  insecure = true
  mirror-by-digest-only = true

  [[registry.mirror]]
    location = "m.io"
    pull-from-mirror = "all"

[[registry]]
  prefix = "*.w.io"
  blocked = true

[aliases]
  "a/b" = "q.io/a/b"
  zz = "z.io/z"
"#;
        assert_eq!(conf.to_toml(), want);
    }

    #[test]
    fn strings_get_burntsushi_escapes() {
        assert_eq!(quoted("a\"b\\c\n\u{1}\u{7f}é"), r#""a\"b\\c\n\u0001\u007fé""#);
    }

    #[test]
    fn a_type_mismatch_is_refused() {
        assert!(RegistriesConf::parse("short-name-mode = 1").is_err());
        assert!(RegistriesConf::parse("[[registry]]\ninsecure = \"yes\"").is_err());
        assert!(RegistriesConf::parse("not toml = = 1").is_err());
    }
}
