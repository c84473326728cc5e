"""`kbus consumer-groups`: kafka-consumer-groups.sh — list, describe (offsets, members, state), delete and
reset the offsets of consumer groups, with Kafka's column layouts."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from kbus.admin.errors import AdminError
from kbus.admin.group_epochs import with_epochs
from kbus.admin.kafka import EARLIEST, LATEST, KafkaAdmin
from kbus.admin.models import GroupDescription, GroupOffset
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
DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major release, the "
    "default behavior of this command will be to prompt the user before executing the reset rather than doing "
    "a dry run. You should add the --dry-run option explicitly if you are scripting this command and want to "
    "keep the current default behavior without prompting."
)
_INACTIVE = ("Empty", "Dead")


@dataclass(frozen=True)
class OffsetRow:
    group: str
    topic: str | None
    partition: int | None
    current: int | None
    log_end: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.current is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.current)


def _cell(value: object) -> str:
    return MISSING if value is None else str(value)


def _width(values: list[str], minimum: int = 15) -> int:
    return max([minimum, *(len(v) for v in values)])


def format_offset_rows(rows: list[OffsetRow]) -> list[str]:
    """ConsumerGroupCommand.printOffsets: a header then one row per partition (or idle member)."""
    g = _width([r.group for r in rows])
    t = _width([_cell(r.topic) for r in rows])
    c = _width([_cell(r.consumer_id) for r in rows])
    h = _width([_cell(r.host) for r in rows])
    fmt = f"{{:<{g}}} {{:<{t}}} {{:<10}} {{:<15}} {{:<15}} {{:<15}} {{:<{c}}} {{:<{h}}} {{}}"
    lines = [fmt.format("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                        "HOST", "CLIENT-ID")]
    for r in rows:
        lines.append(
            fmt.format(r.group, _cell(r.topic), _cell(r.partition), _cell(r.current), _cell(r.log_end),
                       _cell(r.lag), _cell(r.consumer_id), _cell(r.host), _cell(r.client_id))
        )
    return [line.rstrip() for line in lines]


def format_members(desc: GroupDescription, verbose: bool) -> list[str]:
    with_instance = any(m.group_instance_id for m in desc.members)
    g = _width([desc.group_id])
    c = _width([m.member_id for m in desc.members])
    i = _width([m.group_instance_id or MISSING for m in desc.members], 17)
    h = _width([m.host for m in desc.members])
    cl = _width([m.client_id for m in desc.members])
    cols = [("GROUP", g), ("CONSUMER-ID", c)]
    if with_instance:
        cols.append(("GROUP-INSTANCE-ID", i))
    cols += [("HOST", h), ("CLIENT-ID", cl), ("#PARTITIONS", 15)]
    # Kafka always prints the ASSIGNMENT column, empty without --verbose: the padded #PARTITIONS and one space
    # end every line (byte for byte with kafka-consumer-groups.sh)
    cols.append(("ASSIGNMENT" if verbose else "", 0))

    def row(values: list[str]) -> str:
        return " ".join(f"{v:<{w}}" for v, (_, w) in zip(values, cols, strict=True))

    lines = [row([name for name, _ in cols])]
    for m in desc.members:
        values = [desc.group_id, m.member_id]
        if with_instance:
            values.append(m.group_instance_id or MISSING)
        values += [m.host, m.client_id, str(len(m.assignment))]
        if not verbose:
            values.append("")
        else:
            by_topic: dict[str, list[int]] = {}
            for topic, p in m.assignment:
                by_topic.setdefault(topic, []).append(p)
            values.append(
                ",".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(by_topic.items())) or MISSING
            )
        lines.append(row(values))
    return lines


def format_state(desc: GroupDescription) -> list[str]:
    coord = (
        f"{desc.coordinator.host}:{desc.coordinator.port} ({desc.coordinator.id})" if desc.coordinator else MISSING
    )
    # Kafka sizes the GROUP column by the coordinator's text (at least 25) and the coordinator column at 25
    cw = _width([coord], 25)
    fmt = f"{{:<{cw}}} {{:<25}} {{:<20}} {{:<15}} {{}}"
    return [
        fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
        fmt.format(desc.group_id, coord, desc.partition_assignor or "", desc.state, len(desc.members)),
    ]


def _assignment_string(tps: list[tuple[str, int]] | None) -> str:
    """Kafka 4's getAssignmentString: `topic:0,1;other:2`, topics sorted, "-" when empty."""
    if not tps:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, p in tps:
        by_topic.setdefault(topic, []).append(p)
    return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in by_topic.items()))


