"""The transaction coordinator (Kafka's TransactionCoordinator / TransactionStateManager /
TransactionMarkerChannelManager): transactional ids, their state in `__transaction_state`, and the markers that
end a transaction on every partition it wrote."""
