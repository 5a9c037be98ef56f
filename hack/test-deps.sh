#!/usr/bin/env bash
# Debian packages the tests run (shared by `make test` and .ci/run): Prometheus (the demo's
# end-to-end test scrapes real metrics), PostgreSQL (the history store's suite), git (the
# Applications tests serve repositories) and Chromium (the dashboard's browser tests).
# Installs what is missing with apt-get when it can (root, or sudo); otherwise says what to
# install and goes on, so the tests that need a package fail naming it.
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v git >/dev/null 2>&1 || need+=(git)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=sudo; else
    echo "test-deps: install ${need[*]} (Debian: apt-get install ${need[*]}); the tests that need them fail without" >&2
    exit 0
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "test-deps: no apt-get here; install ${need[*]} by hand" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y --no-install-recommends "${need[@]}" || { $sudo apt-get update && $sudo apt-get install -y --no-install-recommends "${need[@]}"; }