def format_consumer_members(desc: GroupDescription, verbose: bool) -> list[str]:
    """Kafka 4's printMembers for a consumer-protocol group: with --verbose the member's epoch and assignment and
    the group's target epoch and the member's target assignment."""
    with_instance = any(m.group_instance_id for m in desc.members)
    g = _width([desc.group_id])
    c = _width([m.member_id for m in desc.members])
    i = _width([m.group_instance_id or "" for m in desc.members], 17)
    h = _width([m.host for m in desc.members])
    cl = _width([m.client_id for m in desc.members])
    current = {m.member_id: _assignment_string(m.assignment) for m in desc.members}
    target = {m.member_id: _assignment_string(m.target_assignment) for m in desc.members}
    ca = _width(list(current.values()), 20)
    ta = _width(list(target.values()), 20)

    def head(values: list[str]) -> str:
        widths = [g, c, *([i] if with_instance else []), h, cl, 15]
        return "".join(f"{v:<{w}} " for v, w in zip(values, widths, strict=True))

    def tail(values: list[str]) -> str:
        return f"{values[0]:<15} {values[1]:<{ca}} {values[2]:<15} {values[3]:<{ta}}" if verbose else ""

    lines = [head(["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instance else []), "HOST", "CLIENT-ID",
                   "#PARTITIONS"]) + tail(["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"])]
    for m in desc.members:
        lines.append(
            head([desc.group_id, m.member_id, *([m.group_instance_id or ""] if with_instance else []), m.host,
                  m.client_id, str(len(m.assignment))])
            + tail([_cell(m.member_epoch), current[m.member_id], _cell(desc.target_assignment_epoch),
                    target[m.member_id]])
        )
    return lines


def format_consumer_state(desc: GroupDescription, verbose: bool) -> list[str]:
    """Kafka 4's printStates (its GROUP column is sized by the group id; --verbose adds the epochs)."""
    coord = (
        f"{desc.coordinator.host}:{desc.coordinator.port}  ({desc.coordinator.id})" if desc.coordinator else MISSING
    )
    gw, cw = _width([desc.group_id]), _width([coord], 25)
    strategy = desc.partition_assignor or MISSING
    if verbose:
        fmt = f"{{:<{gw}}} {{:<{cw}}} {{:<20}} {{:<20}} {{:<15}} {{:<25}} {{}}"
        return [
            fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                       "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"),
            fmt.format(desc.group_id, coord, strategy, desc.state, _cell(desc.group_epoch),
                       _cell(desc.target_assignment_epoch), len(desc.members)),
        ]
    fmt = f"{{:<{gw}}} {{:<{cw}}} {{:<20}} {{:<20}} {{}}"
    return [
        fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
        fmt.format(desc.group_id, coord, strategy, desc.state, len(desc.members)),
    ]


def format_reset_plan(plan: list[tuple[str, str, int, int]]) -> list[str]:
    fmt = "{:<30} {:<30} {:<10} {:<15}"  # padded to the end, as Kafka prints it
    return [fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")] + [fmt.format(g, t, p, o) for g, t, p, o in plan]


def parse_datetime_ms(text: str) -> int:
    """--to-datetime: 'YYYY-MM-DDTHH:mm:SS.sss', optionally with a zone ('Z', '+01:00'); no zone means local time."""
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"Error parsing timestamp '{text}': expected YYYY-MM-DDTHH:mm:SS.sss with an optional time zone"
        ) from None
    if dt.tzinfo is None:
        dt = dt.astimezone()  # local time, as Kafka's tool interprets a zone-less date
    return int(dt.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """--by-duration: ISO-8601 PnDTnHnMnS."""
    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text.strip().upper())
    if m is None or text.strip().upper() in ("P", "PT"):
        raise UsageError(f"Error parsing duration '{text}': expected ISO-8601 like PT1H30M or P1D")
    d, h, mi, s = m.groups()
    delta = timedelta(days=int(d or 0), hours=int(h or 0), minutes=int(mi or 0), seconds=float(s or 0))
    return int(delta.total_seconds() * 1000)


def parse_topic_scope(text: str) -> tuple[str, list[int] | None]:
    topic, sep, parts = text.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"Invalid --topic '{text}': expected topic or topic:0,1,2") from None


