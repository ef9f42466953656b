//! Booting a lab machine as a host boots: the bootloader's default deployment of the machine's
//! OSTree sysroot becomes the root of new namespaces (mount, PID, UTS, IPC, network, cgroup and
//! time) with systemd from the OS image as PID 1.
//!
//! The machine's firmware is util-linux's `unshare`: it makes the namespaces (the time namespace
//! with the host's uptime taken off, so the machine's `/proc/uptime` starts at zero), forks what
//! becomes PID 1 (`mco lab machine-init`, [`init`]) and ends as PID 1 ends. What [`init`] mounts is
//! what ostree-prepare-root and systemd give a host ([`plan`]): the deployment as `/` with its own
//! `/etc`, `/usr` read-only, `/var` from the stateroot, the sysroot at `/sysroot` and its `/boot`,
//! `/run/ostree-booted`, its own `/proc` (its kernel command line at `/proc/cmdline` and a boot id
//! of its own), `/sys`, `/dev`, `/run`, `/tmp` and cgroup hierarchies whose root is the machine's
//! cgroup; then it pivots into the deployment and executes its systemd.
//!
//! A `reboot(2)` in a PID namespace kills the namespace's init with SIGHUP (restart) or SIGINT
//! (power off, halt), and `unshare` dies by the same signal: that is how the supervisor tells a
//! machine's `systemctl reboot` from its `systemctl poweroff` ([`halt_of`]).

use std::ffi::OsStr;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Component, Path, PathBuf};
use std::process::ExitStatus;

use anyhow::Context as _;
use fn_error_context::context;
use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};

use crate::process::{Service, run_tool};

/// The cgroup hierarchies' mount point, the host's and each machine's.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
/// What systemd is told it runs in (`systemd-detect-virt`: `container-other`).
const CONTAINER: &str = "mco-lab";
/// Where, in the machine's `/run`, its firmware keeps the machine's kernel command line and boot
/// id (bound over `/proc/cmdline` and `/proc/sys/kernel/random/boot_id`).
const FIRMWARE_DIR: &str = "run/mco-lab";
/// systemd, in a merged-/usr OS image.
const SYSTEMD: &str = "/usr/lib/systemd/systemd";
/// The kernel settings (under `/proc/sys`) the kubelet sets unless `protectKernelDefaults` (its
/// container manager's `setupKernelTunables`); none is per network namespace.
const KUBELET_KERNEL_SETTINGS: [&str; 6] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];
/// The host's devices a machine's `/dev` has (bound: a machine cannot make device nodes).
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];
/// Where the installer leaves a machine's Ignition config and its first-boot stamp, relative to
/// the sysroot (coreos-installer's places on the boot partition): the initramfs runs Ignition
/// while the stamp is there, and removes it once Ignition succeeded.
pub const IGNITION_CONFIG: &str = "boot/ignition/config.ign";
pub const FIRSTBOOT_STAMP: &str = "boot/ignition.firstboot";
/// Where the machine finds mco's daemon binary, as upstream's nodes find the one
/// `machine-config-daemon-pull.service` copies out of the operator's image: the firmware shares
/// the lab's `mco` there (read-only), which is what the pools' `machine-config-daemon-firstboot`
/// unit runs.
pub const DAEMON_BINARY: &str = "run/bin/machine-config-daemon";
/// How long the initramfs waits for the machine's network (its default route, which the lab
/// plugs in) before it boots.
const NETWORK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// A boot entry the firmware cannot boot.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BootError {
    #[error("the kernel command line {0:?} has no ostree= argument")]
    NoOstreeArgument(String),
    #[error("ostree={0} is not a deployment (/ostree/deploy/STATEROOT/deploy/CHECKSUM.SERIAL)")]
    NotADeployment(String),
}

/// What the bootloader hands over: the deployment to boot and its kernel command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootTarget {
    /// Relative to the sysroot: `ostree/deploy/<stateroot>/deploy/<checksum>.<serial>`.
    pub deployment: PathBuf,
    pub stateroot: String,
    pub cmdline: String,
}

/// The boot target of a kernel command line whose `ostree=` names a deployment directory, as
/// [`mco_os::sysroot::boot`] writes it (pure).
pub fn boot_target(cmdline: &str) -> Result<BootTarget, BootError> {
    let cmdline = cmdline.trim();
    let target =
        mco_os::sysroot::ostree_argument(cmdline).ok_or_else(|| BootError::NoOstreeArgument(cmdline.into()))?;
    let not_a_deployment = || BootError::NotADeployment(target.to_string());
    let parts: Vec<&str> = Path::new(target)
        .components()
        .map(|c| match c {
            Component::Normal(part) => part.to_str().ok_or_else(not_a_deployment),
            Component::RootDir => Ok("/"),
            _ => Err(not_a_deployment()),
        })
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        ["/", "ostree", "deploy", stateroot, "deploy", checkout] if checkout.contains('.') => Ok(BootTarget {
            deployment: Path::new(target).strip_prefix("/").unwrap_or(Path::new(target)).to_path_buf(),
            stateroot: stateroot.to_string(),
            cmdline: cmdline.to_string(),
        }),
        _ => Err(not_a_deployment()),
    }
}

