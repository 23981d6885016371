#!/usr/bin/env bash
# Runs in the image's build stage, after the binaries are built. Works out what the runtime stage
# needs for the given binaries:
#   OUT/runtime-packages.txt  the Debian packages that own every shared library `ldd` resolves
#                             (one per line, sorted), so the runtime stage installs exactly those
#   OUT/extra-libs/           the resolved libraries no Debian package owns (the CUDA toolkit's,
#                             e.g. libnccl.so.2), copied under their sonames, plus EXTRA_LIBS:
#                             libraries the binaries dlopen (libcublasLt.so.13 for the cuda
#                             backend), looked up in EXTRA_LIB_DIRS
# Fails when a library does not resolve or an EXTRA_LIBS name is not found.
# Usage: collect-runtime.sh OUT FILE... (executables or shared objects, e.g. UCX's transport
#        modules, which it dlopens; env: EXTRA_LIBS, EXTRA_LIB_DIRS, space separated)
set -euo pipefail
out="$1"
shift
mkdir -p "$out/extra-libs"
: > "$out/runtime-packages.txt.unsorted"

# dpkg registers a library under /lib or /usr/lib depending on the package (usrmerge), and the
# soname is often a symlink the package ships; try the path as ldd prints it, its target, and the
# other spelling of each.
owner_of() {
  local path="$1" real candidate
  real="$(readlink -f "$path")"
  for candidate in "$path" "$real" "${path#/usr}" "${real#/usr}" "/usr$path" "/usr$real"; do
    if dpkg-query -S "$candidate" >/dev/null 2>&1; then
      dpkg-query -S "$candidate" 2>/dev/null | head -n1 | cut -d: -f1
      return 0
    fi
  done
  return 1
}

# Libraries the binaries dlopen: found by name, copied, and scanned with the binaries.
extra_paths=()
for name in ${EXTRA_LIBS:-}; do
  found=""
  for dir in ${EXTRA_LIB_DIRS:-}; do
    if [ -e "$dir/$name" ]; then found="$dir/$name"; break; fi
  done
  if [ -z "$found" ]; then
    echo "collect-runtime: $name not found in ${EXTRA_LIB_DIRS:-<no dirs>}" >&2
    exit 1
  fi
  echo "collect-runtime: copying dlopen'ed $found"
  cp -L "$found" "$out/extra-libs/$name"
  extra_paths+=("$found")
done

libs="$(ldd "$@" "${extra_paths[@]}" |
  awk '/=> not found/ {print "MISSING:" $1; next} /=> \// {print $3}' | sort -u)"
if grep -q '^MISSING:' <<<"$libs"; then
  echo "collect-runtime: unresolved libraries:" >&2
  grep '^MISSING:' <<<"$libs" >&2
  exit 1
fi
for lib in $libs; do
  if pkg="$(owner_of "$lib")"; then
    echo "$pkg" >> "$out/runtime-packages.txt.unsorted"
  else
    echo "collect-runtime: $lib belongs to no package; copying it"
    cp -L "$lib" "$out/extra-libs/$(basename "$lib")"
  fi
done
sort -u "$out/runtime-packages.txt.unsorted" > "$out/runtime-packages.txt"
rm "$out/runtime-packages.txt.unsorted"
echo "collect-runtime: packages: $(tr '\n' ' ' < "$out/runtime-packages.txt")"
echo "collect-runtime: extra libraries: $(find "$out/extra-libs" -type f -printf '%f ')"