class _GroupsCommand(KafkaStyleCommand):
    # `--state` is a flag with --describe but takes an optional state filter with --list.
    optional_values = {"--state": ""}


def _error(message: str) -> None:
    print(f"\nError: {message}", file=sys.stderr, flush=True)


@app.command("consumer-groups", cls=_GroupsCommand)
def consumer_groups(
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    list_: Annotated[bool, typer.Option("--list", help="List all consumer groups")] = False,
    describe: Annotated[bool, typer.Option("--describe", help="Describe groups: offsets and lag")] = False,
    delete: Annotated[bool, typer.Option("--delete", help="Delete groups (they must have no members)")] = False,
    reset_offsets: Annotated[bool, typer.Option("--reset-offsets", help="Reset a group's committed offsets")] = False,
    group: Annotated[list[str] | None, typer.Option("--group", help="Consumer group id (repeatable)")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="Apply to every group")] = False,
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="With --reset-offsets: topic or topic:0,1 (repeatable)")
    ] = None,
    all_topics: AllTopics = False,
    members: Annotated[bool, typer.Option("--members", help="With --describe: list the members")] = False,
    state: GroupState = None,
    offsets: DescribeOffsets = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="With --describe --members: show assignments")] = False,
    to_earliest: ToEarliest = False,
    to_latest: ToLatest = False,
    to_current: Annotated[bool, typer.Option("--to-current", help="Reset to the current offset")] = False,
    to_offset: ToOffset = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by", help="Move the offset by N (may be negative)")] = None,
    to_datetime: ToDatetime = None,
    by_duration: Annotated[
        str | None, typer.Option("--by-duration", help="Reset to the offset this long ago (ISO-8601, e.g. PT1H)")
    ] = None,
    from_file: Annotated[
        str | None, typer.Option("--from-file", help="Reset to the offsets of a CSV file (as --export writes)")
    ] = None,
    export: Annotated[bool, typer.Option("--export", help="Print the reset plan as CSV")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the new offsets (the default)")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Commit the new offsets")] = False,
    timeout: AdminTimeout = 10000,
) -> None:
    """List, describe, delete consumer groups and reset their offsets (kafka-consumer-groups.sh)."""
    if sum([list_, describe, delete, reset_offsets]) != 1:
        fail("Command must include exactly one action: --list, --describe, --delete, --reset-offsets")
    groups = list(group or [])
    try:
        if (describe or delete or reset_offsets) and not groups and not all_groups:
            raise UsageError("Option [group] or [all-groups] is required")
        if not bootstrap_server:
            raise UsageError('Missing required argument "[bootstrap-server]"')
        check_reachable(bootstrap_server)
        conf = translate(load_properties(command_config)) if command_config else {}
        admin = KafkaAdmin(bootstrap_server, conf, timeout_s=max(1.0, timeout / 1000))
    except UsageError as exc:
        fail(str(exc))
    except (ConnectionError, AdminError) as exc:
        fail(f"Error: Executing consumer group command failed due to {exc}")
    try:
        if all_groups:
            groups = [g.group_id for g in admin.list_groups()]
        if list_:
            code = _list(admin, state)
        elif describe:
            wire = WireAdmin(bootstrap_server, max(1.0, timeout / 1000), wire_security(command_config))
            code = _describe(admin, wire, groups, members, state is not None, verbose)
        elif delete:
            code = _delete(admin, groups)
        else:
            scenario = ResetScenario(
                to_earliest, to_latest, to_current, to_offset, shift_by, to_datetime, by_duration, from_file
            )
            code = _reset(admin, groups, topic or [], all_topics, scenario, dry_run, execute, export)
    except UsageError as exc:
        fail(str(exc))
    except AdminError as exc:
        fail(f"Error: Executing consumer group command failed due to {exc}")
    finally:
        admin.close()
    raise typer.Exit(code)


def _list(admin: KafkaAdmin, state: str | None) -> int:
    listings = admin.list_groups()
    if state is None:
        for g in listings:
            print(g.group_id)
        return 0
    wanted = {s.strip().lower() for s in state.split(",") if s.strip()}
    rows = [(g.group_id, g.state) for g in listings if not wanted or g.state.lower() in wanted]
    width = _width([gid for gid, _ in rows])
    print(f"{'GROUP':<{width}} STATE")
    for gid, st in rows:
        print(f"{gid:<{width}} {st}")
    return 0


