//! A lab machine booted as a host boots (`mco_lab::boot`): an OS image with systemd, installed
//! into an OSTree sysroot, boots its deployment with the image's systemd as PID 1, plugged into a
//! lab network (`mco_lab::network`, in a network namespace of the test's own); `systemctl reboot`
//! and `systemctl poweroff` inside it come back to the firmware as what they are. On its first
//! boot the real Ignition writes the pool's config, and the pool's firstboot unit runs mco's
//! daemon, which rebases it onto the pool's image and reboots it before its kubelet starts.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use mco_lab::boot::{BootSpec, Booted, Halt};
use mco_testenv::{Verbatim, eventually_within, satisfying};

use crate::common::machine::{in_halting_machine, in_machine};
use crate::common::mco;

const KVER: &str = "6.6.1-100.mco.x86_64";
/// How long a machine gets to boot or to halt (a loaded machine; a quiet one takes a second).
const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// The node userland (systemd, D-Bus, iproute2, runc and the CNI plugins beside mco's), as the
/// lab builds it: in the host's network namespace, from which Debian's mirror can be reached.
fn node_userland() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../hack/image.sh");
    let out = StdCommand::new("bash").arg(&script).arg("--node-userland").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A test OS image of `version` on `userland`, with what `prepare` adds to it, committed to
/// `tmp`'s repository and encapsulated to `to` (`oci:DIR:TAG` or `docker://...`); what
/// `mco image encapsulate` printed (a registry image's digest).
fn os_image(
    tmp: &Path,
    userland: &Path,
    version: &str,
    to: &str,
    registries_conf: Option<&Path>,
    prepare: impl FnOnce(&Path),
) -> String {
    let tree = tmp.join(format!("tree-{version}"));
    mco()
        .args(["image", "test-tree", "--kernel", KVER, "--version-id", version, "--userland"])
        .arg(userland)
        .arg(&tree)
        .assert()
        .success();
    prepare(&tree);
    let repo = tmp.join("repo");
    mco()
        .args(["image", "commit", "--ref", "mco/os", "--version", version, "--repo"])
        .arg(&repo)
        .arg("--tree")
        .arg(&tree)
        .assert()
        .success();
    std::fs::remove_dir_all(&tree).unwrap();
    let mut encapsulate = mco();
    encapsulate
        .args(["image", "encapsulate", "--compression-fast", "--ref", "mco/os", "--to", to, "--repo"])
        .arg(&repo);
    if let Some(conf) = registries_conf {
        encapsulate.env("CONTAINERS_REGISTRIES_CONF", conf);
    }
    let out = encapsulate.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Installs a test OS image on `userland` into `sysroot`, with what `prepare` adds to it.
fn install(tmp: &Path, sysroot: &Path, userland: &Path, prepare: impl FnOnce(&Path)) {
    let image = format!("oci:{}:os", tmp.join("oci").display());
    os_image(tmp, userland, "9.6.1", &image, None, prepare);
    mco_lab::node::mount_boot(sysroot).unwrap();
    mco()
        .args(["image", "install", "--stateroot", "lab", "--karg", "console=ttyS0", "--image", &image, "--sysroot"])
        .arg(sysroot)
        .assert()
        .success();
}

/// Waits for the machine's systemd to finish booting; its PID 1 as the host sees it.
async fn running(machine: &mut Booted) -> rustix::process::Pid {
    eventually_within(BOOT_TIMEOUT, "the machine's systemd to reach `running`", || {
        let init = machine.init_pid();
        let halted = machine.halted();
        let console = machine.console_tail();
        async move {
            assert_eq!(halted.unwrap(), None, "the machine halted while booting:\n{console}");
            let Some(pid) = init else { return Err(Verbatim("no PID 1 yet".into())) };
            match in_machine(pid, &["systemctl", "is-system-running"]).await {
                Ok(state) if state.trim() == "running" => Ok(pid),
                seen => {
                    let failed = in_machine(pid, &["systemctl", "--failed", "--no-legend"]).await.unwrap_or_default();
                    Err(Verbatim(format!("{seen:?}; failed units: {failed}\nconsole:\n{console}")))
                }
            }
        }
    })
    .await
}

/// Powers the machine on as lab node 3, plugged into the lab's network with `ports` forwarded
/// into it (a machine boots once its cable is in); the tasks forwarding the ports.
async fn power_on(
    spec: &BootSpec,
    ports: &[u16],
    network_log: &Path,
) -> (Booted, rustix::process::Pid, Vec<tokio::task::JoinHandle<()>>) {
    let mco = assert_cmd::cargo::cargo_bin("mco");
    let machine = Booted::power_on(&mco, spec).await.unwrap();
    let pid = eventually_within(BOOT_TIMEOUT, "the machine's PID 1", || {
        let pid = machine.init_pid();
        async move { pid.ok_or("not forked yet") }
    })
    .await;
    let forwarding = mco_lab::network::forward_into(pid, ports).unwrap();
    mco_lab::network::plug_in(pid, 3, network_log).await.unwrap();
    (machine, pid, forwarding)
}

async fn halted(machine: &mut Booted) -> Halt {
    eventually_within(BOOT_TIMEOUT, "the machine to halt", || {
        let halted = machine.halted().unwrap();
        async move { halted.ok_or("still running") }
    })
    .await
}

/// What a machine leaves on the host, cleaned up however the test ends: its cgroups (every process
/// in them killed) and its sysroot's `/boot` file system.
struct Leftovers {
    cgroup_parent: String,
    sysroot: PathBuf,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        // On a thread of its own: the test's runtime may be unwinding.
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let power_off = mco_lab::machine::power_off_all(&self.cgroup_parent);
                if let Err(e) = tokio::runtime::Runtime::new().unwrap().block_on(power_off) {
                    eprintln!("removing cgroup {}: {e:#}", self.cgroup_parent);
                }
            });
        });
        if let Err(e) = mco_lab::node::remove_sysroot(&self.sysroot) {
            eprintln!("{e:#}");
        }
    }
}

