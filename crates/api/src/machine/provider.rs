//! Typed access to the boot-image fields of a MachineSet provider spec, edited in place.
//!
//! Upstream decodes `providerSpec.value` into the platform's Go struct, changes it and encodes it
//! again, which drops every key that struct does not know. These functions read and write single
//! fields of the JSON value instead, so all other keys (including ones from newer provider
//! versions) survive.
//!
//! JSON field names are those of `openshift/api` `machine/v1beta1` `types_*provider.go`.

use serde_json::{Map, Value};

/// A provider spec field that should be a JSON object is something else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("providerSpec.value{path} is not an object")]
pub struct NotAnObject {
    /// JSON path below `providerSpec.value`, e.g. `.ami`; empty for the value itself.
    pub path: String,
}

/// `userDataSecret.name`: the secret with the stub Ignition config (all platforms).
pub fn user_data_secret_name(spec: &Value) -> Option<&str> {
    str_at(spec, &["userDataSecret", "name"])
}

/// `AWSMachineProviderConfig` fields.
pub mod aws {
    use serde_json::Value;

    use super::{NotAnObject, object_at, str_at};

    /// `ami.id`: the AMI the machines boot (absent when the AMI is given by ARN or filters).
    pub fn ami_id(spec: &Value) -> Option<&str> {
        str_at(spec, &["ami", "id"])
    }

    /// `placement.region`.
    pub fn region(spec: &Value) -> Option<&str> {
        str_at(spec, &["placement", "region"])
    }

    /// Makes the machines boot AMI `id`.
    ///
    /// `ami` is a union of `id`, `arn` and `filters`, so the other two members are removed (as
    /// upstream does by replacing `ami` with `{id}`); any other key of `ami` is kept.
    pub fn set_ami_id(spec: &mut Value, id: &str) -> Result<(), NotAnObject> {
        let ami = object_at(spec, &["ami"])?;
        ami.remove("arn");
        ami.remove("filters");
        ami.insert("id".to_string(), Value::from(id));
        Ok(())
    }
}

/// `GCPMachineProviderSpec` fields.
pub mod gcp {
    use serde_json::Value;

    use super::{NotAnObject, object_at};

    /// `disks[].image` of every disk with `boot: true`, in order.
    pub fn boot_disk_images(spec: &Value) -> Vec<&str> {
        spec.get("disks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|disk| is_boot_disk(disk))
            .filter_map(|disk| disk.get("image").and_then(Value::as_str))
            .collect()
    }

    /// Sets `image` on every boot disk (upstream's `projects/<project>/global/images/<name>`
    /// form is the caller's to build). Returns how many disks were changed.
    pub fn set_boot_disk_images(spec: &mut Value, image: &str) -> Result<usize, NotAnObject> {
        let disks = object_at(spec, &[])?.get_mut("disks");
        let Some(disks) = disks.and_then(Value::as_array_mut) else {
            return Ok(0);
        };
        let mut changed = 0;
        for disk in disks.iter_mut().filter(|disk| is_boot_disk(disk)) {
            if let Some(disk) = disk.as_object_mut() {
                disk.insert("image".to_string(), Value::from(image));
                changed += 1;
            }
        }
        Ok(changed)
    }

    fn is_boot_disk(disk: &Value) -> bool {
        disk.get("boot").and_then(Value::as_bool) == Some(true)
    }
}

/// `AzureMachineProviderSpec` fields.
pub mod azure {
    use serde_json::Value;

    use super::{NotAnObject, object_at, str_at};

    /// The `image` of an Azure provider spec.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct AzureImage {
        /// Marketplace publisher.
        pub publisher: String,
        /// Marketplace offer.
        pub offer: String,
        /// Marketplace SKU.
        pub sku: String,
        /// Image version.
        pub version: String,
        /// Image resource ID (for non-marketplace images).
        pub resource_id: String,
        /// `ID`, `MarketplaceWithPlan` or `MarketplaceNoPlan`; `None` lets the platform choose.
        pub type_: Option<String>,
    }

