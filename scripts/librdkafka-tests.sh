#!/usr/bin/env bash
# Runs tests of librdkafka's own suite against a kbus broker (default: 0011 produce_batch and 0034 offset_reset,
# the two issue 10 names). librdkafka is cloned into .cache/librdkafka (or LIBRDKAFKA_SRC, a clone or tarball tree
# you already have), built without SSL/SASL, and its test runner linked with only the chosen tests (the others
# become stubs: building all ~200 takes long on 2 cores). A standalone kbus broker is started on a free port with
# the settings librdkafka's test clusters use (num.partitions=4, auto topic creation).
#   usage: scripts/librdkafka-tests.sh [TESTS]    e.g. scripts/librdkafka-tests.sh 0011,0034
# Not part of scripts/test.sh (it needs GitHub and ~10 minutes of compiling); results in bench/notes/compat/librdkafka.md.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
tests=${1:-0011,0034}
src=${LIBRDKAFKA_SRC:-$repo/.cache/librdkafka}
PY=$repo/.venv/bin/python
if [ ! -f "$src/configure" ]; then
  git clone -q --depth 1 https://github.com/confluentinc/librdkafka.git "$src"
fi
cd "$src"
if [ ! -f src/librdkafka.a ]; then
  ./configure --disable-ssl --disable-gssapi --disable-zstd --disable-curl --disable-sasl >configure.log
  make -j"$(nproc)" libs >make.log 2>&1 || { tail -20 make.log >&2; exit 1; }
fi
cd tests
# every test main except the chosen ones becomes a stub returning 0
keep=$(echo "$tests" | tr ',' '\n')
grep -o "_TEST_DECL([0-9a-zA-Z_]*)" test.c | sed 's/_TEST_DECL(\(.*\))/\1/' | while read -r name; do
  echo "$keep" | grep -q "^${name%%_*}$" || echo "int main_$name(int argc, char **argv) { (void)argc; (void)argv; return 0; }"
done >kbus_stubs.c
objs=()
for f in test.c rusage.c sockem.c sockem_ctrl.c kbus_stubs.c $(for t in $keep; do ls "$t"-*.c; done); do
  gcc -g -O2 -I../src -I. -DWITH_SOCKEM=1 -c "$f" -o "${f%.c}.kbus.o"
  objs+=("${f%.c}.kbus.o")
done
gcc -rdynamic -o kbus-test-runner "${objs[@]}" ../src/librdkafka.a -lm -lz -ldl -lpthread -lrt

work=$(mktemp -d "${TMPDIR:-/tmp}/kbus-librdkafka.XXXXXX")
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/server.properties" <<EOF
broker.id=0
listeners=PLAINTEXT://127.0.0.1:$port
log.dirs=$work/data
zookeeper.connect=
num.partitions=4
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
group.initial.rebalance.delay.ms=0
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
EOF
(cd "$repo" && exec "$PY" -m kbus.server "$work/server.properties" >"$work/server.log" 2>&1) &
broker=$!
trap 'kill $broker 2>/dev/null; wait $broker 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
echo "bootstrap.servers=127.0.0.1:$port" >"$work/test.conf"
RDKAFKA_TEST_CONF="$work/test.conf" TESTS=$tests ./kbus-test-runner