async fn read(pid: rustix::process::Pid, path: &str) -> String {
    in_machine(pid, &["cat", path]).await.unwrap().trim().to_string()
}

fn uptime(text: &str) -> f64 {
    text.split_whitespace().next().unwrap().parse().unwrap()
}

/// Runs `test` on a thread of its own in a new network namespace (the lab's, as the supervisor's
/// is), with a runtime on that thread only: the bridge and cables it makes go with the thread.
fn in_lab_namespace(test: impl std::future::Future<Output = ()> + Send + 'static) {
    std::thread::spawn(move || {
        // SAFETY: NEWNET only, on this thread, which shares no file descriptor table change.
        unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNET) }.unwrap();
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(test)
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A TCP service on the lab's loopback that says `greeting` to every connection; its port.
async fn lab_service(greeting: &'static str) -> u16 {
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut connection, _)) = listener.accept().await {
            let _ = connection.write_all(greeting.as_bytes()).await;
        }
    });
    port
}

/// What the machine sees of the lab's network: its address and what it reads from `127.0.0.1:port`.
async fn network_seen(pid: rustix::process::Pid, port: u16) -> (String, String) {
    let address = in_machine(pid, &["ip", "-4", "-o", "addr", "show", "dev", "eth0"]).await.unwrap();
    let read = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && cat <&3");
    let said = in_machine(pid, &["timeout", "60", "bash", "-c", &read]).await.unwrap_or_else(|e| e);
    (address, said)
}

