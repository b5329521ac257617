#!/usr/bin/env bash
# Installs everything the build and the test suites need on a fresh Debian machine, and
# nothing when it is all there already (so a warm CI run spends no time here).
# Package lists: tests/setup/apt-packages.txt plus every */PACKAGES and tests/*/PACKAGES.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

wanted() {
    cat "$here/apt-packages.txt" "$root"/*/PACKAGES "$root"/tests/*/PACKAGES 2>/dev/null |
        sed -e 's/#.*//' -e 's/[[:space:]]//g' | grep -v '^$' | sort -u
}

missing=()
while read -r pkg; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        missing+=("$pkg")
done < <(wanted)

if ((${#missing[@]})); then
    echo "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
    echo "deps: all Debian packages present"
fi

# Services some packages start on install would hold ports and files the tests use.
for svc in freeradius kea-dhcp4-server isc-dhcp-server; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
        systemctl stop "$svc" || true
    fi
done

if command -v rustup >/dev/null; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi
