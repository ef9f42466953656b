#!/bin/bash
# Builds kube-apiserver and etcd for mco's integration tests (crates/testenv) from the Go module proxy,
# once, into a cache directory, and prints that directory. No registry ships kube-apiserver binaries.
#
# Versions come from the wrapper modules' go.mod files (hack/kube-binaries/{apiserver,etcd}); the cache
# directory is named after both, so changing either go.mod builds a new set. A cold build takes about
# 5 minutes and 2.6 GB of memory on 2 cores; afterwards the script only prints the directory.
#
# Usage: hack/kube-binaries.sh            (cache dir: ${XDG_CACHE_HOME:-$HOME/.cache}/mco/kube/<version>)
#        MCO_KUBE_BIN_DIR=DIR hack/kube-binaries.sh   (build into DIR instead)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src="$here/kube-binaries"

# The version a wrapper go.mod requires for module $2.
module_version() {
    awk -v m="$2" '{ for (i = 1; i < NF; i++) if ($i == m && $(i + 1) ~ /^v/) { print $(i + 1); exit } }' "$1"
}

kube_version=$(module_version "$src/apiserver/go.mod" k8s.io/kubernetes)
etcd_version=$(module_version "$src/etcd/go.mod" go.etcd.io/etcd/server/v3)
if [[ -z $kube_version || -z $etcd_version ]]; then
    echo "error: cannot read the k8s.io/kubernetes or etcd version from $src/*/go.mod" >&2
    exit 1
fi

out=${MCO_KUBE_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mco/kube/$kube_version-etcd-$etcd_version}
mkdir -p "$out"

# Go only: a newer toolchain must not be fetched behind our back, the go.sum files are authoritative,
# and Go 1.27's encoding/json v2 default breaks kube-apiserver 1.36's OpenAPI endpoint.
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false -trimpath" GOEXPERIMENT=nojsonv2 CGO_ENABLED=0

# build NAME DIR [go build flags...]: builds DIR's main package into $out/NAME unless it is there already.
# The binary is written under a temporary name and renamed, so an interrupted build leaves nothing behind.
build() {
    local name=$1 dir=$2
    shift 2
    if [[ -x $out/$name ]]; then
        return
    fi
    echo "building $name into $out (several minutes on a cold cache)" >&2
    (cd "$dir" && go build "$@" -o "$out/.$name.tmp" .)
    mv -f "$out/.$name.tmp" "$out/$name"
}

build etcd "$src/etcd"
build kube-apiserver "$src/apiserver" -ldflags "-X k8s.io/component-base/version.gitVersion=$kube_version"

echo "$out"
