#!/usr/bin/env bash
# What metrics cost mco's processes: a lab of N workers with Prometheus scraping every mco pod
# every 5 s (`mco lab up --prometheus`, six times upstream's 30 s), then the same lab with
# Prometheus stopped. For the controller (the leader) and each daemon: CPU time used over a
# window of W seconds and RSS at its end, with and without scrapes; and what Prometheus saw of
# each target (scrape duration, samples per scrape).
# Needs root (the lab does).
#
#   MCO=target/release/mco bash hack/bench-metrics.sh [N] [W]
set -euo pipefail
cd "$(dirname "$0")/.."
MCO=${MCO:-target/release/mco}
N=${1:-2}
WINDOW=${2:-120}
work=$(mktemp -d)
trap '$MCO lab down --state-dir "$work/lab" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
dir=$work/lab

# "pid role" of each mco controller and daemon process of the lab.
processes() {
  for pid in $(pgrep -f "^/usr/bin/mco (controller|daemon run)" || true); do
    case "$(tr '\0' ' ' <"/proc/$pid/cmdline")" in
      *" controller "*) echo "$pid controller" ;;
      *" daemon run "*) echo "$pid daemon" ;;
    esac
  done
}

# Clock ticks of CPU (user + system) of process $1.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_mib() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# One window: each process's CPU milliseconds per minute and its RSS at the end.
window() {
  local label=$1 hz
  hz=$(getconf CLK_TCK)
  declare -A before role
  while read -r pid r; do before[$pid]=$(cpu_ticks "$pid"); role[$pid]=$r; done < <(processes)
  sleep "$WINDOW"
  for pid in "${!before[@]}"; do
    [ -e "/proc/$pid" ] || continue
    awk -v label="$label" -v role="${role[$pid]}" -v pid="$pid" -v ticks="$(($(cpu_ticks "$pid") - before[$pid]))" \
      -v rss="$(rss_mib "$pid")" -v hz="$hz" -v w="$WINDOW" \
      'BEGIN { printf "%s: %s (pid %s): %.0f ms CPU per minute, %s MiB RSS\n", label, role, pid, ticks * 1000 / hz * 60 / w, rss }'
  done | sort
}

$MCO lab up --nodes "$N" --prometheus --state-dir "$dir" >/dev/null
prometheus=$($MCO lab status -o json --state-dir "$dir" | sed -n 's/.*"prometheus": "\(.*\)".*/\1/p')
sleep 30
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
window "scraped every 5 s"
for query in scrape_duration_seconds scrape_samples_scraped; do
  curl -fsS "$prometheus/api/v1/query?query=$query" | python3 -c '
import json, sys
name = sys.argv[1]
for r in json.load(sys.stdin)["data"]["result"]:
    pod, value = r["metric"]["pod"], r["value"][1]
    print(f"{name}{{pod=\"{pod}\"}} {value}")' "$query"
done
pkill -f "^prometheus --config.file=$dir/prometheus/prometheus.yml"
sleep 10
window "not scraped"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
