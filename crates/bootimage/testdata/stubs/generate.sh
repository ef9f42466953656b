#!/bin/bash
# Regenerates the certificates of the stub tests (valid for 100 years) and the stubs that embed
# the CA. Needs openssl and python3.
set -euo pipefail
cd "$(dirname "$0")"
days=36500
host=api-int.ci.example.com
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days $days -subj "/OU=openshift/CN=root-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.crt -days $days -subj "/CN=other-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
sign() { # name ca subject [extfile lines]
  local name=$1 ca=$2 subject=$3 ext=$4
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subject" 2>/dev/null
  printf '%b' "$ext" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -out "$name.crt" -days $days \
    -extfile "$name.ext" 2>/dev/null
  rm -f "$name.csr" "$name.ext" "$name.key"
}
# Current installers: CN system:machine-config-server, the host in the SAN.
sign server ca "/CN=system:machine-config-server" \
  "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:$host\n"
# Old installers: the host only in the CN, no SAN (seed 001).
sign server-no-san ca "/CN=$host" "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
# Another host in the SAN.
sign server-other-host ca "/CN=system:machine-config-server" \
  "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:api-int.elsewhere.example.com\n"
# The right host, but signed by a CA the stub does not carry.
sign server-other-ca other-ca "/CN=system:machine-config-server" \
  "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:$host\n"
rm -f ca.key other-ca.key ./*.srl
python3 - "$host" <<'PY'
import base64, json, sys
host = sys.argv[1]
ca = "data:text/plain;charset=utf-8;base64," + base64.b64encode(open("ca.crt", "rb").read()).decode()
other = "data:text/plain;charset=utf-8;base64," + base64.b64encode(open("other-ca.crt", "rb").read()).decode()
src = f"https://{host}:22623/config/worker"
# An installer spec 2.2 stub with customisations an admin added.
v22 = {
    "ignition": {
        "config": {"append": [{"source": src, "verification": {}}]},
        "security": {"tls": {"certificateAuthorities": [{"source": ca, "verification": {}}]}},
        "timeouts": {"httpResponseHeaders": 30},
        "version": "2.2.0",
    },
    "networkd": {},
    "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx admin@example.com"]}]},
    "storage": {"files": [{"filesystem": "root", "path": "/etc/custom-marker", "mode": 420,
                           "contents": {"source": "data:,installed-by-admin", "verification": {}}}]},
    "systemd": {"units": [{"name": "custom-early.service", "enabled": True,
                           "contents": "[Unit]\nDescription=admin customisation\n[Service]\nType=oneshot\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]},
}
json.dump(v22, open("stub-2.2.ign", "w"), indent=1)
v31 = {"ignition": {"config": {"merge": [{"source": src, "verification": {}}], "replace": {"verification": {}}},
                    "proxy": {}, "security": {"tls": {"certificateAuthorities": [{"source": ca, "verification": {}}]}},
                    "timeouts": {}, "version": "3.1.0"}, "passwd": {}, "storage": {}, "systemd": {}}
json.dump(v31, open("stub-3.1.ign", "w"), separators=(",", ":"))
two = json.loads(json.dumps(v22))
two["ignition"]["security"]["tls"]["certificateAuthorities"].append({"source": other, "verification": {}})
json.dump(two, open("stub-2.2-two-cas.ign", "w"), indent=1)
secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
          "metadata": {"name": "worker-user-data", "namespace": "openshift-machine-api"},
          "data": {"userData": base64.b64encode(json.dumps(v22).encode()).decode(),
                   "disableTemplating": base64.b64encode(b"true\n").decode()}}
json.dump(secret, open("worker-user-data-secret.json", "w"), indent=1)
PY
