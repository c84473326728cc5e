"""`kbus ui` driven in a real browser (Debian's headless chromium through Selenium and chromedriver) against a real
3-broker cluster on a real ZooKeeper: what an operator sees and does on each page. Screenshots go to
logs/ui-screenshots/ (git-ignored); the ones in docs/ui/ were copied from there."""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

from kbus.admin.wire import WireAdmin
from kbus.ui.cluster import led_on_every_broker
from tests.kbus_processes import KBUS, REPO, BrokerProcess, Cluster, kbus, wait_for, wait_for_port
from tests.zk_server import ZooKeeperServer, free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
SHOTS = REPO / "logs" / "ui-screenshots"



@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("ui-cluster"), f"{zookeeper.connect}/kbus-ui-{uuid.uuid4().hex[:8]}")
    for b in c.brokers.values():
        # the hanging-transaction test writes a transactional batch its coordinator never heard of, as clients
        # did before KIP-890; with verification on (Kafka 3.9's default) the broker refuses it
        b.overrides["transaction.partition.verification.enable"] = "false"
    c.expose_metrics()  # the overview's throughput comes from the brokers' /metrics
    try:
        c.start_all()
        yield c
    finally:
        c.stop()


class UiProcess:
    def __init__(self, bootstrap: str, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [KBUS, "ui", "--bootstrap-server", bootstrap, "--port", str(self.port), "--lag-interval", "1", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        try:
            wait_for_port(self.port, 20, self.proc)
        except RuntimeError:
            raise RuntimeError(f"kbus ui {' '.join(args)} did not start: {self.proc.stderr.read().decode()}") from None
        self.startup_s = time.monotonic() - started

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


@pytest.fixture(scope="module")
def start_ui(cluster: Cluster) -> Iterator[Callable[..., UiProcess]]:
    started: list[UiProcess] = []

    def start(*args: str) -> UiProcess:
        ui = UiProcess(cluster.bootstrap, *args)
        started.append(ui)
        return ui

    yield start
    for ui in started:
        ui.stop()


@pytest.fixture(scope="module")
def ui(start_ui: Callable[..., UiProcess]) -> UiProcess:
    return start_ui()


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    if not (CHROMIUM and CHROMEDRIVER):  # a missing browser fails, as a missing systemd-analyze does
        pytest.fail("needs Debian's chromium and chromium-driver: scripts/setup.sh installs them")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: webdriver.Chrome, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def text(driver: webdriver.Chrome, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def fill(driver: webdriver.Chrome, form: str, **fields: str) -> None:
    for name, value in fields.items():
        el = driver.find_element(By.CSS_SELECTOR, f"form#{form} [name={name}]")
        if el.tag_name == "select":
            el.find_element(By.CSS_SELECTOR, f"option[value='{value}'], option:not([value])").click()
            for opt in el.find_elements(By.TAG_NAME, "option"):
                if opt.get_attribute("value") == value or opt.text == value:
                    opt.click()
        else:
            el.clear()
            el.send_keys(value)


def submit(driver: webdriver.Chrome, css: str) -> None:
    """Click a form's button and wait for the page it leads to (a click does not always wait for the navigation)."""
    old = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.CSS_SELECTOR, css).click()

    def replaced(_: webdriver.Chrome) -> bool:
        try:
            return bool(expected_conditions.staleness_of(old)(driver))
        except WebDriverException as exc:
            # mid-navigation chromium may answer "Node with given id does not belong to the document" for the old
            # page's node instead of a stale-element error: the page is being replaced all the same
            if "does not belong to the document" in str(exc):
                return True
            raise

    WebDriverWait(driver, 60).until(replaced)


def make_topic(cluster: Cluster, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    wait_for(lambda: len(cluster.partitions(name)) == partitions and all(
        leader >= 0 for leader, _ in cluster.partitions(name).values()), timeout=30, what=f"{name} leaders")


def test_overview_shows_brokers_and_controller(ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster) -> None:
    browser.get(ui.url + "/?refresh=0")  # the page reloads itself otherwise
    assert text(browser, "#brokers-up") == "3 / 3"
    assert text(browser, "#controller") == str(cluster.controller())
    rows = browser.find_elements(By.CSS_SELECTOR, "#brokers tr[data-broker]")
    assert [r.get_attribute("data-broker") for r in rows] == ["1", "2", "3"]
    shot(browser, "overview")
    assert ui.startup_s < 10  # the bound is loose for a loaded machine; docs/ui.md gives the measured figure


def test_throughput_per_broker_and_messages_per_second_from_the_brokers_metrics(
    ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster
) -> None:
    import threading

    make_topic(cluster, "busy")
    leader = cluster.partitions("busy")[0][0]
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0, "linger.ms": 5})
        while not stop.is_set():
            for _ in range(50):
                p.produce("busy", b"x" * 100)
            p.poll(0)
            time.sleep(0.05)
        p.flush(10)

    t = threading.Thread(target=produce)
    t.start()
    try:
        def busy_shown() -> bool:
            browser.get(ui.url + "/topics")
            row = "//table[@id='topics']//tr[td/a[text()='busy']]"
            rate = browser.find_element(By.XPATH, row + "/td[@class='num rate']")
            return rate.text not in ("-", "0.0")

        wait_for(busy_shown, timeout=30, what="messages/s of busy on the topics page")

        def leader_produces() -> bool:
            browser.get(ui.url + "/?refresh=0")
            cell = text(browser, f"#brokers tr[data-broker='{leader}'] td.produce-rate")
            return cell not in ("-", "0")

        wait_for(leader_produces, timeout=30, what="produce bytes/s of the leader on the overview")
        assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart")) == 2
        shot(browser, "overview")
    finally:
        stop.set()
        t.join(30)


def test_create_topic_and_alter_config_show_in_kbus_topics(
    ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster
) -> None:
    browser.get(ui.url + "/topics")
    fill(browser, "create-topic", name="ui-created", partitions="2", replication_factor="3")
    submit(browser, "form#create-topic button")
    assert text(browser, "#flash") == "Topic created"
    # the topic's page, not an error page under the flash (the UI waits until every broker knows the topic)
    assert browser.find_elements(By.CSS_SELECTOR, "form#alter-config"), text(browser, "body")
    fill(browser, "alter-config", key="retention.ms", value="4321000")
    submit(browser, "form#alter-config button[value=set]")
    assert text(browser, "#flash") == "retention.ms set"
    assert "DYNAMIC_TOPIC_CONFIG" in text(browser, "#configs tr[data-config='retention.ms']")
    shot(browser, "topic")
    out = kbus("topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", "ui-created")
    assert out.returncode == 0, out.stderr
    assert "PartitionCount: 2\tReplicationFactor: 3" in out.stdout
    assert "retention.ms=4321000" in out.stdout


def test_a_topic_counts_as_led_once_every_broker_has_its_leaders(cluster: Cluster) -> None:
    wire = WireAdmin(cluster.bootstrap, 10.0)
    assert not led_on_every_broker(wire, "ui-never-created")
    make_topic(cluster, "ui-led", partitions=3)
    wait_for(lambda: led_on_every_broker(wire, "ui-led"), timeout=30, what="ui-led on every broker")


def test_message_browser_finds_by_key_and_by_timestamp(
    ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster
) -> None:
    make_topic(cluster, "browsed")
    base = int(time.time() * 1000) - 60_000
    p = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    for i in range(30):
        p.produce("browsed", key=f"key-{i}", value=f'{{"n": {i}}}', partition=0, timestamp=base + i * 1000)
    assert p.flush(30) == 0
    # sizes on disk come from DescribeLogDirs: 30 records on each of 3 replicas
    browser.get(ui.url + "/topics")
    size = browser.find_element(By.XPATH, "//table[@id='topics']//tr[td/a[text()='browsed']]/td[@class='num size']")
    assert re.fullmatch(r"\d+(\.\d)? (B|KiB)", size.text) and size.text != "0 B", size.text
    browser.get(ui.url + "/topics/browsed/messages?" + urllib.parse.urlencode({"seek": "oldest", "key": "key-17"}))
    rows = browser.find_elements(By.CSS_SELECTOR, "#messages tr.record")
    assert [r.get_attribute("data-offset") for r in rows] == ["17"]
    assert text(browser, "#messages tr.record pre.value") == '{"n": 17}'
    # by timestamp, through the form: the first record at or after base + 22.5 s is offset 23
    fill(browser, "seek", key="", seek="timestamp", position=str(base + 22_500), limit="3", format="json")
    submit(browser, "form#seek button")
    rows = browser.find_elements(By.CSS_SELECTOR, "#messages tr.record")
    assert [r.get_attribute("data-offset") for r in rows] == ["23", "24", "25"]
    assert '"n": 23' in text(browser, "#messages tr.record pre.value")
    shot(browser, "messages")


def test_script_value_is_shown_as_text(ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster) -> None:
    make_topic(cluster, "hostile")
    evil = "<script>document.title='pwned'</script><b id=injected>bold</b>"
    browser.get(ui.url + "/topics/hostile")
    fill(browser, "produce", key="<i>k</i>", value=evil)
    submit(browser, "form#produce button")
    assert text(browser, "#flash").startswith("Produced to partition 0 at offset 0")
    assert text(browser, "#messages tr.record pre.value") == evil
    assert text(browser, "#messages tr.record pre.key") == "<i>k</i>"
    assert browser.find_elements(By.ID, "injected") == []
    assert "pwned" not in browser.title
    shot(browser, "script-as-text")


def test_lagging_group_shows_growing_lag_and_a_dry_run_reset(
    ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster
) -> None:
    make_topic(cluster, "lagging", partitions=2)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "log_level": 0})
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "slow", "log_level": 0,
                  "enable.auto.commit": False})
    c.assign([TopicPartition("lagging", 0, 0), TopicPartition("lagging", 1, 0)])
    c.commit(offsets=[TopicPartition("lagging", 0, 0), TopicPartition("lagging", 1, 0)], asynchronous=False)
    c.close()
    lags = []
    for step in range(4):  # the producer runs ahead; the group commits nothing more
        for i in range(10):
            p.produce("lagging", value=f"m{step}-{i}", partition=i % 2)
        p.flush(30)
        time.sleep(1.5)  # the UI samples lag every second (--lag-interval 1)
        browser.get(ui.url + "/groups/slow?refresh=0")
        lags.append(int(text(browser, "#total-lag")))
    assert lags == sorted(lags) and lags[-1] == 40 and lags[0] < lags[-1]
    chart = browser.find_element(By.CSS_SELECTOR, "svg.chart")
    assert int(chart.get_attribute("data-points")) >= 3
    assert float(chart.get_attribute("data-last")) == 40
    shot(browser, "group-lag")
    # a dry run shows the plan and changes nothing
    fill(browser, "reset", topic="lagging", strategy="to-latest")
    submit(browser, "form#reset button[value=dry-run]")
    plan = [r.text.split() for r in browser.find_elements(By.CSS_SELECTOR, "#plan tr")[1:]]
    assert plan == [["lagging", "0", "0", "20"], ["lagging", "1", "0", "20"]]
    assert int(text(browser, "#total-lag")) == 40


