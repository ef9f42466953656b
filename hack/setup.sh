#!/usr/bin/env bash
# Installs what building and testing mco needs on a fresh Debian 12 machine: the real components
# the tests run (OSTree, skopeo, a registry, the Ignition client, etcd, wrk, Prometheus and
# promtool) and protoc (the CRI and containerd gRPC clients are generated at build time). The
# Rust toolchain (rustup) and Go (only to build the Kubernetes binaries and the lab nodes'
# containerd, see hack/kube-binaries.sh) are expected already.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
  build-essential pkg-config ca-certificates git \
  ostree libostree-dev libzstd-dev libssl-dev protobuf-compiler \
  skopeo docker-registry ignition umoci buildah busybox-static gpg gpg-agent wrk e2fsprogs python3-venv curl \
  runc containernetworking-plugins iptables conntrack mmdebstrap prometheus jq zstd
