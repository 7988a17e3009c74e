#!/usr/bin/env bash
# Start what the test suite needs when it is not running: PostgreSQL, Redis, and Debian's Chromium for the
# browser tests (installed with apt when absent; Playwright never downloads a browser), promtool, and poppler's
# pdftotext/pdftoppm with a Chinese font for the review pack's PDF.
set -u
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Debian's chromium for the browser tests"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if ! command -v promtool >/dev/null 2>&1; then
  echo "installing Debian's prometheus package for promtool (metrics and alerting-rule checks)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
# OpenLDAP's slapd and ldap-utils for the directory sign-in tests (tests/directory/ start their own
# slapd), gettext, poppler-utils and a Chinese font for the review pack's tests (see ensure-build-deps.sh).
"$(dirname "$0")/ensure-build-deps.sh" --test-servers || { echo "the test packages could not be installed" >&2; exit 1; }
pg_isready -h 127.0.0.1 -p 5432 -q || { echo "PostgreSQL is not reachable on 127.0.0.1:5432" >&2; exit 1; }
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null || { echo "Redis is not reachable on 127.0.0.1:6379" >&2; exit 1; }
