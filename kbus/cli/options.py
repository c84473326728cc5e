"""Options the group tools (kafka-consumer-groups.sh, kafka-share-groups.sh) declare alike: one declaration each, so
the two tools keep the same names, help and types."""

from __future__ import annotations

from typing import Annotated

import typer

BootstrapServer = Annotated[
    str | None, typer.Option("--bootstrap-server", help="The broker(s) to connect to, host:port,...")
]
CommandConfig = Annotated[str | None, typer.Option("--command-config", help="Admin client .properties file")]
AllTopics = Annotated[bool, typer.Option("--all-topics", help="With --reset-offsets: every topic")]
GroupState = Annotated[
    str | None, typer.Option("--state", help="With --describe: group state; with --list: filter by states")
]
DescribeOffsets = Annotated[bool, typer.Option("--offsets", help="With --describe: offsets (the default)")]
ToEarliest = Annotated[bool, typer.Option("--to-earliest", help="Reset to the earliest offset")]
ToLatest = Annotated[bool, typer.Option("--to-latest", help="Reset to the latest offset")]
ToOffset = Annotated[int | None, typer.Option("--to-offset", help="Reset to this offset")]
ToDatetime = Annotated[
    str | None, typer.Option("--to-datetime", help="Reset to the first offset at or after YYYY-MM-DDTHH:mm:SS.sss")
]
AdminTimeout = Annotated[int, typer.Option("--timeout", help="Timeout for admin calls, in ms")]
