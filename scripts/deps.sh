#!/bin/sh
# Install the Debian packages dsv4q builds with, when missing (uses sudo
# when not root). Called by `make deps` and the README's first commands.
set -e
PKGS="gcc make libc6-dev libmpfr-dev libgmp-dev libcmocka-dev zlib1g-dev libsqlite3-dev libsodium-dev libjansson-dev libopenblas-dev pkg-config python3 python3-pip python3-venv"
missing=""
# dpkg-query rather than dpkg -s: with multiarch (e.g. the arm64 libraries
# of scripts/arm-golden-check.sh) dpkg -s NAME is ambiguous and fails.
for p in $PKGS; do
  dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null | grep -qx installed || missing="$missing $p"
done
if [ -z "$missing" ]; then echo "dsv4q: all build dependencies present"; exit 0; fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
echo "dsv4q: installing:$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
