#!/usr/bin/env bash
# The main job: the local lab, a whole cluster on this machine. Installs what it needs, builds
# mco and the real kube-apiserver + etcd, starts the lab (API server, OCI registry with OSTree
# images, controller, Machine Config Server, and nodes that boot with the real Ignition client,
# pivot to the pool's OS image and join), then rolls a MachineConfig out across the workers and
# leaves the lab running for you.
#
#   NODES=5 bash hack/lab.sh          more nodes (default 3)
#   MCO_LAB_DIR=DIR bash hack/lab.sh  state directory (default ~/.local/state/mco/lab)
#
# Afterwards: target/release/mco status -w | lab apply -f FILE | lab down
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh
bash hack/kube-binaries.sh >/dev/null
cargo build --release --locked -p mco
MCO=$PWD/target/release/mco

# A lab left over from an earlier run is stopped and removed first.
$MCO lab down
$MCO lab up --nodes "${NODES:-3}"
$MCO status
echo
echo "== Rolling out examples/lab/99-worker-motd.yaml (one node at a time: drain, write, reboot, uncordon)"
$MCO lab apply -f examples/lab/99-worker-motd.yaml
$MCO status -w --until-updated --timeout 900
echo
echo "The lab is still running. Kubeconfig: $($MCO lab kubeconfig)"
echo "Try: $MCO status -w    $MCO lab apply -f FILE    $MCO lab down"
