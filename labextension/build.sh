#!/bin/sh
# Rebuild the prebuilt JupyterLab extension (labextension/prebuilt/, committed and shipped in the
# wheel). Run from anywhere; needs node/npm and the Python environment with jupyterlab.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
# 1. Dependencies (pinned by package-lock.json), TypeScript, then the federated bundle, built
#    against the installed JupyterLab's own package list so shared modules match it.
[ -d node_modules ] || npm ci --no-audit --no-fund
npx tsc
core=$(python -c 'import os, jupyterlab; print(os.path.join(os.path.dirname(jupyterlab.__file__), "staging", "package.json"))')
rm -rf prebuilt
jupyter labextension build --core-package-file "$core" .
# 2. The word catalogue beside the bundle (data the extension loads; it is all a new keyword or
#    builtin changes, so that alone needs no node: python -m cancho_kernel.highlight_words --write).
cd "$here/.."
python -m cancho_kernel.highlight_words --write
