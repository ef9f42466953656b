#!/bin/bash
# Builds mco's container image from an mco binary and pushes it to DEST; prints the image's digest.
# The image is one for every component (`mco controller`, `mco server`, `mco daemon`, ...), two
# layers, so that a new binary ships as one small layer:
#   1. the userland: a minimal Debian with only what the binary needs at run time (libostree and
#      the ostree command, skopeo for the OS image pulls, buildah for on-cluster OS image builds,
#      ca-certificates, chattr), from mmdebstrap and Debian's package mirror, built once (~20 s)
#      and cached, keyed by everything that chooses its content; nothing else is downloaded;
#   2. the binary, its debug info stripped, as /usr/bin/mco, the entrypoint.
# Nothing in the image is run to build it, so it is written as an OCI layout directly (as ko and
# apko write theirs), the layers compressed with zstd, and pushed with skopeo: a few seconds,
# where a container build's copies of the userland took 11-30 s.
#
# Reproducible: mmdebstrap clamps file times to SOURCE_DATE_EPOCH, the binary's layer has fixed
# owners and times and the configuration a fixed creation time, so the same packages and the same
# binary give the same digest.
#
# Usage: [MCO_IMAGE_VERSION=V] hack/image.sh BINARY DEST
#        hack/image.sh --userland-only   (only build the cached userland, and print its path: the
#           lab does this before its network namespace, which cannot reach Debian's mirror)
#        hack/image.sh --node-userland   (the same for the lab nodes' OS: mco's userland, which
#           on-cluster builds `FROM` the OS image run their steps with, and what a node that boots
#           needs: systemd as PID 1, D-Bus, iproute2, runc and the CNI plugins; prints its path)
#   BINARY  the mco binary: target/release/mco for a release; the lab uses target/debug/mco. Its debug
#           info is stripped (a copy; the binary given is untouched).
#   DEST    a containers-transports destination: oci:DIR:mco, docker://HOST/mco:TAG, ...
#   MCO_IMAGE_VERSION  the image's org.opencontainers.image.version label [default: the binary's
#           version, from `BINARY --version`]
set -euo pipefail