/// A cgroup hierarchy of the host, which each machine mounts again (its root being the machine's
/// cgroup, by the cgroup namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// Its directory under [`CGROUP_ROOT`].
    pub name: String,
    /// `cgroup` (v1) or `cgroup2`.
    pub fstype: String,
    /// The mount options naming it (`cpu`, `none,name=systemd`).
    pub options: String,
}

/// The cgroup hierarchies mounted under [`CGROUP_ROOT`], from a `/proc/self/mountinfo` (pure).
pub fn hierarchies(mountinfo: &str) -> Vec<Hierarchy> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, filesystem) = line.split_once(" - ")?;
            let mount_point = mount.split_whitespace().nth(4)?;
            let name = mount_point.strip_prefix(CGROUP_ROOT)?.strip_prefix('/')?;
            let mut fs = filesystem.split_whitespace();
            let fstype = fs.next()?;
            if !matches!(fstype, "cgroup" | "cgroup2") || name.contains('/') {
                return None;
            }
            let options: Vec<&str> = fs.nth(1)?.split(',').filter(|o| !matches!(*o, "rw" | "ro")).collect();
            // A named hierarchy without controllers must say so, or it would get them all.
            let none = fstype == "cgroup" && options.iter().all(|o| o.starts_with("name="));
            let options = if none { [&["none"], &options[..]].concat() } else { options };
            Some(Hierarchy { name: name.to_string(), fstype: fstype.to_string(), options: options.join(",") })
        })
        .collect()
}

/// One step of making a machine's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `mount --bind` (not recursive), read-only if asked.
    Bind {
        source: PathBuf,
        target: PathBuf,
        read_only: bool,
    },
    /// A new file system.
    Mount {
        fstype: &'static str,
        source: &'static str,
        target: PathBuf,
        options: String,
        flags: MountFlags,
    },
    /// An empty file, a device's mount point.
    File(PathBuf),
    Dir(PathBuf),
    Symlink {
        link: PathBuf,
        target: String,
    },
    Write {
        path: PathBuf,
        contents: String,
    },
    /// A file with what `source` holds now (a kernel setting's value).
    Copy {
        source: PathBuf,
        target: PathBuf,
    },
    /// Read-only from now on.
    ReadOnly(PathBuf),
    /// Read-only from now on if it exists.
    Protect(PathBuf),
}

