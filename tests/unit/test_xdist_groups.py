"""tests/conftest.py's xdist_groups: which tests share a pytest-xdist worker and the order work is handed out in.
The Spark tests on the session's SparkSession (and their module-fixture neighbours) share the Spark worker; the
Spark tests without it go to any worker, handed out first all the same."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.conftest import xdist_groups


@dataclass
class FixtureDef:
    scope: str


@dataclass
class FixtureInfo:
    name2fixturedefs: dict[str, list[FixtureDef]]


@dataclass
class Item:
    """What xdist_groups reads of a pytest.Item."""

    nodeid: str
    fixtures: dict[str, str] = field(default_factory=dict)  # name -> scope
    marks: list[str] = field(default_factory=list)

    @property
    def fixturenames(self) -> list[str]:
        return list(self.fixtures)

    @property
    def _fixtureinfo(self) -> FixtureInfo:
        return FixtureInfo({name: [FixtureDef(scope)] for name, scope in self.fixtures.items()})

    def iter_markers(self, name: str) -> list[object]:
        @dataclass
        class Mark:
            args: tuple[str, ...]
            kwargs: dict[str, str]

        return [Mark((m,), {}) for m in self.marks] if name == "xdist_group" else []


EO_CLUSTER = "tests/e2e/spark/test_spark_exactly_once_cluster.py"
CONNECTOR = "tests/e2e/ecosystem/test_spark_kafka_connector.py"
SESSION = {"spark": "session", "broker": "session", "tmp_path": "function"}
ITEMS = [
    Item("tests/e2e/spark/test_spark_crash_resume.py::test_kill_9", SESSION),
    Item("tests/e2e/spark/test_spark_exactly_once.py::test_kill_9", SESSION),
    # a spark-submit job of its own in a module of session tests, no module fixture: any worker
    Item("tests/e2e/spark/test_spark_exactly_once.py::test_task_retries", {"broker": "session"}),
    # a module cluster shared with a session test: the Spark worker
    Item("tests/e2e/spark/test_spark_standalone_cluster.py::test_case_study", {**SESSION, "cluster": "module"}),
    Item("tests/e2e/spark/test_spark_standalone_cluster.py::test_worker_killed", {"cluster": "module"}),
    # a module fixture, no session test in the module: a group of its own
    Item(f"{EO_CLUSTER}::test_twin", {"cluster": "module"}),
    Item(f"{CONNECTOR}::test_batch", {"job_result": "module"}),
    Item(f"{CONNECTOR}::test_stream", {"job_result": "module"}),
    Item("tests/e2e/spark/test_spark_options.py::test_defaults"),
    Item("tests/integration/test_zk_chaos.py::test_failover", {"zookeeper": "session"}),
    Item("tests/integration/test_acls.py::test_a", {"acl_broker": "module"}),
    Item("tests/integration/test_leader_election.py::test_b", {"zk_connect": "function"}),
    Item("tests/integration/test_leader_election.py::test_c", {}, ["custom"]),
    Item("tests/unit/test_log.py::test_d"),
]


def test_spark_session_tests_share_a_worker_and_the_others_do_not() -> None:
    groups, _ = xdist_groups(ITEMS)  # type: ignore[arg-type]
    assert groups == {
        "tests/e2e/spark/test_spark_crash_resume.py::test_kill_9": "spark",
        "tests/e2e/spark/test_spark_exactly_once.py::test_kill_9": "spark",
        "tests/e2e/spark/test_spark_standalone_cluster.py::test_case_study": "spark",
        "tests/e2e/spark/test_spark_standalone_cluster.py::test_worker_killed": "spark",
        f"{EO_CLUSTER}::test_twin": EO_CLUSTER,
        f"{CONNECTOR}::test_batch": CONNECTOR,
        f"{CONNECTOR}::test_stream": CONNECTOR,
        "tests/integration/test_zk_chaos.py::test_failover": "serial",
        "tests/integration/test_acls.py::test_a": "tests/integration/test_acls.py",
        "tests/integration/test_leader_election.py::test_c": "custom",
    }  # fmt: skip


def test_spark_tests_are_handed_out_first_and_unit_tests_last() -> None:
    _, rank = xdist_groups(ITEMS)  # type: ignore[arg-type]
    assert {n for n, r in rank.items() if r == 0} == {i.nodeid for i in ITEMS if "spark" in i.nodeid}
    assert rank["tests/integration/test_zk_chaos.py::test_failover"] == 1
    assert rank["tests/integration/test_acls.py::test_a"] == 2
    assert rank["tests/integration/test_leader_election.py::test_b"] == 2
    assert rank["tests/unit/test_log.py::test_d"] == 3
