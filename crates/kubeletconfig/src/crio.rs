//! The files of a generated container runtime MachineConfig: CRI-O drop-ins under
//! `/etc/crio/crio.conf.d` and `/etc/containers/storage.conf` (the pool's template with the
//! overlay size and additional stores set), written as Go's BurntSushi/toml encoder writes the
//! original's structs.

use std::collections::BTreeMap;

use mco_api::machineconfiguration::ContainerRuntimeConfiguration;

use mco_api::quantity::Quantity;

pub(crate) const STORAGE_CONF: &str = "/etc/containers/storage.conf";

/// How a Go field behaves under BurntSushi/toml.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    StrList,
    /// `map[string]string`: a table with sorted keys.
    StrMap,
    Table(&'static [Field]),
}

#[derive(Debug)]
struct Field {
    key: &'static str,
    kind: Kind,
    omitempty: bool,
}

const fn f(key: &'static str, kind: Kind) -> Field {
    Field { key, kind, omitempty: true }
}

const fn always(key: &'static str, kind: Kind) -> Field {
    Field { key, kind, omitempty: false }
}

// containers/storage v1.58 `pkg/config`.
const AUFS: &[Field] = &[f("mountopt", Kind::Str)];
const BTRFS: &[Field] = &[f("min_space", Kind::Str), f("size", Kind::Str)];
const OVERLAY: &[Field] = &[
    f("ignore_chown_errors", Kind::Str),
    f("mountopt", Kind::Str),
    f("mount_program", Kind::Str),
    f("size", Kind::Str),
    f("inodes", Kind::Str),
    f("skip_mount_home", Kind::Str),
    f("use_composefs", Kind::Str),
    f("force_mask", Kind::Str),
];
const VFS: &[Field] = &[f("ignore_chown_errors", Kind::Str)];
const ZFS: &[Field] = &[f("mountopt", Kind::Str), f("fsname", Kind::Str), f("size", Kind::Str)];
const OPTIONS: &[Field] = &[
    f("additionalimagestores", Kind::StrList),
    f("imagestore", Kind::Str),
    f("additionallayerstores", Kind::StrList),
    f("size", Kind::Str),
    f("ignore_chown_errors", Kind::Str),
    f("use_composefs", Kind::Str),
    f("force_mask", Kind::Int),
    f("root-auto-userns-user", Kind::Str),
    f("auto-userns-min-size", Kind::Int),
    f("auto-userns-max-size", Kind::Int),
    f("aufs", Kind::Table(AUFS)),
    f("btrfs", Kind::Table(BTRFS)),
    f("thinpool", Kind::Table(&[])),
    f("overlay", Kind::Table(OVERLAY)),
    f("vfs", Kind::Table(VFS)),
    f("zfs", Kind::Table(ZFS)),
    f("skip_mount_home", Kind::Str),
    f("mount_program", Kind::Str),
    f("mountopt", Kind::Str),
    f("pull_options", Kind::StrMap),
    f("disable-volatile", Kind::Bool),
];
// The original's `tomlConfigStorage`.
const STORAGE: &[Field] = &[always(
    "storage",
    Kind::Table(&[
        always("driver", Kind::Str),
        always("runroot", Kind::Str),
        always("graphroot", Kind::Str),
        always("options", Kind::Table(OPTIONS)),
    ]),
)];

/// A value of a [`Kind`].
#[derive(Debug, Clone, PartialEq)]
enum Toml {
    Str(String),
    Int(i64),
    Bool(bool),
    StrList(Vec<String>),
    StrMap(BTreeMap<String, String>),
    Table(Vec<Toml>),
}

impl Toml {
    fn zero(kind: Kind) -> Toml {
        match kind {
            Kind::Str => Toml::Str(String::new()),
            Kind::Int => Toml::Int(0),
            Kind::Bool => Toml::Bool(false),
            Kind::StrList => Toml::StrList(Vec::new()),
            Kind::StrMap => Toml::StrMap(BTreeMap::new()),
            Kind::Table(fields) => Toml::Table(fields.iter().map(|f| Toml::zero(f.kind)).collect()),
        }
    }

