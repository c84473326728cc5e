"""Zero-copy Fetch responses: a frame spliced around file regions is byte for byte the frame kio encodes with the
record bytes inline, in the non-flexible (int32 length) and flexible (varint length) layouts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kbus.protocol.codec import RequestHeader, build, encode_response, nested, response_type
from kbus.protocol.splice import FileRegion, RecordSplicer, SplicedFrame


def fetch_response(version: int, records: list[bytes]) -> Any:
    """kio's Fetch response of `version` (codec.build: the fields that version has, the others dropped)."""
    cls = response_type(1, version)
    parts = [build(nested(cls, "PartitionData"), partition_index=i, error_code=0, high_watermark=1000 + i,
                   last_stable_offset=1000 + i, log_start_offset=0, aborted_transactions=None,
                   preferred_read_replica=-1, records=r) for i, r in enumerate(records)]
    topics = [build(nested(cls, "FetchableTopicResponse"), topic="topic-\xff-free.name", partitions=parts)]
    return build(cls, throttle_time=0, error_code=0, session_id=0, responses=topics)


def materialize(frame: SplicedFrame | bytes) -> bytes:
    if isinstance(frame, bytes):
        return frame
    return b"".join(os.pread(p.fd, p.size, p.position) if isinstance(p, FileRegion) else p for p in frame.parts)


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_spliced_frame_equals_inline_encoding(tmp_path: Path, version: int) -> None:
    # record sets of sizes that need 1, 2 and 3 varint bytes, one empty partition, one at a file offset
    sets = [os.urandom(100), b"", os.urandom(20_000), os.urandom(300_000), os.urandom(17)]
    path = tmp_path / "segment.log"
    path.write_bytes(b"junk" + b"".join(sets))
    fd = os.open(path, os.O_RDONLY)
    try:
        header = RequestHeader(1, version, 42, "c", version >= 12)
        inline = encode_response(header, fetch_response(version, sets))
        splicer = RecordSplicer(header.flexible)
        pos = 4
        fields = []
        for s in sets:
            fields.append(splicer.placeholder(FileRegion(fd, pos, len(s))) if s else b"")
            pos += len(s)
        spliced = splicer.splice(encode_response(header, fetch_response(version, fields)))
        assert isinstance(spliced, SplicedFrame)
        assert sum(isinstance(p, FileRegion) for p in spliced.parts) == 4
        assert len(spliced) == len(inline)
        assert materialize(spliced) == inline
    finally:
        os.close(fd)


def test_a_frame_without_placeholders_is_left_alone() -> None:
    header = RequestHeader(1, 12, 1, "c", True)
    frame = encode_response(header, fetch_response(12, [b"abc"]))
    assert RecordSplicer(True).splice(frame) is frame


def test_a_lost_placeholder_is_an_error() -> None:
    header = RequestHeader(1, 11, 1, "c", False)
    splicer = RecordSplicer(False)
    splicer.placeholder(FileRegion(0, 0, 10))
    with pytest.raises(ValueError, match="placeholder 0"):
        splicer.splice(encode_response(header, fetch_response(11, [b"not the placeholder"])))
