#!/usr/bin/env bash
# Pre-staging benchmark: on a lab of N workers, the time an OS image update takes to roll out with
# maxUnavailable 1 (each node: drain, pull, deploy, reboot, in turn), without pre-staging and
# then with it (`mco.dev/prestage-concurrency: 2`: nodes pull while others take their slot). Each
# update is a new image `FROM` the pools' image with a new 64 MiB layer of random data, so each
# pull fetches and imports that much. Needs root (the lab does).
#
#   MCO=target/debug/mco bash hack/bench-prestage.sh [N]
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
MCO=${MCO:-target/release/mco}
N=${1:-5}
KUBECTL=${MCO_KUBE_BIN_DIR:+$MCO_KUBE_BIN_DIR/}kubectl
work=$(mktemp -d)
lab=$work/lab
trap '$MCO lab down --state-dir "$lab" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

$MCO lab up --nodes "$N" --state-dir "$lab" >/dev/null
status=$($MCO lab status --state-dir "$lab" -o json)
base=$(sed -n 's/.*"osImage": "\(.*\)".*/\1/p' <<<"$status")
registry=${base%%/*}

# Builds an update of the pools' image with a new 64 MiB layer; prints it by digest.
update() {
  local context=$work/$1
  mkdir -p "$context"
  printf 'FROM %s\nRUN head -c 67108864 /dev/urandom > /usr/share/bench-%s\n' "$base" "$1" >"$context/Containerfile"
  local digest
  digest=$(CONTAINERS_REGISTRIES_CONF=$lab/registries.conf \
    $MCO image build -f "$context/Containerfile" --to "docker://$registry/mco/node:bench-$1" "$context")
  echo "$registry/mco/node@$digest"
}

target() { $KUBECTL --kubeconfig "$lab/kubeconfig" get mcp worker -o jsonpath='{.spec.configuration.name}'; }

# Rolls `image` out to the workers; prints the seconds from the MachineConfig to the last node.
roll_out() {
  cat >"$work/os.yaml" <<EOF
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-bench-os
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  osImageURL: $1
EOF
  local start before
  before=$(target)
  start=$(date +%s.%N)
  $MCO lab apply --state-dir "$lab" -f "$work/os.yaml" >/dev/null
  # The pool first takes the new config (rendered, its image checked); then every node moves.
  local deadline=$((SECONDS + 300))
  while [[ $(target) == "$before" ]]; do
    ((SECONDS < deadline)) || { echo "the pool did not take the new config" >&2; exit 1; }
    sleep 0.5
  done
  # Until every worker is on it (`mco status --until-updated` would stop at a node reporting
  # Degraded for a moment, which lab nodes may while their machine reboots).
  local config updated
  config=$(target)
  deadline=$((SECONDS + 1800))
  until updated=$($KUBECTL --kubeconfig "$lab/kubeconfig" get mcp worker \
    -o jsonpath='{.status.configuration.name} {.status.updatedMachineCount}') && [[ $updated == "$config $N" ]]; do
    ((SECONDS < deadline)) || { echo "the rollout did not finish: $updated" >&2; exit 1; }
    sleep 0.5
  done
  seconds_since "$start"
}

first=$(update a)
second=$(update b)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
without=$(roll_out "$first")
$KUBECTL --kubeconfig "$lab/kubeconfig" annotate mcp worker mco.dev/prestage-concurrency=2 >/dev/null
with=$(roll_out "$second")
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "OS image rollout to $N workers, maxUnavailable 1: ${without} s without pre-staging, ${with} s with (2 at a time)"