/// The steps that make the root of a machine booting `target` from `sysroot`, before it pivots
/// into it (pure; every path is the host's).
pub fn plan(sysroot: &Path, target: &BootTarget, cgroups: &[Hierarchy], boot_id: &str, daemon: &Path) -> Vec<Step> {
    let root = sysroot.join(&target.deployment);
    let at = |path: &str| root.join(path);
    let bind = |source: PathBuf, target: PathBuf, read_only| Step::Bind { source, target, read_only };
    let mount = |fstype, source, target: &str, options: &str, flags| Step::Mount {
        fstype,
        source,
        target: at(target),
        options: options.to_string(),
        flags,
    };
    let hardened = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    let firmware = |file: &str| at(FIRMWARE_DIR).join(file);
    let mut steps = vec![
        // A mount point of its own, to pivot into.
        bind(root.clone(), root.clone(), false),
        bind(at("usr"), at("usr"), true),
        bind(sysroot.join("ostree/deploy").join(&target.stateroot).join("var"), at("var"), false),
        bind(sysroot.to_path_buf(), at("sysroot"), false),
        // The sysroot's /boot is a file system of its own, seen at /boot and in /sysroot.
        bind(sysroot.join("boot"), at("boot"), false),
        bind(sysroot.join("boot"), at("sysroot/boot"), false),
        mount("tmpfs", "run", "run", "mode=0755", MountFlags::NOSUID | MountFlags::NODEV),
        Step::Write { path: at("run/ostree-booted"), contents: String::new() },
        Step::Write { path: at(DAEMON_BINARY), contents: String::new() },
        bind(daemon.to_path_buf(), at(DAEMON_BINARY), true),
        Step::Write { path: firmware("cmdline"), contents: format!("{}\n", target.cmdline) },
        Step::Write { path: firmware("boot_id"), contents: format!("{boot_id}\n") },
        mount("proc", "proc", "proc", "", hardened),
        bind(firmware("cmdline"), at("proc/cmdline"), true),
        // The kernel's settings are the host's, but for the machine's network namespace's: read-only
        // once the writable ones are bound (a bind mount takes its source's read-only flag).
        bind(at("proc/sys"), at("proc/sys"), false),
        bind(at("proc/sys/net"), at("proc/sys/net"), false),
        Step::ReadOnly(at("proc/sys")),
        bind(firmware("boot_id"), at("proc/sys/kernel/random/boot_id"), true),
    ];
    // The kernel settings the kubelet sets, which are the whole host's: the machine gets its own
    // copies (as a virtual machine has its own kernel), the host's left as they are.
    for setting in KUBELET_KERNEL_SETTINGS {
        let copy = firmware(&format!("sysctl/{setting}"));
        steps.push(Step::Copy { source: Path::new("/proc/sys").join(setting), target: copy.clone() });
        steps.push(bind(copy, at(&format!("proc/sys/{setting}")), false));
    }
    steps.extend([
        // Where the kernel has it: a write there would act on the host.
        Step::Protect(at("proc/sysrq-trigger")),
        mount("sysfs", "sysfs", "sys", "", hardened | MountFlags::RDONLY),
        mount("tmpfs", "cgroup", CGROUP_ROOT.trim_start_matches('/'), "mode=0755", hardened),
    ]);
    for hierarchy in cgroups {
        let path = format!("{}/{}", CGROUP_ROOT.trim_start_matches('/'), hierarchy.name);
        steps.push(Step::Dir(at(&path)));
        let fstype = if hierarchy.fstype == "cgroup2" { "cgroup2" } else { "cgroup" };
        steps.push(mount(fstype, "cgroup", &path, &hierarchy.options, hardened));
    }
    steps.push(Step::ReadOnly(at(CGROUP_ROOT.trim_start_matches('/'))));
    steps.push(mount("tmpfs", "dev", "dev", "mode=0755", MountFlags::NOSUID));
    for device in DEVICES {
        steps.push(Step::File(at(&format!("dev/{device}"))));
        steps.push(bind(Path::new("/dev").join(device), at(&format!("dev/{device}")), false));
    }
    // The kubelet's OOM watcher reads the kernel's log.
    steps.push(Step::File(at("dev/kmsg")));
    steps.push(bind("/dev/kmsg".into(), at("dev/kmsg"), true));
    steps.push(Step::Dir(at("dev/pts")));
    steps.push(mount("devpts", "devpts", "dev/pts", "newinstance,ptmxmode=0666,mode=0620", MountFlags::NOSUID));
    steps.push(Step::Symlink { link: at("dev/ptmx"), target: "pts/ptmx".into() });
    steps.push(Step::Dir(at("dev/shm")));
    steps.push(mount("tmpfs", "shm", "dev/shm", "mode=1777", MountFlags::NOSUID | MountFlags::NODEV));
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        steps.push(Step::Symlink { link: at(&format!("dev/{link}")), target: target.into() });
    }
    steps.push(mount("tmpfs", "tmp", "tmp", "mode=1777", MountFlags::NOSUID | MountFlags::NODEV));
    steps
}

fn perform(step: &Step) -> anyhow::Result<()> {
    match step {
        Step::Bind { source, target, read_only } => {
            rustix::mount::mount_bind(source, target)
                .with_context(|| format!("binding {} to {}", source.display(), target.display()))?;
            if *read_only {
                perform(&Step::ReadOnly(target.clone()))?;
            }
        }
        Step::Mount { fstype, source, target, options, flags } => {
            let data = std::ffi::CString::new(options.as_str())?;
            rustix::mount::mount(*source, target, *fstype, *flags, data.as_c_str())
                .with_context(|| format!("mounting {fstype} ({options}) on {}", target.display()))?;
        }
        Step::File(path) => {
            std::fs::write(path, "").with_context(|| format!("creating {}", path.display()))?;
        }
        Step::Dir(path) => std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?,
        Step::Symlink { link, target } => {
            std::os::unix::fs::symlink(target, link).with_context(|| format!("linking {}", link.display()))?;
        }
        Step::Write { path, contents } => {
            std::fs::create_dir_all(path.parent().context("a file has a directory")?)?;
            std::fs::write(path, contents).with_context(|| format!("writing {}", path.display()))?;
        }
        Step::Copy { source, target } => {
            let contents = std::fs::read(source).with_context(|| format!("reading {}", source.display()))?;
            std::fs::create_dir_all(target.parent().context("a file has a directory")?)?;
            std::fs::write(target, contents).with_context(|| format!("writing {}", target.display()))?;
        }
        Step::Protect(path) if !path.exists() => {}
        Step::Protect(path) => perform(&Step::Bind { source: path.clone(), target: path.clone(), read_only: true })?,
        Step::ReadOnly(path) => {
            rustix::mount::mount_remount(path, MountFlags::BIND | MountFlags::RDONLY, "")
                .with_context(|| format!("making {} read-only", path.display()))?;
        }
    }
    Ok(())
}

