"""Client quotas (Kafka's ClientQuotaManager / ClientRequestQuotaManager) and the windowed rate every quota measures
with (Kafka's metrics Rate/SimpleRate)."""