def _offset_rows(admin: KafkaAdmin, desc: GroupDescription) -> list[OffsetRow]:
    committed = {(o.topic, o.partition): o.offset for o in admin.list_group_offsets(desc.group_id) if o.offset >= 0}
    assigned = {tp: m for m in desc.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(assigned))
    ends = {(o.topic, o.partition): o.offset for o in admin.list_offsets(partitions, LATEST)} if partitions else {}
    rows: list[OffsetRow] = []
    for tp in partitions:
        m = assigned.get(tp)
        rows.append(
            OffsetRow(desc.group_id, tp[0], tp[1], committed.get(tp), ends.get(tp),
                      m.member_id if m else None, m.host if m else None, m.client_id if m else None)
        )
    for m in desc.members:
        if not m.assignment:  # an idle member (more members than partitions) still gets a row
            rows.append(OffsetRow(desc.group_id, None, None, None, None, m.member_id, m.host, m.client_id))
    return rows


def _describe(
    admin: KafkaAdmin, wire: WireAdmin, groups: list[str], members: bool, state: bool, verbose: bool
) -> int:
    code = 0
    for desc in admin.describe_groups(groups):
        consumer = desc.group_type == "consumer"
        if consumer:
            desc = with_epochs(wire, desc)
        if desc.state == "Dead" or (desc.state == "Unknown" and not desc.members):
            _error(f"Consumer group '{desc.group_id}' does not exist.")
            code = 1
            continue
        if state:
            print()
            print("\n".join(format_consumer_state(desc, verbose) if consumer else format_state(desc)))
            continue
        if desc.state == "Empty":
            print(f"\nConsumer group '{desc.group_id}' has no active members.", file=sys.stderr, flush=True)
        elif desc.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
            print(f"\nWarning: Consumer group '{desc.group_id}' is rebalancing.", file=sys.stderr, flush=True)
        if members:
            if desc.members:
                print()
                lines = format_consumer_members(desc, verbose) if consumer else format_members(desc, verbose)
                print("\n".join(lines))
            continue
        rows = _offset_rows(admin, desc)
        if rows:
            print()
            print("\n".join(format_offset_rows(rows)))
    return code


def _delete(admin: KafkaAdmin, groups: list[str]) -> int:
    results = admin.delete_groups(groups)
    ok = [g for g, err in results.items() if err is None]
    failed = {g: err for g, err in results.items() if err is not None}
    if ok:
        print(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in ok)}) was successful.")
    if failed:
        _error("Deletion of some consumer groups failed:")
        for g, err in failed.items():
            print(f"* Group '{g}' could not be deleted due to: {_group_error(err)}", file=sys.stderr, flush=True)
        return 1
    return 0


def _group_error(err: AdminError | None) -> str:
    messages = {
        "GROUP_ID_NOT_FOUND": "The group id does not exist.",
        "NON_EMPTY_GROUP": "The group is not empty.",
    }
    assert err is not None
    return messages.get(err.name, err.message)


@dataclass(frozen=True)
class ResetScenario:
    """Exactly one of Kafka's reset targets."""

    to_earliest: bool = False
    to_latest: bool = False
    to_current: bool = False
    to_offset: int | None = None
    shift_by: int | None = None
    to_datetime: str | None = None
    by_duration: str | None = None
    from_file: str | None = None

    def check(self) -> None:
        chosen = [self.to_earliest, self.to_latest, self.to_current, self.to_offset is not None,
                  self.shift_by is not None, self.to_datetime is not None, self.by_duration is not None,
                  self.from_file is not None]
        if sum(chosen) != 1:
            raise UsageError(
                "One of the reset scenarios must be specified: --to-earliest, --to-latest, --to-current, "
                "--to-offset, --shift-by, --to-datetime, --by-duration, --from-file"
            )