/// A boot image's installed disk copied to a machine's (`mco_lab::disk`): every file with its
/// mode and its hard links (a deployment's files are links into the repository), `/boot`'s
/// contents into the machine's own `/boot`, and the deployments immutable again, as libostree
/// leaves them.
#[test]
fn a_boot_images_disk_is_copied_with_its_hard_links_and_immutable_deployments() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    let tmp = tempfile::tempdir().unwrap();
    let (disk, sysroot) = (tmp.path().join("disk"), tmp.path().join("machine"));
    let deployment = "ostree/deploy/mco/deploy/0123abcd.0";
    let (object, tool) = ("ostree/repo/objects/ab/cdef.file", format!("{deployment}/usr/bin/tool"));
    for dir in [format!("{deployment}/usr/bin"), "ostree/repo/objects/ab".into(), "boot/loader".into()] {
        std::fs::create_dir_all(disk.join(dir)).unwrap();
    }
    std::fs::write(disk.join(object), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(disk.join(object), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::hard_link(disk.join(object), disk.join(&tool)).unwrap();
    std::fs::write(disk.join("boot/loader/entries.conf"), "options ostree=/ostree/boot.1\n").unwrap();
    mco_os::sysroot::set_immutable(&[disk.join(deployment)], true).unwrap();
    std::fs::create_dir_all(sysroot.join("boot")).unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(mco_lab::disk::copy(&disk, &sysroot)).unwrap();

    let meta = |path: &Path| std::fs::metadata(path).unwrap();
    let (copied_object, copied_tool) = (meta(&sysroot.join(object)), meta(&sysroot.join(&tool)));
    assert_eq!(std::fs::read_to_string(sysroot.join(&tool)).unwrap(), "#!/bin/sh\n");
    assert_eq!(copied_tool.mode() & 0o777, 0o755);
    assert_eq!(copied_object.ino(), copied_tool.ino(), "the deployment's file is still a link to the object");
    assert_ne!(copied_object.ino(), meta(&disk.join(object)).ino(), "a copy, not the disk's own file");
    assert_eq!(
        std::fs::read_to_string(sysroot.join("boot/loader/entries.conf")).unwrap(),
        "options ostree=/ostree/boot.1\n"
    );
    let written = std::fs::write(sysroot.join(deployment).join("new"), "");
    assert_eq!(
        written.map_err(|e| e.kind()),
        Err(std::io::ErrorKind::PermissionDenied),
        "the copied deployment is immutable"
    );
    for dir in [&sysroot, &disk] {
        mco_os::sysroot::remove(dir).unwrap();
    }
}

/// A machine's reboot plugs it in again while the kernel may still be tearing down the cable of
/// its previous boot: a cable that is there is removed, one already gone (or going) is no error.
#[test]
fn unplugging_removes_a_nodes_cable_and_a_cable_already_gone_is_no_error() {
    in_lab_namespace(async {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("network.log");
        mco_lab::network::set_up(&log).await.unwrap();
        let link =
            |args: &'static [&'static str]| std::process::Command::new("ip").arg("link").args(args).output().unwrap();
        mco_lab::network::unplug(5, &log).await.expect("no cable to remove");
        let added = link(&["add", "mco-node5", "type", "veth", "peer", "name", "mco-peer5"]);
        assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
        mco_lab::network::unplug(5, &log).await.unwrap();
        let shown = link(&["show", "mco-node5"]);
        assert!(!shown.status.success(), "the cable is still there: {}", String::from_utf8_lossy(&shown.stdout));
        mco_lab::network::unplug(5, &log).await.expect("the cable is gone already");
    });
}

#[test]
fn a_machine_boots_its_deployment_on_the_lab_network_and_reboots_into_it() {
    in_lab_namespace(boots_on_the_lab_network_and_reboots(node_userland()));
}

