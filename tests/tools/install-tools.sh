#!/usr/bin/env bash
# Installs the non-Python test clients: kcat (Debian package), kafkajs (npm), and Chromium with its
# WebDriver (Debian's chromium, chromium-driver) for the console's browser tests.
# Idempotent; prints what it could not install (the tests that need it then say why they skip).
set -u
cd "$(dirname "$0")"
if ! command -v kcat >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null) \
      || echo "install-tools: could not install kcat with apt-get" >&2
  else
    echo "install-tools: kcat missing and apt-get unavailable (not root?)" >&2
  fi
fi
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      chromium chromium-driver fonts-dejavu-core >/dev/null) \
      || echo "install-tools: could not install chromium, chromium-driver with apt-get" >&2
  else
    echo "install-tools: chromium missing and apt-get unavailable (not root?)" >&2
  fi
fi
if command -v npm >/dev/null 2>&1; then
  if [ ! -d node/node_modules/kafkajs ]; then
    (cd node && npm ci --no-audit --no-fund --silent) || echo "install-tools: npm ci failed for kafkajs" >&2
  fi
else
  echo "install-tools: npm not found; kafkajs tests will skip" >&2
fi
exit 0
