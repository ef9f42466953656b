//! `mco bootimage`: boot image planning from stream metadata.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use mco_api::MachineSet;
use mco_bootimage::ec2::KnownStreams;
use mco_bootimage::{Arch, Decision, Infrastructure, PlanContext, Stream};
use serde_json::{Value, json};

use crate::manifests::{self, Object};

#[derive(Debug, clap::Subcommand)]
pub enum BootImageCommand {
    /// Print, per MachineSet, the MachineSet patched to the stream's boot image, or why it is
    /// left alone. Nothing is printed when any input is invalid.
    Plan(PlanArgs),
}

/// Output formats of `bootimage plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanOutput {
    /// Patched MachineSets as YAML documents, the other decisions as comments.
    Yaml,
    /// One JSON object per MachineSet with the decision and, for patches, the merge patch.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// CoreOS stream metadata with the boot images to move to (`openshift-install coreos
    /// print-stream-json`, or `stream` of the coreos-bootimages ConfigMap).
    #[arg(long, value_name = "STREAM.json")]
    stream: PathBuf,
    /// Earlier stream metadata: AMIs listed there (or in --stream) are known to be Red Hat's
    /// RHCOS AMIs; any other AMI is left alone.
    #[arg(long = "known-stream", value_name = "OLD.json")]
    known_streams: Vec<PathBuf>,
    /// The cluster's Infrastructure (`oc get infrastructure cluster -o yaml`). Without it the
    /// platform is taken from each provider spec's kind.
    #[arg(long, value_name = "INFRASTRUCTURE.yaml")]
    infrastructure: Option<PathBuf>,
    /// Architecture of MachineSets without the autoscaler `kubernetes.io/arch` label: the
    /// control plane's (amd64, arm64, s390x, ppc64le), or `multi` to skip them as on a
    /// multi-architecture cluster.
    #[arg(long, value_name = "ARCH", default_value = "amd64")]
    default_arch: String,
    #[arg(short, long, value_enum, default_value = "yaml")]
    output: PlanOutput,
    /// MachineSet manifests (YAML or JSON, multi-document, Lists, directories).
    #[arg(required = true, value_name = "MACHINESET.yaml")]
    machinesets: Vec<PathBuf>,
}

pub fn run(cmd: BootImageCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        BootImageCommand::Plan(args) => plan(&args),
    }
}

/// Reads a file the user named; failing to read it is a command failure (exit 2).
fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