    /// BurntSushi's `isEmpty` (integers are never empty; a table is when all its fields are).
    fn is_empty(&self) -> bool {
        match self {
            Toml::Str(s) => s.is_empty(),
            Toml::Int(_) => false,
            Toml::Bool(b) => !b,
            Toml::StrList(l) => l.is_empty(),
            Toml::StrMap(m) => m.is_empty(),
            Toml::Table(fields) => fields.iter().all(Toml::is_empty),
        }
    }

    /// The field `key` of a table.
    fn field_mut(&mut self, fields: &[Field], key: &str) -> &mut Toml {
        let Toml::Table(values) = self else { unreachable!("not a table") };
        let index = fields.iter().position(|f| f.key == key).unwrap_or_else(|| panic!("no field {key}"));
        &mut values[index]
    }
}

/// Decoding a TOML table into the fields' Go values (unknown keys are ignored, as Go does).
fn decode(table: &toml::Table, fields: &[Field]) -> Result<Toml, String> {
    let mut values = Vec::with_capacity(fields.len());
    for field in fields {
        let value = match (field.kind, table.get(field.key)) {
            (kind, None) => Toml::zero(kind),
            (Kind::Str, Some(toml::Value::String(s))) => Toml::Str(s.clone()),
            (Kind::Int, Some(toml::Value::Integer(i))) => Toml::Int(*i),
            (Kind::Bool, Some(toml::Value::Boolean(b))) => Toml::Bool(*b),
            (Kind::StrList, Some(toml::Value::Array(items))) => Toml::StrList(
                items
                    .iter()
                    .map(|i| i.as_str().map(str::to_string).ok_or(format!("{}: not a string", field.key)))
                    .collect::<Result<_, _>>()?,
            ),
            (Kind::StrMap, Some(toml::Value::Table(map))) => Toml::StrMap(
                map.iter()
                    .map(|(k, v)| {
                        Ok((k.clone(), v.as_str().ok_or(format!("{}.{k}: not a string", field.key))?.to_string()))
                    })
                    .collect::<Result<_, String>>()?,
            ),
            (Kind::Table(sub), Some(toml::Value::Table(t))) => decode(t, sub)?,
            (_, Some(other)) => return Err(format!("{}: unexpected {}", field.key, other.type_str())),
        };
        values.push(value);
    }
    Ok(Toml::Table(values))
}

/// BurntSushi/toml's `Encode` of `value`: in each table its plain keys first, then its
/// sub-tables, indented by two spaces per level.
fn encode(fields: &[Field], value: &Toml) -> String {
    let mut out = String::new();
    encode_table(&mut out, &[], fields, value);
    out
}

fn encode_table(out: &mut String, path: &[&str], fields: &[Field], value: &Toml) {
    let Toml::Table(values) = value else { unreachable!("not a table") };
    let indent = "  ".repeat(path.len());
    let present = |(field, value): &(&Field, &Toml)| !(field.omitempty && value.is_empty());
    let fields: Vec<(&Field, &Toml)> = fields.iter().zip(values).filter(present).collect();
    for (field, value) in fields.iter().filter(|(f, _)| !matches!(f.kind, Kind::Table(_) | Kind::StrMap)) {
        out.push_str(&format!("{indent}{} = {}\n", field.key, scalar(value)));
    }
    for (field, value) in fields.iter().filter(|(f, _)| matches!(f.kind, Kind::Table(_) | Kind::StrMap)) {
        let sub_path: Vec<&str> = path.iter().copied().chain([field.key]).collect();
        if sub_path.len() == 1 && !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("{indent}[{}]\n", sub_path.join(".")));
        match (field.kind, value) {
            (Kind::Table(sub), _) => encode_table(out, &sub_path, sub, value),
            (_, Toml::StrMap(map)) => {
                for (key, v) in map {
                    out.push_str(&format!("{indent}  {key} = {}\n", quote(v)));
                }
            }
            _ => unreachable!("a table-like field holds a table or map"),
        }
    }
}

