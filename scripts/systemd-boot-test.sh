#!/usr/bin/env bash
# kbus under a real, booted systemd: a minimal Debian (debootstrap, cached in .cache/systemd-test/rootfs-base),
# kbus installed the way docs/operations.md tells an operator (a venv under /opt/kbus, from a wheel of this tree),
# booted with `systemd-nspawn --boot` on a private network (loopback only), then scripts/systemd-boot/inside.sh runs
# in it: install-service, systemctl start/stop/restart, the seed walkthrough, kill -9, journalctl, systemd-analyze.
# Needs root. Not part of ./scripts/test.sh (minutes of debootstrap and pip, and a CI runner may not allow
# nspawn); docs/operations.md records its last result. Output: .cache/systemd-test/run/{inside,console}.log
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CACHE=$REPO/.cache/systemd-test
BASE=$CACHE/rootfs-base
RUN=$CACHE/run
ROOTFS=$RUN/rootfs
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
T0=$SECONDS
say() { printf '[systemd-boot-test %3ss] %s\n' "$((SECONDS - T0))" "$*"; }

[ "$(id -u)" -eq 0 ] || { echo "systemd-boot-test: needs root (debootstrap, systemd-nspawn)" >&2; exit 2; }
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
if [ ${#need[@]} -gt 0 ]; then
  say "apt-get install ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if [ ! -x "$BASE/usr/bin/python3" ]; then
  say "debootstrap $SUITE into $BASE (once; cached)"
  rm -rf "$BASE.tmp"
  mkdir -p "$CACHE"
  # systemd as init, Python for the venv, Debian's Apache ZooKeeper + Java as docs/operations.md installs them
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,python3,python3-venv,zookeeper,default-jre-headless,ca-certificates,procps,iproute2 \
    "$SUITE" "$BASE.tmp" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  mv "$BASE.tmp" "$BASE"
fi

say "fresh copy of the rootfs"
rm -rf "$RUN"
mkdir -p "$RUN" "$CACHE/pip-cache"
cp -a "$BASE" "$ROOTFS"
echo kbus-systemd-test >"$ROOTFS/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost\n127.0.1.1 kbus-systemd-test\n' >"$ROOTFS/etc/hosts"
install -m 0755 scripts/systemd-boot/inside.sh "$ROOTFS/usr/local/sbin/kbus-systemd-test"

say "wheel of this tree"
python3 -m pip wheel -q --no-deps --no-build-isolation -w "$RUN/dist" . >"$RUN/wheel.log" 2>&1 \
  || python3 -m pip wheel -q --no-deps -w "$RUN/dist" . >"$RUN/wheel.log" 2>&1 \
  || { tail -20 "$RUN/wheel.log" >&2; exit 1; }
mkdir -p "$ROOTFS/opt/kbus/dist"
cp "$RUN"/dist/kbus-*.whl "$ROOTFS/opt/kbus/dist/"

# pip inside the container reaches PyPI through the host's network (no --private-network for this step); a CA
# bundle or local wheel directory the host's pip is told about is handed in too
pip_args=(--bind="$CACHE/pip-cache:/root/.cache/pip")
for var in PIP_CERT PIP_FIND_LINKS PIP_INDEX_URL; do
  val=${!var:-}
  [ -n "$val" ] || continue
  if [ -e "$val" ]; then pip_args+=(--bind-ro="$val:/run/host-$var" --setenv="$var=/run/host-$var")
  else pip_args+=(--setenv="$var=$val"); fi
done
say "python3 -m venv /opt/kbus/venv && pip install kbus (in the container)"
systemd-nspawn --register=no --keep-unit --quiet -D "$ROOTFS" "${pip_args[@]}" /bin/sh -c \
  'python3 -m venv /opt/kbus/venv && /opt/kbus/venv/bin/pip install -q /opt/kbus/dist/kbus-*.whl' \
  >"$RUN/pip.log" 2>&1 || { tail -20 "$RUN/pip.log" >&2; exit 1; }

say "boot: systemd-nspawn --boot --private-network"
# --register=no --keep-unit: this host runs no systemd (no machined, no bus to ask for a scope)
systemd-nspawn --register=no --keep-unit --private-network -D "$ROOTFS" --boot --console=pipe \
  >"$RUN/console.log" 2>&1 &
NSPAWN=$!
cleanup() {
  if kill -0 "$NSPAWN" 2>/dev/null; then
    [ -n "${LEADER:-}" ] && nsenter -t "$LEADER" -a systemctl poweroff >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.5; done
    kill -TERM "$NSPAWN" 2>/dev/null || true; sleep 2; kill -KILL "$NSPAWN" 2>/dev/null || true
  fi
  wait "$NSPAWN" 2>/dev/null || true
}
trap cleanup EXIT
LEADER=
for _ in $(seq 1 100); do
  LEADER=$(pgrep -P "$NSPAWN" -x systemd || true)
  [ -n "$LEADER" ] && break
  kill -0 "$NSPAWN" 2>/dev/null || { cat "$RUN/console.log" >&2; echo "systemd-nspawn exited" >&2; exit 1; }
  sleep 0.2
done
[ -n "$LEADER" ] || { echo "no systemd in the container" >&2; exit 1; }
in_container() { nsenter -t "$LEADER" -a env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 "$@"; }
t_boot=$SECONDS
state=
for _ in $(seq 1 240); do  # is-system-running --wait can return before the container's bus is up: poll instead
  state=$(in_container systemctl is-system-running 2>/dev/null || true)
  case $state in running|degraded) break ;; esac
  sleep 0.5
done
say "container systemd (pid $LEADER on the host) is '$state' after $((SECONDS - t_boot))s"
[ "$state" = running ] || in_container systemctl --no-pager --failed || true

say "running kbus-systemd-test inside"
set +e
in_container /usr/local/sbin/kbus-systemd-test 2>&1 | tee "$RUN/inside.log"
rc=${PIPESTATUS[0]}
set -e
say "inside: exit $rc; powering off"
in_container systemctl poweroff >/dev/null 2>&1 || true
for _ in $(seq 1 120); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.5; done
say "done in $((SECONDS - T0))s (logs: $RUN/inside.log, $RUN/console.log)"
exit "$rc"