def _post(url: str, fields: dict[str, str], cookie: str = "", auth: str = "") -> int:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if cookie:
        headers["Cookie"] = cookie
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    req = urllib.request.Request(url, urllib.parse.urlencode(fields).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


def _page_token(url: str, auth: str = "") -> tuple[str, str, str]:
    """(page, cookie header, token) of one GET, as a browser would keep them."""
    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
        page = resp.read().decode()
        cookie = resp.headers.get("Set-Cookie", "").split(";")[0]
    token = cookie.split("=", 1)[1] if cookie else ""
    return page, cookie, token


def test_read_only_ui_and_read_only_user_cannot_change_anything(
    start_ui: Callable[..., UiProcess], browser: webdriver.Chrome, cluster: Cluster, tmp_path: Path
) -> None:
    make_topic(cluster, "kept")
    ro = start_ui("--read-only")
    browser.get(ro.url + "/topics/kept")
    assert browser.find_elements(By.CSS_SELECTOR, "form[method=post]") == []
    assert "read-only" in text(browser, "header")
    shot(browser, "read-only")
    # even a well-formed POST with a valid CSRF token is refused
    _, cookie, token = _page_token(ro.url + "/topics")
    assert _post(ro.url + "/topics", {"csrf_token": token, "name": "ro-made"}, cookie) == 403
    assert _post(ro.url + "/topics/kept/delete", {"csrf_token": token, "confirm": "kept"}, cookie) == 403
    # a login whose user is read-only: same; a writer without the CSRF token: refused too
    users = tmp_path / "users"
    users.write_text("admin:s3cret\nviewer:look:read-only\n")
    logged = start_ui("--users-file", str(users))
    with pytest.raises(urllib.error.HTTPError) as unauth:
        urllib.request.urlopen(logged.url + "/", timeout=30)
    assert unauth.value.code == 401
    page, cookie, token = _page_token(logged.url + "/topics", "viewer:look")
    assert 'id="create-topic"' not in page
    assert _post(logged.url + "/topics", {"csrf_token": token, "name": "ro-made"}, cookie, "viewer:look") == 403
    page, cookie, token = _page_token(logged.url + "/topics", "admin:s3cret")
    assert 'id="create-topic"' in page
    assert _post(logged.url + "/topics", {"name": "ro-made"}, cookie, "admin:s3cret") == 403  # no token
    assert _post(logged.url + "/topics", {"csrf_token": "forged", "name": "ro-made"}, cookie, "admin:s3cret") == 403
    out = kbus("topics", "--bootstrap-server", cluster.bootstrap, "--list")
    assert "ro-made" not in out.stdout.split()
    assert "kept" in out.stdout.split()


def _hanging_batch(bootstrap: str, topic: str, producer_id: int) -> None:
    """A transactional batch no coordinator knows of (as a crashed or buggy client leaves one), sent raw to the
    partition's leader (the same as tests/e2e/ecosystem/test_transactions_tool.py does)."""
    import asyncio
    import datetime

    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.produce.v9.response import ProduceResponse

    from kbus.protocol import record_batch as rb
    from kbus.protocol.client import KafkaConnection

    batch = rb.build_batch(
        [(b"k", b"hanging")], producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    host, port = bootstrap.split(":")
    request = ProduceRequest(
        transactional_id="ui-ghost-txn", acks=-1, timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)),),
    )

    async def send() -> None:
        conn = KafkaConnection(host, int(port), "hanging")
        try:
            resp = await conn.request(request, ProduceResponse)
        finally:
            await conn.close()
        assert resp.responses[0].partition_responses[0].error_code == 0

    asyncio.run(send())


