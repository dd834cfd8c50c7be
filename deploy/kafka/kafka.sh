#!/usr/bin/env bash
# A real single-node Kafka broker (KRaft, combined broker+controller) without Docker:
# jars come from Maven Central once (pom.xml beside this script), the broker is one background JVM.
#   kafka.sh up | down | status | jars   (env vars: see README.md beside this script)
# GPUALLOC_KAFKA_SECURITY=sasl makes the client port SASL_PLAINTEXT (SCRAM-SHA-512 and PLAIN), and
# KAFKA_SSL_PORT adds a SASL_SSL port with a certificate made at start (CA in $DIR/tls/ca.pem).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
HOST=127.0.0.1
PORT=${KAFKA_PORT:-9092}
CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((PORT + 1000))}
CACHE=${GPUALLOC_KAFKA_CACHE:-$HOME/.cache/gpualloc/kafka}
DIR=${GPUALLOC_KAFKA_DIR:-/tmp/gpualloc-kafka-$PORT}
START_TIMEOUT=${KAFKA_START_TIMEOUT:-60}
HEAP=${KAFKA_HEAP:--Xms128m -Xmx512m}
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
LIBS=$CACHE/libs
PIDFILE=$DIR/kafka.pid
LOG=$DIR/kafka.log
MARKER=$DIR/.gpualloc-kafka   # down/up only ever delete a directory that carries this file
BROKER_PID=""
SECURITY=${GPUALLOC_KAFKA_SECURITY:-plaintext}
INTERNAL_PORT=${KAFKA_INTERNAL_PORT:-$((PORT + 2000))}   # sasl: the broker's own plaintext listener
SSL_PORT=${KAFKA_SSL_PORT:-}
SASL_USER=${KAFKA_SASL_USER:-admin}
SASL_PASSWORD=${KAFKA_SASL_PASSWORD:-admin-secret}   # also the keystore password
TLS=$DIR/tls

log() { echo "kafka.sh: $*" >&2; }

# The pid in the pid file, if that process is still our broker (guards against pid reuse).
running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid=$(cat "$PIDFILE")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $DIR/server.properties" || return 1
  echo "$pid"
}

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# Copy the jars once; a changed pom.xml (e.g. a version bump) fetches them again. The lock
# keeps two test sessions starting at once from fetching into the same dir.
fetch_jars() {
  local stamp
  stamp=$(sha256sum "$HERE/pom.xml" | cut -d' ' -f1)
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  flock 9
  if [ -f "$CACHE/.stamp" ] && [ "$(cat "$CACHE/.stamp")" = "$stamp" ]; then exec 9>&-; return; fi
  log "fetching broker jars into $LIBS (once)"
  rm -rf "$LIBS" "$CACHE/.stamp"
  cp "$HERE/pom.xml" "$CACHE/pom.xml"   # mvn runs there so nothing is written into the repo
  mvn -q -B -f "$CACHE/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$LIBS" -Dstyle.color=never >&2
  echo "$stamp" >"$CACHE/.stamp"
  exec 9>&-
}

# The listener lines. sasl: clients authenticate on PORT (and SSL_PORT over TLS); the broker talks
# to itself over a plaintext INTERNAL listener and the controller stays plaintext.
listener_config() {
  case "$SECURITY" in
    plaintext)
      cat <<EOF
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$PORT
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
EOF
      ;;
    sasl)
      local listeners="SASL_PLAINTEXT://$HOST:$PORT,INTERNAL://$HOST:$INTERNAL_PORT" listener
      [ -z "$SSL_PORT" ] || listeners="$listeners,SASL_SSL://$HOST:$SSL_PORT"
      cat <<EOF
listeners=$listeners,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=$listeners
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
EOF
      for listener in sasl_plaintext ${SSL_PORT:+sasl_ssl}; do
        cat <<EOF
listener.name.$listener.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.$listener.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SASL_USER="$SASL_PASSWORD";
EOF
      done
      [ -z "$SSL_PORT" ] || cat <<EOF
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS/broker.p12
ssl.keystore.password=$SASL_PASSWORD
EOF
      ;;
  esac
}

# A CA (ca.pem: the clients' ssl_cafile) and the broker's certificate for $HOST, signed by it.
make_certificates() {
  mkdir -p "$TLS"
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj "/CN=gpualloc test CA" \
    -keyout "$TLS/ca.key" -out "$TLS/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$HOST" -keyout "$TLS/broker.key" -out "$TLS/broker.csr" 2>/dev/null
  printf 'subjectAltName=IP:%s,DNS:localhost\n' "$HOST" >"$TLS/san.ext"
  openssl x509 -req -in "$TLS/broker.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial -days 7 \
    -extfile "$TLS/san.ext" -out "$TLS/broker.pem" 2>/dev/null
  openssl pkcs12 -export -in "$TLS/broker.pem" -inkey "$TLS/broker.key" -certfile "$TLS/ca.pem" \
    -name broker -passout "pass:$SASL_PASSWORD" -out "$TLS/broker.p12"
}

