#!/usr/bin/env bash
# Set up (once) and run the broker on 127.0.0.1:9092 with its data in ./data.
# Extra arguments go to the broker, e.g. --override num.partitions=3 or --config server.properties.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -x .venv/bin/python ]]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
.venv/bin/pip install -q -e .
# An editable install leaves the sources uncompiled; bytecode written now (even under
# PYTHONDONTWRITEBYTECODE) halves start-up. Only changed files are recompiled.
.venv/bin/python -m compileall -q broker protocol storage coordinator >/dev/null
exec .venv/bin/python -m broker --override log.dirs=./data "$@"
