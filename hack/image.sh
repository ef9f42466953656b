#!/bin/bash
# Builds mco's container image (deploy/image/Containerfile) from an mco binary and pushes it to DEST;
# prints the image's digest. The userland (minimal Debian: libostree and the ostree command, skopeo,
# buildah, ca-certificates, e2fsprogs) comes from mmdebstrap and Debian's package mirror, built once (~20 s) and cached, keyed by
# everything that chooses its content; nothing else is downloaded.
#
# Reproducible: mmdebstrap clamps file times to SOURCE_DATE_EPOCH and buildah fixes the layers' file
# times and the creation time, so the same packages and the same binary give the same digest.
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
mkdir "$work/context" "$work/storage"
ln "$userland" "$work/context/userland.tar" 2>/dev/null || cp "$userland" "$work/context/userland.tar"
objcopy --strip-debug "$binary" "$work/context/mco"

buildah=(buildah --root "$work/storage" --runroot "$work/storage" --storage-driver vfs)
"${buildah[@]}" build --quiet --layers --timestamp "$SOURCE_DATE_EPOCH" --identity-label=false \
    --label "org.opencontainers.image.version=$version" \
    --file "$here/../deploy/image/Containerfile" --tag localhost/mco "$work/context" >&2
"${buildah[@]}" push --quiet --digestfile "$work/digest" localhost/mco "$dest" >&2
cat "$work/digest"
echo
