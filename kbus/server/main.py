"""Broker process entry point: `kbus server-start` and `python -m kbus.server` both land in run()."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys

from kbus.common.broker_config import ConfigError, KafkaConfig
from kbus.common.broker_config_describe import config_banner

GC_YOUNG_THRESHOLD = 20_000
log = logging.getLogger("kbus.server")
LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def configure_logging(level: str | None = None) -> None:
    log_config = os.environ.get("KBUS_LOG_CONFIG")
    if log_config:
        # an operator's logging.yaml (Kafka: KAFKA_LOG4J_OPTS); raises LoggingConfigError (a ValueError)
        from kbus.ops.logging_config import apply

        apply(log_config)
        return
    broker_process = os.environ.get("KBUS_BROKER_PROCESS")  # one of num.broker.processes: say which, in one log
    fmt = LOG_FORMAT.replace("%(message)s", f"[broker {broker_process}] %(message)s") if broker_process else LOG_FORMAT
    logging.basicConfig(
        level=(level or os.environ.get("KBUS_LOG_LEVEL", "INFO")).upper(), format=fmt, stream=sys.stdout
    )


def sd_notify(message: str) -> None:
    """systemd Type=notify readiness, without a dependency: one datagram to $NOTIFY_SOCKET."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(addr)
        s.sendall(message.encode())


async def serve(config: KafkaConfig) -> None:
    import kbus.server.apis  # noqa: F401 - fills the dispatch table
    from kbus.server.broker import Broker
    from kbus.server.network.socket_server import KafkaServer

    # SIGTERM/SIGINT are ours from the first moment: the listener is bound (and the kernel completes connections)
    # before start-up ends, so a stop sent as soon as the port answers must still be a clean shutdown (exit 0 once
    # started), not Python's default death by signal
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("%s", config_banner(config))
    broker = Broker(config)
    server = KafkaServer(config, broker.managers)
    broker.connection_config_listeners.append(server.apply_connection_configs)
    broker.managers.quotas.add_ip_listener(server.ip_quotas_changed)
    try:
        await server.bind()
    except OSError as exc:
        await server.stop()
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise SystemExit(f"ERROR cannot listen on {config.listeners_raw}: {reason}") from None
    try:
        await broker.start(listen=server.listen)
    except BaseException:
        await server.stop()
        raise
    # The metrics/health endpoint comes up before the Kafka listener serves requests, so whoever waits for the
    # broker's answers or its READY=1 (daemon mode, tests, orchestration) can scrape as soon as it has them.
    ops_endpoint = None
    if config.metrics_port >= 0:
        from kbus.ops.http_endpoint import start_for_broker

        try:
            ops_endpoint = await start_for_broker(broker, config.metrics_host, config.metrics_port)
        except OSError as exc:
            await server.stop()
            await broker.stop()
            raise SystemExit(
                f"ERROR cannot listen on metrics.port {config.metrics_host}:{config.metrics_port}: {exc.strerror}"
            ) from None
    await server.start()
    # What start-up built (modules, protocol schemas, metadata, open logs) lives as long as the broker: moved out of
    # the collector's generations, a full collection scans only what requests allocate since. Unfrozen, each gen-2
    # pass walked the whole start-up heap on the event loop (34 ms measured, stalling every request in flight).
    gc.collect()
    gc.freeze()
    # A young collection every 20,000 allocations instead of Python's 700: with thousands of requests in flight
    # (one per connection), their objects outlived the frequent young collections, were promoted, and kept
    # triggering full collections over every connection's and partition's objects. 5,000 connections each sending
    # a small Produce: 12 full collections and ~150 µs of broker CPU per request, ~85 µs with this threshold (1
    # full collection; bench/notes/RESULTS.md, Scale). Cycles are still collected, a little later.
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    log.info("[KafkaServer id=%d] started (kbus, cluster.id=%s)", broker.broker_id, broker.cluster_id)
    sd_notify("READY=1")
    await stop.wait()
    log.info("[KafkaServer id=%d] shutting down", broker.broker_id)
    sd_notify("STOPPING=1")
    if ops_endpoint is not None:
        await ops_endpoint.stop()
    await broker.controlled_shutdown()
    await server.stop()
    await broker.stop()
    log.info("[KafkaServer id=%d] shut down completed", broker.broker_id)


USAGE = "USAGE: kbus server-start [-daemon] server.properties [--override property=value]*"


def run(config_path: str | None, overrides: list[str]) -> int:
    if config_path is None:
        # Kafka's kafka-server-start.sh: no defaults that would open 0.0.0.0:9092 with nobody having asked for it
        print(USAGE)
        return 1
    try:
        configure_logging()
    except ValueError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    try:
        config = KafkaConfig.load(config_path, overrides)
    except ConfigError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    for key in config.unknown_keys():
        log.warning("The configuration '%s' was supplied but isn't a known config.", key)
    for key in config.ignored_keys():  # a Kafka key kbus does not act on (docs/operations.md lists them)
        log.warning("The configuration '%s' is a Kafka broker config that kbus does not act on; it is accepted "
                    "and shown by DescribeConfigs only.", key)
    from kbus.server.broker_set import log_dirs_layout_error

    if error := log_dirs_layout_error(config.log_dirs, config.num_broker_processes):
        print(f"ERROR {error}", file=sys.stderr)
        return 1
    if config.num_broker_processes > 1:
        return run_broker_set(config_path, overrides, config)
    try:
        import uvloop

        use_uvloop = True
    except ImportError:
        use_uvloop = False
    try:
        if use_uvloop:
            uvloop.run(serve(config))
        else:
            asyncio.run(serve(config))
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 1
        raise
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # a startup failure (log dir locked, broker.id taken, ZooKeeper unreachable, ...)
        what = startup_failure(exc)
        log.error("Fatal error during KafkaServer startup. Prepare to shutdown: %s", what)
        print(f"ERROR {what}", file=sys.stderr)
        return 1
    return 0


def startup_failure(exc: BaseException) -> str:
    """What failed, in one line: the exception's type and message (as the first line of Kafka's stack trace),
    never empty: kazoo's ConnectionLoss has no message, and 'Prepare to shutdown: ' followed by nothing said
    nothing."""
    message = str(exc).strip()
    if isinstance(exc, ConfigError) and message:
        return message  # a config kbus cannot honour already names its key, as when refused before start-up
    return f"{type(exc).__name__}: {message}" if message else f"{type(exc).__name__} (no message)"


def run_broker_set(config_path: str, overrides: list[str], config: KafkaConfig) -> int:
    """num.broker.processes > 1: this process supervises N brokers (kbus.server.broker_set) instead of being one."""
    from kbus.common.broker_processes import broker_process_specs
    from kbus.server.broker_set import BrokerSet

    try:
        specs = broker_process_specs(config, socket.gethostname())
    except ConfigError as exc:
        print(f"ERROR {exc}", file=sys.stderr)
        return 1
    return BrokerSet(config_path, overrides, specs, sd_notify).run()
