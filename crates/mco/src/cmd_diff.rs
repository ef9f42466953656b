//! `mco diff`: what moving a node from one rendered config to another changes, whether it can be
//! done in place, and what the node does afterwards (reboot, drain, reload, restart or nothing).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mco_api::{MachineConfig, MachineConfiguration};
use mco_disruption::{ConfigDiff, Plan};
use mco_render::StorageOverrides;
use serde_json::json;

use crate::manifests::{self, Object};

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The rendered MachineConfig the node runs.
    old: PathBuf,
    /// The rendered MachineConfig it should run.
    new: PathBuf,
    /// A MachineConfiguration `cluster` whose node disruption policies (status, else spec merged
    /// with the defaults) and irreconcilable overrides apply; the defaults without it.
    #[arg(long, value_name = "FILE")]
    policies: Option<PathBuf>,
    /// Use the fixed rules of a node's first boot instead of the cluster's policies.
    #[arg(long)]
    firstboot: bool,
    /// As if the force file (`/run/machine-config-daemon-force`) were present.
    #[arg(long)]
    force: bool,
    /// As if the `image-registry-override-drain` ConfigMap existed: registries.conf changes never drain.
    #[arg(long)]
    skip_registry_drain: bool,
    #[arg(short, long, value_enum, default_value = "text")]
    output: crate::Report,
}