userland_only=false
node=false
if [[ $# -eq 1 && $1 == --userland-only ]]; then
    userland_only=true
elif [[ $# -eq 1 && $1 == --node-userland ]]; then
    userland_only=true node=true
elif [[ $# -ne 2 ]]; then
    echo "usage: $0 BINARY DEST | $0 --userland-only | $0 --node-userland" >&2
    exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export SOURCE_DATE_EPOCH=1767225600 # 2026-01-01T00:00:00Z

suite=bookworm
# ostree: ostree-ext commits an image's non-OSTree layers (a layered OS image's) with `ostree commit`.
# buildah: `mco image build-machine-os`, the on-cluster build pod's command (rootful, `--isolation
# chroot`, vfs storage: no OCI runtime, no fuse-overlayfs, so its Recommends, which the essential
# variant leaves out, are not needed). It adds uidmap, libsubid4 and libseccomp2; ~21 MB.
packages=libostree-1-1,ostree,skopeo,ca-certificates,e2fsprogs,buildah
prefix=
if $node; then
    prefix=node-
    # runc and the CNI plugins for the node's containerd; bubblewrap, which libostree runs in
    # the deployment when the daemon deploys on a booted machine (its first boot).
    packages+=,systemd,dbus,iproute2,runc,containernetworking-plugins,bubblewrap
    # mmdebstrap copies the build host's name; a node has its own.
    variant_args=(--customize-hook='rm -f "$1/etc/hostname"')
else
    # skopeo's and buildah's containers-common depends on a network stack that an image pull or a
    # chroot-isolated build never runs
    variant_args=(--dpkgopt='path-exclude=/usr/lib/cni/*')
fi
mmdebstrap_args=(
    --variant=essential --format=tar --include="$packages"
    # merged /usr without the usrmerge package (which drags in perl)
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    "${variant_args[@]}"
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*'
    "$suite"
)
mirrors=("deb http://deb.debian.org/debian $suite main" "deb http://deb.debian.org/debian-security $suite-security main")

cache=${XDG_CACHE_HOME:-$HOME/.cache}/mco/image
key=$(printf '%s\n' "${mmdebstrap_args[@]}" "${mirrors[@]}" "$SOURCE_DATE_EPOCH" | sha256sum | cut -c1-16)
userland=$cache/${prefix}userland-$key.tar
mkdir -p "$cache"
if [[ ! -f $userland ]]; then
    echo "building the image's userland into $userland (about 20 s)" >&2
    partial=$userland.partial.$$
    if ! mmdebstrap "${mmdebstrap_args[@]}" "$partial" "${mirrors[@]}" >"$partial.log" 2>&1; then
        cat "$partial.log" >&2
        rm -f "$partial" "$partial.log"
        exit 1
    fi
    mv -f "$partial.log" "$userland.log"
    mv -f "$partial" "$userland"
fi
if $userland_only; then
    echo "$userland"
    exit 0
fi
binary=$1 dest=$2
version=${MCO_IMAGE_VERSION:-$("$binary" --version | cut -d' ' -f2)}

work=$(mktemp -d "${TMPDIR:-/var/tmp}/mco-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
oci=$work/oci
mkdir -p "$oci/blobs/sha256" "$work/root/usr/bin"
echo '{"imageLayoutVersion":"1.0.0"}' >"$oci/oci-layout"

# blob FILE MEDIA_TYPE: moves FILE into the layout's blobs; prints its descriptor.
blob() {
    local digest
    digest=$(sha256sum "$1" | cut -d' ' -f1)
    jq -cn --arg type "$2" --arg digest "sha256:$digest" --argjson size "$(stat -c %s "$1")" \
        '{mediaType: $type, digest: $digest, size: $size}'
    mv "$1" "$oci/blobs/sha256/$digest"
}
# layer TAR: TAR compressed as a layer blob; prints its descriptor and its diff ID (the
# uncompressed tar's digest), tab-separated.
layer() {
    local diff_id
    diff_id=sha256:$(sha256sum "$1" | cut -d' ' -f1)
    zstd -3 -q -c "$1" >"$work/layer"
    printf '%s\t%s\n' "$(blob "$work/layer" application/vnd.oci.image.layer.v1.tar+zstd)" "$diff_id"
}

objcopy --strip-debug "$binary" "$work/root/usr/bin/mco"
chmod 0755 "$work/root/usr/bin/mco"
tar --create --file "$work/binary.tar" --directory "$work/root" --sort=name --numeric-owner \
    --owner=0 --group=0 --mode=go-w --mtime="@$SOURCE_DATE_EPOCH" usr
IFS=$'\t' read -r userland_layer userland_diff < <(layer "$userland")
IFS=$'\t' read -r binary_layer binary_diff < <(layer "$work/binary.tar")

jq -cn --arg created "$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)" \
    --arg architecture "$(dpkg --print-architecture)" --arg version "$version" \
    --arg userland "$userland_diff" --arg binary "$binary_diff" '{
    created: $created, architecture: $architecture, os: "linux",
    config: {
        Entrypoint: ["/usr/bin/mco"],
        Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        Labels: {
            "org.opencontainers.image.title": "mco",
            "org.opencontainers.image.description": "Machine config for image-based Linux nodes on Kubernetes",
            "org.opencontainers.image.version": $version
        }
    },
    rootfs: {type: "layers", diff_ids: [$userland, $binary]},
    history: [
        {created: $created, created_by: "hack/image.sh: the userland (mmdebstrap)"},
        {created: $created, created_by: "hack/image.sh: /usr/bin/mco"}
    ]
}' >"$work/config"
config=$(blob "$work/config" application/vnd.oci.image.config.v1+json)
jq -cn --argjson config "$config" --argjson userland "$userland_layer" --argjson binary "$binary_layer" \
    '{schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json", config: $config,
      layers: [$userland, $binary]}' >"$work/manifest"
manifest=$(blob "$work/manifest" application/vnd.oci.image.manifest.v1+json)
jq -cn --argjson manifest "$manifest" \
    '{schemaVersion: 2, manifests: [$manifest + {annotations: {"org.opencontainers.image.ref.name": "mco"}}]}' \
    >"$oci/index.json"
# skopeo 1.9 (Debian 12) ignores CONTAINERS_REGISTRIES_CONF (how the lab marks its plain-HTTP
# registry insecure) but for its hidden --registries-conf.
skopeo ${CONTAINERS_REGISTRIES_CONF:+--registries-conf "$CONTAINERS_REGISTRIES_CONF"} \
    copy --quiet --digestfile "$work/digest" "oci:$oci:mco" "$dest" >&2
cat "$work/digest"
echo
