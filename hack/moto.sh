#!/usr/bin/env bash
# Installs moto's server (a local EC2-compatible endpoint from PyPI) into a venv under
# ~/.cache/mco/moto, once, and prints the path of its `moto_server` binary. The EC2 AMI-owner
# lookup of crates/bootimage-controller is tested against it (MCO_MOTO_SERVER overrides the path).
set -euo pipefail
MOTO_VERSION="5.2.5"
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/mco/moto"
BIN="$VENV/bin/moto_server"
if [ ! -x "$BIN" ] || ! "$VENV/bin/python" -c "import moto, sys; sys.exit(moto.__version__ != '$MOTO_VERSION')" 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "moto[server,ec2]==$MOTO_VERSION" >&2
fi
echo "$BIN"