/// A new boot id, as the kernel makes one (a random UUID).
fn new_boot_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).context("reading random bytes")?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..]))
}

/// What the firmware brings to a machine besides its disk: mco's daemon binary, which it shares
/// at [`DAEMON_BINARY`], and the Ignition client its initramfs runs on a first boot.
#[derive(Debug, Clone)]
pub struct Firmware {
    pub daemon: PathBuf,
    pub ignition: PathBuf,
}

/// PID 1 of a machine's new namespaces (`mco lab machine-init`): makes the root of the deployment
/// the bootloader chose in `sysroot` ([`plan`]), runs Ignition on a first boot ([`first_boot`]),
/// names the machine `hostname`, pivots into the root and executes its systemd. Returns only on
/// failure.
#[context("Booting {} as {hostname}", sysroot.display())]
pub fn init(sysroot: &Path, hostname: &str, firmware: &Firmware) -> anyhow::Result<std::convert::Infallible> {
    anyhow::ensure!(
        rustix::process::getpid().is_init(),
        "not PID 1 of a new PID namespace (run by the lab's firmware)"
    );
    // Nothing mounted here may reach the host.
    rustix::mount::mount_change(c"/", MountPropagationFlags::PRIVATE | MountPropagationFlags::REC)?;
    let cmdline_file = mco_os::sysroot::default_cmdline(sysroot);
    let cmdline = std::fs::read_to_string(&cmdline_file)
        .with_context(|| format!("reading the boot entry's command line {}", cmdline_file.display()))?;
    let target = boot_target(&cmdline)?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    for step in plan(sysroot, &target, &hierarchies(&mountinfo), &new_boot_id()?, &firmware.daemon) {
        perform(&step)?;
    }
    rustix::system::sethostname(hostname.as_bytes()).context("naming the machine")?;
    let root = sysroot.join(&target.deployment);
    // A machine boots once its cable is in: its units (the kubelet's) can count on the network.
    wait_for_network()?;
    first_boot(sysroot, &root, &firmware.ignition)?;
    rustix::process::chdir(&root)?;
    // The old root goes below the new one and is detached at once: nothing of the host is left.
    rustix::process::pivot_root(".", ".").context("pivoting into the deployment")?;
    rustix::mount::unmount(".", UnmountFlags::DETACH).context("detaching the host's root")?;
    rustix::process::chdir("/")?;
    // As a host's systemd makes them: mounts shared within the machine (container runtimes bind
    // `/` into pods with propagation), in peer groups of its own (nothing reaches the host).
    rustix::mount::mount_change(c"/", MountPropagationFlags::SHARED | MountPropagationFlags::REC)
        .context("sharing the machine's mounts")?;
    let error = std::process::Command::new(SYSTEMD).env_clear().env("container", CONTAINER).exec();
    Err(error).with_context(|| format!("executing {SYSTEMD} of the deployment"))
}

