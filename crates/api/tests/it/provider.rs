//! Provider spec accessors edit single fields and keep every other key.

use mco_api::machine::provider::{NotAnObject, aws, azure, gcp, vsphere};
use serde_json::json;

#[test]
fn aws_ami_replaces_the_union_members_and_keeps_other_keys() {
    let mut spec = json!({
        "ami": {"arn": "arn:aws:ec2:...", "filters": [{"name": "tag:Name"}], "futureAmiKey": 1},
        "instanceType": "m6i.xlarge",
    });
    assert_eq!(aws::ami_id(&spec), None);
    aws::set_ami_id(&mut spec, "ami-1").unwrap();
    assert_eq!(spec, json!({"ami": {"id": "ami-1", "futureAmiKey": 1}, "instanceType": "m6i.xlarge"}));

    // A missing `ami` is created.
    let mut spec = json!({"placement": {"region": "eu-west-1"}});
    aws::set_ami_id(&mut spec, "ami-2").unwrap();
    assert_eq!(spec, json!({"placement": {"region": "eu-west-1"}, "ami": {"id": "ami-2"}}));
}

#[test]
fn non_objects_are_reported_not_overwritten() {
    let mut spec = json!({"ami": "ami-as-a-string"});
    assert_eq!(aws::set_ami_id(&mut spec, "ami-1"), Err(NotAnObject { path: ".ami".into() }));
    assert_eq!(spec, json!({"ami": "ami-as-a-string"}));
    assert_eq!(NotAnObject { path: ".ami".into() }.to_string(), "providerSpec.value.ami is not an object");
    let mut spec = json!([1]);
    assert!(vsphere::set_template(&mut spec, "t").is_err());
}

#[test]
fn gcp_only_boot_disks_change() {
    let mut spec = json!({"disks": [
        {"boot": false, "image": "data"},
        {"boot": true, "image": "old", "sizeGb": 128},
        {"boot": true, "image": "old2"},
    ]});
    assert_eq!(gcp::boot_disk_images(&spec), ["old", "old2"]);
    assert_eq!(gcp::set_boot_disk_images(&mut spec, "new").unwrap(), 2);
    assert_eq!(
        spec,
        json!({"disks": [
            {"boot": false, "image": "data"},
            {"boot": true, "image": "new", "sizeGb": 128},
            {"boot": true, "image": "new"},
        ]})
    );
    assert_eq!(gcp::set_boot_disk_images(&mut json!({}), "new").unwrap(), 0);
}

#[test]
fn azure_image_fields_are_replaced_in_place() {
    let mut spec = json!({
        "image": {"resourceID": "/resourceGroups/rg/providers/Microsoft.Compute/images/rhcos", "type": "ID", "futureImageKey": "x"},
        "securityProfile": {"settings": {"securityType": "TrustedLaunch"}},
        "vmSize": "Standard_D4s_v3",
    });
    let image = azure::image(&spec).unwrap();
    assert_eq!(image.resource_id, "/resourceGroups/rg/providers/Microsoft.Compute/images/rhcos");
    assert_eq!(image.publisher, "");
    assert_eq!(azure::security_type(&spec), Some("TrustedLaunch"));

    let marketplace = azure::AzureImage {
        publisher: "azureopenshift".into(),
        offer: "aro4".into(),
        sku: "419-v2".into(),
        version: "9.6.20250402".into(),
        resource_id: String::new(),
        type_: Some("MarketplaceNoPlan".into()),
    };
    azure::set_image(&mut spec, &marketplace).unwrap();
    assert_eq!(azure::image(&spec), Some(marketplace.clone()));
    assert_eq!(spec["image"]["futureImageKey"], "x");
    assert_eq!(spec["vmSize"], "Standard_D4s_v3");

    // No type: the key goes away (`omitempty` upstream).
    azure::set_image(&mut spec, &azure::AzureImage { type_: None, ..marketplace }).unwrap();
    assert!(spec["image"].get("type").is_none());
}

#[test]
fn vsphere_template_and_workspace() {
    let mut spec = json!({
        "template": "ci-rhcos-old",
        "workspace": {"server": "vcenter.example.com", "datacenter": "dc1", "resourcePool": "/dc1/host/c1/Resources"},
        "tagIDs": ["urn:vmomi:InventoryServiceTag:1:GLOBAL"],
        "numCPUs": 4,
    });
    assert_eq!(vsphere::template(&spec), Some("ci-rhcos-old"));
    let workspace = vsphere::workspace(&spec).unwrap();
    assert_eq!(workspace.server, Some("vcenter.example.com"));
    assert_eq!(workspace.resource_pool, Some("/dc1/host/c1/Resources"));
    assert_eq!(workspace.folder, None);
    assert_eq!(vsphere::tag_ids(&spec), ["urn:vmomi:InventoryServiceTag:1:GLOBAL"]);

    vsphere::set_template(&mut spec, "ci-rhcos-new").unwrap();
    assert_eq!(spec["template"], "ci-rhcos-new");
    assert_eq!(spec["numCPUs"], 4);
}
