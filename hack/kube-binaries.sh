#!/bin/bash
# Builds etcd and the Kubernetes components (kube-apiserver for mco's integration tests, plus
# kube-controller-manager, kube-scheduler, kube-proxy and the nodes' kubelet for the lab) from the
# Go module proxy, once, into a cache directory, and prints that directory. No package registry
# ships these binaries.
#
# Versions come from the wrapper modules' go.mod files (hack/kube-binaries/{kubernetes,etcd}); the
# cache directory is named after both, so changing either go.mod builds a new set. A cold build (empty
# Go build cache, modules downloaded) of all six took 4 min 37 s on 2 cores (2.2 GB peak memory);
# afterwards the script only prints the directory.
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

kube_version=$(module_version "$src/kubernetes/go.mod" k8s.io/kubernetes)
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

# build MODULE [go build flags...] -- NAME...: builds MODULE's main packages ./NAME (or MODULE itself
# for a single NAME without such a directory) into $out/NAME, those not there already, in one go build.
# Binaries are written into a temporary directory and moved, so an interrupted build leaves nothing behind.
build() {
    local module=$1 flags=() names=() packages=()
    shift
    while [[ $1 != -- ]]; do flags+=("$1"); shift; done
    shift
    for name in "$@"; do
        [[ -x $out/$name ]] && continue
        names+=("$name")
        if [[ -d $module/$name ]]; then packages+=("./$name"); else packages+=(.); fi
    done
    [[ ${#names[@]} -eq 0 ]] && return
    echo "building ${names[*]} into $out (several minutes on a cold cache)" >&2
    local tmp
    tmp=$(mktemp -d "$out/.build.XXXXXX")
    if [[ ${#packages[@]} -eq 1 ]]; then
        (cd "$module" && go build "${flags[@]}" -o "$tmp/${names[0]}" "${packages[0]}")
    else
        (cd "$module" && go build "${flags[@]}" -o "$tmp/" "${packages[@]}")
    fi
    for name in "${names[@]}"; do mv -f "$tmp/$name" "$out/$name"; done
    rmdir "$tmp"
}

build "$src/etcd" -- etcd
build "$src/kubernetes" -ldflags "-X k8s.io/component-base/version.gitVersion=$kube_version" -- \
    kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl

echo "$out"
