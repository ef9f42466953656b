#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for SECONDS each (default 30), from its seeds in fuzz/seeds/
# (kept in the repository) and what earlier runs found (fuzz/corpus/, not kept). A crash stops
# the run with libFuzzer's report and the input in fuzz/artifacts/: make it a regular test.
# Usage: hack/fuzz.sh [SECONDS] [TARGET...]
# MCO_FUZZ_BUILD=dev builds the targets unoptimized (the test suite's brief runs: see below).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || mapfile -t targets < <(cd fuzz && cargo fuzz list)
for target in "${targets[@]}"; do
    echo "== fuzz $target (${seconds} s)"
    mkdir -p "fuzz/corpus/$target"
    # libFuzzer's instrumentation needs unstable rustc flags: RUSTC_BOOTSTRAP for this build only.
    # cargo fuzz builds with one code-generation unit unless told: 16 let both cores compile
    # mco-ignition (the build: 6 min 47 s -> 4 min 16 s on a quiet machine). Unoptimized, the
    # build takes 1 min 14 s: each input runs slower, with debug assertions and overflow checks.
    if [[ ${MCO_FUZZ_BUILD:-release} == dev ]]; then build=(--dev); else build=(--release --codegen-units 16); fi
    (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run "${build[@]}" "$target" "corpus/$target" "seeds/$target" \
        -- -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536)
done
