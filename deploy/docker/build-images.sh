#!/usr/bin/env bash
# Build gpualloc's images on a machine that reaches no image registry (only Debian's packages,
# PyPI and Maven Central): a Debian base made with debootstrap and imported, the Kafka image on it
# (kafka.Dockerfile, the jars deploy/kafka fetches), and the gpualloc image (Dockerfile) from
# wheels built here. Prints the variables docker-compose.yml takes to use them.
#   deploy/docker/build-images.sh            (needs root for debootstrap, a running Docker engine)
# Env: BASE_IMAGE, KAFKA_IMAGE, GPUALLOC_IMAGE (the tags), DEBIAN_MIRROR, PYTHON (builds the wheels).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BASE_IMAGE=${BASE_IMAGE:-gpualloc-local/debian:bookworm}
KAFKA_IMAGE=${KAFKA_IMAGE:-gpualloc-local/kafka:4.1.2}
GPUALLOC_IMAGE=${GPUALLOC_IMAGE:-gpualloc:latest}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PYTHON=${PYTHON:-python3}
export DOCKER_BUILDKIT=0   # the classic builder: FROM an imported image, no registry lookups
log() { echo "build-images: $*" >&2; }

docker info >/dev/null 2>&1 || { log "no Docker engine answers (start dockerd)"; exit 1; }

# The base: Debian bookworm, minimal, with Python (and venv), the JRE for Kafka, CA certificates.
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { log "debootstrap not found (apt-get install debootstrap)"; exit 1; }
  rootfs=$(mktemp -d /tmp/gpualloc-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  log "debootstrap bookworm into $rootfs (about a minute)"
  debootstrap --variant=minbase --include=python3,python3-venv,default-jre-headless,ca-certificates \
    bookworm "$rootfs" "$DEBIAN_MIRROR" >/tmp/gpualloc-debootstrap.log 2>&1 \
    || { tail -20 /tmp/gpualloc-debootstrap.log >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  log "importing $BASE_IMAGE"
  tar -C "$rootfs" -c . | docker import -c 'ENV LANG=C.UTF-8' - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
fi

# Kafka: the broker jars (Maven Central, cached by deploy/kafka/kafka.sh) and the entrypoint.
context=$(mktemp -d /tmp/gpualloc-kafka-context.XXXXXX)
trap 'rm -rf "$context"' EXIT
libs=$(bash "$ROOT/deploy/kafka/kafka.sh" jars)
cp -r "$libs" "$context/libs"
cp "$HERE/kafka-entrypoint.sh" "$ROOT/deploy/kafka/log4j2.properties" "$context/"
log "building $KAFKA_IMAGE"
docker build -q --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$KAFKA_IMAGE" -f "$HERE/kafka.Dockerfile" "$context" >/dev/null

# gpualloc: its wheel and its dependencies' wheels, built here (the base has Python 3.11 too).
rm -rf "$HERE/wheelhouse"
log "building wheels into deploy/docker/wheelhouse"
"$PYTHON" -m pip wheel -q --wheel-dir "$HERE/wheelhouse" "$ROOT" >&2
if command -v cargo >/dev/null 2>&1; then  # the compiled heuristic; without it the image plans in Python
  "$PYTHON" -m pip wheel -q --no-deps --wheel-dir "$HERE/wheelhouse" "$ROOT/solvers/native" >&2
else
  log "no Rust toolchain: the image's heuristic runs in Python"
fi
log "building $GPUALLOC_IMAGE"
docker build -q --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$GPUALLOC_IMAGE" -f "$HERE/Dockerfile" "$ROOT" >/dev/null
echo "KAFKA_IMAGE=$KAFKA_IMAGE"
echo "GPUALLOC_IMAGE=$GPUALLOC_IMAGE"
