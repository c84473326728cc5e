"""Security as Kafka configures it: TLS contexts from ssl.* keys, SASL mechanisms from sasl.* keys and JAAS
properties, principals (ssl.principal.mapping.rules), SCRAM credentials in Kafka's format."""