async fn boots_on_the_lab_network_and_reboots(userland: PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let network_log = tmp.path().join("network.log");
    mco_lab::network::set_up(&network_log).await.unwrap();
    let port = lab_service("the lab's service\n").await;
    let sysroot = tmp.path().join("sysroot");
    let spec = BootSpec {
        name: "machine-1".into(),
        sysroot: sysroot.clone(),
        cgroup_parent: format!("mco-test-boot-{}", std::process::id()),
        console: tmp.path().join("console.log"),
    };
    let _leftovers = Leftovers { cgroup_parent: spec.cgroup_parent.clone(), sysroot: sysroot.clone() };
    install(tmp.path(), &sysroot, &userland, |_| {});
    let host_boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();

    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let cpu = mco_lab::boot::hierarchies(&mountinfo)
        .into_iter()
        .find(|h| h.fstype == "cgroup" && h.options.split(',').any(|o| o == "cpu"))
        .expect("the host has a cgroup v1 cpu hierarchy (the lab's kubelets need one)");
    let cpu_parent = Path::new(mco_lab::boot::CGROUP_ROOT).join(&cpu.name).join(&spec.cgroup_parent);
    std::fs::create_dir_all(cpu_parent.join("machine-0")).unwrap();

    let powered_on = Instant::now();
    let (mut machine, pid, forwarding) = power_on(&spec, &[port], &network_log).await;
    assert_eq!(running(&mut machine).await, pid);
    assert_eq!(std::fs::read_to_string(format!("/proc/{pid}/comm", pid = pid.as_raw_nonzero())).unwrap(), "systemd\n");
    // The machines' parent weighs one host process per machine (two: the other is a machine
    // powered on before, as far as its CPU weight goes), as VMs would.
    let shares = std::fs::read_to_string(cpu_parent.join("cpu.shares")).unwrap();
    assert_eq!(shares.trim(), (2 * mco_lab::boot::MACHINE_CPU_SHARES).to_string(), "{}", cpu_parent.display());
    assert_eq!(read(pid, "/proc/1/comm").await, "systemd", "PID 1 inside the machine");
    // The root is the booted deployment: libostree (its `ostree` command, inside) finds it booted.
    let deployments = in_machine(pid, &["ostree", "admin", "status"]).await.unwrap();
    let deployment = machine.target.deployment.file_name().unwrap().to_str().unwrap().to_string();
    assert!(deployments.lines().any(|l| l.starts_with("* lab ") && l.ends_with(&deployment)), "{deployments}");
    assert_eq!(read(pid, "/proc/cmdline").await, machine.target.cmdline);
    assert!(machine.target.cmdline.split_whitespace().any(|arg| arg == "console=ttyS0"), "{}", machine.target.cmdline);
    assert!(in_machine(pid, &["test", "-e", "/run/ostree-booted"]).await.is_ok());
    assert_eq!(read(pid, "/proc/sys/kernel/hostname").await, "machine-1");
    // The machine's uptime counts from its power-on, not the host's boot.
    assert!(uptime(&read(pid, "/proc/uptime").await) <= powered_on.elapsed().as_secs_f64() + 1.0);
    let first_boot_id = read(pid, "/proc/sys/kernel/random/boot_id").await;
    // On the lab's bridge at node 3's address, the lab's 127.0.0.1 services forwarded to it.
    let (address, said) = network_seen(pid, port).await;
    assert!(address.contains(" inet 10.200.0.13/24 "), "{address}");
    assert_eq!(said, "the lab's service\n");
    assert_ne!(first_boot_id, host_boot_id.trim());
    // /usr is the image's, read-only; /etc the deployment's own; /home is in the stateroot's /var.
    assert!(in_machine(pid, &["touch", "/usr/mco-test-written"]).await.is_err());
    // The kernel's settings: the network namespace's writable (the CNI bridge plugin turns on
    // forwarding), the host's not.
    in_machine(pid, &["sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"]).await.unwrap();
    assert!(in_machine(pid, &["sh", "-c", "echo 1 > /proc/sys/kernel/sysrq"]).await.is_err());
    in_machine(pid, &["touch", "/etc/mco-test-written", "/home/mco-test-written"]).await.unwrap();
    assert!(sysroot.join(&machine.target.deployment).join("etc/mco-test-written").exists());
    assert!(sysroot.join("ostree/deploy/lab/var/home/mco-test-written").exists());
    // A unit written into /etc runs once systemd reloads (as a MachineConfig's unit would).
    let unit = "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo ran > /run/mco-test-unit'\n";
    std::fs::write(sysroot.join(&machine.target.deployment).join("etc/systemd/system/mco-test.service"), unit).unwrap();
    in_machine(pid, &["systemctl", "daemon-reload"]).await.unwrap();
    in_machine(pid, &["systemctl", "start", "mco-test.service"]).await.unwrap();
    assert_eq!(read(pid, "/run/mco-test-unit").await, "ran");

    in_machine(pid, &["systemctl", "reboot"]).await.unwrap();
    assert_eq!(halted(&mut machine).await, Halt::Reboot);
    forwarding.iter().for_each(tokio::task::JoinHandle::abort);
    let rebooted = Instant::now();
    let (mut machine, pid, _forwarding) = power_on(&spec, &[port], &network_log).await;
    assert_eq!(running(&mut machine).await, pid);
    // A new boot: its own id, an uptime from zero, an empty /run, the files of /etc and /var kept.
    assert_ne!(read(pid, "/proc/sys/kernel/random/boot_id").await, first_boot_id);
    assert!(uptime(&read(pid, "/proc/uptime").await) <= rebooted.elapsed().as_secs_f64() + 1.0);
    assert!(in_machine(pid, &["test", "-e", "/run/mco-test-unit"]).await.is_err());
    in_machine(pid, &["test", "-e", "/etc/mco-test-written"]).await.unwrap();
    in_machine(pid, &["test", "-e", "/var/home/mco-test-written"]).await.unwrap();
    // Plugged in again: the last boot's cable went with its namespace.
    let (address, said) = network_seen(pid, port).await;
    assert!(address.contains(" inet 10.200.0.13/24 "), "{address}");
    assert_eq!(said, "the lab's service\n");

    in_machine(pid, &["systemctl", "poweroff"]).await.unwrap();
    assert_eq!(halted(&mut machine).await, Halt::PowerOff);
    machine.power_off().await.unwrap();
    let cgroup = Path::new(mco_lab::boot::CGROUP_ROOT).join("pids").join(&spec.cgroup_parent).join("machine-1");
    assert!(!cgroup.exists(), "{} is left", cgroup.display());
}