def parse_reset_csv(text: str, groups: list[str]) -> dict[str, list[tuple[str, int, int]]]:
    """--from-file: `topic,partition,offset` lines (one group) or `group,topic,partition,offset` (several),
    the format --export writes."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        try:
            if len(cells) == 3 and len(groups) == 1:
                out.setdefault(groups[0], []).append((cells[0], int(cells[1]), int(cells[2])))
            elif len(cells) == 4:
                out.setdefault(cells[0], []).append((cells[1], int(cells[2]), int(cells[3])))
            else:
                raise ValueError
        except ValueError:
            raise UsageError(
                f"Line {number} of the reset file is not topic,partition,offset (or group,topic,partition,offset "
                f"with several groups): {line!r}"
            ) from None
    return out


def format_reset_csv(plan: list[tuple[str, str, int, int]], several_groups: bool) -> list[str]:
    if several_groups:
        return [f"{g},{t},{p},{o}" for g, t, p, o in plan]
    return [f"{t},{p},{o}" for _, t, p, o in plan]


def _reset(
    admin: KafkaAdmin,
    groups: list[str],
    topics: list[str],
    all_topics: bool,
    scenario: ResetScenario,
    dry_run: bool,
    execute: bool,
    export: bool,
) -> int:
    scenario.check()
    from_file: dict[str, list[tuple[str, int, int]]] | None = None
    if scenario.from_file is not None:
        try:
            text = Path(scenario.from_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"Cannot read {scenario.from_file}: {exc.strerror or exc}") from None
        from_file = parse_reset_csv(text, groups)
    elif bool(topics) == all_topics:
        raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if dry_run and execute:
        raise UsageError("Option [dry-run] cannot be used with [execute]")
    if not dry_run and not execute:
        print(DRY_RUN_WARNING)
    code = 0
    plans: list[tuple[str, str, int, int]] = []
    per_group: dict[str, list[tuple[str, int, int]]] = {}
    for desc in admin.describe_groups(groups):
        if desc.state not in _INACTIVE and desc.state != "Unknown":
            _error(
                f"Assignments can only be reset if the group '{desc.group_id}' is inactive, but the current state "
                f"is {desc.state}."
            )
            code = 1
            continue
        if from_file is not None:
            new = sorted(from_file.get(desc.group_id, []))
        else:
            committed = {(o.topic, o.partition): o for o in admin.list_group_offsets(desc.group_id) if o.offset >= 0}
            partitions = _reset_scope(admin, topics) if topics else sorted(committed)
            new = _new_offsets(admin, partitions, committed, scenario)
        per_group[desc.group_id] = new
        plans += [(desc.group_id, t, p, o) for t, p, o in new]
    if export:
        print("\n".join(format_reset_csv(plans, len(groups) > 1)))
    elif plans:
        print()
        print("\n".join(format_reset_plan(plans)))
    if execute:
        for gid, new in per_group.items():
            if new:
                admin.alter_group_offsets(gid, new)
    return code


def _reset_scope(admin: KafkaAdmin, topics: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for spec in topics:
        name, parts = parse_topic_scope(spec)
        existing = admin.partitions_of(name)
        for p in parts if parts is not None else existing:
            if p not in existing:
                raise UsageError(f"Partition {p} of topic {name} does not exist")
            out.append((name, p))
    return sorted(set(out))


def _new_offsets(
    admin: KafkaAdmin,
    partitions: list[tuple[str, int]],
    committed: dict[tuple[str, int], GroupOffset],
    scenario: ResetScenario,
) -> list[tuple[str, int, int]]:
    if not partitions:
        return []
    earliest = {(o.topic, o.partition): o.offset for o in admin.list_offsets(partitions, EARLIEST)}
    latest = {(o.topic, o.partition): o.offset for o in admin.list_offsets(partitions, LATEST)}

    def clamp(tp: tuple[str, int], offset: int) -> int:
        return min(max(offset, earliest[tp]), latest[tp])

    if scenario.to_datetime is not None or scenario.by_duration is not None:
        ts = (
            parse_datetime_ms(scenario.to_datetime)
            if scenario.to_datetime is not None
            else int(datetime.now(UTC).timestamp() * 1000) - parse_duration_ms(scenario.by_duration or "")
        )
        found = {(o.topic, o.partition): o.offset for o in admin.list_offsets(partitions, ts)}
        # No record at or after the time: the end of the log, as Kafka does.
        return [(t, p, found[(t, p)] if found.get((t, p), -1) >= 0 else latest[(t, p)]) for t, p in partitions]
    out: list[tuple[str, int, int]] = []
    for tp in partitions:
        current = committed[tp].offset if tp in committed else None
        if scenario.to_earliest:
            new = earliest[tp]
        elif scenario.to_latest:
            new = latest[tp]
        elif scenario.to_current:
            new = current if current is not None else latest[tp]
        elif scenario.to_offset is not None:
            new = clamp(tp, scenario.to_offset)
        else:
            assert scenario.shift_by is not None
            base = current if current is not None else latest[tp]
            new = clamp(tp, base + scenario.shift_by)
        out.append((tp[0], tp[1], new))
    return out
