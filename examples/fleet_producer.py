"""Fleet: the six buses of ABC's case study sending location updates to `abc-bus-location`.

Each bus's trip code is the record key and "lat, lon" is the value, so every update of a trip lands on the same
partition. The producer uses librdkafka's `murmur2_random` partitioner, which is the Java client's default, so the
trips land on the same partitions as in the article (BLRHBL002/004/006 on partition 2, BLRHBL005 on 1, the rest
on 0 for a 3-partition topic).

    kbus topics --bootstrap-server localhost:9092 --create --topic abc-bus-location --partitions 3 \
        --replication-factor 1
    python examples/fleet_producer.py --bootstrap-server localhost:9092
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import KafkaError, Message, Producer

LOCATIONS = {
    "BLRHBL001": "13.071362, 77.461906",
    "BLRHBL002": "14.399654, 76.045834",
    "BLRHBL003": "15.183959, 75.137622",
    "BLRHBL004": "13.659576, 76.944675",
    "BLRHBL005": "12.981337, 77.596181",
    "BLRHBL006": "13.024843, 77.546983",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Send the fleet's location updates to Kafka/kbus.")
    parser.add_argument("--bootstrap-server", default="localhost:9092", help="broker host:port")
    parser.add_argument("--topic", default="abc-bus-location")
    parser.add_argument("--rounds", type=int, default=10, help="location updates per bus (default: 10)")
    parser.add_argument("--interval", type=float, default=0.0, help="seconds between rounds (default: 0)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    producer = Producer({"bootstrap.servers": args.bootstrap_server, "partitioner": "murmur2_random"})
    failures: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failures.append(err)
            print(f"delivery failed for {msg.key()!r}: {err}", file=sys.stderr)

    for i in range(args.rounds):
        for trip, location in LOCATIONS.items():
            producer.produce(args.topic, key=trip, value=location, on_delivery=on_delivery)
            producer.poll(0)
        if args.interval and i + 1 < args.rounds:
            time.sleep(args.interval)
    remaining = producer.flush(30)
    sent = args.rounds * len(LOCATIONS) - remaining - len(failures)
    print(f"Sent {sent} location updates from {len(LOCATIONS)} buses to {args.topic}", file=sys.stderr)
    return 0 if remaining == 0 and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
