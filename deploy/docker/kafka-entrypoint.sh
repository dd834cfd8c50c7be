#!/bin/sh
# The local Kafka image's entrypoint (kafka.Dockerfile): server.properties from the KAFKA_*
# variables, as apache/kafka does, then the storage formatted once and the broker in the foreground.
set -eu
CONF=/var/lib/kafka/server.properties
LIBS="/opt/kafka/libs/*"
: > "$CONF"
env | sort | while IFS='=' read -r name value; do
  case "$name" in
    KAFKA_HEAP_OPTS | KAFKA_OPTS | KAFKA_JVM_PERFORMANCE_OPTS | KAFKA_LOG4J_OPTS) continue ;;
    KAFKA_*) ;;
    *) continue ;;
  esac
  key=$(printf '%s' "${name#KAFKA_}" | tr 'A-Z' 'a-z' | sed -e 's/___/-/g' -e 's/__/\x01/g' -e 's/_/./g' -e 's/\x01/_/g')
  printf '%s=%s\n' "$key" "$value" >> "$CONF"
done
grep -q '^log\.dirs=' "$CONF" || echo "log.dirs=/var/lib/kafka/data" >> "$CONF"
LOG4J="-Dlog4j2.configurationFile=/opt/kafka/log4j2.properties"
# shellcheck disable=SC2086  # the heap options are a list of JVM flags
java -Xmx256m -cp "$LIBS" $LOG4J kafka.tools.StorageTool format --ignore-formatted \
  --cluster-id="${CLUSTER_ID:-5L6g3nShT-eMCtK--X86sw}" -c "$CONF"
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xms128m -Xmx512m} -XX:+UseG1GC -Djava.awt.headless=true $LOG4J \
  -cp "$LIBS" kafka.Kafka "$CONF"