def test_transactions_listed_and_a_hanging_one_found_and_aborted_with_confirmation(
    ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster
) -> None:
    make_topic(cluster, "stuck")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "ui-open-txn", "log_level": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("stuck", b"open", partition=0)
    p.flush(30)
    leader = cluster.partitions("stuck")[0][0]
    _hanging_batch(cluster.brokers[leader].bootstrap, "stuck", producer_id=987_654)
    browser.get(ui.url + "/transactions")
    row = browser.find_element(By.XPATH, "//table[@id='transactions']//tr[td[text()='ui-open-txn']]")
    assert "Ongoing" in row.text and "stuck-0" in row.text
    browser.get(ui.url + "/transactions?" + urllib.parse.urlencode(
        {"find-hanging": "1", "topic": "stuck", "max_timeout_min": "0"}))
    rows = browser.find_elements(By.CSS_SELECTOR, "#hanging tr.hanging")
    assert [r.find_elements(By.TAG_NAME, "td")[2].text for r in rows] == ["987654"]
    shot(browser, "transactions")
    # the CLI's find-hanging shares the search (kbus.admin.transactions.hanging_transactions)
    cli = kbus("transactions", "--bootstrap-server", cluster.bootstrap, "find-hanging", "--topic", "stuck",
               "--max-transaction-timeout", "0")
    assert [line.split("\t")[2].strip() for line in cli.stdout.splitlines()[1:]] == ["987654"], cli.stderr
    # the wrong confirmation aborts nothing
    browser.find_element(By.CSS_SELECTOR, "#hanging form.abort input[name=confirm]").send_keys("12345")
    submit(browser, "#hanging form.abort button")
    assert "nothing was aborted" in text(browser, "#error")
    browser.get(ui.url + "/transactions?find-hanging=1&topic=stuck&max_timeout_min=0")
    browser.find_element(By.CSS_SELECTOR, "#hanging form.abort input[name=confirm]").send_keys("987654")
    submit(browser, "#hanging form.abort button")
    assert text(browser, "#flash") == "Aborted the transaction of producer 987654 on stuck-0"
    browser.get(ui.url + "/transactions?find-hanging=1&topic=stuck&max_timeout_min=0")
    assert browser.find_elements(By.CSS_SELECTOR, "#hanging tr.hanging") == []
    p.commit_transaction(30)
    # the log now holds: 0 "open" (committed), 1 "hanging" (aborted), 2 the ABORT marker, 3 the COMMIT marker;
    # consumers are never given markers, so the browser marks offsets 2-3 as such

    def gaps() -> list[str]:
        browser.get(ui.url + "/topics/stuck/messages?seek=oldest&partition=0")
        return [r.find_elements(By.TAG_NAME, "td")[1].text for r in browser.find_elements(By.CSS_SELECTOR, "tr.gap")]

    wait_for(lambda: gaps() == ["2\u20133"], timeout=20, what="the two markers shown as a gap")
    assert [r.get_attribute("data-offset") for r in browser.find_elements(By.CSS_SELECTOR, "tr.record")] == ["0", "1"]
    assert "control record" in text(browser, "tr.gap")
    shot(browser, "control-records")


