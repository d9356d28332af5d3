#!/usr/bin/env bash
# Install the library into a temporary PREFIX (make install), build
# tests/install/consumer.c against the installed copy with
# `pkg-config --cflags --libs dsv4q` only (no -I. into the tree), run it.
# Prints cmocka-style summary lines for tests/run_all.sh.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/dsv4q-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "install_check: $*"; echo "[  FAILED  ] 1 test(s)."; exit 1; }
command -v pkg-config >/dev/null || fail "pkg-config not found (scripts/deps.sh installs it)"
make -s install PREFIX="$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install failed"; }
for f in lib/libdsv4q.so lib/libdsv4q.so.1 lib/libdsv4q.a lib/pkgconfig/dsv4q.pc include/dsv4q/abi/dsv4q_backend.h \
         include/dsv4q/cli/dsv4q_capi.h include/dsv4q/oracle/ops.h include/dsv4q/harness/measure/metrics.h \
         include/dsv4q/oracle/ggml_decode.h include/dsv4q/oracle/ggml_decode.inc include/dsv4q/io/gguf.h; do
  [ -e "$tmp/prefix/$f" ] || fail "make install did not install $f"
done
flags=$(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs dsv4q) || fail "pkg-config --cflags --libs dsv4q failed"
echo "install_check: cc consumer.c $flags"
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -Wall -Wextra -Werror -o "$tmp/consumer" tests/install/consumer.c $flags -lm >"$tmp/cc.log" 2>&1 ||
  { cat "$tmp/cc.log"; fail "building against the installed library failed"; }
# the program must load the INSTALLED shared library, not the tree's, and
# find it with no LD_LIBRARY_PATH (dsv4q.pc's Libs carry an rpath to libdir)
env -u LD_LIBRARY_PATH ldd "$tmp/consumer" | grep -q "$tmp/prefix/lib/libdsv4q.so.1" ||
  fail "consumer does not resolve libdsv4q.so.1 from the install prefix without LD_LIBRARY_PATH (rpath in dsv4q.pc?)"
env -u LD_LIBRARY_PATH "$tmp/consumer"
