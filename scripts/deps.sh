#!/bin/sh
# Install the Debian packages dsv4q builds with, when missing. Runs as root
# (apt-get directly) or as a user with sudo; with neither it prints the exact
# command to run and exits 1. Called by `make deps` and the README's first
# commands. Python test packages come from PyPI: `make pydeps` (build/venv).
set -e
PKGS="gcc make libc6-dev libmpfr-dev libgmp-dev libcmocka-dev zlib1g-dev libsqlite3-dev libsodium-dev libjansson-dev libopenblas-dev libopenmpi-dev openmpi-bin pkg-config python3 python3-pip python3-venv git"
missing=""
# dpkg-query rather than dpkg -s: with multiarch (e.g. the arm64 libraries
# of scripts/arm-golden-check.sh) dpkg -s NAME is ambiguous and fails.
for p in $PKGS; do
  dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed || missing="$missing $p"
done
if [ -z "$missing" ]; then echo "dsv4q: all build dependencies present"; exit 0; fi
if [ "$(id -u)" = 0 ]; then SUDO=""
elif command -v sudo >/dev/null 2>&1; then SUDO=sudo
else
  echo "dsv4q: missing Debian packages:$missing" >&2
  echo "dsv4q: not root and no sudo; as root, run:" >&2
  echo "  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y$missing" >&2
  exit 1
fi
echo "dsv4q: installing:$missing"
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing
