#!/usr/bin/env bash
# Sets up a fresh machine for kbus: Debian packages (Apache ZooKeeper, kcat, a JDK, Maven), a virtualenv in .venv
# with kbus and its test/ui/spark extras. Safe to run again; it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
# a JDK and Maven: Apache Kafka's jars and the Java client tests (scripts/kafka-jars.sh, tests/e2e/ecosystem/java)
command -v javac >/dev/null 2>&1 || need_pkgs+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_pkgs+=(maven)
# Node.js and npm: the kafkajs client test (tests/e2e/ecosystem/js)
command -v npm >/dev/null 2>&1 || need_pkgs+=(nodejs npm)
[ -f /usr/share/java/zookeeper.jar ] || need_pkgs+=(zookeeper)
command -v kcat >/dev/null 2>&1 || need_pkgs+=(kcat)
# promtool checks and unit-tests monitoring/kbus-alerts.yml against real scrapes (tests/integration/test_monitoring.py)
command -v promtool >/dev/null 2>&1 || need_pkgs+=(prometheus)
# pip install builds kbus's C extensions (the produce record scan, the hot path compiled by mypyc: ~1.5 min of CPU;
# without a compiler it installs pure Python): a compiler and Python's headers
command -v gcc >/dev/null 2>&1 || need_pkgs+=(gcc)
"${PYTHON:-python3}" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
  || need_pkgs+=(python3-dev)
# systemd-analyze validates the units in systemd/ (tests/e2e/test_systemd_units.py); no running systemd is needed
command -v systemd-analyze >/dev/null 2>&1 || need_pkgs+=(systemd)
# tmux runs kaskade (a terminal UI) in tests/e2e/ecosystem/test_python_apps.py, its screen read with capture-pane
command -v tmux >/dev/null 2>&1 || need_pkgs+=(tmux)
# ip (network namespaces of the partition tests) and ss (a connection's socket buffers, test_connection_handling.py)
{ command -v ip && command -v ss; } >/dev/null 2>&1 || need_pkgs+=(iproute2)
# headless Chromium and its WebDriver: the browser tests of kbus ui (tests/e2e/test_ui_browser.py)
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_pkgs+=(chromium-driver)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian packages: ${need_pkgs[*]}"
    ./scripts/apt-install.sh "${need_pkgs[@]}"
  else
    echo "setup: please install ${need_pkgs[*]} with your package manager" >&2
  fi
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import ensurepip' 2>/dev/null && command -v apt-get >/dev/null 2>&1; then
  ./scripts/apt-install.sh python3-venv  # Debian splits venv's pip bootstrap out of python3
fi
# a venv left without pip by an earlier failed attempt is made again
[ -x .venv/bin/python ] && [ -x .venv/bin/pip ] || "$PY" -m venv --clear .venv
mkdir -p logs
if ! { .venv/bin/python -m pip install -q --upgrade pip &&
       .venv/bin/python -m pip install -q -e ".[test,ui${KBUS_EXTRAS-,spark}]"; } >logs/setup-pip.log 2>&1; then
  tail -20 logs/setup-pip.log >&2
  echo "setup: pip install failed (full log: logs/setup-pip.log)" >&2
  exit 1
fi
.venv/bin/python -c "import kbus, confluent_kafka, kio" || { echo "setup: kbus did not install" >&2; exit 1; }
echo "setup: ready (.venv/bin/kbus)"
