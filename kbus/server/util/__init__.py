"""Helpers every layer of the broker may use (Kafka's kafka.utils and kafka.metrics): the metrics registry, the
scheduler of periodic jobs, rate-limited warnings, eager task start. They import nothing else of kbus.server."""
