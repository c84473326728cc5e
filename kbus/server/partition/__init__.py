"""Kafka's Partition (kafka.cluster): one replica's high watermark, followers and ISR, and the errors of the replicated
write path it raises."""
