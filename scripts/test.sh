#!/bin/sh
# Installs everything the test suite needs on a fresh machine, then runs it.
# Usage: sh scripts/test.sh [pytest arguments]
set -eu
cd "$(dirname "$0")/.."

# The history tests drive the real `git` executable.
if ! command -v git >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq git >/dev/null
    else
        echo "scripts/test.sh: the test suite needs git; install it and run again" >&2
        exit 1
    fi
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
exec .venv/bin/python -m pytest "$@"
