#!/bin/sh
# Install what the hub needs, without touching the system: JupyterHub from PyPI into the current
# Python (the `hub` extra of cancho-kernel), configurable-http-proxy from npm into a cache
# directory (CANCHO_HUB_CACHE, default ~/.cache/cancho-hub). Run from the repository's root.
set -eu
cache="${CANCHO_HUB_CACHE:-$HOME/.cache/cancho-hub}"
python3 -m pip install -q -e '.[hub]'
mkdir -p "$cache/chp"
if [ ! -x "$cache/chp/node_modules/.bin/configurable-http-proxy" ]; then
    npm install --prefix "$cache/chp" --no-audit --no-fund --loglevel=error 'configurable-http-proxy@^4.6'
fi
echo "configurable-http-proxy: $cache/chp/node_modules/.bin/configurable-http-proxy"
