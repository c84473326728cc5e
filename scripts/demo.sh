#!/usr/bin/env bash
# The seed walkthrough end to end, with `kbus` in place of Kafka's scripts: start ZooKeeper and a broker,
# create topic-1 with three partitions, produce "Hello World" and "Hello Kafka", consume them from the beginning.
# KEEP_RUNNING=1 leaves ZooKeeper and the broker up afterwards (stop them with kbus server-stop / zookeeper-stop).
set -euo pipefail
cd "$(dirname "$0")/.."
KBUS_EXTRAS=${KBUS_EXTRAS-} ./scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"

cleanup() {
  if [ "${KEEP_RUNNING:-0}" != 1 ]; then
    kbus server-stop config/server.properties >/dev/null 2>&1 || true
    kbus zookeeper-stop >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

set -x
kbus zookeeper-start --daemon config/zookeeper.properties
kbus server-start --daemon config/server.properties
kbus topics --create --topic topic-1 --zookeeper localhost:2181 --partitions 3 --replication-factor 1 --if-not-exists
kbus topics --describe --topic topic-1 --bootstrap-server localhost:9092
printf 'Hello World\nHello Kafka\n' | kbus console-producer --broker-list localhost:9092 --topic topic-1
kbus console-consumer --bootstrap-server localhost:9092 --topic topic-1 --from-beginning --timeout-ms 5000