/// What the initramfs does on a machine's first boot (while [`FIRSTBOOT_STAMP`] is on /boot),
/// before it switches to `root`: the targets of the root's links into `/var` made in the new
/// stateroot's empty `/var` (as ignition-ostree-populate-var does, so that Ignition can write
/// `/home/core`), Ignition's fetch stage, its files stage on the root, and the stamp removed. Ignition logs to the console.
#[context("Running Ignition on the first boot")]
fn first_boot(sysroot: &Path, root: &Path, ignition: &Path) -> anyhow::Result<()> {
    let stamp = sysroot.join(FIRSTBOOT_STAMP);
    if !stamp.exists() {
        return Ok(());
    }
    let mut links = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_type()?.is_symlink() {
            links.push(std::fs::read_link(entry.path())?);
        }
    }
    for dir in var_link_targets(&links) {
        std::fs::create_dir_all(root.join(dir))?;
    }
    let state = root.join("run/ignition");
    let shims = root.join(FIRMWARE_DIR).join("bin");
    std::fs::create_dir_all(&state)?;
    std::fs::create_dir_all(&shims)?;
    // The lab's OS images have no SELinux policy to label files with.
    let setfiles = shims.join("setfiles");
    std::fs::write(&setfiles, "#!/bin/sh\ncat >/dev/null\n")?;
    std::fs::set_permissions(&setfiles, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    // Debian's Ignition is built for SELinux distributions: it reads the policy type before it
    // labels what it wrote (the `setfiles` above). The lab's OS images have no SELinux, and
    // libostree would rebuild a policy for every deployment of a root with this file: it is
    // there for Ignition's run only.
    let selinux = root.join("etc/selinux/config");
    let lent_selinux = !selinux.exists();
    if lent_selinux {
        std::fs::create_dir_all(root.join("etc/selinux"))?;
        std::fs::write(&selinux, "SELINUX=disabled\nSELINUXTYPE=targeted\n")?;
    }
    for (stage, extra) in [("fetch", vec![]), ("files", vec![OsStr::new("-root"), root.as_os_str()])] {
        let status = std::process::Command::new(ignition)
            .args(["-platform", "file", "-stage", stage, "-log-to-stdout", "-config-cache"])
            .arg(state.join("config.json"))
            .arg("-state-file")
            .arg(state.join("state"))
            .args(extra)
            .env("IGNITION_CONFIG_FILE", sysroot.join(IGNITION_CONFIG))
            .env("PATH", format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", shims.display()))
            .status()
            .with_context(|| format!("running {}", ignition.display()))?;
        anyhow::ensure!(status.success(), "Ignition's {stage} stage failed ({status})");
    }
    if lent_selinux {
        std::fs::remove_dir_all(root.join("etc/selinux"))?;
    }
    std::fs::remove_file(&stamp).with_context(|| format!("removing {}", stamp.display()))
}

/// The directories a root's links into `/var` point at (`var/home` for `home -> var/home`), given
/// the targets of its top-level links (pure).
pub fn var_link_targets(links: &[PathBuf]) -> Vec<PathBuf> {
    links
        .iter()
        .filter(|target| target.starts_with("var") && target.components().all(|c| matches!(c, Component::Normal(_))))
        .filter(|target| target.components().count() > 1)
        .cloned()
        .collect()
}

/// Whether a `/proc/net/route` table has a default route that is up (pure).
pub fn has_default_route(routes: &str) -> bool {
    routes.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let up = fields.get(3).and_then(|flags| u32::from_str_radix(flags, 16).ok()).is_some_and(|f| f & 1 == 1);
        fields.get(1) == Some(&"00000000") && up
    })
}

