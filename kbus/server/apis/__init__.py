"""The broker's API handlers; importing this package fills the dispatch table (registry.API_TABLE)."""

from kbus.server.apis import (  # noqa: F401
    acls,
    admin,
    api_versions,
    consumer_groups,
    elect_leaders,
    fetch,
    groups,
    log_dirs,
    metadata,
    offsets,
    produce,
    quotas,
    reassignments,
    replication,
    sasl,
    share_fetch,
    share_groups,
    share_state,
    transactions,
    users,
)
