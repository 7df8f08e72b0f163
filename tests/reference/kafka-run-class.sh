#!/usr/bin/env bash
# Run a Kafka main class with every jar in libs/ on the classpath, as Apache Kafka's own
# bin/kafka-run-class.sh does (its environment variables, fewer options).
#   KAFKA_HEAP_OPTS (-Xmx256M), KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS (tools: warnings
#   to stderr), KAFKA_OPTS, LOG_DIR (the broker's log4j files), JAVA_HOME.
base_dir="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${JAVA_HOME:-}" ]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi
LOG_DIR="${LOG_DIR:-$base_dir/logs}"
mkdir -p "$LOG_DIR" 2>/dev/null || true
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx256M}"
KAFKA_JVM_PERFORMANCE_OPTS="${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true}"
KAFKA_LOG4J_OPTS="${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.properties}"
# shellcheck disable=SC2086  # the *_OPTS variables are word lists, as in Kafka's script
exec "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS "-Dkafka.logs.dir=$LOG_DIR" $KAFKA_LOG4J_OPTS \
  -cp "$base_dir/libs/*" ${KAFKA_OPTS:-} "$@"
