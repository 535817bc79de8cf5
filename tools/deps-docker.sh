#!/usr/bin/env bash
# deps-docker.sh — what `make image`, `make compose-up` and integration/test_compose.py need
# from Docker, on a Debian machine with or without a Docker engine:
#
#   1. installs Debian's docker.io, docker-compose (1.29) and mmdebstrap when missing;
#   2. makes a Docker engine answer: $DOCKER_HOST or /var/run/docker.sock when one answers there,
#      else a private dockerd of this script's own (started when its socket does not answer);
#   3. provides the base images debian:bookworm and debian:bookworm-slim when they are not
#      there: pulled where a registry answers, else built with mmdebstrap from this machine's
#      apt sources and `docker import`ed under the same tags;
#   4. prints one line for the caller, `export DOCKER_HOST=unix:///...`:
#        eval "$(tools/deps-docker.sh)" && docker-compose -f compose/docker-compose.yaml ps
#
#   tools/deps-docker.sh --stop   stops the private dockerd (of INFERPLANE_DOCKER_DIR) if this
#                                 script started one; never another engine
#
# Idempotent and quiet: with everything present it prints only that line. Every wait is
# bounded. Exit status 0 ok; 1 a step failed (its reason on stderr); 3 no Docker engine can
# start here (integration/test_compose.py skips on 3, naming the reason).
#
# The private dockerd (no systemd needed) runs with its own --data-root, --exec-root and socket
# under INFERPLANE_DOCKER_DIR, --iptables=false (it leaves the host's firewall alone) and the
# default bridge off (--bridge=none): containers run on user-defined networks (compose creates
# one per project, with name resolution between containers); `docker build --network host`
# reaches the apt mirror. Port publishing works through docker-proxy on 127.0.0.1.
#
# Environment:
#   INFERPLANE_DOCKER_DIR            the private dockerd's folder (default /tmp/inferplane-docker)
#   INFERPLANE_DOCKER_CACHE          where the base root file systems are kept for 7 days, so a
#                                    new dockerd imports them again in seconds
#                                    (default /var/tmp/inferplane-docker-cache; "off": none)
#   INFERPLANE_DOCKER_START_TIMEOUT  seconds to wait for dockerd (default 60)
#   INFERPLANE_DOCKER_NO_PULL=1      never try a registry for the base images
#   INFERPLANE_DOCKER_APT_SOURCES    the apt sources file for mmdebstrap (default: this machine's
#                                    /etc/apt/sources.list.d/debian.sources or sources.list)
set -euo pipefail

DIR=${INFERPLANE_DOCKER_DIR:-/tmp/inferplane-docker}
CACHE=${INFERPLANE_DOCKER_CACHE:-/var/tmp/inferplane-docker-cache}
START_TIMEOUT=${INFERPLANE_DOCKER_START_TIMEOUT:-60}
SUITE=bookworm
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
LOG="$DIR/dockerd.log"

say() { printf 'deps-docker: %s\n' "$*" >&2; }
die() { say "$1"; exit "${2:-1}"; }

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# ---- --stop -------------------------------------------------------------------------------
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# wait_gone PID TENTHS: 0 when PID is gone within TENTHS tenths of a second.
wait_gone() {
    local i=0
    while alive "$1"; do
        [ "$i" -lt "$2" ] || return 1
        sleep 0.1
        i=$((i + 1))
    done
}

