"""Log compaction (the ``cleanup.policy=compact`` half of Kafka's LogCleaner), for __consumer_offsets and
compacted user topics.

One pass over a log: build a map key -> last offset from the dirty section (offsets at or after the cleaner
checkpoint), then rewrite every inactive segment keeping, per key, only the latest record; tombstones (null
value) stay until delete.retention.ms has passed; keyless records are dropped, as Kafka does. Batches keep their
base offset and last offset delta, so offsets never move and idempotent producers keep their sequence state.
Transactions: the cleaner stops before the first unstable offset (an open transaction may still abort); batches
of aborted transactions (found through the segments' .txnindex) are dropped and never shadow a committed value;
committed transactional batches are compacted like any other; transaction markers are kept (Kafka drops them
once delete.retention.ms has passed after their transaction's data is gone: kbus keeps them, which costs a few
bytes per transaction and changes nothing a consumer sees).

A segment is swapped crash-safely the way Kafka does it: ``<base>.log.cleaned`` is written and fsynced, renamed
to ``<base>.log.swap``, the old files are renamed ``*.deleted``, and the swap file becomes ``<base>.log``. Log.open
completes a swap left by a crash and drops ``.cleaned`` leftovers.

This runs off the request path (decoding records is exactly what the broker avoids on produce and fetch): call
``LogManager.run_cleaner`` from a background thread.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from kbus.protocol import record_batch as rb
from kbus.server.log.log import Log
from kbus.server.log.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment, pread_all, write_all

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CleanResult:
    segments_rewritten: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_removed: int = 0
    next_dirty_offset: int = 0


def _read_batches(seg: LogSegment) -> list[tuple[rb.BatchHeader, bytes]]:
    out = []
    for h in seg.walk():
        out.append((h, pread_all(seg.fd, h.size, h.position)))
    return out


def _cleanable(lg: Log, now_ms: int) -> list[LogSegment]:
    """Inactive segments, oldest first, stopping at the first one younger than min.compaction.lag.ms."""
    segments = lg.segments[:-1]
    lag = lg.config.min_compaction_lag_ms
    out = []
    for seg in segments:
        if lag > 0 and now_ms - seg.largest_timestamp < lag:
            break
        out.append(seg)
    return out


def dirty_ratio(lg: Log, first_dirty_offset: int, now_ms: int) -> float:
    segments = _cleanable(lg, now_ms)
    total = sum(s.size for s in segments)
    if total == 0:
        return 0.0
    dirty = sum(s.size for s in segments if s.next_offset > first_dirty_offset)
    return dirty / total


def clean_log(lg: Log, first_dirty_offset: int, now_ms: int, *, force: bool = False) -> CleanResult | None:
    """Compact ``lg`` if its dirty ratio reaches min.cleanable.dirty.ratio (or ``force``). Returns None when
    nothing was done; otherwise the result, whose ``next_dirty_offset`` is the new cleaner checkpoint."""
    config = lg.config
    if not config.compact_enabled or lg.closed:
        return None
    segments = _cleanable(lg, now_ms)
    if not segments:
        return None
    if not force and dirty_ratio(lg, first_dirty_offset, now_ms) < config.min_cleanable_dirty_ratio:
        return None
    with lg._lock:
        unstable = lg.producer_state.first_unstable_offset()
        aborted: dict[int, list[tuple[int, int]]] = {}
        for seg in lg.segments:
            for e in seg.txn_index.entries:
                aborted.setdefault(e.producer_id, []).append((e.first_offset, e.last_offset))
    if unstable is not None:
        # an open transaction may still abort: what it wrote (and everything after) is not cleanable yet
        segments = [seg for seg in segments if seg.next_offset <= unstable]
        if not segments:
            return None

    def is_aborted(h: rb.BatchHeader) -> bool:
        return h.is_transactional and not h.is_control and any(
            first <= h.base_offset <= last for first, last in aborted.get(h.producer_id, ()))

    end_offset = segments[-1].next_offset
    if end_offset <= first_dirty_offset and not force:
        return None

    # 1. key -> latest offset over the dirty section
    latest: dict[bytes, int] = {}
    for seg in segments:
        if seg.next_offset <= first_dirty_offset:
            continue
        for h, data in _read_batches(seg):
            if h.is_control or h.next_offset <= first_dirty_offset or is_aborted(h):
                continue
            for r in rb.decode_records(data, rb.read_header(data)):
                if r.key is not None:
                    latest[r.key] = r.offset

    # 2. rewrite each cleanable segment
    with lg._lock:  # appends on the event loop add producers while this thread reads them
        keep_last_batch = {e.last_offset for e in lg.producer_state.producers.values() if e.batches}
    tombstone_horizon = now_ms - config.delete_retention_ms
    result = CleanResult(next_dirty_offset=end_offset)
    for seg in segments:
        out = bytearray()
        removed = 0
        changed = False
        for h, data in _read_batches(seg):
            if h.is_control:
                out += data
                continue
            if is_aborted(h):
                if h.last_offset in keep_last_batch:
                    out += data  # a live producer's sequence state (invisible to read_committed readers)
                else:
                    changed = True
                    removed += h.records_count
                continue
            records = rb.decode_records(data, rb.read_header(data))
            kept = [
                r for r in records
                if r.key is not None
                and r.offset >= latest.get(r.key, -1)
                and (r.value is not None or h.max_timestamp >= tombstone_horizon or r.offset >= first_dirty_offset)
            ]
            if len(kept) == len(records):
                out += data
                continue
            if not kept and h.last_offset in keep_last_batch:
                out += data  # the last batch of a live producer carries its sequence state: keep it
                continue
            changed = True
            removed += len(records) - len(kept)
            if kept:
                out += rb.rebuild_batch(h, kept)
        if not changed:
            continue
        if _swap_segment(lg, seg, bytes(out)):
            result.segments_rewritten += 1
            result.bytes_before += seg.size
            result.bytes_after += len(out)
            result.records_removed += removed
    if result.segments_rewritten:
        log.info("compacted %s: %d segment(s), %d -> %d bytes, %d records removed", lg.dir,
                 result.segments_rewritten, result.bytes_before, result.bytes_after, result.records_removed)
    return result


def _swap_segment(lg: Log, old: LogSegment, data: bytes) -> bool:
    base_name = old.log_path.name  # <base>.log
    cleaned = lg.dir / (base_name + CLEANED_SUFFIX)
    swap = lg.dir / (base_name + SWAP_SUFFIX)
    fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    with lg._lock:
        if lg.closed or old not in lg.segments[:-1]:
            cleaned.unlink(missing_ok=True)  # deleted, truncated or became active meanwhile
            return False
        os.replace(cleaned, swap)
        aborted_entries = list(old.txn_index.entries)  # the cleaned segment keeps its markers, so its index
        old.mark_deleted()
        os.replace(swap, lg.dir / base_name)
        new = LogSegment.open(lg.dir, old.base_offset, lg.config)
        for entry in aborted_entries:
            new.txn_index.append(entry)
        new.recover(verify_crc=False)
        new.on_become_inactive()
        new.release_index_fds()
        lg._replace_segment(old, new)
    return True
