#!/bin/bash
# Builds etcd and the Kubernetes components (kube-apiserver for mco's integration tests, plus
# kube-controller-manager, kube-scheduler, kube-proxy and the nodes' kubelet for the lab), and the lab
# nodes' containerd v2.4.2 with its containerd-shim-runc-v2, from the Go module proxy, once, into a
# cache directory, and prints that directory. No package registry ships these binaries (Debian's
# containerd 1.6 cannot pin images).
#
# Versions come from the wrapper modules' go.mod files (hack/kube-binaries/{kubernetes,etcd,containerd});
# the cache directory is named after Kubernetes' and etcd's, so changing either go.mod builds a new set.
# containerd's version is not in the name: after changing its go.mod, delete the directory's containerd
# and containerd-shim-runc-v2. A cold build (empty Go build cache, modules downloaded) of the six
# Kubernetes and etcd binaries took 4 min 37 s on 2 cores (2.2 GB peak memory), containerd's two
# about a minute more (0.8 GB); afterwards the script only prints the directory.
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
# for a single NAME without such a directory; or, for a NAME that is an import path, that package of a
# module MODULE requires, into its last element) into $out/NAME, those not there already, in one go build.
# Binaries are written into a temporary directory and moved, so an interrupted build leaves nothing behind.
build() {
    local module=$1 flags=() names=() packages=()
    shift
    while [[ $1 != -- ]]; do flags+=("$1"); shift; done
    shift
    for name in "$@"; do
        [[ -x $out/${name##*/} ]] && continue
        names+=("${name##*/}")
        if [[ $name == */* ]]; then packages+=("$name")
        elif [[ -d $module/$name ]]; then packages+=("./$name")
        else packages+=(.); fi
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

build "$src/etcd" -ldflags "-s -w" -- etcd
build "$src/kubernetes" -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$kube_version" -- \
    kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
# containerd's release builds stamp the version the same way; btrfs and devmapper snapshotters are left
# out (the lab's nodes use overlayfs; btrfs needs cgo anyway).
containerd_version=$(module_version "$src/containerd/go.mod" github.com/containerd/containerd/v2)
build "$src/containerd" -tags "no_btrfs no_devmapper" \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version" -- \
    github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2

echo "$out"
