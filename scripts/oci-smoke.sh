#!/usr/bin/env bash
# Build and run the container image for real, then the compose stacks (one broker, three in
# docker/compose.cluster.yml, and TLS + SCRAM + ACLs in docker/compose.secure.yml), each with a
# smoke test (docker/smoke.py, docker/smoke_secure.py)
# against 127.0.0.1:9092 (produce, consume, a committed and an aborted transaction; for compose
# also the topics made by init-topics and the /metrics endpoint on 9404).
# Uses ../shared/tools/oci-check (podman; needs root; installs podman, runc and debootstrap and
# makes its stand-in base image on first use). Build output goes to $OCI_LOG; on failure its
# tail is printed. PYTHON: an interpreter with confluent-kafka (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
tool=../shared/tools/oci-check
py=${PYTHON:-python3}
log=${OCI_LOG:-${TMPDIR:-/tmp}/oci-smoke.log}
export BUILDAH_FORMAT=docker   # podman keeps HEALTHCHECK only in the docker image format
: >"$log"
step() {
  local name=$1 started=$SECONDS; shift
  if "$tool" "$@" >>"$log" 2>&1; then
    grep -a '^smoke: ' "$log" | tail -n +"$((seen + 1))"
    echo "oci-smoke: $name passed in $((SECONDS - started)) s"
  else
    echo "oci-smoke: $name FAILED; last lines of $log:" >&2
    tail -60 "$log" >&2
    exit 1
  fi
  seen=$(grep -ac '^smoke: ' "$log" || true)
}
seen=0
step "oci-check run" run --port 9092 -- "$py" docker/smoke.py --require-transactions
step "oci-check compose" compose --port 9092 -- "$py" docker/smoke.py --require-transactions \
  --expect-topics orders,payments,events --metrics http://127.0.0.1:9404/metrics
# three brokers in the container (docker/compose.cluster.yml): RF 3 topics, a broker taken down
export COMPOSE_FILE=docker/compose.cluster.yml
step "oci-check compose (3 brokers)" compose --port 9092 -- "$py" docker/smoke.py --require-transactions \
  --brokers 3 --control http://127.0.0.1:9099
unset COMPOSE_FILE
# TLS listeners, SCRAM and ACLs (docker/compose.secure.yml): certificates made at start, alice's
# access allowed and refused as the ACLs say
mkdir -p docker/certs
export COMPOSE_FILE=docker/compose.secure.yml
step "oci-check compose (TLS, SCRAM, ACLs)" compose --port 9094 -- "$py" docker/smoke_secure.py --certs docker/certs
unset COMPOSE_FILE
