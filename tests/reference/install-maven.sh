#!/usr/bin/env bash
# Maven fetches the reference Kafka's jars (assemble.sh). Install Debian's when it is missing.
set -euo pipefail
command -v mvn >/dev/null && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Maven (Debian package maven) ..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends maven >/dev/null
else
  echo "install-maven.sh: Maven (mvn) is needed for the reference Kafka: install it (e.g. apt-get install maven) or set KAFKA_HOME" >&2
  exit 1
fi
