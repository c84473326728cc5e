"""Creates a topic through the Kafka protocol and prints the broker id leading partition 0 once every replica
is in sync (used by the bench scripts against Kafka and kbus alike).

    .venv/bin/python bench/lib/topic.py create -b HOST:PORT --topic T [--partitions N] [--replication-factor R]
        [--config K=V ...] [--replica-assignment 2,1,3]

--replica-assignment puts every partition on these brokers, the first one its preferred leader (so a second topic
can be led by the broker that leads the first: the one whose CPU a bench counts).
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka.admin import AdminClient, NewTopic


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("action", choices=["create"])
    ap.add_argument("-b", "--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--replication-factor", type=int, default=1)
    ap.add_argument("--config", action="append", default=[], metavar="K=V")
    ap.add_argument("--replica-assignment", default=None, metavar="B1,B2,...")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    cfg = dict(kv.split("=", 1) for kv in args.config)
    if args.replica_assignment:
        brokers = [int(b) for b in args.replica_assignment.split(",")]
        args.replication_factor = len(brokers)
        # num_partitions given too: confluent-kafka 2.16 refuses its default (-1) beside an assignment ("a default
        # partition count and a replica assignment are mutually exclusive")
        new = NewTopic(args.topic, args.partitions, replica_assignment=[brokers] * args.partitions, config=cfg)
    else:
        new = NewTopic(args.topic, args.partitions, args.replication_factor, config=cfg)
    admin.create_topics([new], operation_timeout=args.timeout)[args.topic].result(args.timeout)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(args.topic, timeout=10).topics.get(args.topic)
        if md and not md.error and len(md.partitions) == args.partitions and all(
                p.leader >= 0 and len(p.isrs) == args.replication_factor for p in md.partitions.values()):
            print(md.partitions[0].leader)
            return 0
        time.sleep(0.2)
    print(f"topic.py: {args.topic} has no leader with a full ISR after {args.timeout:g} s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
