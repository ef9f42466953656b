#!/usr/bin/env bash
# Installs what building and testing mco needs on a fresh Debian 12 machine.
# The Rust toolchain (rustup) is expected on the machine already.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
  build-essential pkg-config ca-certificates git
