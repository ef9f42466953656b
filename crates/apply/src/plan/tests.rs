use mco_api::MachineConfigSpec;
use serde_json::json;

use super::*;

fn spec(config: serde_json::Value) -> MachineConfigSpec {
    MachineConfigSpec { config: Some(config), ..Default::default() }
}

fn ign(files: serde_json::Value, units: serde_json::Value) -> serde_json::Value {
    json!({"ignition": {"version": "3.5.0"}, "storage": {"files": files}, "systemd": {"units": units}})
}

fn file(path: &str, text: &str) -> serde_json::Value {
    json!({"path": path, "mode": 420, "contents": {"source": format!("data:,{text}")}})
}

fn plan_of(old: &MachineConfigSpec, new: &MachineConfigSpec, force: bool) -> Result<Plan, PlanError> {
    let (o, n) = (ignition_of("old", old)?, ignition_of("new", new)?);
    plan(Side { name: "old", spec: old, ignition: &o }, Side { name: "new", spec: new, ignition: &n }, force)
}

fn planned(path: &str, text: &str) -> Step {
    Step::WriteFile(PlannedFile { path: path.into(), contents: text.into(), mode: 0o644, user: None, group: None })
}

fn unit(value: serde_json::Value) -> v3::Unit {
    serde_json::from_value(value).unwrap()
}

#[test]
fn steps_of_updates() {
    let a = file("/etc/a", "1");
    let b = file("/etc/b", "1");
    let a2 = file("/etc/a", "2");
    let kubelet_ca = file("/etc/kubernetes/kubelet-ca.crt", "ca");
    let svc = json!({"name": "x.service", "enabled": true, "contents": "[Service]\n"});
    let svc_off = json!({"name": "x.service", "enabled": false, "contents": "[Service]\n"});
    let drop = json!({"name": "y.service", "dropins": [{"name": "10-a.conf", "contents": "[Unit]\n"}]});
    let cases: Vec<(&str, MachineConfigSpec, MachineConfigSpec, bool, Vec<Step>)> = vec![
        ("nothing changes", spec(ign(json!([a]), json!([svc]))), spec(ign(json!([a]), json!([svc]))), false, vec![]),
        (
            "one file changes, one is added",
            spec(ign(json!([a]), json!([]))),
            spec(ign(json!([a2, b]), json!([]))),
            false,
            vec![planned("/etc/a", "2"), planned("/etc/b", "1")],
        ),
        (
            "force rewrites unchanged files and units",
            spec(ign(json!([a]), json!([svc]))),
            spec(ign(json!([a]), json!([svc]))),
            true,
            vec![
                planned("/etc/a", "1"),
                Step::WriteUnit(unit(svc.clone())),
                Step::EnableUnits(vec!["x.service".into()]),
            ],
        ),
        (
            "files removed; kubelet CA kept",
            spec(ign(json!([a, b, kubelet_ca]), json!([]))),
            spec(ign(json!([b]), json!([]))),
            false,
            vec![Step::RemoveFile("/etc/a".into())],
        ),
        (
            "unit disabled; dropin-only unit presets",
            spec(ign(json!([]), json!([svc]))),
            spec(ign(json!([]), json!([svc_off, drop]))),
            false,
            vec![
                Step::WriteUnit(unit(svc_off.clone())),
                Step::WriteUnit(unit(drop.clone())),
                Step::DisableUnits(vec!["x.service".into()]),
                Step::PresetUnits(vec!["y.service".into()]),
            ],
        ),
        (
            "unit and dropin removed",
            spec(ign(json!([]), json!([svc, drop]))),
            spec(ign(json!([]), json!([]))),
            false,
            vec![
                Step::RemoveUnit("x.service".into()),
                Step::RemoveDropin("/etc/systemd/system/y.service.d/10-a.conf".into()),
                Step::RemoveUnit("y.service".into()),
            ],
        ),
    ];
    for (name, old, new, force, want) in cases {
        assert_eq!(plan_of(&old, &new, force).unwrap().steps, want, "{name}");
    }
}

