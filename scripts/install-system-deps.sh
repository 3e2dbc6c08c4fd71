#!/usr/bin/env bash
# Install the Debian packages runplane's stack and tests need, only those that are missing:
#   redis-server   the local index cache `runplane up` starts
#   maven, JDK 17  resolve and run the local Kafka (tools/kafka/pom.xml)
#   chromium       headless browser for the worklist's browser tests
#   python3 venv   when the interpreter cannot create a venv
# Idempotent and quiet when everything is there. Needs root (CI and dev machines run as root).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v mvn >/dev/null || missing+=(maven)
if ! command -v java >/dev/null && [[ -z "${JAVA_HOME:-}" ]]; then
    missing+=(openjdk-17-jdk-headless)
fi
command -v chromium >/dev/null || missing+=(chromium fonts-liberation)
if ! "$PYTHON" -c "import ensurepip, venv" >/dev/null 2>&1; then
    missing+=("python3-venv")
fi

if ((${#missing[@]} == 0)); then
    echo "install-system-deps: everything present"
    exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-system-deps: installing ${missing[*]} (a minute or two; one line per package)"
$SUDO apt-get update -qq
# apt's own -qq is silent for the whole download; keep one line per package unpacked, so a
# long install shows it is moving (awk, not grep: no match is not a failure).
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" \
    | awk '/^Setting up / {print "   " $0; fflush()}'
echo "install-system-deps: done"
