#!/usr/bin/env bash
# arm-golden-check.sh - do the goldens recorded on this (x86-64) machine pass
# bit-exactly on aarch64?
#
# Cross-compiles a standalone checker for aarch64 (the two oracle widths,
# the safetensors/config/synth/model loaders and goldens/, with the
# project's flags: -O2 -ffp-contract=off, no -ffast-math) and runs
# `dsv4q_golden_check` under qemu-user against goldens/. qemu-user emulates
# the aarch64 ISA, so this checks the code-generation side (another compiler
# backend, another instruction set, FMA instructions available but not
# emitted because of -ffp-contract=off), not a physical ARM CPU.
#
# usage: scripts/arm-golden-check.sh [--install] [--ops CASE,...] [--dir DIR]
#   --install   install the cross toolchain, qemu-user and the arm64 -dev
#               libraries (Debian multiarch; needs root) when missing
# ARM_EXTRA_CFLAGS (environment) is appended to the flags, e.g.
# ARM_EXTRA_CFLAGS=-ffp-contract=fast shows what FMA contraction would do.
# Exit status: the checker's (0 all ok, 1 mismatch, 2 corrupt/missing), 4 if our
# code does not build for aarch64 (a real failure), or
# 3 when the cross toolchain or qemu is missing.
# Run as `sh scripts/arm-golden-check.sh` (dash): re-run under bash (arrays, pipefail).
if [ -z "${BASH_VERSION:-}" ]; then exec bash "$0" "$@"; fi
set -euo pipefail
cd "$(dirname "$0")/.."

INSTALL=0
OPS=""
DIR="goldens"
while [ $# -gt 0 ]; do
  case "$1" in
    --install) INSTALL=1 ;;
    --ops) OPS="$2"; shift ;;
    --dir) DIR="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "arm-golden-check: unknown argument '$1'" >&2; exit 3 ;;
  esac
  shift
done

CC=aarch64-linux-gnu-gcc
SYSROOT=/usr/aarch64-linux-gnu
ARM_LIBS="libjansson-dev:arm64 zlib1g-dev:arm64 libsodium-dev:arm64"

have_libs() {
  for l in libjansson libsodium libz; do
    ls /usr/lib/aarch64-linux-gnu/$l.so >/dev/null 2>&1 || return 1
  done
}

if ! command -v "$CC" >/dev/null || ! command -v qemu-aarch64 >/dev/null || ! have_libs; then
  if [ "$INSTALL" = 1 ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    apt-cache policy gcc-aarch64-linux-gnu qemu-user | grep -E '^[a-z]|Candidate' || true
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq gcc-aarch64-linux-gnu qemu-user
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      $SUDO dpkg --add-architecture arm64
      $SUDO apt-get update -qq
    fi
    $SUDO apt-get install -y -qq $ARM_LIBS
  else
    echo "arm-golden-check: needs $CC, qemu-aarch64 and $ARM_LIBS; run with --install" >&2
    exit 3
  fi
fi

OUT=build/arm64${ARM_EXTRA_CFLAGS:+-extra}
mkdir -p "$OUT"
CFLAGS="-O2 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -ffp-contract=off -Wno-format-truncation -fno-fast-math -fopenmp -I. ${ARM_EXTRA_CFLAGS:-}"
# The width-independent oracle sources: the Makefile's ORACLE_COMMON, read
# from it so the two lists cannot drift apart.
COMMON=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' Makefile | sed -n 's/^ORACLE_COMMON := //p')
[ -n "$COMMON" ] || { echo "arm-golden-check: ORACLE_COMMON not found in the Makefile" >&2; exit 2; }
WIDTH=""
for f in oracle/*.c; do
  case " $COMMON " in *" $f "*) ;; *) WIDTH="$WIDTH $f" ;; esac
done
SRCS="$(echo base/*.c) $COMMON $(echo io/*.c) $(echo goldens/*.c)"

cat > "$OUT/arm_check_main.c" <<'EOF'
/* standalone golden checker (built by scripts/arm-golden-check.sh only) */
#include <stdio.h>
#include "goldens/golden.h"
int main(int argc, char **argv)
{
#if defined(__aarch64__)
    const char *arch = "aarch64";
#elif defined(__x86_64__)
    const char *arch = "x86-64";
#else
    const char *arch = "other";
#endif
    printf("golden checker built for %s\n", arch);
    return dsv4q_golden_check(argc > 1 ? argv[1] : "goldens", argc > 2 && argv[2][0] ? argv[2] : NULL, stdout);
}
EOF

echo "arm-golden-check: compiling with $($CC --version | head -1)"
t0=$(date +%s)
objs=()
build() {   # src obj extra-flags
  $CC $CFLAGS $3 -c "$1" -o "$2" || exit 4
  objs+=("$2")
}
for f in $WIDTH; do
  b=$(basename "$f" .c)
  build "$f" "$OUT/${b}_f32.o" "-DDSV4Q_WIDTH=32"
  build "$f" "$OUT/${b}_f64.o" "-DDSV4Q_WIDTH=64"
done
for f in $SRCS "$OUT/arm_check_main.c"; do
  b=$(echo "$f" | tr '/' '_')
  build "$f" "$OUT/${b%.c}.o" ""
done
$CC "${objs[@]}" -ljansson -lsodium -lz -lm -fopenmp -o "$OUT/golden-check" || exit 4
file "$OUT/golden-check" 2>/dev/null || true
t1=$(date +%s)
echo "arm-golden-check: built in $((t1 - t0)) s; running under $(qemu-aarch64 --version | head -1)"
set +e
OMP_NUM_THREADS=1 QEMU_LD_PREFIX=$SYSROOT qemu-aarch64 "$OUT/golden-check" "$DIR" "$OPS"
rc=$?
set -e
echo "arm-golden-check: exit $rc after $(( $(date +%s) - t1 )) s under emulation"
exit $rc