    /// `image`; missing string fields read as "" (Go's zero value).
    pub fn image(spec: &Value) -> Option<AzureImage> {
        spec.get("image")?.as_object()?;
        let field = |key| str_at(spec, &["image", key]).unwrap_or_default().to_string();
        Some(AzureImage {
            publisher: field("publisher"),
            offer: field("offer"),
            sku: field("sku"),
            version: field("version"),
            resource_id: field("resourceID"),
            type_: str_at(spec, &["image", "type"]).map(str::to_string),
        })
    }

    /// Replaces the image fields with `new`, keeping any other key of `image`.
    pub fn set_image(spec: &mut Value, new: &AzureImage) -> Result<(), NotAnObject> {
        let image = object_at(spec, &["image"])?;
        for (key, value) in [
            ("publisher", &new.publisher),
            ("offer", &new.offer),
            ("sku", &new.sku),
            ("version", &new.version),
            ("resourceID", &new.resource_id),
        ] {
            image.insert(key.to_string(), Value::from(value.as_str()));
        }
        // `type` is `omitempty` upstream: no type means no key.
        match &new.type_ {
            Some(type_) => image.insert("type".to_string(), Value::from(type_.as_str())),
            None => image.remove("type"),
        };
        Ok(())
    }

    /// `securityProfile.settings.securityType` (e.g. `TrustedLaunch`, `ConfidentialVM`).
    pub fn security_type(spec: &Value) -> Option<&str> {
        str_at(spec, &["securityProfile", "settings", "securityType"])
    }
}

/// `VSphereMachineProviderSpec` fields.
pub mod vsphere {
    use serde_json::Value;

    use super::{NotAnObject, object_at, str_at};

    /// The `workspace` of a vSphere provider spec.
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct Workspace<'a> {
        /// vCenter server.
        pub server: Option<&'a str>,
        /// Datacenter.
        pub datacenter: Option<&'a str>,
        /// VM folder.
        pub folder: Option<&'a str>,
        /// Datastore.
        pub datastore: Option<&'a str>,
        /// Resource pool.
        pub resource_pool: Option<&'a str>,
        /// VM group.
        pub vm_group: Option<&'a str>,
    }

    /// `template`: name of the VM template the machines are cloned from.
    pub fn template(spec: &Value) -> Option<&str> {
        str_at(spec, &["template"])
    }

    /// Sets `template`.
    pub fn set_template(spec: &mut Value, template: &str) -> Result<(), NotAnObject> {
        object_at(spec, &[])?.insert("template".to_string(), Value::from(template));
        Ok(())
    }

    /// `workspace`.
    pub fn workspace(spec: &Value) -> Option<Workspace<'_>> {
        spec.get("workspace")?.as_object()?;
        let field = |key| str_at(spec, &["workspace", key]);
        Some(Workspace {
            server: field("server"),
            datacenter: field("datacenter"),
            folder: field("folder"),
            datastore: field("datastore"),
            resource_pool: field("resourcePool"),
            vm_group: field("vmGroup"),
        })
    }

    /// `tagIDs`.
    pub fn tag_ids(spec: &Value) -> Vec<&str> {
        spec.get("tagIDs").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
    }
}

fn str_at<'a>(spec: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(spec, |value, key| value.get(key))?.as_str()
}

/// The object at `path`, creating missing (or null) objects on the way.
fn object_at<'a>(spec: &'a mut Value, path: &[&str]) -> Result<&'a mut Map<String, Value>, NotAnObject> {
    let mut current = spec;
    let mut walked = String::new();
    for key in path {
        let object = as_object(current, &walked)?;
        walked = format!("{walked}.{key}");
        current = object.entry(key.to_string()).or_insert(Value::Null);
    }
    as_object(current, &walked)
}

fn as_object<'a>(value: &'a mut Value, path: &str) -> Result<&'a mut Map<String, Value>, NotAnObject> {
    if value.is_null() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut().ok_or_else(|| NotAnObject { path: path.to_string() })
}