/// Exit 0 when the update can be applied in place, 1 when the daemon would refuse it
/// (unreconcilable) or an input is invalid.
pub fn run(args: &DiffArgs) -> anyhow::Result<ExitCode> {
    let (old, new) = match (read_one::<MachineConfig>(&args.old), read_one::<MachineConfig>(&args.new)) {
        (Ok(old), Ok(new)) => (old, new),
        (old, new) => {
            for e in [old.err(), new.err()].into_iter().flatten() {
                eprintln!("error: {e}");
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    let configuration = args.policies.as_deref().map(read_one::<MachineConfiguration>).transpose()?;
    let diff = match ConfigDiff::between(Some(&old), &new, args.force) {
        Ok(diff) => diff,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let reconcilable = mco_render::reconcile::check(
        &diff.old_ignition,
        old.spec.fips,
        &diff.new_ignition,
        new.spec.fips,
        StorageOverrides::from_configuration(configuration.as_ref()),
    );
    let plan = if args.firstboot {
        mco_disruption::firstboot_plan(&diff, args.skip_registry_drain)
    } else {
        let policies =
            configuration.as_ref().map_or_else(mco_disruption::default_cluster_policies, mco_disruption::policies_of);
        mco_disruption::cluster_plan(&diff, &policies, args.skip_registry_drain)
    };
    let plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    match args.output {
        crate::Report::Text => print!("{}", text_report(&old, &new, &diff, reconcilable.as_ref().err(), &plan)),
        crate::Report::Json => {
            println!(
                "{}",
                serde_json::to_string_pretty(&json_report(&old, &new, &diff, reconcilable.as_ref().err(), &plan))?
            )
        }
    }
    Ok(if reconcilable.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Reads a file that must hold exactly one object of the wanted kind.
fn read_one<T: TryFromObject>(path: &Path) -> anyhow::Result<T> {
    let manifests = manifests::load(&[path.to_path_buf()])?;
    if let Some(problem) = manifests.problems.first() {
        anyhow::bail!("{problem}");
    }
    let mut found = manifests.objects.into_iter().filter_map(|(_, o)| T::try_from_object(o));
    match (found.next(), found.next()) {
        (Some(one), None) => Ok(one),
        (None, _) => anyhow::bail!("{}: no {} in the file", path.display(), T::KIND),
        (Some(_), Some(_)) => anyhow::bail!("{}: more than one {} in the file", path.display(), T::KIND),
    }
}

trait TryFromObject: Sized {
    const KIND: &'static str;
    fn try_from_object(object: Object) -> Option<Self>;
}

impl TryFromObject for MachineConfig {
    const KIND: &'static str = "MachineConfig";
    fn try_from_object(object: Object) -> Option<Self> {
        if let Object::MachineConfig(mc) = object { Some(*mc) } else { None }
    }
}

impl TryFromObject for MachineConfiguration {
    const KIND: &'static str = "MachineConfiguration";
    fn try_from_object(object: Object) -> Option<Self> {
        if let Object::MachineConfiguration(c) = object { Some(*c) } else { None }
    }
}

fn name(mc: &MachineConfig) -> &str {
    mc.metadata.name.as_deref().unwrap_or("<unnamed>")
}

/// The OS-level fields that differ, as (field, old, new).
fn os_changes(old: &MachineConfig, new: &MachineConfig, diff: &ConfigDiff) -> Vec<(&'static str, String, String)> {
    let (o, n) = (&old.spec, &new.spec);
    let list = |l: &Option<Vec<String>>| format!("{:?}", l.as_deref().unwrap_or_default());
    let kernel = |k: &str| if k.is_empty() { "default".to_string() } else { k.to_string() };
    let mut changes = Vec::new();
    if o.os_image_url != n.os_image_url {
        changes.push(("osImageURL", o.os_image_url.clone(), n.os_image_url.clone()));
    }
    if diff.kargs {
        changes.push(("kernelArguments", list(&o.kernel_arguments), list(&n.kernel_arguments)));
    }
    if diff.kernel_type {
        changes.push(("kernelType", kernel(&o.kernel_type), kernel(&n.kernel_type)));
    }
    if diff.extensions {
        changes.push(("extensions", list(&o.extensions), list(&n.extensions)));
    }
    if diff.fips {
        changes.push(("fips", o.fips.to_string(), n.fips.to_string()));
    }
    changes
}

fn text_report(
    old: &MachineConfig,
    new: &MachineConfig,
    diff: &ConfigDiff,
    unreconcilable: Option<&String>,
    plan: &Plan,
) -> String {
    use std::fmt::Write;
    let mut out = format!("{} -> {}\n", name(old), name(new));
    let os = os_changes(old, new, diff);
    if diff.is_empty() {
        out.push_str("no changes\n");
    }
    for (field, was, is) in &os {
        let _ = writeln!(out, "{field}: {was} -> {is}");
    }
    if diff.force {
        out.push_str("force file: present (full re-apply)\n");
    }
    for (what, changes) in [("files", &diff.files), ("units", &diff.units)] {
        if changes.is_empty() {
            continue;
        }
        let _ = writeln!(out, "{what}:");
        let mut lines: Vec<(&str, char)> = (changes.added.iter().map(|p| (p.as_str(), '+')))
            .chain(changes.changed.iter().map(|p| (p.as_str(), '~')))
            .chain(changes.removed.iter().map(|p| (p.as_str(), '-')))
            .collect();
        lines.sort_unstable();
        for (item, mark) in lines {
            let _ = writeln!(out, "  {mark} {item}");
        }
    }
    if diff.passwd {
        out.push_str("passwd: changed (core user's SSH keys or password)\n");
    }
    match unreconcilable {
        None => out.push_str("reconcilable: yes\n"),
        Some(why) => {
            let _ = writeln!(out, "reconcilable: no: {why}");
        }
    }
    let actions: Vec<String> = plan.actions.iter().map(mco_disruption::describe).collect();
    let _ = writeln!(out, "actions: {}", actions.join(", "));
    let _ = writeln!(out, "drain: {} ({})", if plan.drain { "yes" } else { "no" }, plan.drain_reason);
    out
}

fn json_report(
    old: &MachineConfig,
    new: &MachineConfig,
    diff: &ConfigDiff,
    unreconcilable: Option<&String>,
    plan: &Plan,
) -> serde_json::Value {
    let changes =
        |c: &mco_disruption::diff::Changes| json!({"added": c.added, "changed": c.changed, "removed": c.removed});
    json!({
        "old": name(old),
        "new": name(new),
        "os": os_changes(old, new, diff).into_iter().map(|(f, o, n)| json!({"field": f, "old": o, "new": n})).collect::<Vec<_>>(),
        "force": diff.force,
        "files": changes(&diff.files),
        "units": changes(&diff.units),
        "passwd": diff.passwd,
        "reconcilable": unreconcilable.is_none(),
        "unreconcilableReason": unreconcilable,
        "actions": plan.actions,
        "drain": plan.drain,
        "drainReason": plan.drain_reason,
    })
}