def test_quotas_page_lists_client_quotas_and_overview_lists_no_reassignment(
    ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster
) -> None:
    done = kbus("configs", "--bootstrap-server", cluster.bootstrap, "--alter", "--add-config",
                "producer_byte_rate=1024", "--entity-type", "users", "--entity-name", "<b>quota-user</b>")
    assert done.returncode == 0, done.stderr
    browser.get(ui.url + "/quotas")
    quotas = text(browser, "#quotas")
    assert "user=<b>quota-user</b>" in quotas and "producer_byte_rate=1024" in quotas, quotas
    browser.get(ui.url + "/?refresh=0")
    assert text(browser, "#no-reassignments") == "None."


def test_killed_broker_turns_its_partitions_under_replicated(
    ui: UiProcess, browser: webdriver.Chrome, cluster: Cluster
) -> None:
    make_topic(cluster, "replicated", partitions=3)
    wait_for(lambda: all(len(isr) == 3 for _, isr in cluster.partitions("replicated").values()), timeout=30,
             what="full ISRs")
    browser.get(ui.url + "/?refresh=0")  # the page reloads itself otherwise
    assert text(browser, "#under-replicated") == "0"
    cluster.brokers[3].kill()

    replicated_row = re.compile(r"^replicated\s+\d\s+\d+\s+[123],[123],[123]\s", re.MULTILINE)

    def shows_under_replicated() -> bool:
        # __consumer_offsets rows can turn up first (a partition broker 3 led shrinks its ISR at the election; one it
        # followed only after replica.lag.time.max.ms), so wait for the test's own topic in the table
        browser.get(ui.url + "/?refresh=0")  # the page reloads itself otherwise
        return (
            text(browser, "#under-replicated") != "0"
            and "down" in text(browser, "#brokers tr[data-broker='3']")
            and replicated_row.search(text(browser, "#urp")) is not None
        )

    took = wait_for(shows_under_replicated, timeout=45, what="the topic's under-replicated partitions on the overview")
    shot(browser, "broker-down")
    print(f"under-replicated on the overview {took:.1f}s after kill -9")


