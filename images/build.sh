#!/usr/bin/env bash
# `make image`: every image a Magnetar pod needs, built without any image registry, saved as
# tarballs and imported into a local Kubernetes node's containerd when one is running.
#
#   magnetar/debian-base:bookworm     debootstrap --variant=minbase of Debian bookworm (cached)
#   magnetar/python-base:3.11-bookworm  + Debian's python3 (3.11) and python3-venv
#   magnetar:<version>                the top-level Dockerfile, BASE_IMAGE=the python base, and
#                                     every wheel from a wheelhouse filled on the host
#   magnetar:<version>-next           that image, MAGNETAR_VERSION_LABEL=next: it reports
#                                     <version>+next, the image an upgrade goes to (saved apart,
#                                     imported by its test)
#   magnetar/zookeeper:3.8            Debian's libzookeeper-java, images/zookeeper/
#   magnetar/zookeeper-official:3.8   that server in the official zookeeper image's layout (root by
#                                     default, /conf of uid 1000), images/zookeeper-official/ (saved
#                                     apart, imported by the tests and the kind walkthrough's script)
#   registry.k8s.io/pause:3.10        magnetar/kube/pause.c, static, FROM scratch
#
# The builds run on a private dockerd (its own data root, exec root and socket under
# ~/.cache/magnetar/docker, no bridge and no iptables rules: builds use the host's network), started
# here and stopped by its PID at the end unless it was already running.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${MAGNETAR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/magnetar}"
DOCKER_STATE="$CACHE/docker"
DOCKER_SOCK="$DOCKER_STATE/docker.sock"
DOCKER_PIDFILE="$DOCKER_STATE/dockerd.pid"
IMAGES_DIR="$CACHE/images"
LOGS="$CACHE/image-logs"
BASE_DIR="$CACHE/debian-base"
WHEELHOUSE="$CACHE/wheelhouse"
CONTAINERD_SOCKET="${MAGNETAR_CONTAINERD_SOCKET:-$CACHE/kube/state/containerd/containerd.sock}"

SUITE=bookworm
MIRROR="${MAGNETAR_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${MAGNETAR_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/pyproject.toml" | head -1)"
BASE_TAG="magnetar/debian-base:$SUITE"
PYTHON_TAG="magnetar/python-base:3.11-$SUITE"
MAGNETAR_TAG="magnetar:$VERSION"
# A second image of the same sources whose processes report another version (the Dockerfile's
# VERSION_LABEL): what a version upgrade goes to. Only its config differs, so it costs seconds.
NEXT_LABEL=next
NEXT_TAG="magnetar:$VERSION-$NEXT_LABEL"
# Apart from the tarballs every node imports: only the test of an upgrade imports it.
NEXT_DIR="$IMAGES_DIR/upgrade"
ZOOKEEPER_TAG="magnetar/zookeeper:3.8"
# The official image's layout on the same server, what the operator's default zookeeper:3.9 meets
# (a few seconds on top of the image above); apart from the tarballs every node imports.
ZOOKEEPER_OFFICIAL_TAG="magnetar/zookeeper-official:3.8"
OFFICIAL_DIR="$IMAGES_DIR/official"
PAUSE_TAG="registry.k8s.io/pause:3.10"
APT_PACKAGES=(docker.io containerd runc debootstrap gcc libc6-dev)