fn scalar(value: &Toml) -> String {
    match value {
        Toml::Str(s) => quote(s),
        Toml::Int(i) => i.to_string(),
        Toml::Bool(b) => b.to_string(),
        Toml::StrList(items) => format!("[{}]", items.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ")),
        Toml::StrMap(_) | Toml::Table(_) => unreachable!("tables are not scalars"),
    }
}

/// BurntSushi's basic string quoting.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `updateStorageConfig`: the template's storage.conf with the overlay size and (when the
/// AdditionalStorageConfig feature gate is on) the additional layer and image stores set.
pub(crate) fn storage_conf(
    template: &str,
    runtime: &ContainerRuntimeConfiguration,
    additional_storage: bool,
) -> Result<Vec<u8>, String> {
    let table: toml::Table = template.parse().map_err(|e| format!("error decoding crio config: {e}"))?;
    let mut conf = decode(&table, STORAGE)?;
    let Kind::Table(storage) = STORAGE[0].kind else { unreachable!("storage is a table") };
    let options = conf.field_mut(STORAGE, "storage").field_mut(storage, "options");
    if let Some(size) = runtime.overlay_size.as_ref().map(|q| Quantity::parse(&q.0)).transpose()? {
        if size.value() < 0 {
            return Err(format!(
                "invalid overlaySize config {:?}: the overlaySize should be larger than 0",
                size.canonical()
            ));
        }
        if size.value() != 0 {
            *options.field_mut(OPTIONS, "size") = Toml::Str(size.canonical());
        }
    }
    let paths = |stores: &Option<Vec<mco_api::machineconfiguration::AdditionalStore>>| -> Vec<String> {
        stores.iter().flatten().map(|s| s.path.clone()).collect()
    };
    if additional_storage {
        let layers: Vec<String> = paths(&runtime.additional_layer_stores)
            .into_iter()
            .map(|p| if p.ends_with(":ref") { p } else { format!("{p}:ref") })
            .collect();
        if !layers.is_empty() {
            *options.field_mut(OPTIONS, "additionallayerstores") = Toml::StrList(layers);
        }
        let images = paths(&runtime.additional_image_stores);
        if !images.is_empty() {
            *options.field_mut(OPTIONS, "additionalimagestores") = Toml::StrList(images);
        }
    }
    Ok(encode(STORAGE, &conf).into_bytes())
}

/// `createCRIODropinFiles`: one drop-in per setting, in the original's order, each what
/// BurntSushi/toml writes for the original's `tomlConfigCRIO*` struct (`crio.runtime.<key>`).
pub(crate) fn dropins(
    runtime: &ContainerRuntimeConfiguration,
    additional_storage: bool,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut settings = Vec::new();
    if let Some(level) = runtime.log_level.as_ref().filter(|l| !l.is_empty()) {
        settings.push(("logLevel", "log_level", Toml::Str(level.clone())));
    }
    if let Some(limit) = runtime.pids_limit {
        settings.push(("pidsLimit", "pids_limit", Toml::Int(limit)));
    }
    if let Some(max) =
        runtime.log_size_max.as_ref().map(|q| Quantity::parse(&q.0)).transpose()?.filter(|q| q.value() != 0)
    {
        settings.push(("logSizeMax", "log_size_max", Toml::Int(max.value())));
    }
    if let Some(default) = runtime.default_runtime {
        settings.push(("defaultRuntime", "default_runtime", Toml::Str(default.as_str().into())));
    }
    let artifacts: Vec<String> = runtime.additional_artifact_stores.iter().flatten().map(|s| s.path.clone()).collect();
    if additional_storage && !artifacts.is_empty() {
        settings.push(("additionalArtifactStores", "additional_artifact_stores", Toml::StrList(artifacts)));
    }
    Ok(settings
        .into_iter()
        .map(|(name, key, value)| {
            let toml = format!("[crio]\n  [crio.runtime]\n    {key} = {}\n", scalar(&value));
            (format!("/etc/crio/crio.conf.d/01-ctrcfg-{name}"), toml.into_bytes())
        })
        .collect())
}
