//! Server-side apply of arbitrary manifests (what `kubectl apply --server-side -f` does): the
//! bootstrap objects and `mco lab apply -f`.

use std::path::Path;

use anyhow::Context as _;
use fn_error_context::context;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client};
use serde_json::Value;

/// Field manager of everything the lab applies.
pub const FIELD_MANAGER: &str = "mco-lab";

/// Every document of a YAML or JSON file (multi-document YAML allowed); empty documents skipped.
#[context("Reading manifests from {}", path.display())]
pub fn read_manifests(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text = std::fs::read_to_string(path)?;
    parse_manifests(&text)
}

/// The documents of a manifest text, read as kubectl reads them (YAML 1.1 scalars); each must
/// name its apiVersion, kind and metadata.name.
pub fn parse_manifests(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    let documents = mco_goser::yaml_documents(text).map_err(|e| anyhow::anyhow!("document {}: {e}", e.document))?;
    for (index, value) in documents.into_iter().enumerate() {
        if value.is_null() {
            continue;
        }
        for field in ["apiVersion", "kind"] {
            if !value.get(field).is_some_and(Value::is_string) {
                anyhow::bail!("document {}: no {field}", index + 1);
            }
        }
        if !value.pointer("/metadata/name").is_some_and(Value::is_string) {
            anyhow::bail!("document {}: no metadata.name", index + 1);
        }
        objects.push(value);
    }
    Ok(objects)
}

/// Applies `objects` in order; returns `kind/name` of each.
pub async fn apply(client: &Client, objects: &[Value]) -> anyhow::Result<Vec<String>> {
    let discovery = Discovery::new(client.clone()).run().await.context("discovering the API")?;
    let mut applied = Vec::new();
    for value in objects {
        let object: DynamicObject = serde_json::from_value(value.clone())?;
        let types = object.types.clone().context("no apiVersion/kind")?;
        let name = object.metadata.name.clone().unwrap_or_default();
        let what = format!("{}/{name}", types.kind);
        let gvk = GroupVersionKind::try_from(&types)?;
        let (resource, capabilities): (ApiResource, _) =
            discovery.resolve_gvk(&gvk).with_context(|| format!("{what}: the API server does not serve {gvk:?}"))?;
        let api: Api<DynamicObject> = match capabilities.scope {
            Scope::Cluster => Api::all_with(client.clone(), &resource),
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                object.metadata.namespace.as_deref().unwrap_or("default"),
                &resource,
            ),
        };
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&object))
            .await
            .with_context(|| format!("applying {what}"))?;
        applied.push(what);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_need_type_and_name() {
        let ok = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n";
        let objects = parse_manifests(ok).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1]["kind"], "Secret");
        for (text, problem) in [
            ("kind: ConfigMap\nmetadata: {name: a}\n", "document 1: no apiVersion"),
            ("apiVersion: v1\nmetadata: {name: a}\n", "document 1: no kind"),
            (
                "apiVersion: v1\nkind: ConfigMap\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
                "document 1: no metadata.name",
            ),
            ("apiVersion: v1\nkind: [\n", "document 1"),
        ] {
            let err = format!("{:#}", parse_manifests(text).unwrap_err());
            assert!(err.contains(problem), "{text:?}: {err}");
        }
    }
}
