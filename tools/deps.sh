#!/usr/bin/env bash
# Installs what the build, the tests and `make run` need on a Debian machine.
# Idempotent and quiet: prints nothing and installs nothing when everything is present.
set -euo pipefail

pkgs=(libczmq-dev libzmq3-dev libmsgpack-dev libmicrohttpd-dev libcurl4-openssl-dev libyaml-dev
      libxxhash-dev libcmocka-dev libcjson-dev pkg-config gcc make clang libclang-rt-dev
      python3-yaml nginx wrk gnuplot-nox)
# Commands the tests and tools call, with the Debian package that provides each.
declare -A cmds=([python3]=python3 [curl]=curl [node]=nodejs [npm]=npm [promtool]=prometheus
                 [prometheus]=prometheus)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
for c in "${!cmds[@]}"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("${cmds[$c]}")
done
if [ ${#missing[@]} -eq 0 ]; then
    exec "$(dirname "$0")/deps-node.sh"
fi

echo "deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
exec "$(dirname "$0")/deps-node.sh"
