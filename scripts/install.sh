#!/bin/sh
# Install Quiver from this source tree, non-editable, into a Python environment: the one install
# step the Docker image runs and the packaging test (tests/test_packaging.py) runs in a fresh venv.
#   scripts/install.sh                 # into the interpreter `python3` (the image's)
#   PYTHON=/path/venv/bin/python scripts/install.sh
# Extra pip options come from the environment (PIP_NO_INDEX, PIP_FIND_LINKS, PIP_NO_CACHE_DIR ...).
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
# Build from a copy: the source tree may be read-only (image layer) and must stay free of build/.
cp -R "$SRC/pyproject.toml" "$SRC/README.md" "$SRC/app" "$BUILD/"
"$PYTHON" -m pip install --quiet "$BUILD"
"$PYTHON" -c "import app.db.migrate as m; assert (m.MIGRATIONS / 'env.py').is_file(), m.MIGRATIONS"