usage() {
  cat <<EOF
usage: images/build.sh [--keep-dockerd] [--no-import]
       images/build.sh dockerd start|stop|status

Builds $MAGNETAR_TAG, $ZOOKEEPER_TAG and $PAUSE_TAG (and their
bases) on a private dockerd, saves them to $IMAGES_DIR/*.tar and, when a
local Kubernetes node's containerd answers, imports them there (namespace k8s.io).
Also $NEXT_TAG: the same image, its processes reporting version $VERSION+$NEXT_LABEL
(magnetar --version, a broker's CONNECTED), saved to $NEXT_DIR/ and not
imported: what a version upgrade's test goes to. And $ZOOKEEPER_OFFICIAL_TAG:
the ZooKeeper image in the official zookeeper image's layout (root by default,
/conf owned by uid 1000), saved to $OFFICIAL_DIR/ and not imported.

  --keep-dockerd   leave the private dockerd running afterwards (docker -H unix://$DOCKER_SOCK ...)
  --no-import      do not import into containerd even when its socket exists
  dockerd start    start the private dockerd (if not running) and leave it running
  dockerd stop     stop it (by the PID in $DOCKER_PIDFILE)
  dockerd status   exit 0 when it answers

Environment:
  MAGNETAR_CONTAINERD_SOCKET  the node's containerd socket
                              (default $CACHE/kube/state/containerd/containerd.sock,
                              where "magnetar kube up" puts it)
  MAGNETAR_DEBIAN_MIRROR      Debian mirror for debootstrap (default http://deb.debian.org/debian)
  MAGNETAR_CACHE              cache directory (default ~/.cache/magnetar)

Examples:
  make image
  images/build.sh --keep-dockerd && docker -H unix://$DOCKER_SOCK run --rm $MAGNETAR_TAG --help
  MAGNETAR_CONTAINERD_SOCKET=/run/k8s/containerd.sock images/build.sh
  images/build.sh dockerd stop
EOF
}

say() { printf '[image] %s\n' "$*"; }
elapsed() { printf '%ds' "$((SECONDS - $1))"; }
docker_() { docker -H "unix://$DOCKER_SOCK" "$@"; }
# Heavy steps yield the machine's two cores to whatever else runs.
nice_() { nice -n 10 "$@"; }

# Debian packages this needs; installed only when missing, like the Makefile's system-deps.
system_deps() {
  local missing=() p
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "images/build.sh runs dockerd and debootstrap, which need root" >&2
    exit 1
  fi
}

dockerd_pid() {
  local pid
  pid="$(cat "$DOCKER_PIDFILE" 2>/dev/null)" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

dockerd_answers() { dockerd_pid >/dev/null && docker_ version >/dev/null 2>&1; }

# Starts the private dockerd unless it already answers; STARTED_DOCKERD=1 when this call started it.
STARTED_DOCKERD=0
dockerd_start() {
  if dockerd_answers; then
    return 0
  fi
  mkdir -p "$DOCKER_STATE"
  say "starting a private dockerd (socket $DOCKER_SOCK, log $DOCKER_STATE/dockerd.log)"
  # Its own containerd under the exec root: nothing is shared with the system's or a node's.
  # No bridge, no iptables, no ip_forward: builds and test containers use --network host, so
  # nothing here touches the host's network setup (or a Kubernetes node's bridge and settings).
  setsid dockerd \
    --data-root "$DOCKER_STATE/data" \
    --exec-root "$DOCKER_STATE/exec" \
    --pidfile "$DOCKER_PIDFILE" \
    -H "unix://$DOCKER_SOCK" \
    --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
    </dev/null >>"$DOCKER_STATE/dockerd.log" 2>&1 &
  local started_pid=$! _
  for _ in $(seq 1 120); do
    if dockerd_answers; then
      STARTED_DOCKERD=1
      return 0
    fi
    sleep 0.5
  done
  kill -TERM "$started_pid" 2>/dev/null || true
  echo "dockerd did not answer on $DOCKER_SOCK in 60 s; its log:" >&2
  tail -n 30 "$DOCKER_STATE/dockerd.log" >&2
  exit 1
}

dockerd_stop() {
  local pid _
  pid="$(dockerd_pid)" || return 0
  say "stopping the private dockerd (pid $pid)"
  kill -TERM "$pid"
  for _ in $(seq 1 60); do
    if ! kill -0 "$pid" 2>/dev/null; then
      # dockerd leaves its default network namespace bind-mounted in the exec root
      if mountpoint -q "$DOCKER_STATE/exec/netns/default" 2>/dev/null; then
        umount "$DOCKER_STATE/exec/netns/default"
      fi
      return 0
    fi
    sleep 0.5
  done
  echo "dockerd (pid $pid) still running after 30 s" >&2
  return 1
}

# The debootstrap rootfs, imported as $BASE_TAG; rebuilt only when its inputs change (a label on
# the image records their hash; the rootfs tarball is kept to re-import without debootstrap).
build_base() {
  local inputs hash current rootfs tarball started=$SECONDS
  # what the rootfs is made of: the suite, the mirrors and base_configure's text (not the rest of
  # this script, whose edits do not change the rootfs)
  inputs="$SUITE minbase $MIRROR $SECURITY_MIRROR $(declare -f base_configure | sha256sum | cut -c1-16)"
  hash="$(printf '%s' "$inputs" | sha256sum | cut -c1-16)"
  current="$(docker_ image inspect --format '{{index .Config.Labels "org.magnetar.inputs"}}' "$BASE_TAG" 2>/dev/null || true)"
  if [ "$current" = "$hash" ]; then
    say "$BASE_TAG: up to date"
    return
  fi
  tarball="$BASE_DIR/rootfs-$hash.tar"
  if [ ! -f "$tarball" ]; then
    rootfs="$BASE_DIR/rootfs-$hash"
    rm -rf "$rootfs" "$tarball.part"
    mkdir -p "$BASE_DIR"
    say "$BASE_TAG: debootstrap --variant=minbase $SUITE (about a minute)"
    if ! nice_ debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$BASE_DIR/debootstrap.log" 2>&1; then
      tail -n 20 "$BASE_DIR/debootstrap.log" >&2
      rm -rf "$rootfs"
      exit 1
    fi
    base_configure "$rootfs"
    tar --numeric-owner -C "$rootfs" -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    rm -rf "$rootfs"
    # older rootfs tarballs (other inputs) are never used again
    find "$BASE_DIR" -maxdepth 1 -name 'rootfs-*.tar' ! -name "rootfs-$hash.tar" -delete
  fi
  docker_ import \
    --change "LABEL org.magnetar.inputs=$hash" \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    "$tarball" "$BASE_TAG" >/dev/null
  say "$BASE_TAG: imported ($(elapsed "$started"))"
}

# What Debian's own docker images do to a fresh rootfs: security updates in the sources, no docs,
# man pages or translations installed later, no package lists or caches left behind.
base_configure() {
  local rootfs="$1"
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
EOF
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/magnetar-nodoc" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
EOF
  cat >"$rootfs/etc/apt/apt.conf.d/magnetar-lean" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
  find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,info,lintian}/* "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/log/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
}

# The project's wheel and every dependency's (cp311, manylinux or built here), filled by the host's
# pip, which reaches PyPI through the machine's CA; the image build installs from it with no index.
fill_wheelhouse() {
  local started=$SECONDS pip="$ROOT/.venv/bin/pip"
  [ -x "$pip" ] || { echo "no $pip: run make install first" >&2; exit 1; }
  rm -rf "$WHEELHOUSE/new"
  mkdir -p "$WHEELHOUSE/project" "$WHEELHOUSE/deps" "$WHEELHOUSE/new"
  say "wheelhouse: building the magnetar wheel"
  # no build isolation: the venv already has setuptools and grpcio-tools (the proto generator).
  # A fixed SOURCE_DATE_EPOCH makes the wheel the same bytes when the sources are, and the file is
  # replaced only when it differs (its mtime kept): the image build's COPY then hits docker's
  # cache and an unchanged image is not built again.
  SOURCE_DATE_EPOCH=315532800 nice_ "$pip" wheel --quiet --no-deps --no-build-isolation \
    --wheel-dir "$WHEELHOUSE/new" "$ROOT"
  local wheel stamp
  wheel="$(cd "$WHEELHOUSE/new" && ls magnetar-*.whl)"
  if ! cmp -s "$WHEELHOUSE/new/$wheel" "$WHEELHOUSE/project/$wheel"; then
    rm -f "$WHEELHOUSE"/project/*.whl
    mv "$WHEELHOUSE/new/$wheel" "$WHEELHOUSE/project/"
  fi
  rm -rf "$WHEELHOUSE/new"
  wheel="$WHEELHOUSE/project/$wheel"
  # Dependencies: resolved again only when pyproject.toml changes.
  stamp="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
  if [ "$(cat "$WHEELHOUSE/deps/.stamp" 2>/dev/null)" != "$stamp" ]; then
    say "wheelhouse: fetching the dependencies' wheels"
    nice_ "$pip" wheel --quiet --prefer-binary --find-links "$WHEELHOUSE/deps" \
      --wheel-dir "$WHEELHOUSE/deps" "${wheel}[operator,chaos,workload]"
    rm -f "$WHEELHOUSE"/deps/magnetar-*.whl
    echo "$stamp" >"$WHEELHOUSE/deps/.stamp"
  fi
  local count
  count="$(find "$WHEELHOUSE/deps" -name '*.whl' | wc -l)"
  say "wheelhouse: $count wheels ($(elapsed "$started"))"
}

build_magnetar() {
  local started=$SECONDS context_wheels="$ROOT/.wheelhouse"
  fill_wheelhouse
  # The wheels enter the build context as .wheelhouse/ (hard links: no copy), gone afterwards; it
  # is in .gitignore should a build be interrupted.
  rm -rf "$context_wheels"
  mkdir -p "$context_wheels"
  cp -l "$WHEELHOUSE"/project/*.whl "$WHEELHOUSE"/deps/*.whl "$context_wheels/"
  say "$MAGNETAR_TAG: docker build (BASE_IMAGE=$PYTHON_TAG)"
  if ! nice_ env DOCKER_BUILDKIT=0 docker -H "unix://$DOCKER_SOCK" build --network host \
    --build-arg "BASE_IMAGE=$PYTHON_TAG" --build-arg WHEELHOUSE=.wheelhouse \
    --tag "$MAGNETAR_TAG" "$ROOT" >"$LOGS/magnetar.log" 2>&1; then
    rm -rf "$context_wheels"
    tail -n 30 "$LOGS/magnetar.log" >&2
    exit 1
  fi
  rm -rf "$context_wheels"
  say "$MAGNETAR_TAG: built ($(elapsed "$started"))"
  # The image just built with the label's setting (the Dockerfile's VERSION_LABEL) on top: its
  # layers are the same ones, and a build of the whole context again would miss the cache whenever
  # a file of the tree changed meanwhile.
  started=$SECONDS
  if ! printf 'FROM %s\nENV MAGNETAR_VERSION_LABEL=%s\n' "$MAGNETAR_TAG" "$NEXT_LABEL" |
    DOCKER_BUILDKIT=0 docker_ build --tag "$NEXT_TAG" - >"$LOGS/magnetar-next.log" 2>&1; then
    tail -n 30 "$LOGS/magnetar-next.log" >&2
    exit 1
  fi
  say "$NEXT_TAG: built ($(elapsed "$started"))"
}

# docker build of one of images/<dir>, its output kept in a log shown only on failure.
build_dir() {
  local tag="$1" context="$2" started=$SECONDS log
  shift 2
  log="$LOGS/${tag//[\/:]/-}.log"
  say "$tag: docker build"
  if ! nice_ env DOCKER_BUILDKIT=0 docker -H "unix://$DOCKER_SOCK" build --network host \
    --tag "$tag" "$@" "$context" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    exit 1
  fi
  say "$tag: built ($(elapsed "$started"))"
}

build_pause() {
  local context="$CACHE/pause-build"
  rm -rf "$context"
  mkdir -p "$context"
  cp "$ROOT/images/pause/Dockerfile" "$context/"
  gcc -static -O2 -Wall -Wextra -Werror -s -o "$context/pause" "$ROOT/magnetar/kube/pause.c"
  build_dir "$PAUSE_TAG" "$context"
  rm -rf "$context"
}

# docker save, skipped when the tarball already holds this image ID; prints the sizes. A third
# argument: the folder to save in instead, whose tarballs are not imported into a node.
SAVED=()
save_image() {
  local tag="$1" id tarball="${3:-$IMAGES_DIR}/$2.tar"
  [ -n "${3:-}" ] || SAVED+=("$tarball")
  id="$(docker_ image inspect --format '{{.Id}}' "$tag")"
  if [ "$(cat "$tarball.id" 2>/dev/null)" != "$id" ] || [ ! -f "$tarball" ]; then
    say "$tag: saving"
    # .part: a node starting meanwhile imports every *.tar here, never a half-written one
    docker_ save --output "$tarball.part" "$tag"
    mv "$tarball.part" "$tarball"
    echo "$id" >"$tarball.id"
  fi
  local size
  size="$(docker_ image inspect --format '{{.Size}}' "$tag")"
  say "$(awk -v tag="$tag" -v size="$size" -v tar="$(stat -c %s "$tarball")" -v path="$tarball" \
    'BEGIN { printf "%-28s %6.1f MB unpacked %6.1f MB tarball  %s", tag, size / 1e6, tar / 1e6, path }')"
}

import_into_node() {
  if [ ! -S "$CONTAINERD_SOCKET" ]; then
    say "no Kubernetes node's containerd at $CONTAINERD_SOCKET (set MAGNETAR_CONTAINERD_SOCKET):" \
      "not imported; the tarballs are in $IMAGES_DIR"
    return
  fi
  local tarball
  for tarball in "${SAVED[@]}"; do
    say "importing $(basename "$tarball") into containerd ($CONTAINERD_SOCKET, namespace k8s.io)"
    ctr --address "$CONTAINERD_SOCKET" -n k8s.io images import "$tarball" >/dev/null
  done
}

STOP_DOCKERD=0
# On any exit: no wheels left in the source tree, and the dockerd this run started stopped.
cleanup() {
  rm -rf "$ROOT/.wheelhouse"
  if ((STOP_DOCKERD)); then
    dockerd_stop
  fi
}

main() {
  local keep_dockerd=0 import=1
  case "${1:-}" in
    -h | --help)
      usage
      return 0
      ;;
    dockerd)
      case "${2:-}" in
        start) system_deps && dockerd_start ;;
        stop) dockerd_stop ;;
        status) dockerd_answers ;;
        *) usage >&2 && return 2 ;;
      esac
      return
      ;;
  esac
  while (($#)); do
    case "$1" in
      --keep-dockerd) keep_dockerd=1 ;;
      --no-import) import=0 ;;
      *) usage >&2 && return 2 ;;
    esac
    shift
  done

  local started=$SECONDS
  system_deps
  mkdir -p "$IMAGES_DIR" "$LOGS"
  dockerd_start
  STOP_DOCKERD=$((STARTED_DOCKERD && !keep_dockerd))
  trap cleanup EXIT
  build_base
  # ZooKeeper's images and pause need only the Debian base: they build beside Magnetar's (on a
  # first build, about 40 s each: the one mostly apt, the other mostly pip)
  (
    build_dir "$ZOOKEEPER_TAG" "$ROOT/images/zookeeper" --build-arg "BASE_IMAGE=$BASE_TAG"
    build_dir "$ZOOKEEPER_OFFICIAL_TAG" "$ROOT/images/zookeeper-official" --build-arg "BASE_IMAGE=$ZOOKEEPER_TAG"
    build_pause
  ) &
  local others=$!
  build_dir "$PYTHON_TAG" "$ROOT/images/python-base" --build-arg "BASE_IMAGE=$BASE_TAG"
  build_magnetar
  wait "$others" || exit 1
  # Earlier builds' images, untagged now, only fill the private data root. A day's grace: the last
  # build stage is untagged too, and is the cache that makes the next build quick.
  docker_ image prune --force --filter until=24h >/dev/null
  save_image "$MAGNETAR_TAG" "magnetar-$VERSION"
  mkdir -p "$NEXT_DIR"
  save_image "$NEXT_TAG" "magnetar-$VERSION-$NEXT_LABEL" "$NEXT_DIR"
  save_image "$ZOOKEEPER_TAG" zookeeper-3.8
  mkdir -p "$OFFICIAL_DIR"
  save_image "$ZOOKEEPER_OFFICIAL_TAG" zookeeper-official-3.8 "$OFFICIAL_DIR"
  save_image "$PAUSE_TAG" pause-3.10
  if ((import)); then
    import_into_node
  fi
  say "done in $(elapsed "$started")"
}

main "$@"
