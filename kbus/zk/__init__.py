"""ZooKeeper for kbus: launching the real Apache ZooKeeper, and Kafka 2.x's znode layout on top of kazoo."""
