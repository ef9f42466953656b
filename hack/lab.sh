#!/usr/bin/env bash
# The main job: the local lab, a whole cluster on this machine. Installs what it needs, builds
# mco and the real etcd and Kubernetes components, starts the lab (API server, controller-manager,
# scheduler, kube-proxy, OCI registry with OSTree and container images, a bootstrap controller and
# Machine Config Server, and a control-plane node and workers that boot with the real Ignition
# client, pivot to the pool's OS image, reboot and join with the kubelet of that image on their own
# containerd), installs mco from deploy/ as pods (controller, a daemon on every node, the server on
# the control-plane node), then rolls a MachineConfig out across the workers and leaves the lab
# running for you, with a small workload whose pods the rollout's drains move, and a Prometheus
# scraping mco with its alerting rules (deploy/components/monitoring).
#
#   NODES=5 bash hack/lab.sh          more workers (default 3)
#   MCO_LAB_DIR=DIR bash hack/lab.sh  state directory (default /var/tmp/mco-lab)
#
# The build runs as you; the lab runs as root (through sudo when you are not root): the real
# Ignition client and the node daemons write files owned by root into the nodes' roots.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh
KUBE_BIN_DIR=$(bash hack/kube-binaries.sh)
cargo build --release --locked -p mco
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
DIR=${MCO_LAB_DIR:-/var/tmp/mco-lab}
lab() { $SUDO env MCO_KUBE_BIN_DIR="$KUBE_BIN_DIR" MCO_LAB_DIR="$DIR" "$PWD/target/release/mco" "$@"; }

# A lab left over from an earlier run is stopped and removed first.
lab lab down
lab lab up --nodes "${NODES:-3}" --prometheus
lab status
echo
echo "== Applying examples/lab/workload.yaml (a Deployment of 3 pods behind a PodDisruptionBudget)"
lab lab apply -f examples/lab/workload.yaml
KUBECONFIG=$(lab lab kubeconfig)
# The kubectl of the lab's Kubernetes version, built with the other binaries.
KUBECTL=$KUBE_BIN_DIR/kubectl
$SUDO "$KUBECTL" --kubeconfig "$KUBECONFIG" -n lab-workload rollout status deployment/web --timeout 120s
$SUDO "$KUBECTL" --kubeconfig "$KUBECONFIG" get nodes,pods -A -o wide
echo
echo "== Rolling out examples/lab/99-worker-motd.yaml (one node at a time: drain, write, reboot, uncordon;"
echo "   the drains evict the workload's pods, which their ReplicaSet re-creates on the other nodes)"
lab lab apply -f examples/lab/99-worker-motd.yaml
lab status -w --until-updated --timeout 900
echo
echo "The lab is still running in $DIR. With MCO_LAB_DIR=$DIR (and root):"
echo "  target/release/mco status -w | lab apply -f FILE | lab kubeconfig | lab down"
echo "  $KUBECTL --kubeconfig $KUBECONFIG get nodes,pods -A -o wide   (logs, exec, drain work too)"
echo "  Prometheus (mco's metrics and alerts): $(lab lab status -o json | sed -n 's/.*"prometheus": "\(.*\)".*/\1/p')/alerts"
