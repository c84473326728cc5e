"""kbus: a lightweight Kafka-compatible message bus."""

__version__ = "0.1.0"