#[test]
fn ssh_keys_and_password_hashes_are_written_when_passwd_changes() {
    let users = |keys: serde_json::Value, hash: Option<&str>| {
        let mut core = json!({"name": "core", "sshAuthorizedKeys": keys});
        if let Some(hash) = hash {
            core["passwordHash"] = json!(hash);
        }
        spec(json!({"ignition": {"version": "3.5.0"}, "passwd": {"users": [core]}}))
    };
    let hashes = |hash: &str| Step::SetPasswordHashes(vec![("core".to_string(), hash.to_string())]);
    let p = plan_of(&users(json!(["ssh-ed25519 A"]), None), &users(json!(["ssh-ed25519 A", "ssh-rsa B"]), None), false)
        .unwrap();
    assert_eq!(p.steps, vec![Step::WriteSshKeys("ssh-ed25519 A\nssh-rsa B\n".into()), hashes("*")]);
    let p = plan_of(&users(json!(["k"]), None), &users(json!(["k"]), Some("$6$s$h")), false).unwrap();
    assert_eq!(p.steps, vec![Step::WriteSshKeys("k\n".into()), hashes("$6$s$h")]);
    let same = plan_of(&users(json!(["k"]), Some("$6$s$h")), &users(json!(["k"]), Some("$6$s$h")), false).unwrap();
    assert_eq!(same.steps, vec![]);
    let err = plan_of(&users(json!(["k"]), None), &users(json!(["k"]), Some("x:0:0")), false).unwrap_err();
    assert_eq!(err.to_string(), "passwordHash of user core contains ':'");
}

#[test]
fn os_changes_follow_upstream_diff() {
    let mk = |img: &str, kargs: Option<Vec<&str>>, kt: &str, ext: Option<Vec<&str>>| MachineConfigSpec {
        os_image_url: img.into(),
        kernel_arguments: kargs.map(|k| k.into_iter().map(String::from).collect()),
        kernel_type: kt.into(),
        extensions: ext.map(|e| e.into_iter().map(String::from).collect()),
        ..Default::default()
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cases = vec![
        (
            "no change",
            mk("i@1", None, "", None),
            mk("i@1", Some(vec![]), "default", Some(vec![])),
            false,
            OsChanges::default(),
        ),
        (
            "image change switches the kernel too",
            mk("i@1", None, "", None),
            mk("i@2", None, "", None),
            false,
            OsChanges { image: Some("i@2".into()), kernel: Some(KernelType::Default), ..Default::default() },
        ),
        (
            "force re-applies the image",
            mk("i@1", None, "", None),
            mk("i@1", None, "", None),
            true,
            OsChanges { image: Some("i@1".into()), kernel: Some(KernelType::Default), ..Default::default() },
        ),
        (
            "kargs: delete all old, append all new (upstream TestKernelAguments)",
            mk("i@1", Some(vec!["foo", "bar=1 hello=world", "baz"]), "", None),
            mk("i@1", Some(vec!["foo", "bar=1", "hello=world"]), "", None),
            false,
            OsChanges {
                kargs: Some(KargsChange {
                    delete: s(&["foo", "bar=1", "hello=world", "baz"]),
                    append: s(&["foo", "bar=1", "hello=world"]),
                }),
                ..Default::default()
            },
        ),
        (
            "kernel type only",
            mk("i@1", None, "", None),
            mk("i@1", None, "realtime", None),
            false,
            OsChanges { kernel: Some(KernelType::Realtime), ..Default::default() },
        ),
        (
            "extensions changed",
            mk("i@1", None, "", Some(vec!["usbguard"])),
            mk("i@1", None, "", Some(vec![])),
            false,
            OsChanges { extensions: Some(vec![]), ..Default::default() },
        ),
        (
            "same extensions re-applied on an image change",
            mk("i@1", None, "", Some(vec!["usbguard"])),
            mk("i@2", None, "", Some(vec!["usbguard"])),
            false,
            OsChanges {
                image: Some("i@2".into()),
                kernel: Some(KernelType::Default),
                extensions: Some(s(&["usbguard"])),
                ..Default::default()
            },
        ),
    ];
    for (name, old, new, force, want) in cases {
        assert_eq!(os_changes(&old, &new, force).unwrap(), want, "{name}");
    }
}

#[test]
fn kargs_split_on_whitespace_outside_quotes() {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (s(&["a b  c"]), s(&["a", "b", "c"])),
        (s(&["foo=\"bar baz\" x"]), s(&["foo=\"bar baz\"", "x"])),
        (s(&["  ", "\tz\n"]), s(&["z"])),
        (s(&["a", "a"]), s(&["a", "a"])),
    ];
    for (input, want) in cases {
        assert_eq!(split_kargs(&input), want, "{input:?}");
    }
}

