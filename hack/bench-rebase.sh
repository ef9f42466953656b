#!/usr/bin/env bash
# OS rebase of an image with 50,000 files: mco (libostree + ostree-ext) against the ostree CLI
# (`ostree admin deploy` of the same commit) and pull + import against skopeo copy + ostree commit.
# Needs ostree, skopeo and docker-registry (hack/test.sh installs them); runs on /dev/shm.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p mco-daemon --bench rebase "$@"