fn plan(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let mut problems = Vec::new();
    let mut parse_stream = |path: &Path| -> anyhow::Result<Option<Stream>> {
        Ok(Stream::parse(&read(path)?).map_err(|e| problems.push(format!("{}: {e}", path.display()))).ok())
    };
    let stream = parse_stream(&args.stream)?;
    let known = args.known_streams.iter().map(|p| parse_stream(p)).collect::<anyhow::Result<Vec<_>>>()?;
    let infrastructure = match &args.infrastructure {
        Some(path) => read_infrastructure(path, &read(path)?).map_err(|e| problems.push(e)).ok(),
        None => None,
    };
    let default_arch = match args.default_arch.as_str() {
        "multi" => None,
        arch => arch.parse::<Arch>().map_err(|e| problems.push(format!("--default-arch: {e}"))).ok(),
    };
    let manifests = manifests::load(&args.machinesets)?;
    problems.extend(manifests.problems.iter().map(ToString::to_string));
    let mut machinesets = Vec::new();
    for (origin, object) in &manifests.objects {
        match object {
            Object::MachineSet(ms) => machinesets.push(ms.as_ref()),
            other => problems.push(format!("{origin}: not a MachineSet: {}", kind_of(other))),
        }
    }
    if machinesets.is_empty() && manifests.problems.is_empty() {
        problems.push("no MachineSet in the given manifests".to_string());
    }
    let (Some(stream), true) = (stream, problems.is_empty()) else {
        return refuse(&problems);
    };
    let lookup = KnownStreams::new(known.iter().flatten().chain([&stream]));
    let ctx = PlanContext { stream: &stream, infrastructure: infrastructure.as_ref(), default_arch, amis: &lookup };
    let mut decisions = Vec::new();
    for ms in machinesets {
        match mco_bootimage::plan(ms, &ctx) {
            Ok(decision) => decisions.push((ms, decision)),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return refuse(&problems);
    }
    let text = match args.output {
        PlanOutput::Yaml => format_yaml(&decisions)?,
        PlanOutput::Json => format!("{}\n", serde_json::to_string_pretty(&format_json(&decisions))?),
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn refuse(problems: &[String]) -> anyhow::Result<ExitCode> {
    for p in problems {
        eprintln!("error: {p}");
    }
    Ok(ExitCode::FAILURE)
}

fn kind_of(object: &Object) -> &str {
    match object {
        Object::MachineConfig(_) => "MachineConfig",
        Object::MachineConfigPool(_) => "MachineConfigPool",
        Object::ControllerConfig(_) => "ControllerConfig",
        Object::MachineConfiguration(_) => "MachineConfiguration",
        Object::MachineOSConfig(_) => "MachineOSConfig",
        Object::MachineOSBuild(_) => "MachineOSBuild",
        Object::MachineSet(_) => "MachineSet",
        Object::KubeletConfig(_) => "KubeletConfig",
        Object::ContainerRuntimeConfig(_) => "ContainerRuntimeConfig",
        Object::OSImageStream(_) => "OSImageStream",
        Object::ClusterConfig { kind, .. } => kind,
    }
}

/// Reads an Infrastructure manifest; the message names the file.
pub fn read_infrastructure(path: &Path, bytes: &[u8]) -> Result<Infrastructure, String> {
    let infra: Infrastructure = std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())
        .and_then(|text| mco_goser::yaml_object(text).map_err(|e| e.to_string()))
        .map_err(|e| format!("{}: not an Infrastructure: {e}", path.display()))?;
    if infra.kind != "Infrastructure" || infra.api_version != "config.openshift.io/v1" {
        return Err(format!(
            "{}: expected kind Infrastructure in apiVersion config.openshift.io/v1, found kind {:?} in {:?}",
            path.display(),
            infra.kind,
            infra.api_version
        ));
    }
    Ok(infra)
}

fn name(ms: &MachineSet) -> String {
    let name = ms.metadata.name.as_deref().unwrap_or("<unnamed>");
    ms.metadata.namespace.as_deref().map_or_else(|| name.to_string(), |ns| format!("{ns}/{name}"))
}

/// One line saying what the plan is for a MachineSet (without the MachineSet itself).
fn summary(decision: &Decision) -> String {
    match decision {
        Decision::Patch(p) => format!("patched: {} -> {}", p.from, p.to),
        Decision::UpToDate { image } => format!("unchanged: already boots {image}"),
        Decision::Skipped(reason) => format!("skipped: {reason}"),
        Decision::VsphereTemplate { template, ova } => format!(
            "unchanged: vSphere template {} must hold RHCOS {} (OVA {} sha256 {}); checking and importing it needs vCenter",
            template.as_deref().unwrap_or("<none>"),
            ova.release,
            ova.location,
            ova.sha256
        ),
    }
}

fn format_yaml(decisions: &[(&MachineSet, Decision)]) -> anyhow::Result<String> {
    let mut out = String::new();
    for (ms, decision) in decisions {
        out.push_str(&format!("---\n# MachineSet {}: {}\n", name(ms), summary(decision)));
        if let Decision::Patch(patch) = decision {
            if let Some(secret) = &patch.user_data_secret {
                out.push_str(&format!(
                    "# Before applying: the stub Ignition in secret {secret} must be spec 3 (mco ignition upgrade-stub).\n"
                ));
            }
            out.push_str(&serde_yaml::to_string(&patch.apply(*ms))?);
        }
    }
    Ok(out)
}

fn format_json(decisions: &[(&MachineSet, Decision)]) -> Value {
    let entries = decisions.iter().map(|(ms, decision)| {
        let mut entry = json!({"machineSet": name(ms), "summary": summary(decision)});
        let fields = match decision {
            Decision::Patch(p) => json!({
                "decision": "Patch",
                "from": p.from,
                "to": p.to,
                "userDataSecret": p.user_data_secret,
                "mergePatch": p.merge_patch(ms),
            }),
            Decision::UpToDate { image } => json!({"decision": "UpToDate", "image": image}),
            Decision::Skipped(reason) => json!({
                "decision": "Skipped",
                "reason": reason.to_string(),
                "countsAsSkipped": reason.counts_as_skipped(),
            }),
            Decision::VsphereTemplate { template, ova } => json!({
                "decision": "VsphereTemplate",
                "template": template,
                "release": ova.release,
                "ova": {"location": ova.location, "sha256": ova.sha256},
            }),
        };
        entry.as_object_mut().expect("an object").extend(fields.as_object().expect("an object").clone());
        entry
    });
    Value::Array(entries.collect())
}

#[derive(Debug, clap::Args)]
pub struct UpgradeStubArgs {
    /// Ignition spec 3 version to write. 3.1 is read by every boot image since OCP 4.6; the
    /// original controller writes 3.5 (only recent boot images read it).
    #[arg(long, default_value = "3.1")]
    to: String,
    /// The Machine Config Server certificate chain (PEM, e.g. `tls.crt` of the
    /// machine-config-server-tls secret): check that new machines will trust it.
    #[arg(long, value_name = "TLS.crt")]
    server_cert: Option<PathBuf>,
    /// A stub Ignition config, or a `*-user-data` Secret manifest holding one; - for stdin.
    file: PathBuf,
}

/// `mco ignition upgrade-stub`: prints the stub (or Secret) with its Ignition config upgraded to
/// spec 3, after checking its CA (and the server certificate); nothing is printed on error.
pub fn upgrade_stub(args: &UpgradeStubArgs) -> anyhow::Result<ExitCode> {
    use mco_bootimage::stub::{self, Secret, StubUpgrade};

    let raw = if args.file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())?.into_bytes()
    } else {
        read(&args.file)?
    };
    let server_cert = args.server_cert.as_deref().map(read).transpose()?;
    let target: mco_ignition::Target = match args.to.parse() {
        Ok(target) => target,
        Err(e) => return refuse(&[format!("--to: {e}")]),
    };
    let file = args.file.display();
    // A Secret manifest (YAML or JSON) or else an Ignition config (JSON).
    let as_secret = std::str::from_utf8(&raw)
        .ok()
        .and_then(|text| mco_goser::yaml_object::<Value>(text).ok())
        .filter(|v| v.get("kind").and_then(Value::as_str) == Some("Secret"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let (user_data, output) = match as_secret {
        Some(value) => {
            let secret: Secret = match serde_json::from_value(value) {
                Ok(secret) => secret,
                Err(e) => return refuse(&[format!("{file}: not a Secret: {e}")]),
            };
            let upgraded = match stub::upgrade_user_data_secret(&secret, target, &stub::rfc3339(now)) {
                Ok(upgraded) => upgraded,
                Err(e) => return refuse(&[format!("{file}: {e}")]),
            };
            let secret = upgraded.unwrap_or_else(|| {
                eprintln!("{file}: the stub is already spec 3; unchanged");
                secret
            });
            let user_data =
                secret.data.as_ref().and_then(|d| d.get("userData")).map(|b| b.0.clone()).unwrap_or_default();
            (user_data, serde_yaml::to_string(&secret)?)
        }
        None => match stub::upgrade_stub(&raw, target) {
            Ok(StubUpgrade::Upgraded { json, .. }) => (json.clone().into_bytes(), format!("{json}\n")),
            Ok(StubUpgrade::AlreadySpec3 { version }) => {
                eprintln!("{file}: the stub is already spec {version}; unchanged");
                (raw.clone(), String::from_utf8_lossy(&raw).into_owned())
            }
            Err(e) => return refuse(&[format!("{file}: {e}")]),
        },
    };
    let checked = mco_ignition::parse(&user_data)
        .map_err(|e| e.to_string())
        .and_then(|parsed| mco_ignition::to_internal(parsed.config).map_err(|e| e.to_string()))
        .and_then(|config| stub::stub_trust(&config).map_err(|e| e.to_string()))
        .and_then(|trust| match &server_cert {
            Some(pem) => stub::check_server_certificate(&trust, pem, stub::UnixTime::now())
                .map(|report| {
                    eprintln!(
                        "server certificate {} is trusted by the stub's CA and valid for {} (SAN: {})",
                        report.subject,
                        trust.host,
                        report.dns_names.join(", ")
                    )
                })
                .map_err(|e| e.to_string()),
            None => Ok(()),
        });
    if let Err(e) = checked {
        return refuse(&[format!("{file}: {e}")]);
    }
    print!("{output}");
    Ok(ExitCode::SUCCESS)
}
