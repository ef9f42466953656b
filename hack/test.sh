#!/usr/bin/env bash
# Every test of every tier, as CI runs them: the system packages, the real kube-apiserver + etcd
# and the lab's components (built once from the Go module proxy into a cache), the build (timed,
# `cargo test --no-run --timings`), then every test binary with each test's wall time, the lab's
# scenarios beside the rest, and every fuzz target for a few seconds (MCO_FUZZ_SECONDS, 10).
# Nothing may be skipped: an ignored test fails the run.
#
# The breakdown (build, each tier, the ten slowest tests) is printed at the end and written to
# target/test-report/report.md; each binary's output is in target/test-report/<binary>.log.
# `cargo test` alone runs only the pure tier (no root, no kube binaries, no network).
#
# Usage: hack/test.sh [--no-setup]    (--no-setup: the packages and binaries are there already)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} != --no-setup ]]; then
    bash hack/setup.sh
    bash hack/kube-binaries.sh >/dev/null
fi
export MCO_MOTO_SERVER="${MCO_MOTO_SERVER:-$(bash hack/moto.sh)}" # local EC2 endpoint for the AMI owner lookups
# A whole build, not an edit's rebuild: incremental compilation's bookkeeping only costs here
# (the lab's harness built in 3 min 21 s instead of 3 min 41 s).
export CARGO_INCREMENTAL=0

report=target/test-report
rm -rf "$report"
mkdir -p "$report"

# Seconds since the epoch, with milliseconds.
now() { date +%s.%N | cut -c1-14; }

# build NAME [CARGO ARGS...]: `cargo test --no-run` of every test with all features (timed:
# target/cargo-timings/), its test executables appended to $report/binaries.tsv (name, path,
# package directory). $niceness: see below.
build() {
    local name=$1
    shift
    nice -n "${niceness:-0}" cargo test --workspace --locked --all-features --no-run --timings --message-format=json-render-diagnostics "$@" \
        > "$report/artifacts-$name.json"
    jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
           | [.target.name, .executable, (.manifest_path | rtrimstr("/Cargo.toml"))] | @tsv' \
        "$report/artifacts-$name.json" | sort -u >> "$report/binaries.tsv"
}

# run LOG EXECUTABLE DIR [ARGS...]: the binary as `cargo test` runs it (from its package's
# directory), into $report/LOG.log.
run() {
    local log="$report/$1.log" executable=$2 dir=$3
    shift 3
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" RUSTC_BOOTSTRAP=1 "$executable" "$@") > "$log" 2>&1
}
# libtest's own report of each test's time (unstable: RUSTC_BOOTSTRAP for the run only; the lab's
# harness reports its scenarios' times itself).
timed=(-Z unstable-options --report-time)

failed=()
# The lab is the longest tier: its harness and mco are built first (the same features as the
# whole build, so nothing of it is built twice), and its labs come up and run their scenarios
# while the rest of the tests compile and run.
echo "== build: the lab's harness and mco (cargo test --no-run --test lab)"
build_start=$(now)
build lab --test lab
lab_built=$(now)
IFS=$'\t' read -r _ lab_executable lab_dir < <(awk -F'\t' '$1 == "lab"' "$report/binaries.tsv") ||
    { echo "error: no lab test binary was built" >&2; exit 1; }
echo "== lab scenarios (in the background: $report/lab.log)"
run lab "$lab_executable" "$lab_dir" & lab_pid=$!
# What only burns CPU beside the lab (the rest of the build, the fuzz targets' instrumented build
# and runs, the doc tests) yields to it: the lab is the critical path, mostly waiting on its
# nodes, and its in-cluster build and reboots stalled behind the fuzz build (a scenario of 170 s
# took 420 s).
niceness=19
echo "== build: every other test, beside the lab"
if ! build rest; then
    # The lab's run takes its labs down when it ends; stopping it halfway would leave one running.
    echo "error: the build failed; waiting for the lab's scenarios to end" >&2
    wait
    exit 1
fi
build_end=$(now)
# Every fuzz target briefly (hack/fuzz.sh runs them longer), beside the other tiers, built
# unoptimized: the instrumented release build took 12 min beside the lab and ended after it.
echo "== fuzz targets, ${MCO_FUZZ_SECONDS:=10} s each, in the background ($report/fuzz.log)"
MCO_FUZZ_BUILD=dev nice -n "$niceness" bash hack/fuzz.sh "$MCO_FUZZ_SECONDS" > "$report/fuzz.log" 2>&1 & fuzz_pid=$!
while IFS=$'\t' read -r name executable dir; do
    [[ $name == lab ]] && continue
    echo "== $name ($(basename "$executable"))"
    run "$name-$(basename "$executable")" "$executable" "$dir" "${timed[@]}" || failed+=("$name $(basename "$executable")")
done < "$report/binaries.tsv"
echo "== doc tests"
nice -n "$niceness" cargo test --workspace --locked --all-features --doc > "$report/doc.log" 2>&1 || failed+=("doc tests")
wait "$fuzz_pid" || failed+=("fuzz (the crash and its input: $report/fuzz.log)")
wait "$lab_pid" || failed+=("lab")
tests_end=$(now)

bash hack/test-report.sh "$report" "$build_start" "$lab_built" "$build_end" "$tests_end" | tee "$report/report.md"

for log in "$report"/*.log; do
    # (Not the "test … FAILED" line: a lab scenario's own output may land between its name and
    # the verdict.)
    if grep -q '^failures:$' "$log"; then
        echo "--- failures in $log:"
        sed -n '/^failures:$/,$p' "$log"
    fi
done
if grep -h '^test .* \.\.\. ignored' "$report"/*.log; then
    echo "error: the tests above were skipped; hack/test.sh runs every test" >&2
    exit 1
fi
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "error: failed: ${failed[*]}" >&2
    exit 1
fi
