"""Kafka's rules that the broker and the tools share, each in one place: .properties parsing, topic names and the
internal topics, the topic-config and broker-config tables with their limits and defaults, the error codes with one
exception base. Nothing here does I/O beyond reading a file, and nothing imports kbus.server, kbus.cli or kbus.ops:
they all import this."""
