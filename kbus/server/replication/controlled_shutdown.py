"""Kafka's controlled shutdown: before a clean stop, hand leadership to other in-sync replicas so clients move to
the new leaders while this broker still answers them."""

from __future__ import annotations

import asyncio
import logging

from kbus.server.metadata.types import MetadataStore
from kbus.server.replication.replica_manager import ReplicaManager

log = logging.getLogger("kbus.server")
TIMEOUT_S = 30


async def controlled_shutdown(metadata: MetadataStore, replicas: ReplicaManager) -> None:
    led = [k for k, p in replicas.partitions.items() if p.is_leader and p.replicated]
    replicas.shutting_down = True  # lead nothing new, follow nothing
    try:
        stranded = await asyncio.wait_for(asyncio.to_thread(metadata.controlled_shutdown), timeout=TIMEOUT_S)
    except Exception as exc:
        log.warning("Controlled shutdown failed (%s); proceeding with an uncontrolled one", exc)
        return
    await replicas.apply_metadata()
    # `stranded` also names partitions this broker only followed (or led alone, RF=1): count what it led
    kept = set(stranded)
    log.info(
        "Controlled shutdown: moved leadership of %d partition(s); %d had no other in-sync replica",
        sum(1 for k in led if k not in kept),
        sum(1 for k in led if k in kept),
    )
