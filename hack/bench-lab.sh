#!/usr/bin/env bash
# Lab rollout benchmark: time for a file-change MachineConfig to roll out (drain, write, reboot,
# uncordon, Done) across N nodes with maxUnavailable 1, next to the ideal: N × the time the same
# rollout takes on a 1-node lab. Needs root (the lab does).
#
#   MCO=target/release/mco bash hack/bench-lab.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
MCO=${MCO:-target/release/mco}
N=${1:-5}
work=$(mktemp -d)
trap '$MCO lab down --state-dir "$work/lab" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

rollout() { # nodes -> seconds for one rollout
  local nodes=$1 dir=$work/lab
  $MCO lab up --nodes "$nodes" --state-dir "$dir" >/dev/null 2>&1
  local kc=$dir/kubeconfig
  local start end
  start=$(date +%s.%N)
  $MCO lab apply --state-dir "$dir" -f examples/lab/99-worker-motd.yaml >/dev/null
  $MCO status -w --until-updated --kubeconfig "$kc" --timeout 900 >/dev/null
  end=$(date +%s.%N)
  $MCO lab down --state-dir "$dir" >/dev/null 2>&1
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }'
}

one=$(rollout 1)
many=$(rollout "$N")
echo "1 node:   ${one} s"
echo "$N nodes:  ${many} s (ideal $N × 1 node = $(awk -v n="$N" -v t="$one" 'BEGIN { printf "%.1f", n * t }') s)"
