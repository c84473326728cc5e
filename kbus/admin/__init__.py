"""Admin clients behind `kbus topics`, `kbus consumer-groups`, `kbus get-offsets` and friends: over the wire
(KafkaAdmin, --bootstrap-server) or, for topics, straight to ZooKeeper (kbus.admin.zookeeper, --zookeeper)."""

from kbus.admin.base import TopicAdmin
from kbus.admin.errors import AdminError
from kbus.admin.kafka import KafkaAdmin, KafkaTopicAdmin

__all__ = ["AdminError", "KafkaAdmin", "KafkaTopicAdmin", "TopicAdmin"]
