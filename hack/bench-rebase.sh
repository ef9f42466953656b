#!/usr/bin/env bash
# OS rebase of an image with 50,000 files: mco (libostree + ostree-ext) against the ostree CLI
# (`ostree admin deploy` of the same commit) and pull + import against skopeo copy + ostree commit.
# Needs ostree, skopeo and docker-registry (hack/test.sh installs them); runs on /dev/shm.
# `cargo bench` builds with the release profile; the build comes first so that it does not load
# the machine while the benchmark runs, and the load average is printed around the run because
# the numbers depend on it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench -p mco-apply --bench rebase --no-run
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cargo bench -p mco-apply --bench rebase "$@"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
