//! What a MachineConfig does to a booted host, seen from inside the machine: units enabled,
//! disabled and masked by its systemd, the pool's node disruption policy really reloading and
//! restarting services (without a reboot), and the `core` user's SSH keys and password.

use std::collections::BTreeMap;

use kube::Api;
use kube::api::{Patch, PatchParams};
use mco_api::MachineConfiguration;
use mco_testenv::{eventually, satisfying};
use serde_json::json;

use crate::support::*;

/// A unit that runs until stopped; with `reload`, reloading it appends the file's text to `/run/lab-reloaded`.
fn service(description: &str, reload: bool) -> String {
    let reload = if reload { "ExecReload=/bin/sh -c 'cat /etc/lab/reload-me >> /run/lab-reloaded'\n" } else { "" };
    format!(
        "[Unit]\nDescription={description}\n[Service]\nExecStart=/bin/sleep infinity\n{reload}\
         [Install]\nWantedBy=multi-user.target\n"
    )
}

/// The worker MachineConfig of this scenario at `generation`: four units and the files the
/// policy watches.
fn units_mc(generation: u32) -> String {
    let file =
        |path: &str| json!({"path": path, "mode": 420, "contents": {"source": format!("data:,{generation}%0A")}});
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "99-worker-units", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {
            "ignition": {"version": "3.4.0"},
            "storage": {"files": [file("/etc/lab/restart-me"), file("/etc/lab/reload-me")]},
            "systemd": {"units": [
                {"name": "lab-restart.service", "enabled": true, "contents": service("restarted by policy", false)},
                {"name": "lab-reload.service", "enabled": true, "contents": service("reloaded by policy", true)},
                {"name": "lab-disabled.service", "enabled": false,
                 "contents": service(&format!("disabled, generation {generation}"), false)},
                {"name": "lab-masked.service", "mask": true},
            ]},
        }},
    })
    .to_string()
}

/// `systemctl show -p PROPERTY --value UNIT` on every worker.
async fn workers_show(lab: &Lab, unit: &str, property: &str) -> BTreeMap<String, String> {
    let mut seen = BTreeMap::new();
    for name in lab.workers() {
        let said = on_node(lab, &name, &["systemctl", "show", "-p", property, "--value", unit]).await;
        seen.insert(name, said.map(|s| s.trim().to_string()).unwrap_or_else(|e| e));
    }
    seen
}

/// `command` on every worker, its output trimmed (or why it failed).
async fn on_workers(lab: &Lab, command: &[&str]) -> BTreeMap<String, Result<String, String>> {
    let mut seen = BTreeMap::new();
    for name in lab.workers() {
        seen.insert(name.clone(), on_node(lab, &name, command).await.map(|s| s.trim().to_string()));
    }
    seen
}

fn every<T: PartialEq + std::fmt::Debug>(seen: &BTreeMap<String, T>, wanted: T) -> bool {
    seen.values().all(|v| *v == wanted)
}

