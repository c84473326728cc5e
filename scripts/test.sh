#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite: unit tests, then integration tests against real
# broker processes, real Apache ZooKeeper, real clients and a real local Spark. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check kbus tests
.venv/bin/mypy  # [tool.mypy] in pyproject.toml: kbus/, strict on kbus.server
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "$@"