PLAIN_USERS = {"admin": "admin-secret", "kbusui": "ui-secret"}
PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    + ";"
)


def _client_properties(path: Path, user: str) -> Path:
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{PLAIN_USERS[user]}";\n'
    )
    return path


def test_with_acls_the_documented_read_only_acls_show_every_page_and_change_nothing(
    tmp_path_factory: pytest.TempPathFactory, browser: webdriver.Chrome
) -> None:
    """A broker with ACLs on; the UI's principal has only the ACLs docs/ui.md lists for a read-only console, and the
    UI is not started --read-only: every page shows, every change is refused by the broker, nothing changes."""

    d = tmp_path_factory.mktemp("ui-acl")
    port = free_port()
    broker = BrokerProcess(d, {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }, port=port).start()
    ui = None
    try:
        bootstrap = f"127.0.0.1:{port}"
        admin_props = _client_properties(d / "admin.properties", "admin")
        ui_props = _client_properties(d / "ui.properties", "kbusui")
        acl = ["acls", "--bootstrap-server", bootstrap, "--command-config", str(admin_props), "--add",
               "--allow-principal", "User:kbusui"]
        # exactly the commands docs/ui.md gives for a read-only console
        for extra in (["--operation", "Describe", "--operation", "DescribeConfigs", "--operation", "Read",
                       "--topic", "*"],
                      ["--operation", "Describe", "--group", "*"],
                      ["--operation", "Describe", "--operation", "DescribeConfigs", "--cluster"],
                      ["--operation", "Describe", "--transactional-id", "*"]):
            done = kbus(*acl, *extra)
            assert done.returncode == 0, done.stderr
        admin_conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                      "sasl.username": "admin", "sasl.password": "admin-secret", "log_level": 0}
        admin = AdminClient(admin_conf)  # kept: a dropped client destroys its pending requests
        admin.create_topics([NewTopic("guarded", 1, 1)])["guarded"].result(30)
        p = Producer(admin_conf)
        p.produce("guarded", key=b"the-key", value=b"the-value")
        assert p.flush(30) == 0
        c = Consumer({**admin_conf, "group.id": "watchers"})
        c.commit(offsets=[TopicPartition("guarded", 0, 0)], asynchronous=False)
        c.close()

        ui = UiProcess(bootstrap, "--command-config", str(ui_props))
        for page, expect in [("/?refresh=0", "#brokers-up"), ("/topics", "#topics"), ("/topics/guarded", "#configs"),
                             ("/topics/guarded/messages?seek=oldest", "#messages tr.record"),
                             ("/groups/watchers?refresh=0", "#lag"), ("/acls", "#acls"), ("/users", "#users"),
                             ("/quotas", "#quotas"), ("/transactions", "#transactions")]:
            browser.get(ui.url + page)
            assert browser.find_elements(By.ID, "error") == [], (page, text(browser, "#error"))
            assert browser.find_elements(By.CSS_SELECTOR, expect), page
        browser.get(ui.url + "/?refresh=0")
        assert text(browser, "#no-reassignments") == "None."  # ListPartitionReassignments allowed too
        browser.get(ui.url + "/topics/guarded/messages?seek=oldest")
        assert text(browser, "#messages tr.record pre.value") == "the-value"
        browser.get(ui.url + "/groups/watchers?refresh=0")
        assert text(browser, "#total-lag") == "1"
        browser.get(ui.url + "/acls")
        assert "User:kbusui" in text(browser, "#acls")
        shot(browser, "acls")

        browser.get(ui.url + "/topics")
        fill(browser, "create-topic", name="not-allowed")
        submit(browser, "form#create-topic button")
        assert "AUTHORIZATION_FAILED" in text(browser, "#error")
        browser.get(ui.url + "/topics/guarded")
        fill(browser, "alter-config", key="retention.ms", value="1000")
        submit(browser, "form#alter-config button[value=set]")
        assert "AUTHORIZATION_FAILED" in text(browser, "#error")
        browser.get(ui.url + "/topics/guarded")
        fill(browser, "produce", value="intruder")
        submit(browser, "form#produce button")
        assert "AUTHORIZATION_FAILED" in text(browser, "#error")
        browser.get(ui.url + "/topics/guarded")
        fill(browser, "delete-topic", confirm="guarded")
        submit(browser, "form#delete-topic button")
        assert "AUTHORIZATION_FAILED" in text(browser, "#error")
        browser.get(ui.url + "/groups/watchers?refresh=0")
        fill(browser, "reset", strategy="to-latest")
        submit(browser, "form#reset button[value=execute]")
        assert "AUTHORIZATION_FAILED" in text(browser, "#error")

        out = kbus("topics", "--bootstrap-server", bootstrap, "--command-config", str(admin_props), "--describe")
        assert "not-allowed" not in out.stdout and "guarded" in out.stdout and "retention.ms" not in out.stdout
        reader = Consumer({**admin_conf, "group.id": "x"})
        assert reader.get_watermark_offsets(TopicPartition("guarded", 0), 10) == (0, 1)
        reader.close()
        groups = kbus("consumer-groups", "--bootstrap-server", bootstrap, "--command-config", str(admin_props),
                      "--describe", "--group", "watchers")
        assert re.search(r"guarded\s+0\s+0\s+1\s+1", groups.stdout), groups.stdout
    finally:
        if ui is not None:
            ui.stop()
        broker.stop()
