#!/usr/bin/env bash
# On-cluster build benchmark, in a lab of N workers: examples/lab/machineosconfig.yaml applied,
# (1) the in-cluster build's time (the MachineOSBuild's buildStart to buildEnd, 1 s resolution: its
# Job, scheduling, mco's image, the base image pull, bake, build, push, the controller seeing the
# pod end; the pod itself is gone once its node is drained for the rollout), against `buildah bud`
# run by hand on the same machine with the same base image and Containerfile (pull, build, push),
# each R times (in the cluster with the rebuild annotation); (2) the time from the MachineOSConfig
# applied to the last worker Done on the built image (maxUnavailable 1). Needs root (the lab does).
#
#   MCO=target/release/mco bash hack/bench-build.sh [N] [R]
set -euo pipefail
cd "$(dirname "$0")/.."
MCO=${MCO:-target/release/mco}
N=${1:-2}
R=${2:-3}
work=$(mktemp -d)
dir=$work/lab
trap '$MCO lab down --state-dir "$dir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
ns=openshift-machine-config-operator

seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
epoch() { date -d "$1" +%s; }

$MCO lab up --nodes "$N" --state-dir "$dir" >/dev/null 2>&1
export KUBECONFIG=$dir/kubeconfig
registry=$($MCO lab status --state-dir "$dir" -o json | jq -r .registry)
rendered=$(kubectl get mcp worker -o jsonpath='{.spec.configuration.name}')
base=$(kubectl get mc "$rendered" -o jsonpath='{.spec.osImageURL}')
sed "s/LAB_REGISTRY/$registry/" examples/lab/machineosconfig.yaml >"$work/mosc.yaml"

current_build() { kubectl get machineosconfig worker -o jsonpath='{.metadata.annotations.machineconfiguration\.openshift\.io/current-machine-os-build}' 2>/dev/null; }
wait_succeeded() {
  until [[ $(kubectl get machineosbuild "$1" -o jsonpath='{.status.conditions[?(@.type=="Succeeded")].status}' 2>/dev/null) == True ]]; do sleep 0.5; done
}
# Seconds from the build's start to its end, as its status records them.
build_seconds() {
  local status
  status=$(kubectl get machineosbuild "$1" -o json)
  echo $(($(epoch "$(jq -r .status.buildEnd <<<"$status")") - $(epoch "$(jq -r .status.buildStart <<<"$status")")))
}

start=$(date +%s.%N)
$MCO lab apply --state-dir "$dir" -f "$work/mosc.yaml" >/dev/null
until build=$(current_build) && [[ -n $build ]]; do sleep 0.5; done
wait_succeeded "$build"
image=$(kubectl get machineosbuild "$build" -o jsonpath='{.status.digestedImagePushSpec}')
until [[ $(kubectl get nodes -l node-role.kubernetes.io/worker -o json |
  jq --arg i "$image" '[.items[].metadata.annotations | select(.["machineconfiguration.openshift.io/currentImage"] == $i and .["machineconfiguration.openshift.io/state"] == "Done")] | length') == "$N" ]]; do
  sleep 0.5
done
rollout=$(seconds_since "$start")
in_cluster=("$(build_seconds "$build")")
for ((i = 1; i < R; i++)); do
  kubectl annotate machineosconfig worker machineconfiguration.openshift.io/rebuild= >/dev/null
  # The same name comes back once the old build is gone and the new one has run.
  sleep 2
  until [[ $(kubectl get machineosbuild "$build" -o jsonpath='{.status.conditions[?(@.type=="Succeeded")].status}' 2>/dev/null) == True ]] &&
    [[ -z $(kubectl get machineosconfig worker -o jsonpath='{.metadata.annotations.machineconfiguration\.openshift\.io/rebuild}' 2>/dev/null) ]]; do
    sleep 0.5
  done
  in_cluster+=("$(build_seconds "$build")")
done

# By hand: the admin's Containerfile on the same base, buildah as `mco image build` runs it.
mkdir -p "$work/context"
content=$(kubectl get machineosconfig worker -o jsonpath='{.spec.containerFile[0].content}')
printf 'FROM %s AS configs\n%s\n' "$base" "$content" >"$work/context/Containerfile"
by_hand=()
for ((i = 0; i < R; i++)); do
  storage=$work/storage-$i
  start=$(date +%s.%N)
  buildah --root "$storage" --runroot "$storage" --storage-driver vfs --registries-conf "$dir/registries.conf" \
    bud --isolation chroot --layers=false --quiet -f "$work/context/Containerfile" -t localhost/by-hand "$work/context" >/dev/null
  buildah --root "$storage" --runroot "$storage" --storage-driver vfs --registries-conf "$dir/registries.conf" \
    push --quiet localhost/by-hand "docker://$registry/mco/by-hand:$i" >/dev/null
  by_hand+=("$(seconds_since "$start")")
  rm -rf "$storage"
done

echo "workers: $N, runs: $R"
echo "in-cluster build (buildStart -> buildEnd), s:       ${in_cluster[*]}"
echo "buildah bud + push by hand, s:                      ${by_hand[*]}"
echo "MachineOSConfig applied -> last worker on the image, s: $rollout"