/// Waits until the machine's network has a default route (the lab plugs its cable in).
fn wait_for_network() -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + NETWORK_TIMEOUT;
    loop {
        let routes = std::fs::read_to_string("/proc/net/route")?;
        if has_default_route(&routes) {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "no default route after {NETWORK_TIMEOUT:?} (the machine's network is not plugged in)"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// How a machine's boot ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Halt {
    /// `systemctl reboot`: the firmware boots again.
    Reboot,
    /// `systemctl poweroff` (or halt).
    PowerOff,
    /// Anything else: the machine's init died or could not boot; what its status was.
    Crashed(String),
}

/// How a boot ended, from the firmware's exit status (pure).
pub fn halt_of(status: ExitStatus) -> Halt {
    match status.signal() {
        Some(signal) if signal == rustix::process::Signal::HUP.as_raw() => Halt::Reboot,
        Some(signal) if signal == rustix::process::Signal::INT.as_raw() => Halt::PowerOff,
        _ => Halt::Crashed(status.to_string()),
    }
}

/// A machine that boots its sysroot.
#[derive(Debug, Clone)]
pub struct BootSpec {
    /// Its hostname, and its cgroup's name.
    pub name: String,
    pub sysroot: PathBuf,
    /// The cgroup (relative to each hierarchy's root) the machine's cgroup goes under.
    pub cgroup_parent: String,
    /// Where the machine's console (its PID 1's output) goes.
    pub console: PathBuf,
}

impl BootSpec {
    fn cgroup(&self) -> String {
        format!("{}/{}", self.cgroup_parent, self.name)
    }
}

/// A powered-on machine.
pub struct Booted {
    pub spec: BootSpec,
    /// What it booted.
    pub target: BootTarget,
    firmware: Service,
}

impl Booted {
    /// Powers the machine on: the bootloader picks the default deployment (`mco image boot`, which
    /// finalizes a staged one), the machine gets an empty cgroup of its own in every hierarchy,
    /// and the firmware boots it.
    #[context("Powering on machine {}", spec.name)]
    pub async fn power_on(mco: &Path, spec: &BootSpec) -> anyhow::Result<Booted> {
        let sysroot = spec.sysroot.as_os_str();
        run_tool(mco, [OsStr::new("image"), "boot".as_ref(), "--sysroot".as_ref(), sysroot], &[], &spec.console)
            .await?;
        let cmdline_file = mco_os::sysroot::default_cmdline(&spec.sysroot);
        let target = boot_target(&std::fs::read_to_string(&cmdline_file)?)?;
        // What an earlier boot's processes left (runc's cgroups outlive their containers).
        crate::machine::kill_cgroup(&spec.cgroup()).await?;
        let procs = make_cgroups(&spec.cgroup())?;
        let uptime = |clock| {
            let now = rustix::time::clock_gettime_dynamic(clock)?;
            anyhow::Ok(format!("-{}", now.tv_sec))
        };
        let mut command = tokio::process::Command::new("unshare");
        command
            .args(["--pid", "--fork", "--kill-child", "--mount", "--uts", "--ipc", "--net", "--cgroup", "--time"])
            .arg(format!("--boottime={}", uptime(rustix::time::DynamicClockId::Boottime)?))
            .arg(format!(
                "--monotonic={}",
                uptime(rustix::time::DynamicClockId::Known(rustix::time::ClockId::Monotonic))?
            ))
            .arg("--propagation=private")
            .arg(mco)
            .args(["lab", "machine-init", "--hostname", &spec.name, "--sysroot"])
            .arg(&spec.sysroot)
            .arg("--daemon")
            .arg(mco)
            .args(["--ignition", crate::node::IGNITION]);
        // SAFETY: the closure runs between fork and exec and only makes system calls (no allocation).
        unsafe {
            command.pre_exec(move || {
                // A machine does not outlive what powered it on (`unshare --kill-child` takes its
                // PID 1, and with it every process of the machine).
                rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
                for procs in &procs {
                    let procs =
                        rustix::fs::open(procs.as_c_str(), rustix::fs::OFlags::WRONLY, rustix::fs::Mode::empty())?;
                    rustix::io::write(&procs, b"0")?;
                }
                Ok(())
            });
        }
        let firmware = Service::spawn(&format!("machine {}", spec.name), command, &spec.console)?;
        Ok(Booted { spec: spec.clone(), target, firmware })
    }

    /// How the boot ended, once it has.
    pub fn halted(&mut self) -> anyhow::Result<Option<Halt>> {
        Ok(self.firmware.exited()?.map(halt_of))
    }

    /// The machine's PID 1 as the host sees it, once the firmware has forked it.
    pub fn init_pid(&self) -> Option<rustix::process::Pid> {
        let firmware = self.firmware.pid()?;
        let children = std::fs::read_to_string(format!("/proc/{firmware}/task/{firmware}/children")).ok()?;
        rustix::process::Pid::from_raw(children.split_whitespace().next()?.parse().ok()?)
    }

    /// The end of the machine's console, for error messages.
    pub fn console_tail(&self) -> String {
        self.firmware.tail()
    }

    /// Pulls the plug: every process of the machine killed, its cgroups removed.
    pub async fn power_off(self) -> anyhow::Result<()> {
        let cgroup = self.spec.cgroup();
        drop(self.firmware);
        crate::machine::kill_cgroup(&cgroup).await
    }
}

/// The CPU weight (cgroup v1 `cpu.shares`) of one machine: a hypervisor gives each VM's vCPU the
/// weight of one process of the host. The machines' common parent gets it once per machine in it:
/// at the default weight, every machine of the lab together would weigh as much as one process of
/// the host, and a loaded host (the other test tiers beside the lab) starved them all.
pub const MACHINE_CPU_SHARES: u64 = 1024;

/// Makes `cgroup` in every hierarchy of the host (a cpuset's with its parent's CPUs and memory
/// nodes, which a new cpuset lacks), gives its parent [`MACHINE_CPU_SHARES`] per machine in it;
/// returns the paths of their `cgroup.procs`.
fn make_cgroups(cgroup: &str) -> anyhow::Result<Vec<std::ffi::CString>> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let mut procs = Vec::new();
    for hierarchy in hierarchies(&mountinfo) {
        let top = Path::new(CGROUP_ROOT).join(&hierarchy.name);
        let mut dir = top.clone();
        for part in Path::new(cgroup).components() {
            let parent = dir.clone();
            dir.push(part);
            if dir.is_dir() {
                continue;
            }
            std::fs::create_dir(&dir).with_context(|| format!("creating cgroup {}", dir.display()))?;
            if hierarchy.options.split(',').any(|o| o == "cpuset") {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let inherited = std::fs::read(parent.join(file))?;
                    std::fs::write(dir.join(file), inherited)
                        .with_context(|| format!("writing {file} of {}", dir.display()))?;
                }
            }
        }
        if hierarchy.fstype == "cgroup"
            && hierarchy.options.split(',').any(|o| o == "cpu")
            && let Some(parent) = dir.parent()
        {
            let machines = std::fs::read_dir(parent)?.filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir())).count();
            let shares = MACHINE_CPU_SHARES * u64::try_from(machines)?;
            std::fs::write(parent.join("cpu.shares"), shares.to_string())
                .with_context(|| format!("writing cpu.shares of {}", parent.display()))?;
        }
        procs.push(std::ffi::CString::new(dir.join("cgroup.procs").into_os_string().into_encoded_bytes())?);
    }
    Ok(procs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootloader_hands_over_a_deployment_of_a_stateroot() {
        let cmdline = "rw console=ttyS0 ostree=/ostree/deploy/lab/deploy/0123abc.0\n";
        assert_eq!(
            boot_target(cmdline),
            Ok(BootTarget {
                deployment: "ostree/deploy/lab/deploy/0123abc.0".into(),
                stateroot: "lab".into(),
                cmdline: cmdline.trim().into(),
            })
        );
        assert_eq!(boot_target("rw quiet"), Err(BootError::NoOstreeArgument("rw quiet".into())));
        for bad in [
            "ostree=/ostree/boot.1/lab/0123/0",
            "ostree=/ostree/deploy/lab/deploy/../../../etc",
            "ostree=ostree/deploy/lab/deploy/0123abc.0",
            "ostree=/ostree/deploy/lab/deploy/0123abc",
            "ostree=/ostree/deploy/lab/deploy/0123abc.0/usr",
        ] {
            let value = bad.strip_prefix("ostree=").unwrap();
            assert_eq!(boot_target(bad), Err(BootError::NotADeployment(value.into())), "{bad}");
        }
    }

    #[test]
    fn machines_mount_every_cgroup_hierarchy_of_the_host() {
        let mountinfo = "\
25 1 0:23 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
50 40 0:37 /x /sys/fs/cgroup/systemd/x rw,relatime - cgroup cgroup rw,name=systemd
";
        let hierarchy = |name: &str, fstype: &str, options: &str| Hierarchy {
            name: name.into(),
            fstype: fstype.into(),
            options: options.into(),
        };
        assert_eq!(
            hierarchies(mountinfo),
            [
                hierarchy("cpu,cpuacct", "cgroup", "cpu,cpuacct"),
                hierarchy("memory", "cgroup", "memory"),
                // xattr is not a controller: without `none` the mount would take them all.
                hierarchy("systemd", "cgroup", "xattr,name=systemd"),
                hierarchy("unified", "cgroup2", "nsdelegate"),
            ]
        );
        assert_eq!(
            hierarchies("32 31 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd")[0].options,
            "none,name=systemd"
        );
    }

    #[test]
    fn the_root_is_the_deployment_with_the_places_a_host_mounts() {
        let target = boot_target("ostree=/ostree/deploy/lab/deploy/abc.1 karg=1").unwrap();
        let cgroups = [Hierarchy { name: "memory".into(), fstype: "cgroup".into(), options: "memory".into() }];
        let steps = plan(Path::new("/s"), &target, &cgroups, "id-1", Path::new("/lab/mco"));
        let root = Path::new("/s/ostree/deploy/lab/deploy/abc.1");
        let bound = |target: &str| {
            steps.iter().find_map(|step| match step {
                Step::Bind { source, target: to, read_only } if *to == root.join(target) => {
                    Some((source.clone(), *read_only))
                }
                _ => None,
            })
        };
        let bind = |source: &str, read_only| Some((PathBuf::from(source), read_only));
        let position = |wanted: &Step| steps.iter().position(|step| step == wanted).unwrap();
        // The root first: pivot_root needs a mount point.
        assert_eq!(steps[0], Step::Bind { source: root.into(), target: root.into(), read_only: false });
        assert_eq!(bound("usr"), Some((root.join("usr"), true)));
        assert_eq!(bound("var"), bind("/s/ostree/deploy/lab/var", false));
        assert_eq!(bound("sysroot"), bind("/s", false));
        assert_eq!(bound("boot"), bind("/s/boot", false));
        assert_eq!(bound("sysroot/boot"), bind("/s/boot", false));
        // The firmware's share of the daemon binary, in the machine's own /run.
        assert_eq!(bound("run/bin/machine-config-daemon"), bind("/lab/mco", true));
        let run = steps
            .iter()
            .position(|step| matches!(step, Step::Mount { target, .. } if *target == root.join("run")))
            .expect("/run is a tmpfs");
        assert!(run < position(&Step::Write { path: root.join("run/bin/machine-config-daemon"), contents: "".into() }));
        assert_eq!(bound("proc/cmdline"), Some((root.join("run/mco-lab/cmdline"), true)));
        assert_eq!(bound("proc/sys/kernel/random/boot_id"), Some((root.join("run/mco-lab/boot_id"), true)));
        assert_eq!(bound("proc/sys/net"), Some((root.join("proc/sys/net"), false)));
        // The kubelet's host-wide kernel settings: the machine's own writable copies of the host's,
        // taken before they are bound over the read-only /proc/sys.
        for setting in ["vm/overcommit_memory", "kernel/panic_on_oops", "kernel/keys/root_maxbytes"] {
            let copy = root.join("run/mco-lab/sysctl").join(setting);
            assert_eq!(bound(&format!("proc/sys/{setting}")), Some((copy.clone(), false)));
            let copied = position(&Step::Copy { source: Path::new("/proc/sys").join(setting), target: copy.clone() });
            let read_only = position(&Step::ReadOnly(root.join("proc/sys")));
            let bound_at =
                position(&Step::Bind { source: copy, target: root.join("proc/sys").join(setting), read_only: false });
            assert!(read_only < copied && copied < bound_at, "{read_only} {copied} {bound_at}");
        }
        // /proc/sys read-only after /proc/sys/net is bound writable (from the still writable one).
        let net = position(&Step::Bind {
            source: root.join("proc/sys/net"),
            target: root.join("proc/sys/net"),
            read_only: false,
        });
        assert!(
            position(&Step::Bind { source: root.join("proc/sys"), target: root.join("proc/sys"), read_only: false })
                < net
        );
        assert!(net < position(&Step::ReadOnly(root.join("proc/sys"))));
        assert_eq!(bound("dev/kmsg"), bind("/dev/kmsg", true));
        assert_eq!(bound("dev/null"), bind("/dev/null", false));
        let written = |path: &str, contents: &str| Step::Write { path: root.join(path), contents: contents.into() };
        // What is bound over /proc is written first, in the machine's own /run.
        assert!(
            position(&written("run/mco-lab/cmdline", "ostree=/ostree/deploy/lab/deploy/abc.1 karg=1\n")) < steps.len()
        );
        assert!(position(&written("run/mco-lab/boot_id", "id-1\n")) < steps.len());
        assert!(position(&written("run/ostree-booted", "")) < steps.len());
        let memory = steps
            .iter()
            .position(|step| {
                matches!(step, Step::Mount { fstype: "cgroup", target, options, .. }
                if *target == root.join("sys/fs/cgroup/memory") && options == "memory")
            })
            .expect("the memory hierarchy is mounted");
        assert!(memory < position(&Step::ReadOnly(root.join("sys/fs/cgroup"))));
        // Every mount is below the root.
        for step in &steps {
            let target = match step {
                Step::Bind { target, .. } | Step::Mount { target, .. } => target,
                Step::File(path) | Step::Dir(path) | Step::ReadOnly(path) | Step::Protect(path) => path,
                Step::Symlink { link, .. } => link,
                Step::Write { path, .. } | Step::Copy { target: path, .. } => path,
            };
            assert!(target.starts_with(root), "{step:?}");
        }
    }

    #[test]
    fn the_first_boot_makes_what_the_roots_links_into_var_need_and_waits_for_a_default_route() {
        let links: Vec<PathBuf> =
            ["var/home", "var/roothome", "sysroot/ostree", "var", "/var/abs", "var/../etc", "usr/local"]
                .iter()
                .map(PathBuf::from)
                .collect();
        assert_eq!(var_link_targets(&links), [PathBuf::from("var/home"), PathBuf::from("var/roothome")]);
        let header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";
        let default = "eth0\t00000000\t0100C80A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
        let subnet = "eth0\t0000C80A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let down = "eth0\t00000000\t0100C80A\t0002\t0\t0\t0\t00000000\t0\t0\t0\n";
        assert!(has_default_route(&format!("{header}{subnet}{default}")));
        assert!(!has_default_route(&format!("{header}{subnet}")));
        assert!(!has_default_route(&format!("{header}{down}")));
        assert!(!has_default_route(header));
        // The header's own "Destination" is no route.
        assert!(!has_default_route("Iface 00000000 x 0001"));
    }

    #[test]
    fn a_reboot_and_a_power_off_are_told_apart_by_the_signal_init_died_of() {
        let signalled = |signal: rustix::process::Signal| ExitStatus::from_raw(signal.as_raw());
        assert_eq!(halt_of(signalled(rustix::process::Signal::HUP)), Halt::Reboot);
        assert_eq!(halt_of(signalled(rustix::process::Signal::INT)), Halt::PowerOff);
        assert_eq!(halt_of(signalled(rustix::process::Signal::KILL)), Halt::Crashed("signal: 9 (SIGKILL)".into()));
        // The init's own failure to boot (an exit status of `mco lab machine-init`).
        assert_eq!(halt_of(ExitStatus::from_raw(2 << 8)), Halt::Crashed("exit status: 2".into()));
    }
}
