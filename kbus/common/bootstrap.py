"""Bootstrap server lists as Kafka's tools accept them (ToolsUtils.validatePortOrDie), and a quick reachability
check so a tool fails in seconds instead of retrying quietly for a minute."""

from __future__ import annotations

import re
import socket

from kbus.common.errors import UsageError

# host:port pairs separated by commas; hosts may be bracketed IPv6.
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[^\s:,\[\]]+):(\d{1,5})$")
CONNECT_TIMEOUT_S = 3.0


def validate_bootstrap(bootstrap: str | None, option: str = "--bootstrap-server") -> list[tuple[str, int]]:
    if not bootstrap:
        raise UsageError(f'Missing required argument "[{option.lstrip("-")}]"')
    servers: list[tuple[str, int]] = []
    for part in bootstrap.split(","):
        m = _HOST_PORT.match(part.strip())
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise UsageError(
                f"Invalid {option} '{bootstrap}'. Please provide valid host:port like host1:9091,host2:9092"
            )
        servers.append((m.group(1).strip("[]"), int(m.group(2))))
    return servers


def check_reachable(bootstrap: str, option: str = "--bootstrap-server") -> None:
    """Raise ConnectionError with the OS's reason when no bootstrap server accepts a TCP connection."""
    reasons: list[str] = []
    for host, port in validate_bootstrap(bootstrap, option):
        try:
            with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
                return
        except TimeoutError:
            reasons.append(f"{host}:{port}: timed out after {CONNECT_TIMEOUT_S:g} s")
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or exc}")
    raise ConnectionError(f"Could not connect to any broker ({'; '.join(reasons)})")
