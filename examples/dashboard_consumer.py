"""Dashboard: ABC's operations-centre consumer, one member of the consumer group `abc-dashboard`.

Run three in three terminals and each one owns one partition of `abc-bus-location`; a fourth stays idle until one
of the others stops. Offsets are committed after each record is printed (at-least-once), so a restarted dashboard
continues where its group left off.

    python examples/dashboard_consumer.py --bootstrap-server localhost:9092
"""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType

from confluent_kafka import Consumer, KafkaException, TopicPartition


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Print the fleet's location updates as a member of a group.")
    parser.add_argument("--bootstrap-server", default="localhost:9092", help="broker host:port")
    parser.add_argument("--topic", default="abc-bus-location")
    parser.add_argument("--group", default="abc-dashboard", help="consumer group id (default: abc-dashboard)")
    parser.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset when the group has no committed offset",
    )
    parser.add_argument("--max-messages", type=int, default=0, help="exit after this many records (0: run forever)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap_server,
            "group.id": args.group,
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
            # Commit only what has been printed: the offset is stored after processing, auto-commit ships it.
            "enable.auto.offset.store": False,
        }
    )
    running = True

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def on_assign(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        print(f"Assigned partitions: {sorted(p.partition for p in partitions)}", file=sys.stderr, flush=True)

    def on_revoke(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
        print(f"Revoked partitions: {sorted(p.partition for p in partitions)}", file=sys.stderr, flush=True)

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    seen = 0
    try:
        while running:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                print(f"Consumer error: {msg.error()}", file=sys.stderr, flush=True)
                continue
            key = msg.key().decode() if msg.key() is not None else None
            value = msg.value().decode() if msg.value() is not None else None
            print(f"Topic={msg.topic()}, Partition={msg.partition()}, Key={key}, Value={value}", flush=True)
            consumer.store_offsets(msg)
            seen += 1
            if args.max_messages and seen >= args.max_messages:
                break
    except KafkaException as exc:
        print(f"Dashboard failed: {exc}", file=sys.stderr)
        return 1
    finally:
        consumer.close()  # commits the stored offsets and leaves the group
    return 0


if __name__ == "__main__":
    sys.exit(main())