pub async fn units_are_enabled_masked_and_acted_on_by_the_machines_systemd(lab: &mut Lab) {
    let client = lab.client.clone();
    let mut current = rolled_out(lab, "").await;
    // Every container's scope (transient, made by runc) takes the OS image's drop-in: stopped
    // after containerd at shutdown, so no reboot waits on a scope whose cgroup runc removed.
    let scopes =
        on_workers(lab, &["systemctl", "list-units", "--type=scope", "--no-legend", "--plain", "cri-containerd-*"])
            .await;
    for (name, listed) in &scopes {
        let listed = listed.as_ref().unwrap_or_else(|e| panic!("{name}: listing its scopes: {e}"));
        let scopes: Vec<&str> = listed.lines().filter_map(|line| line.split_whitespace().next()).collect();
        assert!(!scopes.is_empty(), "{name} runs no container (its daemon's pod, at least)");
        for scope in scopes {
            let before = on_node(lab, name, &["systemctl", "show", "-p", "Before", "--value", scope]).await;
            let before = before.unwrap_or_else(|e| panic!("{name}: {scope}: {e}"));
            assert!(
                before.split_whitespace().any(|unit| unit == "containerd.service"),
                "{name}: {scope} is before {before:?}"
            );
        }
    }
    // New units reboot the nodes (no policy covers them); afterwards each machine's systemd says
    // what the config asked for.
    lab.apply("99-worker-units", &units_mc(1));
    current = rolled_out(lab, &current).await;
    eventually("every worker's systemd to report the config's units", || async {
        let states = [
            ("lab-restart.service", "enabled", "active"),
            ("lab-reload.service", "enabled", "active"),
            ("lab-disabled.service", "disabled", "inactive"),
            ("lab-masked.service", "masked", "inactive"),
        ];
        let mut seen = Vec::new();
        for (unit, enabled, active) in states {
            let is_enabled = workers_show(lab, unit, "UnitFileState").await;
            let is_active = workers_show(lab, unit, "ActiveState").await;
            seen.push((
                unit,
                every(&is_enabled, enabled.into()) && every(&is_active, active.into()),
                is_enabled,
                is_active,
            ));
        }
        satisfying(seen, |seen| seen.iter().all(|(_, as_asked, ..)| *as_asked))
    })
    .await;

    // The pool's disruption policy: the watched files restart or reload their services, a
    // changed unit needs only a daemon-reload. The next generation of the config is applied
    // without a reboot, and each action really happened.
    let policy = json!({"spec": {"nodeDisruptionPolicy": {
        "files": [
            {"path": "/etc/lab/restart-me", "actions": [{"type": "Restart", "restart": {"serviceName": "lab-restart.service"}}]},
            {"path": "/etc/lab/reload-me", "actions": [{"type": "Reload", "reload": {"serviceName": "lab-reload.service"}}]},
        ],
        "units": [{"name": "lab-disabled.service", "actions": [{"type": "DaemonReload"}]}],
    }}});
    Api::<MachineConfiguration>::all(client.clone())
        .patch("cluster", &PatchParams::default(), &Patch::Merge(&policy))
        .await
        .unwrap();
    let boots = on_workers(lab, &["cat", BOOT_ID]).await;
    let restarted = workers_show(lab, "lab-restart.service", "InvocationID").await;
    let reloaded = workers_show(lab, "lab-reload.service", "InvocationID").await;
    lab.apply("99-worker-units", &units_mc(2));
    let next = rolled_out(lab, &current).await;
    if on_workers(lab, &["cat", BOOT_ID]).await != boots {
        panic!("a worker rebooted for a change its policy covers: {}", rendered_diff(lab, &current, &next).await);
    }
    let now_restarted = workers_show(lab, "lab-restart.service", "InvocationID").await;
    for (name, before) in &restarted {
        assert_ne!(now_restarted.get(name), Some(before), "{name}: lab-restart.service was not restarted");
    }
    assert_eq!(workers_show(lab, "lab-reload.service", "InvocationID").await, reloaded, "the reloaded unit restarted");
    assert!(
        every(&on_workers(lab, &["cat", "/run/lab-reloaded"]).await, Ok("2".into())),
        "reloaded once, after the new file"
    );
    let description = workers_show(lab, "lab-disabled.service", "Description").await;
    assert!(every(&description, "disabled, generation 2".into()), "systemd not reloaded: {description:?}");
}

pub async fn the_core_users_ssh_keys_and_password_are_set_without_a_reboot(lab: &mut Lab) {
    let current = rolled_out(lab, "").await;
    // A MachineConfig with passwd.users for core: its keys in the file upstream writes, in
    // directories made for core with the modes sshd accepts, its password hash in /etc/shadow;
    // no reboot. Deleting the config takes the keys away and locks the password again.
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHq7x2c0Gm4ZlqSbEhy4Jq8n0kqV1yTq3C4hZ0k6bC3e lab@mco";
    let hash = "$6$labsalt$2Kq9ZLd1nWcK0bF0yY8s1Xw9oQ8m7k5j3h2g1f0e9d8c7b6a5Z4Y3X2W1V0U9T8S7R6Q5P4O3N2M1L0K9J8I7";
    let mc = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "99-worker-core", "labels": {"machineconfiguration.openshift.io/role": "worker"}},
        "spec": {"config": {
            "ignition": {"version": "3.4.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [key], "passwordHash": hash}]},
        }},
    });
    let boots = on_workers(lab, &["cat", BOOT_ID]).await;
    lab.apply("99-worker-core", &mc.to_string());
    let with_keys = rolled_out(lab, &current).await;
    let keys = "/home/core/.ssh/authorized_keys.d/ignition";
    assert!(every(&on_workers(lab, &["cat", keys]).await, Ok(key.into())));
    let owners =
        on_workers(lab, &["stat", "-c", "%U %a", "/home/core/.ssh", "/home/core/.ssh/authorized_keys.d", keys]).await;
    assert!(every(&owners, Ok("core 700\ncore 700\ncore 600".into())), "{owners:?}");
    let shadow = on_workers(lab, &["sh", "-c", "getent shadow core | cut -d: -f2"]).await;
    assert!(every(&shadow, Ok(hash.into())), "{shadow:?}");
    if on_workers(lab, &["cat", BOOT_ID]).await != boots {
        panic!("a worker rebooted for SSH keys: {}", rendered_diff(lab, &current, &with_keys).await);
    }

    Api::<mco_api::MachineConfig>::all(lab.client.clone()).delete("99-worker-core", &Default::default()).await.unwrap();
    rolled_out(lab, &with_keys).await;
    let shadow = on_workers(lab, &["sh", "-c", "getent shadow core | cut -d: -f2"]).await;
    assert!(every(&shadow, Ok("*".into())), "{shadow:?}");
    let keys_left = on_workers(lab, &["cat", keys]).await;
    assert!(keys_left.values().all(|k| k.as_deref().unwrap_or("").is_empty()), "{keys_left:?}");
}
