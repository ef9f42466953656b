#!/bin/bash
# Rebuilds bootstrap/ (upstream's bootstrap server directory layout) from bootstrap-input/:
# renders the master pool with `mco render` as the controller that wrote the ControllerConfig
# would, and records the rendered name in the pool's status, as the installer's bootstrap does.
set -euo pipefail
cd "$(dirname "$0")"
mco=${MCO:-mco}
out=bootstrap
rm -rf "$out.tmp" && mkdir -p "$out.tmp"/{machine-pools,machine-configs,controller-config}
rendered=$("$mco" render --pool master --controller-version was-not-built-properly \
    --controller-version-raw v0.0.0-was-not-built-properly bootstrap-input)
name=$(printf '%s\n' "$rendered" | sed -n 's/^  name: \(rendered-master-[0-9a-f]*\)$/\1/p')
[ -n "$name" ] || { echo "no rendered name in mco render output" >&2; exit 1; }
printf '%s\n' "$rendered" > "$out.tmp/machine-configs/$name.yaml"
{ cat bootstrap-input/pool.yaml; printf 'status:\n  configuration:\n    name: %s\n' "$name"; } > "$out.tmp/machine-pools/master.yaml"
cp bootstrap-input/controllerconfig.yaml "$out.tmp/controller-config/machine-config-controller.yaml"
cp bootstrap-input/kubeconfig bootstrap-input/registry-ca.crt "$out.tmp/"
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out: master -> $name"