stop_private() {
    local pid="" cpid=""
    [ -f "$PIDFILE" ] && pid=$(cat "$PIDFILE" 2>/dev/null || true)
    # dockerd starts its own containerd; its pid file is under the exec root.
    [ -f "$DIR/exec/containerd/containerd.pid" ] &&
        cpid=$(cat "$DIR/exec/containerd/containerd.pid" 2>/dev/null || true)
    if alive "$pid"; then
        $sudo kill -TERM "$pid" 2>/dev/null || true
        if ! wait_gone "$pid" 300; then
            say "dockerd (pid $pid) did not stop within 30 s of SIGTERM; sending SIGKILL"
            $sudo kill -KILL "$pid" 2>/dev/null || true
            wait_gone "$pid" 50 || true
        fi
    fi
    if alive "$cpid" && [[ "$(tr '\0' ' ' <"/proc/$cpid/cmdline" 2>/dev/null)" == *"$DIR/exec/"* ]]; then
        $sudo kill -TERM "$cpid" 2>/dev/null || true
        wait_gone "$cpid" 50 || { $sudo kill -KILL "$cpid" 2>/dev/null || true; }
    fi
    # What a killed dockerd can leave mounted (network namespaces, overlays) under its folder.
    if command -v findmnt >/dev/null; then
        local m
        for m in $(findmnt -rn -o TARGET | grep -F "$DIR/" | sort -r || true); do
            $sudo umount -l "$m" 2>/dev/null || true
        done
    fi
    rm -f "$PIDFILE"
}

# Each private dockerd takes its own 172.N.0.0/16 for its networks, so that two of them (two
# test runs at once) never make bridges with the same subnet. The claims are lines
# "N DIR SINCE" in one file, under a lock; a claim is free again when its dockerd is gone (and
# it is older than the start timeout: the pid file comes a moment after the claim).
POOLS=${TMPDIR:-/tmp}/inferplane-docker-pools
claim_pool() {
    (
        flock -w 30 9 || exit 1
        touch "$POOLS.list"
        local n d t keep="" used now
        now=$(date +%s)
        while read -r n d t; do
            if [ -z "${t:-}" ] || [ "$d" = "$DIR" ]; then continue; fi
            if alive "$(cat "$d/dockerd.pid" 2>/dev/null || true)" ||
                [ $((now - t)) -lt $((START_TIMEOUT + 10)) ]; then
                keep+="$n $d $t"$'\n'
            fi
        done <"$POOLS.list"
        used=$(ip -4 route 2>/dev/null | grep -oE '^172\.[0-9]+' | cut -d. -f2 || true)
        for ((n = 18; n <= 31; n++)); do
            grep -qE "^$n " <<<"$keep" && continue
            grep -qxF "$n" <<<"$used" && continue
            printf '%s%s %s %s\n' "$keep" "$n" "$DIR" "$now" >"$POOLS.list"
            echo "$n"
            exit 0
        done
        exit 1
    ) 9>>"$POOLS.lock"
}

if [ "${1:-}" = --stop ]; then
    stop_private
    exit 0
