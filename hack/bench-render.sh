#!/usr/bin/env bash
# Whole-process benchmark of `mco render`: the render benchmark's pool (200 MachineConfigs, 1,000
# files, 5 MB of content, spec 2.2/3.x; crates/render/benches/render.rs) written as YAML manifests,
# rendered by the release binary RUNS times (default 41). Prints the median, min and max wall time
# and peak RSS. The render ends, as the original's does, with the size refusal after all the work,
# so the command exits 1; the error line is checked so that nothing else goes unnoticed.
#
# Usage: hack/bench-render.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-41}
cargo build --release --locked -p mco
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cargo bench -p mco-render --bench render -- --write-inputs "$dir/inputs"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$runs"); do
    if /usr/bin/time -f '%e %M' -o "$dir/time" target/release/mco render --pool worker "$dir/inputs" >/dev/null 2>"$dir/err"; then
        echo "error: the render was expected to end with the size refusal" >&2; exit 1
    fi
    grep -q "is too large" "$dir/err" || { echo "error: unexpected failure:" >&2; cat "$dir/err" >&2; exit 1; }
    tail -n 1 "$dir/time" >> "$dir/times"  # time(1) first notes the exit status 1
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
sort -n "$dir/times" | awk -v n="$runs" '
    { t[NR] = $1 * 1000; if ($2 > rss) rss = $2 }
    END { printf "mco render (whole process, %d runs): median %.0f ms, min %.0f ms, max %.0f ms, peak RSS %.1f MB\n",
          n, t[int((n + 1) / 2)], t[1], t[n], rss / 1024 }'
