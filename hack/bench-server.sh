#!/bin/bash
# Benchmarks `mco server` with wrk on loopback: 64 keep-alive connections, plain HTTP and TLS,
# for a typical config (~17 KB body) and a large one (200 MachineConfigs' worth of files,
# ~13.7 MB rendered config). Prints requests/s, p50/p99 latency and the server's peak memory
# (VmHWM) per run; each run has its own server process.
#
#   hack/bench-server.sh                 # builds the server (example `serve`) with --release first
#   SERVE=path/to/serve DURATION=10s hack/bench-server.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
if [ -z "${SERVE:-}" ]; then
    cargo build --release -p mco-server --example serve >&2
    SERVE="${CARGO_TARGET_DIR:-target}/release/examples/serve"
fi
duration=${DURATION:-10s}
connections=${CONNECTIONS:-64}
threads=${THREADS:-2}
work=$(mktemp -d)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# A bootstrap directory whose rendered config holds `files` files of `size` bytes each.
make_dir() {
    local dir=$1 files=$2 size=$3
    mkdir -p "$dir"/{machine-pools,machine-configs,controller-config}
    cp crates/server/testdata/bootstrap/kubeconfig "$dir/"
    cp crates/server/testdata/bootstrap/controller-config/machine-config-controller.yaml "$dir/controller-config/"
    printf 'apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata: {name: master}\nspec: {}\nstatus: {configuration: {name: rendered-master-bench}}\n' \
        >"$dir/machine-pools/master.yaml"
    python3 - "$dir/machine-configs/rendered-master-bench.yaml" "$files" "$size" <<'EOF'
import base64, json, random, sys
path, files, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(42)
entries = []
for i in range(files):
    data = bytes(rng.getrandbits(8) for _ in range(size * 3 // 4))
    entries.append({"path": f"/etc/bench/file-{i:04}.conf", "overwrite": True, "mode": 420,
                    "contents": {"source": "data:;base64," + base64.b64encode(data).decode()}})
mc = {"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
      "metadata": {"name": "rendered-master-bench"},
      "spec": {"osImageURL": "quay.io/os@sha256:" + "1" * 64, "kernelArguments": ["nosmt"],
               "config": {"ignition": {"version": "3.5.0"}, "storage": {"files": entries}}}}
with open(path, "w") as f:
    json.dump(mc, f)  # JSON is YAML
EOF
}

# Starts a fresh server on `dir` (so that each run's peak memory is its own), runs wrk over
# `proto` (http or https) and prints one result line with the server's peak memory (VmHWM).
bench() {
    local label=$1 dir=$2 proto=$3
    "$SERVE" "$dir" "$work/certs" 2>"$work/server.log" &
    server_pid=$!
    for _ in $(seq 100); do [ "$(grep -c '^listening' "$work/server.log")" = 2 ] && break; sleep 0.1; done
    local url
    url=$(sed -n "s/^listening on \($proto:.*\)/\1/p" "$work/server.log")
    local accept='Accept: application/vnd.coreos.ignition+json;version=3.3.0, */*;q=0.1'
    local size
    size=$(curl -sk -H "$accept" "$url/config/master" | wc -c)
    local out rps p50 p99 errors
    out=$(wrk -t"$threads" -c"$connections" -d"$duration" --timeout 60s --latency -H "$accept" "$url/config/master")
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    errors=$(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr '\n' ' ' || true)
    printf '%-8s %-5s body=%9d B  %10s req/s  p50=%-9s p99=%-9s peak RSS=%s %s\n' \
        "$label" "$proto" "$size" "$rps" "$p50" "$p99" "$(awk '/VmHWM/ {print $2, $3}' "/proc/$server_pid/status")" "$errors"
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=
}

# 5 files of 920 bytes: a 3.3.0 body of 17.1 KB with the kubeconfig, CA, debug copy of the
# MachineConfig (which repeats the files) and encapsulated MachineConfig the server adds.
make_dir "$work/typical" 5 920
make_dir "$work/large" 200 68000
for proto in http https; do bench typical "$work/typical" "$proto"; done
for proto in http https; do bench large "$work/large" "$proto"; done
