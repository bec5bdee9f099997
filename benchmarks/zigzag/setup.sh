#!/usr/bin/env bash
# Create benchmarks/zigzag/.venv and install ZigZag into it (kept apart from perfcast's
# environment: ZigZag pins its own numpy/networkx/onnx versions). Run from anywhere:
#   bash benchmarks/zigzag/setup.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python3 -m venv "$here/.venv"
"$here/.venv/bin/python" -m pip install --quiet --upgrade pip
"$here/.venv/bin/python" -m pip install --quiet -r "$here/requirements.txt"
"$here/.venv/bin/python" -c "import zigzag, importlib.metadata as m; print('zigzag-dse', m.version('zigzag-dse'))"
