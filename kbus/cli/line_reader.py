"""kafka-console-producer's LineMessageReader: turns one input line into (key, value, headers) following the
reader properties parse.key, key.separator, parse.headers, headers.delimiter, headers.separator,
headers.key.separator, null.marker and ignore.error."""

from __future__ import annotations

from dataclasses import dataclass, field


class LineReaderError(Exception):
    """A line (or the reader properties) that the reader cannot make sense of; Kafka's KafkaException text."""


@dataclass(slots=True)
class ProducerLine:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _bool(value: str) -> bool:
    return value.strip().lower() == "true"


@dataclass
class LineMessageReader:
    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None
    line_number: int = 0

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> LineMessageReader:
        reader = cls(
            parse_key=_bool(props.get("parse.key", "false")),
            key_separator=props.get("key.separator", "\t"),
            parse_headers=_bool(props.get("parse.headers", "false")),
            headers_delimiter=props.get("headers.delimiter", "\t"),
            headers_separator=props.get("headers.separator", ","),
            headers_key_separator=props.get("headers.key.separator", ":"),
            ignore_error=_bool(props.get("ignore.error", "false")),
            null_marker=props.get("null.marker"),
        )
        reader._check_separators()
        return reader

    def _check_separators(self) -> None:
        # Ambiguous separators would make a line parse two ways; Kafka refuses them up front.
        named = [
            ("key.separator", self.key_separator),
            ("headers.delimiter", self.headers_delimiter),
            ("headers.separator", self.headers_separator),
            ("headers.key.separator", self.headers_key_separator),
        ]
        if self.null_marker is not None:
            for name, value in named:
                if value == self.null_marker:
                    raise LineReaderError(f"null.marker and {name} may not be equal")
        header_seps = named[1:]
        for i, (a, va) in enumerate(header_seps):
            for b, vb in header_seps[i + 1 :]:
                if va == vb:
                    raise LineReaderError(f"{a} and {b} may not be equal")
        for name, value in named:
            if value == "":
                raise LineReaderError(f"{name} may not be empty")

    def _split(self, enabled: bool, line: str, start: int, demarcation: str, what: str) -> str | None:
        if not enabled:
            return None
        index = line.find(demarcation, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise LineReaderError(f"No {what} found on line number {self.line_number}: '{line}'")
        return line[start:index]

    def _encode(self, text: str | None) -> bytes | None:
        if text is None or (self.null_marker is not None and text == self.null_marker):
            return None
        return text.encode("utf-8", errors="surrogateescape")

    def _split_headers(self, headers: str) -> list[tuple[str, bytes | None]]:
        out: list[tuple[str, bytes | None]] = []
        for pair in headers.split(self.headers_separator):
            i = pair.find(self.headers_key_separator)
            if i == -1:
                if self.ignore_error:
                    out.append((pair, None))
                    continue
                raise LineReaderError(
                    f"No header key separator found in pair '{pair}' on line number {self.line_number}"
                )
            key = pair[:i]
            if self.null_marker is not None and key == self.null_marker:
                raise LineReaderError(
                    f"Header keys should not be equal to the null marker '{self.null_marker}' as they can't be null"
                )
            out.append((key, self._encode(pair[i + len(self.headers_key_separator) :])))
        return out

    def read(self, line: str) -> ProducerLine:
        """`line` without its line terminator."""
        self.line_number += 1
        if not (self.parse_key or self.parse_headers) and self.null_marker is None:
            # The common case (plain values) skips the parsing machinery: this runs once per input line.
            return ProducerLine(None, line.encode("utf-8", errors="surrogateescape"), [])
        headers = self._split(self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter")
        header_end = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._split(self.parse_key, line, header_end, self.key_separator, "key separator")
        key_end = header_end if key is None else header_end + len(key) + len(self.key_separator)
        value = line[key_end:]
        parsed_headers: list[tuple[str, bytes | None]] = []
        if headers is not None and not (self.null_marker is not None and headers == self.null_marker):
            parsed_headers = self._split_headers(headers)
        return ProducerLine(key=self._encode(key), value=self._encode(value), headers=parsed_headers)
