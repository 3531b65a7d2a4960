#!/bin/sh
# Container entrypoint: run the broker with the image's server.properties and the KAFKA_*
# environment (read by the broker itself: KAFKA_LOG_RETENTION_HOURS -> log.retention.hours,
# with _ -> ., __ -> _, ___ -> -, as the apache/kafka image does).
#
#   (no arguments)          run the broker
#   --override k=v ...      run the broker with these properties on top (any broker flag works)
#   anything else           run that command instead (sh, python -m broker.ops.admin_cli ..., ...)
#
# Compatibility with the other Kafka images:
#   KAFKA_CFG_<NAME> (bitnami) is read as KAFKA_<NAME>;
#   CLUSTER_ID (apache/kafka) is read as KAFKA_CLUSTER_ID;
#   KAFKA_LISTENERS without KAFKA_ADVERTISED_LISTENERS advertises the listeners themselves, as
#   Kafka does, instead of this image's localhost:9092 default.
set -eu

if [ "$#" -gt 0 ] && [ "${1#-}" = "$1" ]; then
  exec "$@"
fi

for name in $(env | sed -n 's/^KAFKA_CFG_\([A-Za-z0-9_]*\)=.*/\1/p'); do
  eval "export KAFKA_${name}=\"\${KAFKA_CFG_${name}}\""
  unset "KAFKA_CFG_${name}"
done
if [ -n "${CLUSTER_ID:-}" ] && [ -z "${KAFKA_CLUSTER_ID:-}" ]; then
  export KAFKA_CLUSTER_ID="$CLUSTER_ID"
fi
if [ -n "${KAFKA_LISTENERS:-}" ] && [ -z "${KAFKA_ADVERTISED_LISTENERS:-}" ]; then
  export KAFKA_ADVERTISED_LISTENERS="$KAFKA_LISTENERS"
fi

# KAFKA_WAIT_FOR_FILE: wait (up to a minute) for a file another container writes, such as the
# keystore of docker/compose.secure.yml's one-shot certs service; it is not a broker property.
if [ -n "${KAFKA_WAIT_FOR_FILE:-}" ]; then
  waited=0
  while [ ! -e "$KAFKA_WAIT_FOR_FILE" ] && [ "$waited" -lt 120 ]; do
    sleep 0.5
    waited=$((waited + 1))
  done
  unset KAFKA_WAIT_FOR_FILE
fi
exec python -m broker --config "${BROKER_CONFIG_FILE:-/etc/kafka/server.properties}" "$@"
