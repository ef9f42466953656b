#!/usr/bin/env bash
# The breakdown of a hack/test.sh run, as Markdown: the build's and the tests' wall times, each
# tier's tests and summed test time, and the ten slowest tests.
#
# Tiers, by where a test is: `lab` (the lab binary's scenarios; `lab up`: bringing its labs up),
# `real components` (under a
# `real` module: the API server, registry, OSTree, buildah, root), `pure` (everything else, what
# a plain `cargo test` runs).
#
# The lab's harness is built first and the lab runs while the rest builds: the tests start when
# the lab's build ends.
#
# Usage: hack/test-report.sh REPORT_DIR BUILD_START LAB_BUILT BUILD_END TESTS_END
set -euo pipefail
dir=$1 build_start=$2 lab_built=$3 build_end=$4 tests_end=$5

# One line per test: tier, seconds, result, binary, name. libtest's lines carry the time
# (--report-time); the lab's harness prints each scenario's at the end ("scenario time: NAME Ns").
for log in "$dir"/*.log; do
    binary=$(basename "$log" .log)
    binary=${binary%-*}
    if [[ $binary == lab ]]; then
        sed -nE -e 's/^scenario time: (.*) ([0-9.]+)s$/lab\t\2\tok\tlab\t\1/p' \
            -e 's/^lab up time: (.*) ([0-9.]+)s$/lab up\t\2\tok\tlab\tlab up (\1)/p' "$log"
        continue
    fi
    sed -nE 's/^test (.*) \.\.\. ([A-Za-z]+)( <([0-9.]+)s>)?$/\2\t\4\t\1/p' "$log" | while IFS=$'\t' read -r result seconds name; do
        if [[ $name == real::* || $name == *::real::* ]]; then tier="real components"; else tier=pure; fi
        printf '%s\t%s\t%s\t%s\t%s\n' "$tier" "${seconds:-0}" "$result" "$binary" "$name"
    done
done > "$dir/tests.tsv"

# minutes SECONDS [FROM]: SECONDS (minus FROM) as minutes and seconds.
minutes() { awk -v s="$1" -v from="${2:-0}" 'BEGIN { s -= from; printf "%dm %02ds", s / 60, s % 60 }'; }

echo "| phase | wall time | tests | summed test time |"
echo "|---|---|---|---|"
echo "| build: the lab's harness and mco (\`cargo test --no-run --test lab\`) | $(minutes "$lab_built" "$build_start") | | |"
echo "| build: every other test, beside the lab | $(minutes "$build_end" "$lab_built") | | |"
for tier in pure "real components" "lab up" lab; do
    awk -F'\t' -v tier="$tier" '$1 == tier { n++; sum += $2 } END { printf "%d\t%d\n", n, sum }' "$dir/tests.tsv" |
        { IFS=$'\t' read -r count sum; echo "| $tier | | $count | $(minutes "$sum") |"; }
done
total=$(wc -l < "$dir/tests.tsv")
echo "| all tests (tiers side by side, from the lab's build on) | $(minutes "$tests_end" "$lab_built") | $total | |"
echo "| **total** (build and tests) | $(minutes "$tests_end" "$build_start") | | |"
echo
echo "The ten slowest tests:"
echo
echo "| test | binary | tier | time |"
echo "|---|---|---|---|"
# (awk, not head: a reader that stops early kills sort with SIGPIPE, and pipefail fails the run.)
sort -t$'\t' -k2,2 -g -r "$dir/tests.tsv" |
    awk -F'\t' 'NR <= 10 { printf "| `%s` | %s | %s | %.1f s |\n", $5, $4, $1, $2 }'
