#!/usr/bin/env bash
# Records what Kafka 3.9's kafka-configs prints for a topic's and a broker's configs when they come from every
# layer: server.properties (config/server.properties + min.insync.replicas=1), the cluster-wide dynamic default,
# broker 0's dynamic configs and the topic's own overrides. Run against Apache Kafka to (re)record
# kafka-3.9.2-config-sources.txt; test_config_sources.py sets up the same layers on kbus.
#   usage: tests/e2e/ecosystem/recorded/config_sources.sh kafka|kbus OUTFILE
set -euo pipefail
out=$(realpath "$2"); cd "$(dirname "$0")/../../../.."
. bench/lib/lib.sh
who=$1
mkdir -p .cache/bench; work=$(mktemp -d "$PWD/.cache/bench/sources.XXXXXX")
trap bench_cleanup EXIT
zkport=$(free_port); start_zk "$zkport"
port=$(free_port)
if [ "$who" = kafka ]; then
  start_kafka k0 "$port" "127.0.0.1:$zkport/k" --override broker.id=0 --override min.insync.replicas=1
else
  start_kbus k0 "$port" "127.0.0.1:$zkport/k" --override broker.id=0 --override min.insync.replicas=1
fi
wait_port "$port"
libs=$(kafka_libs)
tool() { java -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
  -Dlog4j.configuration="file:$libs/../config/tools-log4j.properties" -cp "$libs/*" "$@" --bootstrap-server "127.0.0.1:$port"; }
kc() { tool kafka.admin.ConfigCommand "$@"; }
kc --entity-type brokers --entity-default --alter \
  --add-config log.retention.ms=3600000,min.insync.replicas=1,log.cleaner.delete.retention.ms=3600000,log.roll.ms=360000000
kc --entity-type brokers --entity-name 0 --alter --add-config log.segment.bytes=536870912,min.insync.replicas=1
tool org.apache.kafka.tools.TopicCommand --create --topic t --partitions 1 --replication-factor 1 \
  --config retention.ms=7200000 --config segment.ms=600000
sleep 2
{ kc --entity-type topics --entity-name t --describe --all; echo ====; kc --entity-type topics --entity-name t --describe
  echo ====; kc --entity-type brokers --entity-name 0 --describe --all |
    grep -E "log\.(retention|roll|segment\.bytes|cleaner\.delete)|min\.insync|message\.max|flush"; } >"$out" 2>&1
