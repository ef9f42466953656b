#!/usr/bin/env bash
# The tests, exactly as CI runs them: system packages, the real kube-apiserver + etcd (built once
# from the Go module proxy into a cache), then every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
bash hack/setup.sh
bash hack/kube-binaries.sh
export MCO_MOTO_SERVER="$(bash hack/moto.sh)"  # local EC2 endpoint for the AMI owner lookup tests
cargo test --workspace --locked
