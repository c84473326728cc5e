"""`kbus share-groups`: kafka-share-groups.sh (Kafka 4's ShareGroupCommand) — list, describe (offsets, members,
state), reset and delete the offsets of share groups, delete share groups, with Kafka's column layouts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from kbus.admin.errors import AdminError
from kbus.admin.kafka import EARLIEST, LATEST, KafkaAdmin
from kbus.admin.share_groups import ShareGroupAdmin, ShareGroupInfo, ShareOffset
from kbus.admin.wire import WireAdmin
from kbus.cli.app import app
from kbus.cli.client_config import translate, wire_security
from kbus.cli.common import KafkaStyleCommand, UsageError, check_reachable, fail, load_properties
from kbus.cli.options import (
    AdminTimeout,
    AllTopics,
    BootstrapServer,
    CommandConfig,
    DescribeOffsets,
    GroupState,
    ToDatetime,
    ToEarliest,
    ToLatest,
    ToOffset,
)

MISSING = "-"
# Kafka's exception classes for the errors its tool prints them with
_EXCEPTIONS = {
    "NON_EMPTY_GROUP": "org.apache.kafka.common.errors.GroupNotEmptyException",
    "GROUP_ID_NOT_FOUND": "org.apache.kafka.common.errors.GroupIdNotFoundException",
    "GROUP_AUTHORIZATION_FAILED": "org.apache.kafka.common.errors.GroupAuthorizationException",
}


def _w(values: list[str], minimum: int = 15) -> int:
    return max([minimum, *(len(v) for v in values)])


def _cell(v: int) -> str:
    return MISSING if v < 0 else str(v)


def _row(values: list[str], widths: list[int]) -> str:
    return " ".join(f"{v:<{w}}" for v, w in zip(values[:-1], widths, strict=True)) + " " + values[-1]


def format_offsets(group: str, offsets: list[ShareOffset], verbose: bool) -> list[str]:
    g, t = _w([group]), _w([o.topic for o in offsets])
    head = ["GROUP", "TOPIC", "PARTITION", *(["LEADER-EPOCH"] if verbose else []), "START-OFFSET", "LAG"]
    widths = [g, t, 10, *([13] if verbose else []), 13]
    lines = [_row(head, widths)]
    for o in offsets:
        state = o.start_offset >= 0
        lines.append(_row([group, o.topic, str(o.partition),
                           *([_cell(o.leader_epoch) if state else MISSING] if verbose else []),
                           _cell(o.start_offset), _cell(o.lag) if state else MISSING], widths))
    return lines


def _assignment(tps: list[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for topic, p in tps:
        by_topic.setdefault(topic, []).append(p)
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or MISSING


def format_members(info: ShareGroupInfo, verbose: bool) -> list[str]:
    ms = info.members
    widths = [_w([info.group_id]), _w([m.member_id for m in ms]), _w([m.host for m in ms]),
              _w([m.client_id for m in ms]), 12, *([13] if verbose else [])]
    head = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", *(["MEMBER-EPOCH"] if verbose else []),
            "ASSIGNMENT"]
    lines = [_row(head, widths)]
    for m in ms:
        lines.append(_row([info.group_id, m.member_id, m.host, m.client_id, str(len(m.assignment)),
                           *([str(m.member_epoch)] if verbose else []), _assignment(m.assignment)], widths))
    return lines


def format_state(info: ShareGroupInfo, verbose: bool) -> list[str]:
    c = info.coordinator
    coordinator = f"{c.host}:{c.port}  ({c.node_id})"
    widths = [_w([info.group_id]), _w([coordinator], 25), 15, *([12, 17] if verbose else [])]
    head = ["GROUP", "COORDINATOR (ID)", "STATE", *(["GROUP-EPOCH", "ASSIGNMENT-EPOCH"] if verbose else []),
            "#MEMBERS"]
    values = [info.group_id, coordinator, info.state,
              *([str(info.group_epoch), str(info.assignment_epoch)] if verbose else []), str(len(info.members))]
    return [_row(head, widths), _row(values, widths)]


class _ShareGroupsCommand(KafkaStyleCommand):
    optional_values = {"--state": ""}


@app.command("share-groups", cls=_ShareGroupsCommand)
def share_groups(
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    list_: Annotated[bool, typer.Option("--list", help="List all share groups")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Describe share groups: start offsets and lag")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Delete share groups (they must have no members)")] = False,
    delete_offsets: Annotated[
        bool, typer.Option("--delete-offsets", help="Delete a share group's offsets of the given topics")
    ] = False,
    reset_offsets: Annotated[
        bool, typer.Option("--reset-offsets", help="Reset a share group's start offsets (no members)")
    ] = False,
    group: Annotated[list[str] | None, typer.Option("--group", help="Share group id (repeatable)")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Apply to every share group")] = False,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="Topic, or topic:0,1 with --reset-offsets (repeatable)")
    ] = None,
    all_topics: AllTopics = False,
    members: Annotated[bool, typer.Option("--members", help="With --describe: the members")] = False,
    state: GroupState = None,
    offsets: DescribeOffsets = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="With --describe: epochs")] = False,
    to_earliest: ToEarliest = False,
    to_latest: ToLatest = False,
    to_offset: ToOffset = None,
    to_datetime: ToDatetime = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the new offsets")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Reset the offsets")] = False,
    timeout: AdminTimeout = 10000,
) -> None:
    """List, describe, delete share groups and reset their offsets (kafka-share-groups.sh)."""
    if sum([list_, describe, delete, delete_offsets, reset_offsets]) != 1:
        fail("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
             "--delete-offsets")
    groups = list(group or [])
    try:
        if not bootstrap_server:
            raise UsageError('Missing required argument "[bootstrap-server]"')
        if (describe or delete) and not groups and not all_groups:
            raise UsageError("Option [describe] takes one of these options: [all-groups], [group]" if describe
                             else "Option [delete] takes one of these options: [all-groups], [group]")
        if (reset_offsets or delete_offsets) and len(groups) != 1:
            raise UsageError("Option [reset-offsets] takes the option: [group]" if reset_offsets
                             else "Option [delete-offsets] takes the option: [group]")
        if reset_offsets and dry_run == execute:
            raise UsageError("Option [reset-offsets] takes the option: [execute] or [dry-run]")
        check_reachable(bootstrap_server)
        security = wire_security(command_config)
        admin = ShareGroupAdmin(WireAdmin(bootstrap_server, max(1.0, timeout / 1000), security))
        if all_groups:
            groups = [g for g, _ in admin.list_groups()]
        if list_:
            _list(admin, state)
        elif describe:
            _describe(admin, groups, members, state is not None, verbose)
        elif delete:
            raise typer.Exit(_delete(admin, groups))
        elif delete_offsets:
            if not topic:
                raise UsageError("Option [delete-offsets] takes the option: [topic]")
            _delete_offsets(admin, groups[0], topic)
        else:
            conf = translate(load_properties(command_config)) if command_config else {}
            _reset(admin, KafkaAdmin(bootstrap_server, conf, timeout_s=max(1.0, timeout / 1000)), groups[0],
                   topic or [], all_topics, to_earliest, to_latest, to_offset, to_datetime, execute)
    except UsageError as exc:
        fail(str(exc))
    except (ConnectionError, AdminError) as exc:
        name = getattr(exc, "name", "")
        fail(f"Error: Executing share group command failed due to {_EXCEPTIONS.get(name, name)}: {exc}"
             if name in _EXCEPTIONS else f"Error: Executing share group command failed due to {exc}")


def _list(admin: ShareGroupAdmin, state: str | None) -> None:
    listed = admin.list_groups()
    if state is None:
        for gid, _ in listed:
            print(gid)
        return
    wanted = {s.strip().lower() for s in state.split(",") if s.strip()}
    rows = [(g, s) for g, s in listed if not wanted or s.lower() in wanted]
    width = _w([g for g, _ in rows])
    print(f"{'GROUP':<{width}} STATE")
    for g, s in rows:
        print(f"{g:<{width}} {s}")


def _describe(admin: ShareGroupAdmin, groups: list[str], members: bool, state: bool, verbose: bool) -> None:
    for info in admin.describe(groups):
        print()
        if state:
            lines = format_state(info, verbose)
        elif members:
            lines = format_members(info, verbose)
        else:
            lines = format_offsets(info.group_id, admin.offsets(info.group_id), verbose)
        print("\n".join(lines))


def _delete(admin: ShareGroupAdmin, groups: list[str]) -> int:
    results = admin.delete(groups)
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        print(f"Deletion of requested share groups ({', '.join(repr(g) for g in groups)}) was successful.")
        return 0
    lines = ["Error: Deletion of some share groups failed:"]
    for g, e in failed.items():
        reason = (f"Share group '{g}' is not EMPTY." if e == "NON_EMPTY_GROUP" else
                  f"Group '{g}' not found." if e == "GROUP_ID_NOT_FOUND" else e)
        lines.append(f"* Group '{g}' could not be deleted due to: {_EXCEPTIONS.get(e or '', e)}: {reason}")
    print("\n".join(lines))  # on stdout, exit code 0: as kafka-share-groups.sh
    return 0


def _delete_offsets(admin: ShareGroupAdmin, group: str, topics: list[str]) -> None:
    results = admin.delete_offsets(group, topics)
    width = _w(list(results))
    print()
    print(f"{'TOPIC':<{width}} STATUS")
    for t, e in results.items():
        print(f"{t:<{width}} {'Successful' if e is None else 'Error: ' + e}")


def _reset(admin: ShareGroupAdmin, kadmin: KafkaAdmin, group: str, topics: list[str], all_topics: bool,
           to_earliest: bool, to_latest: bool, to_offset: int | None, to_datetime: str | None,
           execute: bool) -> None:
    if sum([to_earliest, to_latest, to_offset is not None, to_datetime is not None]) != 1:
        raise UsageError("Option [reset-offsets] takes one of these options: [to-datetime], [to-earliest], "
                         "[to-latest], [to-offset]")
    info = admin.describe([group])[0]
    if info.members:
        fail(f"Share group '{group}' is not empty.")
    partitions: list[tuple[str, int]] = []
    if all_topics:
        partitions = [(o.topic, o.partition) for o in admin.offsets(group)]
    elif topics:
        for spec in topics:
            name, _, parts = spec.partition(":")
            ps = [int(p) for p in parts.split(",")] if parts else kadmin.partitions_of(name)
            partitions += [(name, p) for p in ps]
    else:
        raise UsageError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    earliest = {(o.topic, o.partition): o.offset for o in kadmin.list_offsets(partitions, EARLIEST)}
    latest = {(o.topic, o.partition): o.offset for o in kadmin.list_offsets(partitions, LATEST)}
    new: dict[tuple[str, int], int] = {}
    if to_datetime is not None:
        at = datetime.fromisoformat(to_datetime).replace(tzinfo=UTC) if "+" not in to_datetime else \
            datetime.fromisoformat(to_datetime)
        found = {(o.topic, o.partition): o.offset
                 for o in kadmin.list_offsets(partitions, int(at.timestamp() * 1000))}
    for tp in sorted(partitions):
        if to_earliest:
            new[tp] = earliest[tp]
        elif to_latest:
            new[tp] = latest[tp]
        elif to_offset is not None:
            new[tp] = min(max(to_offset, earliest[tp]), latest[tp])  # Kafka clamps to the log's range
        else:
            new[tp] = found[tp] if found.get(tp, -1) >= 0 else latest[tp]
    if execute:
        errors = admin.alter_offsets(group, new)
        failed = {tp: e for tp, e in errors.items() if e is not None}
        if failed:
            fail("\n".join(f"Error: {t}-{p}: {e}" for (t, p), e in sorted(failed.items())))
    g, t = _w([group]), _w([tp[0] for tp in new])
    print()
    print(_row(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], [g, t, 10]))
    for (topic, p), o in sorted(new.items()):
        print(_row([group, topic, str(p), str(o)], [g, t, 10]))
