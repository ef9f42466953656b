#!/usr/bin/env bash
# Lab benchmark. For a 2-node and an N-node lab: the time `mco lab up` takes until every node has
# joined (binaries cached), the lab's memory (RSS of the supervisor and every process under it:
# etcd, the control plane, registry, mco server, node daemons, kubelets and containerd, and the
# shims and containers of the machines' cgroups, mco's controller pods among them) once idle and at
# its peak during a rollout, and the time for a file-change MachineConfig to roll out (drain, write,
# reboot, uncordon, Done) with maxUnavailable 1, next to the ideal: N/2 × the 2-node rollout. Node
# counts are workers; every lab also has its control-plane node.
# Needs root (the lab does).
#
#   MCO=target/release/mco bash hack/bench-lab.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
MCO=${MCO:-target/release/mco}
N=${1:-5}
work=$(mktemp -d)
trap '$MCO lab down --state-dir "$work/lab" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# MiB of RSS of process $1, all its descendants, and every process in the lab machines' cgroups
# and the cgroups their systemd makes below them.
tree_rss() {
  { find /sys/fs/cgroup/pids/mco-lab-"$1" -name cgroup.procs -exec cat {} + 2>/dev/null |
      sed 's/^/machine /'; ps -eo pid=,ppid=,rss=; } | awk -v root="$1" '
    $1 == "machine" { machine[$2] = 1; next }
    { parent[$1] = $2; rss[$1] = $3 }
    END {
      for (p in parent) {
        q = p; while (q != "" && q != root && q in parent && q != 1) q = parent[q]
        if (q == root || p in machine) sum += rss[p]
      }
      printf "%.0f", sum / 1024
    }'
}

# One lab of $1 nodes: prints "up-seconds idle-MiB peak-MiB rollout-seconds".
measure() {
  local nodes=$1 dir=$work/lab start up idle peak=0 rss rollout
  start=$(date +%s.%N)
  $MCO lab up --nodes "$nodes" --state-dir "$dir" >/dev/null 2>&1
  up=$(seconds_since "$start")
  local supervisor
  supervisor=$(cat "$dir/supervisor.pid")
  sleep 10
  idle=$(tree_rss "$supervisor")
  start=$(date +%s.%N)
  $MCO lab apply --state-dir "$dir" -f examples/lab/99-worker-motd.yaml >/dev/null
  $MCO status -w --until-updated --kubeconfig "$dir/kubeconfig" --timeout 900 >/dev/null &
  local watcher=$!
  while kill -0 "$watcher" 2>/dev/null; do
    rss=$(tree_rss "$supervisor")
    ((rss > peak)) && peak=$rss
    sleep 0.5
  done
  wait "$watcher"
  rollout=$(seconds_since "$start")
  $MCO lab down --state-dir "$dir" >/dev/null 2>&1
  echo "$up $idle $peak $rollout"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r up1 idle1 peak1 one < <(measure 2)
read -r upn idlen peakn many < <(measure "$N")
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "lab up (until every node joined): 2 nodes ${up1} s, $N nodes ${upn} s"
echo "lab memory (RSS of all its processes): 2 nodes ${idle1} MiB idle, ${peak1} MiB peak in a rollout; $N nodes ${idlen} MiB idle, ${peakn} MiB peak"
echo "rollout: 2 nodes ${one} s; $N nodes ${many} s (ideal $N/2 × 2 nodes = $(awk -v n="$N" -v t="$one" 'BEGIN { printf "%.1f", n * t / 2 }') s)"