#[test]
fn a_machines_first_boot_runs_ignition_and_the_firstboot_pivot_then_systemd_starts_its_kubelet_and_pods() {
    in_lab_namespace(first_boot_and_kubelet(node_userland()));
}

/// The lab's `00-worker` MachineConfig with the pool's OS image `os_image`, as the Ignition config
/// the server would serve a machine (spec 3.3, which Debian's Ignition reads): the config, and the
/// MachineConfig itself at the place the daemon's firstboot reads it.
fn served_config(tmp: &Path, registry: &str, os_image: &str) -> String {
    use base64::Engine as _;
    let mut mc = mco_lab::manifests::base_config("worker", registry);
    mc["spec"]["osImageURL"] = serde_json::json!(os_image);
    let mut config = mc["spec"]["config"].clone();
    let encapsulated = base64::engine::general_purpose::STANDARD.encode(mc.to_string());
    config["storage"]["files"].as_array_mut().unwrap().push(serde_json::json!({
        "path": "/etc/ignition-machine-config-encapsulated.json",
        "mode": 0o644,
        "contents": {"source": format!("data:;base64,{encapsulated}")},
    }));
    let file = tmp.join("served.ign");
    std::fs::write(&file, config.to_string()).unwrap();
    let out = mco().args(["ignition", "convert", "--to", "3.3"]).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

async fn first_boot_and_kubelet(userland: PathBuf) {
    use k8s_openapi::api::core::v1::Node;

    let tmp = tempfile::tempdir().unwrap();
    let network_log = tmp.path().join("network.log");
    mco_lab::network::set_up(&network_log).await.unwrap();
    // The API server, in the lab's namespace (started from this thread).
    let env = mco_testenv::TestEnv::start().await.unwrap();
    let kubeconfig = std::fs::read_to_string(env.kubeconfig()).unwrap();
    let api_port: u16 = kubeconfig
        .lines()
        .find_map(|line| line.trim().strip_prefix("server: https://127.0.0.1:"))
        .expect("the kubeconfig names the API server")
        .parse()
        .unwrap();
    // The lab's registry with its pause and workload images, and the pool's OS image: the boot
    // image's tree with the kubelet and a file more.
    let layout = mco_lab::layout::Layout::new(tmp.path().join("lab"));
    let [registry_port] = mco_lab::process::free_ports().unwrap();
    let _registry = mco_lab::images::start_registry(&layout, registry_port).await.unwrap();
    let registry = format!("127.0.0.1:{registry_port}");
    let sandbox_image = mco_lab::images::build_container_images(&layout, &registry).await.unwrap();
    let pool_image = {
        let to = format!("docker://{registry}/mco/os:pool");
        let conf = layout.registries_conf();
        let digest = os_image(tmp.path(), &userland, "9.6.2", &to, Some(&conf), |tree| {
            mco_lab::node_os::add_node_software(tree).unwrap();
            // The kubelet, as the lab's node image adds it to the base image.
            let [kubelet] = mco_testenv::find_binaries(["kubelet"]).unwrap();
            std::fs::copy(kubelet, tree.join("usr/bin/kubelet")).unwrap();
            std::fs::create_dir_all(tree.join("usr/share/mco-test")).unwrap();
            std::fs::write(tree.join("usr/share/mco-test/pool"), "the pool's image\n").unwrap();
        });
        format!("{registry}/mco/os@{digest}")
    };
    let sysroot = tmp.path().join("sysroot");
    let spec = BootSpec {
        name: "machine-1".into(),
        sysroot: sysroot.clone(),
        cgroup_parent: format!("mco-test-kubelet-{}", std::process::id()),
        console: tmp.path().join("console.log"),
    };
    let _leftovers = Leftovers { cgroup_parent: spec.cgroup_parent.clone(), sysroot: sysroot.clone() };
    install(tmp.path(), &sysroot, &userland, |tree| mco_lab::node_os::add_node_software(tree).unwrap());
    // What the lab writes on the machine's disk as its installer and cloud.
    let node_kubeconfig = tmp.path().join("kubelet.kubeconfig");
    env.write_client_kubeconfig(&node_kubeconfig, "system:node:machine-1", Some("system:masters")).unwrap();
    let settings = mco_lab::node_os::MachineSettings {
        name: "machine-1".into(),
        index: 3,
        zone: "lab-b".into(),
        taints: vec![],
        kubeconfig: std::fs::read_to_string(&node_kubeconfig).unwrap(),
        client_ca: std::fs::read_to_string(env.ca_cert()).unwrap(),
        registry: registry.clone(),
        sandbox_image,
    };
    let ignition = served_config(tmp.path(), &registry, &pool_image);
    mco_lab::node_os::install_machine(&sysroot, &settings, &ignition).unwrap();

    // The first boot: Ignition writes the pool's config, the firstboot unit rebases the machine
    // onto the pool's image and reboots it before the kubelet starts.
    let ports = [api_port, registry_port];
    let (mut machine, pid, forwarding) = power_on(&spec, &ports, &network_log).await;
    let halt = eventually_within(BOOT_TIMEOUT, "the first boot to reboot the machine", || {
        let halted = machine.halted().unwrap();
        async move {
            if let Some(halt) = halted {
                return Ok(halt);
            }
            let units = ["machine-config-daemon-firstboot", "machine-config-daemon-reboot"];
            let journal = ["journalctl", "--no-pager", "-n", "30", "-u", units[0], "-u", units[1]];
            let failed = in_halting_machine(pid, &["systemctl", "list-units", "--failed", "--no-legend"]).await;
            let journal = in_halting_machine(pid, &journal).await;
            Err(Verbatim(format!("failed units: {failed:?}\n{}", journal.unwrap_or_else(|e| e))))
        }
    })
    .await;
    assert_eq!(halt, Halt::Reboot, "{}", machine.console_tail());
    forwarding.iter().for_each(tokio::task::JoinHandle::abort);
    let console = std::fs::read_to_string(&spec.console).unwrap();
    assert!(console.contains("ignition-machine-config-encapsulated.json"), "Ignition's log:\n{console}");
    assert!(!sysroot.join(mco_lab::boot::FIRSTBOOT_STAMP).exists(), "Ignition runs on the first boot only");
    let (mut machine, pid, _forwarding) = power_on(&spec, &ports, &network_log).await;
    assert_eq!(running(&mut machine).await, pid);
    // The pool's image, with the pool's kernel argument, Ignition's files kept through the /etc merge.
    assert_eq!(read(pid, "/usr/share/mco-test/pool").await, "the pool's image");
    let cmdline = read(pid, "/proc/cmdline").await;
    assert!(cmdline.split_whitespace().any(|arg| arg == mco_lab::manifests::LAB_KARG), "{cmdline}");
    assert_eq!(read(pid, "/etc/mco-lab/role").await, "worker");
    // The daemon renamed Ignition's copy of the config after it deployed the pool's image: the
    // rename is there because the deployment's /etc was merged again when it was finalized.
    in_machine(pid, &["test", "-e", "/etc/ignition-machine-config-encapsulated.json.bak"]).await.unwrap();
    assert!(in_machine(pid, &["test", "-e", "/etc/ignition-machine-config-encapsulated.json"]).await.is_err());
    // The firstboot unit's condition no longer holds: it does not run again.
    let firstboot = ["systemctl", "show", "--property=ConditionResult", "--value", "machine-config-daemon-firstboot"];
    assert_eq!(in_machine(pid, &firstboot).await.unwrap().trim(), "no");

    let nodes: kube::Api<Node> = kube::Api::all(env.client());
    let node = eventually_within(BOOT_TIMEOUT, "the machine's kubelet to register its Node Ready", || {
        let nodes = nodes.clone();
        async move {
            let node = nodes.get_opt("machine-1").await.map_err(|e| Verbatim(e.to_string()))?;
            match node {
                Some(node) if mco_lab::node::is_ready(&node) => Ok(node),
                seen => {
                    let units =
                        in_machine(pid, &["systemctl", "status", "--no-pager", "-n", "20", "containerd", "kubelet"])
                            .await;
                    Err(Verbatim(format!("{:#?}\n{}", seen.and_then(|n| n.status), units.unwrap_or_else(|e| e))))
                }
            }
        }
    })
    .await;
    // Its name, address and zone are the ones the lab gave the machine.
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("topology.kubernetes.io/zone").map(String::as_str), Some("lab-b"), "{labels:?}");
    let addresses = node.status.and_then(|s| s.addresses).unwrap_or_default();
    assert!(addresses.iter().any(|a| a.type_ == "InternalIP" && a.address == "10.200.0.13"), "{addresses:?}");
    // Started by the machine's systemd, from the units: each in its unit's cgroup.
    for unit in ["containerd", "kubelet"] {
        assert_eq!(in_machine(pid, &["systemctl", "is-active", unit]).await.unwrap().trim(), "active", "{unit}");
        let main = in_machine(pid, &["systemctl", "show", "--property=MainPID", "--value", unit]).await.unwrap();
        let cgroup = read(pid, &format!("/proc/{}/cgroup", main.trim())).await;
        assert!(cgroup.lines().any(|l| l.ends_with(&format!(":/system.slice/{unit}.service"))), "{unit}: {cgroup}");
    }

    // A pod on the machine's pod network, its containers run by the machine's containerd and runc.
    let namespace = "machine-pods";
    let objects = [
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": namespace}}),
        serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "workload", "namespace": namespace},
            "spec": {
                "nodeName": "machine-1",
                "automountServiceAccountToken": false,
                "containers": [{"name": "workload", "image": mco_lab::images::WORKLOAD_IMAGE}],
            },
        }),
    ];
    let client = env.client();
    for object in objects {
        let object: kube::api::DynamicObject = serde_json::from_value(object).unwrap();
        let resource = kube::discovery::ApiResource::from_gvk(&object.types.as_ref().unwrap().try_into().unwrap());
        let api: kube::Api<kube::api::DynamicObject> = match &object.metadata.namespace {
            Some(namespace) => kube::Api::namespaced_with(client.clone(), namespace, &resource),
            None => kube::Api::all_with(client.clone(), &resource),
        };
        api.create(&kube::api::PostParams::default(), &object).await.unwrap();
    }
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, namespace);
    let pod_ip = eventually_within(BOOT_TIMEOUT, "the workload pod to run on the machine", || {
        let pods = pods.clone();
        async move {
            let status = pods.get("workload").await.map_err(|e| Verbatim(e.to_string()))?.status.unwrap_or_default();
            match (&status.phase, &status.pod_ip) {
                (Some(phase), Some(ip)) if phase == "Running" => Ok(ip.clone()),
                _ => {
                    let journal = ["journalctl", "--no-pager", "-n", "15", "-u", "kubelet", "-u", "containerd"];
                    let journal = in_machine(pid, &journal).await.unwrap_or_else(|e| e);
                    Err(Verbatim(format!("{:?} {:?}\n{journal}", status.phase, status.container_statuses)))
                }
            }
        }
    })
    .await;
    assert!(pod_ip.starts_with("10.244.4."), "{pod_ip}");
    // It serves its name on its pod address, reached from the machine.
    let get = format!("exec 3<>/dev/tcp/{pod_ip}/8080 && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3");
    let answer = eventually_within(BOOT_TIMEOUT, "the workload to answer on its pod address", || {
        let get = get.clone();
        async move {
            let said = in_machine(pid, &["timeout", "10", "bash", "-c", &get]).await;
            satisfying(said, |said| said.as_ref().is_ok_and(|text| text.ends_with("workload\n")))
        }
    })
    .await;
    let answer = answer.unwrap();
    assert!(answer.starts_with("HTTP/1.") && answer.lines().next().unwrap().contains(" 200 "), "{answer}");

    in_machine(pid, &["systemctl", "poweroff"]).await.unwrap();
    assert_eq!(halted(&mut machine).await, Halt::PowerOff);
    machine.power_off().await.unwrap();
}
