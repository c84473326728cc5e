"""Apache Kafka's own Connect runtime (Connect workers, MirrorMaker 2) run against kbus: `kbus connect-*`."""