write_config() {
  cat >"$DIR/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
controller.listener.names=CONTROLLER
$(listener_config)
log.dirs=$DIR/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=500
log.retention.hours=168
log.segment.bytes=16777216
EOF
  cp "$HERE/log4j2.properties" "$DIR/log4j2.properties"
}

fail_start() {
  log "broker did not start: $1; first errors and last lines of $LOG:"
  grep -m 5 -E '\] (ERROR|FATAL) ' "$LOG" >&2 || true
  echo "..." >&2
  tail -n 30 "$LOG" >&2 || true
  if [ -n "$BROKER_PID" ]; then kill -KILL "$BROKER_PID" 2>/dev/null || true; fi
  exit 1
}

up() {
  if running_pid >/dev/null; then
    log "already running ($DIR)"; echo "$HOST:$PORT"; return
  fi
  if port_open "$PORT"; then log "port $PORT is taken by another process"; exit 1; fi
  case "$SECURITY" in plaintext | sasl) ;; *) log "GPUALLOC_KAFKA_SECURITY: plaintext or sasl, got $SECURITY"; exit 2 ;; esac
  command -v "$JAVA" >/dev/null || { log "java not found (Kafka 4.x needs Java 17+)"; exit 1; }
  command -v mvn >/dev/null || { log "mvn not found"; exit 1; }
  fetch_jars
  # A stale dir of ours (crash, kill -9) is wiped; someone else's non-empty dir is not touched.
  if [ -d "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
    [ -f "$MARKER" ] || { log "$DIR exists and is not ours"; exit 1; }
    rm -rf "$DIR"
  fi
  mkdir -p "$DIR" && touch "$MARKER"
  write_config
  if [ "$SECURITY" = sasl ] && [ -n "$SSL_PORT" ]; then make_certificates; fi
  # 16 random bytes in base64url (22 chars). One in 64 begins with '-': passed as --cluster-id=ID
  # it is never read as an option.
  local cluster_id scram=()
  cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
  [ "$SECURITY" = plaintext ] || scram=(--add-scram "SCRAM-SHA-512=[name=$SASL_USER,password=$SASL_PASSWORD]")
  "$JAVA" -Xmx256m -cp "$LIBS/*" -Dlog4j2.configurationFile="$DIR/log4j2.properties" \
    kafka.tools.StorageTool format --cluster-id="$cluster_id" "${scram[@]}" -c "$DIR/server.properties" \
    >"$LOG" 2>&1 || fail_start "storage format failed"
  # setsid: the broker outlives this script and ignores the caller's Ctrl-C; exec keeps the pid.
  # shellcheck disable=SC2086,SC2016  # HEAP is a list of JVM flags; $$ is the inner shell's
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PIDFILE" \
    "$JAVA" $HEAP -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$DIR/log4j2.properties" \
    -cp "$LIBS/*" kafka.Kafka "$DIR/server.properties" </dev/null >>"$LOG" 2>&1 &
  for _ in $(seq 1 50); do [ -s "$PIDFILE" ] && break; sleep 0.1; done
  BROKER_PID=$(cat "$PIDFILE" 2>/dev/null) || fail_start "no pid file"
  if [ -n "${KAFKA_OWNER_PID:-}" ]; then
    # The owner (a pytest session) may be killed before it calls down: stop the broker then.
    # shellcheck disable=SC2016  # the inner script reads its own arguments
    KAFKA_PORT=$PORT GPUALLOC_KAFKA_DIR=$DIR setsid bash -c \
      'while kill -0 "$0" && kill -0 "$1"; do sleep 2; done 2>/dev/null
       if kill -0 "$1" 2>/dev/null; then exec bash "$2" down; fi' \
      "$KAFKA_OWNER_PID" "$BROKER_PID" "$HERE/kafka.sh" </dev/null >/dev/null 2>&1 &
  fi
  # Ready = the port answers and the broker logged "Kafka Server started", which it does only
  # after it caught up with the metadata log and was unfenced, i.e. it serves metadata.
  local deadline=$((SECONDS + START_TIMEOUT))
  until port_open "$PORT" && grep -q "Kafka Server started" "$LOG"; do
    kill -0 "$BROKER_PID" 2>/dev/null || fail_start "the JVM exited"
    [ "$SECONDS" -lt "$deadline" ] || fail_start "not ready after ${START_TIMEOUT}s"
    sleep 0.5
  done
  log "up, pid $BROKER_PID, data and log in $DIR"
  echo "$HOST:$PORT"
}

down() {
  local pid
  if pid=$(running_pid); then
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then log "no exit after 30s, SIGKILL"; kill -KILL "$pid"; fi
    log "stopped pid $pid"
  else
    log "not running"
  fi
  if [ -f "$MARKER" ]; then rm -rf "$DIR"; fi
}

status() {
  local pid
  if pid=$(running_pid); then echo "running pid $pid at $HOST:$PORT ($DIR)"
  else echo "not running ($DIR)"; return 1; fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  jars) fetch_jars; echo "$LIBS" ;;   # the broker's jars (fetched once), e.g. for an image
  *) echo "usage: $0 up|down|status|jars" >&2; exit 2 ;;
esac