#[test]
fn bad_files_are_refused_before_anything_is_written() {
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b"zipped\n").unwrap();
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, e.finish().unwrap())
    };
    let ok = decode_file(
        &serde_json::from_value(json!({"path": "/etc/z", "mode": 384, "user": {"name": "core"}, "group": {"id": 5},
            "contents": {"compression": "gzip", "source": format!("data:;base64,{gz}")}}))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        ok,
        PlannedFile {
            path: "/etc/z".into(),
            contents: b"zipped\n".to_vec(),
            mode: 0o600,
            user: Some(Owner::Name("core".into())),
            group: Some(Owner::Id(5)),
        }
    );
    let cases = [
        (json!({"path": "/etc/x", "contents": {"source": "https://example.com/x"}}), "only data URLs are supported"),
        (json!({"path": "/etc/x", "contents": {"compression": "xz", "source": "data:,x"}}), "\"xz\" is not supported"),
        (json!({"path": "/etc/x", "contents": {"compression": "gzip", "source": "data:,notgzip"}}), "gzip"),
        (json!({"path": "/etc/x", "append": [{"source": "data:,x"}]}), "append is not supported"),
        (json!({"path": "/etc/../x"}), "is not clean"),
        (json!({"path": "/etc/x", "mode": 70000}), "mode 70000"),
    ];
    for (f, want) in cases {
        let err = decode_file(&serde_json::from_value(f.clone()).unwrap()).unwrap_err().to_string();
        assert!(err.contains(want), "{f}: {err}");
    }
}

#[test]
fn unreconcilable_changes_are_refused() {
    let old = spec(json!({"ignition": {"version": "3.5.0"}}));
    let new = spec(json!({"ignition": {"version": "3.5.0"}, "storage": {"directories": [{"path": "/etc/d"}]}}));
    let err = plan_of(&old, &new, false).unwrap_err();
    assert_eq!(
        err,
        PlanError::Unreconcilable {
            from: "old".into(),
            to: "new".into(),
            reason: "ignition directories section contains changes".into()
        }
    );
}

#[test]
fn a_unit_whose_install_section_names_paths_is_refused_before_anything_is_written() {
    let old = spec(json!({"ignition": {"version": "3.5.0"}}));
    for (key, bad) in
        [("WantedBy", "../../../../etc/cron.d"), ("RequiredBy", "/etc/x.target"), ("Alias", "x/y.service")]
    {
        let contents = format!("[Unit]\nDescription=x\n[Install]\n{key}=multi-user.target {bad}\n");
        let new = spec(ign(json!([]), json!([{"name": "evil.service", "enabled": true, "contents": contents}])));
        let err = plan_of(&old, &new, false).unwrap_err().to_string();
        let want = format!("error at $.systemd.units.0.contents: [Install] {key}={bad:?} is not a unit name");
        assert!(err.contains(&want), "{key}: {err}");
    }
    let fine = "[Install]\nWantedBy=multi-user.target\nAlias=other.service\nRequiredBy=getty@tty1.service\n";
    let new = spec(ign(json!([]), json!([{"name": "good.service", "enabled": true, "contents": fine}])));
    plan_of(&old, &new, false).unwrap();
}

#[test]
fn the_etc_paths_of_a_config_are_its_files_units_dropins_and_enablement_links() {
    let links = |unit: &str, dirs: &[&str]| -> Vec<String> {
        dirs.iter().map(|d| format!("/etc/systemd/system/{d}/{unit}")).collect()
    };
    let usual = |unit: &str| links(unit, &["multi-user.target.wants", "default.target.wants", "basic.target.wants"]);
    let cases: Vec<(&str, serde_json::Value, Vec<String>)> = vec![
        (
            "contents without [Install]: its file and drop-ins, no link",
            json!({"name": "a.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n",
                   "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}]}),
            vec!["/etc/systemd/system/a.service".into(), "/etc/systemd/system/a.service.d/10-x.conf".into()],
        ),
        (
            "the links its [Install] section names",
            json!({"name": "b.service", "contents":
                   "[Install]\nWantedBy=multi-user.target x.target\nRequiredBy=firstboot-osupdate.target\nAlias=c.service\n"}),
            [
                vec!["/etc/systemd/system/b.service".to_string()],
                links("b.service", &["multi-user.target.wants", "x.target.wants"]),
                links("b.service", &["firstboot-osupdate.target.requires"]),
                vec!["/etc/systemd/system/c.service".into()],
            ]
            .concat(),
        ),
        (
            "no contents (the image's unit, enabled or masked): the usual targets",
            json!({"name": "d.service", "enabled": false}),
            [vec!["/etc/systemd/system/d.service".to_string()], usual("d.service")].concat(),
        ),
        (
            "a name in [Install] that is not a unit: no link",
            json!({"name": "e.service", "contents": "[Install]\nWantedBy=../../cron.d\n"}),
            vec!["/etc/systemd/system/e.service".into()],
        ),
    ];
    for (case, unit, want) in cases {
        let config = v3::Config {
            systemd: v3::Systemd { units: vec![serde_json::from_value(unit).unwrap()] },
            ..Default::default()
        };
        assert_eq!(etc_paths(&config), want, "{case}");
    }
    let files = spec(ign(json!([file("/etc/lab/a", "a"), file("/usr/local/bin/tool", "t")]), json!([])));
    assert_eq!(etc_paths(&ignition_of("c", &files).unwrap()), ["/etc/lab/a"], "files under /etc only");
}