elif [ $# -gt 0 ]; then
    die "unknown argument '$1' (usage: tools/deps-docker.sh [--stop])" 2
fi

# ---- 1. packages ----------------------------------------------------------------------------
declare -A cmds=([dockerd]=docker.io [docker-compose]=docker-compose [mmdebstrap]=mmdebstrap)
missing=()
for c in "${!cmds[@]}"; do command -v "$c" >/dev/null 2>&1 || missing+=("${cmds[$c]}"); done
# The docker client may come from elsewhere (/usr/local/bin/docker); docker.io brings one too.
command -v docker >/dev/null 2>&1 || missing+=(docker.io)
if [ ${#missing[@]} -gt 0 ]; then
    mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Installing docker.io must not start a system dockerd: policy-rc.d says no (as in
    # Debian's container images) unless the machine already has one.
    made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
        $sudo chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    rc=0
    { $sudo apt-get update -qq >/dev/null &&
        $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } || rc=$?
    [ "$made_policy" -eq 0 ] || $sudo rm -f /usr/sbin/policy-rc.d
    [ "$rc" -eq 0 ] || die "apt-get install ${missing[*]} failed (exit $rc)"
fi

# ---- 2. an engine -----------------------------------------------------------------------------
answers() { DOCKER_HOST=$1 timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

HOST=""
if [ -n "${DOCKER_HOST:-}" ] && answers "$DOCKER_HOST"; then
    HOST=$DOCKER_HOST
elif [ -z "${DOCKER_HOST:-}" ] && [ -S /var/run/docker.sock ] && answers unix:///var/run/docker.sock; then
    HOST=unix:///var/run/docker.sock
elif answers "unix://$SOCK"; then
    HOST="unix://$SOCK"
else
    [ -z "${DOCKER_HOST:-}" ] || [ "$DOCKER_HOST" = "unix://$SOCK" ] ||
        say "DOCKER_HOST=$DOCKER_HOST does not answer; starting a private dockerd instead"
    stop_private # a dead one's leftovers
    $sudo mkdir -p "$DIR/data" "$DIR/exec"
    group=()
    [ -z "$sudo" ] || group=(--group "$(id -gn)")
    pool=$(claim_pool) || die "no free 172.N.0.0/16 (N 18..31) for the private dockerd's networks"
    # setsid: the daemon outlives this script (and a Ctrl-C of the make that ran it).
    $sudo setsid dockerd --data-root "$DIR/data" --exec-root "$DIR/exec" --pidfile "$PIDFILE" \
        -H "unix://$SOCK" --iptables=false --ip-masq=false --bridge=none "${group[@]}" \
        --default-address-pool "base=172.$pool.0.0/16,size=24" \
        </dev/null >"$LOG" 2>&1 &
    started=$!
    deadline=$((SECONDS + START_TIMEOUT))
    until answers "unix://$SOCK"; do
        if ! alive "$started" && ! alive "$(cat "$PIDFILE" 2>/dev/null || true)"; then
            tail -n 15 "$LOG" >&2 || true
            die "dockerd exited at start (log: $LOG)" 3
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 15 "$LOG" >&2 || true
            stop_private
            die "dockerd did not answer within ${START_TIMEOUT}s (log: $LOG)" 3
        fi
        sleep 0.2
    done
    HOST="unix://$SOCK"
    say "started a private dockerd (pid $(cat "$PIDFILE"), data in $DIR; stop it with tools/deps-docker.sh --stop)"
fi
export DOCKER_HOST=$HOST

# ---- 3. base images -----------------------------------------------------------------------
have() { docker image inspect "$1" >/dev/null 2>&1; }

# The options of this machine's apt that an image needs to reach the same mirror (a proxy, a
# snapshot mirror whose Release files are past their Valid-Until).
apt_opts() {
    local k v
    for k in Acquire::http::Proxy Acquire::https::Proxy Acquire::Check-Valid-Until Acquire::Check-Date; do
        v=$(apt-config dump "$k" 2>/dev/null | sed -n "s/^$k \"\(.*\)\";$/\1/p" | head -n 1)
        [ -z "$v" ] || printf '%s "%s";\n' "$k" "$v"
    done
}

# What Debian's own container images (debuerreotype) configure, and for -slim what they leave
# out: documentation, manuals, translations (dpkg keeps them out of later installs too).
# shellcheck disable=SC2016  # a script, expanded where it runs
IMAGE_TWEAKS='
set -e
root=$1
printf "#!/bin/sh\nexit 101\n" >"$root/usr/sbin/policy-rc.d"; chmod +x "$root/usr/sbin/policy-rc.d"
echo force-unsafe-io >"$root/etc/dpkg/dpkg.cfg.d/docker-apt-speedup"
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<EOF
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
echo "Acquire::Languages \"none\";" >"$root/etc/apt/apt.conf.d/docker-no-languages"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/apt/* "$root"/var/log/dpkg.log
'
# shellcheck disable=SC2016
SLIMIFY='
set -e
root=$1
cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<EOF
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/man/* "$root"/usr/share/groff/* "$root"/usr/share/info/* \
       "$root"/usr/share/lintian/* "$root"/usr/share/linda/*
find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
'

# build_rootfs OUT.tar SLIM.tar: both root file systems from one mmdebstrap run.
build_rootfs() {
    local out=$1 slim=$2 sources tmp rc=0 line
    sources=${INFERPLANE_DOCKER_APT_SOURCES:-}
    if [ -z "$sources" ]; then
        if [ -f /etc/apt/sources.list.d/debian.sources ]; then
            sources=/etc/apt/sources.list.d/debian.sources
        elif [ -s /etc/apt/sources.list ]; then
            sources=/etc/apt/sources.list
        else
            die "no apt sources found for mmdebstrap: set INFERPLANE_DOCKER_APT_SOURCES"
        fi
    fi
    tmp=$($sudo mktemp -d "${TMPDIR:-/tmp}/inferplane-rootfs.XXXXXX")
    local aptopt=()
    while IFS= read -r line; do aptopt+=(--aptopt="$line"); done < <(apt_opts)
    say "building the $SUITE root file systems with mmdebstrap (sources: $sources)"
    # The merged-usr hook: /usr merged as in Debian's images (usr-is-merged, not usrmerge and
    # the Perl it would pull in).
    local hooks=()
    [ -d /usr/share/mmdebstrap/hooks/merged-usr ] &&
        hooks=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr)
    $sudo timeout 900 mmdebstrap --quiet --variant=minbase --format=directory "${aptopt[@]}" \
        "${hooks[@]}" \
        "$SUITE" "$tmp/root" "$sources" >"$tmp/mmdebstrap.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ]; then
        { $sudo sh -c "$IMAGE_TWEAKS" -- "$tmp/root" &&
            $sudo tar -C "$tmp/root" --numeric-owner -cf "$out.part" . && mv "$out.part" "$out" &&
            $sudo sh -c "$SLIMIFY" -- "$tmp/root" &&
            $sudo tar -C "$tmp/root" --numeric-owner -cf "$slim.part" . && mv "$slim.part" "$slim"
        } >>"$tmp/mmdebstrap.log" 2>&1 || rc=$?
    fi
    if [ "$rc" -ne 0 ]; then
        tail -n 20 "$tmp/mmdebstrap.log" >&2 || true
        $sudo rm -rf "$tmp"
        rm -f "$out.part" "$slim.part"
        die "building the $SUITE root file system failed (exit $rc)"
    fi
    $sudo rm -rf "$tmp"
}

need=()
for tag in "debian:$SUITE" "debian:$SUITE-slim"; do have "$tag" || need+=("$tag"); done
if [ ${#need[@]} -gt 0 ] && [ "${INFERPLANE_DOCKER_NO_PULL:-0}" != 1 ]; then
    for tag in "${need[@]}"; do
        timeout 120 docker pull -q "$tag" >/dev/null 2>&1 || break # no registry: mmdebstrap
    done
    need=()
    for tag in "debian:$SUITE" "debian:$SUITE-slim"; do have "$tag" || need+=("$tag"); done
fi
if [ ${#need[@]} -gt 0 ]; then
    if [ "$CACHE" = off ]; then
        cache=$(mktemp -d "${TMPDIR:-/tmp}/inferplane-rootfs-cache.XXXXXX")
        trap 'rm -rf "$cache"' EXIT
    else
        cache=$CACHE
        mkdir -p "$cache"
        find "$cache" -maxdepth 1 -name "$SUITE*.tar" -mtime +7 -delete 2>/dev/null || true
    fi
    full="$cache/$SUITE.tar" slim="$cache/$SUITE-slim.tar"
    if ! [ -s "$full" ] || ! [ -s "$slim" ]; then build_rootfs "$full" "$slim"; fi
    # Official images' defaults: a shell, Debian's PATH.
    imp=(-c 'CMD ["bash"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
    for tag in "${need[@]}"; do
        f=$full
        [ "$tag" = "debian:$SUITE" ] || f=$slim
        timeout 300 docker import "${imp[@]}" -m "mmdebstrap $SUITE (tools/deps-docker.sh)" \
            "$f" "$tag" >/dev/null || die "docker import of $f as $tag failed"
        say "made $tag from this machine's apt sources (mmdebstrap)"
    done
fi

echo "export DOCKER_HOST=$HOST"
