#!/usr/bin/env bash
# Installs a Python stream-processing framework or Kafka tool from PyPI into its own virtualenv under the
# git-ignored .cache/python-apps/, and prints that venv's bin/ directory. Each gets its own venv because their pins
# clash with kbus's: quixstreams wants confluent-kafka<2.13 and its own pydantic, faust-streaming brings mode and
# its aiokafka, kaskade brings Textual. The tests (tests/e2e/ecosystem/test_python_apps.py) run them as
# subprocesses with that venv's python, as a user of kbus would run them.
#
#   scripts/python-apps.sh NAME     NAME: quixstreams | faust-streaming | kaskade (the versions pinned below)
#   scripts/python-apps.sh --all    every one of them (scripts/test.sh)
#
# A finished venv carries a `.complete` marker naming the path it was made at; a second call prints it at once. A
# venv's scripts start with the absolute path of its python, so one made through another path (a symlinked .cache
# of a checkout since deleted) is made again.
set -euo pipefail
cd "$(dirname "$0")/.."
# the physical path: a worktree's .cache may be a symlink to another checkout's, and a venv's scripts carry the path
cache=$(mkdir -p .cache && cd .cache && pwd -P)

# The newest releases PyPI serves (checked November 2026); the README's compatibility matrix names these.
declare -A PINS=(
  [quixstreams]="quixstreams==3.28.1"
  [faust-streaming]="faust-streaming==0.15.3"
  [kaskade]="kaskade==5.1.0"
)

die() { echo "python-apps: $*" >&2; exit 2; }

install_one() {
  local name=$1 spec=${PINS[$1]:-}
  [ -n "$spec" ] || die "unknown app: $name (known: ${!PINS[*]})"
  local dir=$cache/python-apps/${spec/==/-}
  if [ "$(cat "$dir/.complete" 2>/dev/null)" != "$dir" ]; then
    rm -rf "$dir"
    "${PYTHON:-python3}" -m venv "$dir"
    if ! { "$dir/bin/python" -m pip install -q --upgrade pip && "$dir/bin/python" -m pip install -q "$spec"; } \
         >"$dir.log" 2>&1; then
      tail -20 "$dir.log" >&2
      die "pip could not install $spec (log: .cache/python-apps/${spec/==/-}.log)"
    fi
    echo "$dir" >"$dir/.complete"
  fi
  echo "$dir/bin"
}

case "${1:-}" in
  --all) for n in "${!PINS[@]}"; do install_one "$n"; done ;;
  ""|-h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) install_one "$1" ;;
esac
