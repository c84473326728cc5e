#!/usr/bin/env bash
# apt-get update + install of the given Debian packages, waiting for the apt/dpkg locks instead of failing:
# on a freshly booted machine unattended-upgrades or cloud-init hold them for minutes.
# KBUS_APT_WAIT_S (default 900) bounds the wait; KBUS_APT_POLL_S (default 5) is the poll interval.
set -euo pipefail
wait_s=${KBUS_APT_WAIT_S:-900}
poll_s=${KBUS_APT_POLL_S:-5}
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Runs apt-get with its arguments, retrying while another process holds an apt or dpkg lock.
apt_get() {
  local start=$SECONDS err
  err=$(mktemp)
  while true; do
    # DPkg::Lock::Timeout makes apt itself wait for the dpkg lock; the lists lock of `update` is retried here.
    if DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout="$wait_s" "$@" 2>"$err"; then
      rm -f "$err"; return 0
    fi
    if grep -qE "Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock directory" "$err" &&
       [ $((SECONDS - start)) -lt "$wait_s" ]; then
      holder=$(grep -o 'held by process [0-9]* ([^)]*)' "$err" | head -1 || true)
      echo "setup: waiting for the apt lock (${holder:-held by another process})" >&2
      sleep "$poll_s"
      continue
    fi
    cat "$err" >&2; rm -f "$err"; return 1
  done
}

apt_get update -qq
apt_get install -y -qq "$@" >/dev/null
