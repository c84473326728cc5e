"""The console's ASGI app: server-rendered pages (jinja2, autoescaped: keys, values, topic and group names are
attacker-controlled), every change a POST carrying a CSRF token, refused outright in read-only mode."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import parse_qs, quote, urlencode

from confluent_kafka import KafkaError, KafkaException, Producer
from jinja2 import Environment, PackageLoader
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from kbus.admin.errors import AdminError
from kbus.admin.kafka import KafkaAdmin
from kbus.admin.quotas import describe_client_quotas
from kbus.admin.transactions import TransactionsAdmin
from kbus.admin.wire import WireAdmin
from kbus.common.acl import AclFilter
from kbus.protocol.client import PLAINTEXT, ClientSecurity
from kbus.ui import browse, charts, cluster, transactions
from kbus.ui.lag import LagHistory
from kbus.ui.security import CSRF_COOKIE, CSRF_FIELD, UiUser, check_basic, csrf_ok, new_csrf_token
from kbus.ui.throughput import Throughput

T = TypeVar("T")


# how long a topic the UI created may take to show in the metadata it reads back
_NEW_TOPIC_VISIBLE_S = 10.0


@dataclass
class UiSettings:
    bootstrap: str
    client_conf: dict[str, Any] = field(default_factory=dict)  # librdkafka settings from --command-config
    security: ClientSecurity = PLAINTEXT  # the same, for kbus's own wire client (transactions)
    read_only: bool = False
    users: dict[str, UiUser] | None = None  # None: no login
    lag_interval_s: float = 5.0
    timeout_s: float = 10.0


class _BasicAuth:
    """Every request must carry a known user's credentials; the user lands in request.state.user."""

    def __init__(self, app: ASGIApp, users: dict[str, UiUser]) -> None:
        self.app = app
        self.users = users

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            user = check_basic(Headers(scope=scope).get("authorization"), self.users)
            if user is None:
                challenge = {"WWW-Authenticate": 'Basic realm="kbus ui", charset="UTF-8"'}
                await PlainTextResponse("Login required.", 401, headers=challenge)(scope, receive, send)
                return
            scope.setdefault("state", {})["user"] = user
        await self.app(scope, receive, send)


def _error_text(exc: Exception) -> str:
    """One line with Kafka's error name first (TOPIC_AUTHORIZATION_FAILED: ...), as the other commands print it."""
    if isinstance(exc, KafkaException) and isinstance(exc.args[0], KafkaError):
        return f"{exc.args[0].name()}: {exc.args[0].str()}"
    if isinstance(exc, AdminError):
        return f"{exc.name}: {exc.message}"
    return str(exc)


class Console:
    def __init__(self, settings: UiSettings) -> None:
        self.settings = settings
        self.admin = KafkaAdmin(settings.bootstrap, settings.client_conf, timeout_s=settings.timeout_s)
        self.wire = WireAdmin(settings.bootstrap, settings.timeout_s, settings.security)  # kbus's own wire client
        self.throughput = Throughput(self.admin)
        self.lag = LagHistory(self.admin, settings.lag_interval_s, also=[self.throughput.sample_once])
        self._producer: Producer | None = None
        self.env = Environment(loader=PackageLoader("kbus.ui", "templates"), autoescape=True)
        self.env.filters["q"] = lambda s: quote(str(s), safe="")
        self.env.filters["bytes"] = _human_bytes

    # --- plumbing ---------------------------------------------------------------------------------

    def can_write(self, request: Request) -> bool:
        if self.settings.read_only:
            return False
        user: UiUser | None = getattr(request.state, "user", None)
        return user is None or not user.read_only

    def render(self, request: Request, template: str, status: int = 200, **ctx: object) -> HTMLResponse:
        token = request.cookies.get(CSRF_COOKIE) or new_csrf_token()
        user: UiUser | None = getattr(request.state, "user", None)
        html = self.env.get_template(template).render(
            csrf_field=CSRF_FIELD,
            csrf=token,
            can_write=self.can_write(request),
            read_only=self.settings.read_only,
            user=user.name if user else None,
            bootstrap=self.settings.bootstrap,
            msg=request.query_params.get("msg"),
            path=request.url.path,
            refresh=_refresh(request),
            **ctx,
        )
        resp = HTMLResponse(html, status)
        if CSRF_COOKIE not in request.cookies:
            resp.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path="/")
        return resp

    def fail(self, request: Request, exc: Exception, status: int = 502) -> HTMLResponse:
        return self.render(request, "error.html", status, error=_error_text(exc))

    async def form(self, request: Request) -> dict[str, str] | Response:
        """The POSTed form, or the refusal: read-only, or no valid CSRF token."""
        if not self.can_write(request):
            return self.render(request, "error.html", 403, error="This console is read-only: nothing was changed.")
        body = (await request.body()).decode("utf-8", errors="replace")
        form = {k: v[-1] for k, v in parse_qs(body, keep_blank_values=True).items()}
        if not csrf_ok(request.cookies.get(CSRF_COOKIE), form.get(CSRF_FIELD)):
            return self.render(
                request, "error.html", 403, error="Missing or wrong CSRF token: reload the page and try again."
            )
        return form

    @staticmethod
    def redirect(url: str, msg: str) -> RedirectResponse:
        return RedirectResponse(f"{url}?{urlencode({'msg': msg})}", status_code=303)

    async def act(self, request: Request, fn: Callable[[], T]) -> T | HTMLResponse:
        try:
            return await run_in_threadpool(fn)
        except (AdminError, KafkaException, ValueError, ConnectionError, OSError) as exc:
            return self.fail(request, exc, 400 if isinstance(exc, ValueError) else 502)

    @property
    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({**self.settings.client_conf, "bootstrap.servers": self.settings.bootstrap,
                                       "log_level": 0, "client.id": "kbus-ui"})
        return self._producer

    def _consumer_conf(self) -> dict[str, Any]:
        return {**self.settings.client_conf, "bootstrap.servers": self.settings.bootstrap, "client.id": "kbus-ui"}

    # --- pages ------------------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        try:
            ov = cluster.overview(self.admin, self.wire)
        except AdminError as exc:
            return self.fail(request, exc)
        rates = self.throughput.broker_rates()
        produce = charts.chart([(f"broker {b}", p) for b, (p, _) in rates.items()], "produce bytes/s per broker")
        consume = charts.chart([(f"broker {b}", c) for b, (_, c) in rates.items()], "consume bytes/s per broker")
        now = {b: (p[-1][1] if p else None, c[-1][1] if c else None) for b, (p, c) in rates.items()}
        return self.render(request, "overview.html", ov=ov, produce=produce, consume=consume, rates_now=now,
                           has_metrics=bool(rates))

    def topics(self, request: Request) -> Response:
        try:
            rows = cluster.topic_rows(self.admin, self.wire)
        except AdminError as exc:
            return self.fail(request, exc)
        return self.render(request, "topics.html", topics=rows, rates=self.throughput.topic_rates())

    def topic(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            page = cluster.topic_page(self.admin, self.wire, name)
        except AdminError as exc:
            return self.fail(request, exc, 404 if exc.name == "UNKNOWN_TOPIC_OR_PARTITION" else 502)
        return self.render(request, "topic.html", page=page, t=page.topic)

    def messages(self, request: Request) -> Response:
        name = request.path_params["name"]
        q = request.query_params
        seek = q.get("seek", "newest")
        fmt = q.get("format", "text")
        if seek not in browse.SEEK_MODES or fmt not in browse.FORMATS:
            return self.render(request, "error.html", 400, error="seek or format not understood")
        try:
            limit = min(max(int(q.get("limit") or 50), 1), 1000)
            all_parts = self.admin.partitions_of(name)
            part = q.get("partition", "")
            parts = [int(part)] if part else all_parts
            if any(p not in all_parts for p in parts):
                raise ValueError(f"topic {name} has no partition {part}")
            result = browse.browse(
                self._consumer_conf(), name, parts, seek, q.get("position", ""), limit,
                q.get("key", ""), q.get("value", ""),
            )
        except (AdminError, ValueError) as exc:
            return self.fail(request, exc, 400 if isinstance(exc, ValueError) else 502)
        return self.render(
            request, "messages.html", topic=name, partitions=all_parts, result=result, fmt=fmt, decode=browse.decode,
            q=q, seek=seek, is_record=lambda r: isinstance(r, browse.Record),
        )

    def groups(self, request: Request) -> Response:
        try:
            groups = self.admin.list_groups()
        except AdminError as exc:
            return self.fail(request, exc)
        return self.render(request, "groups.html", groups=groups)

    def group(self, request: Request, plan: list[cluster.ResetRow] | None = None, form: dict[str, str] | None = None,
              status: int = 200) -> Response:
        gid = request.path_params["group"]
        try:
            desc = self.admin.describe_groups([gid])[0]
            rows = cluster.group_lag(self.admin, gid, desc)
            topics = sorted({r.topic for r in rows})
        except AdminError as exc:
            return self.fail(request, exc)
        samples = self.lag.samples(gid)
        chart = charts.line_chart([(s.at, float(s.total)) for s in samples], f"total lag of {gid}")
        return self.render(
            request, "group.html", status, g=desc, rows=rows, chart=chart, topics=topics, plan=plan, form=form or {},
            total_lag=sum(r.lag or 0 for r in rows),
        )

    def acls(self, request: Request) -> Response:
        try:
            acls = sorted(self.admin.describe_acls(AclFilter()), key=lambda a: (a.principal, a.resource_type, a.name))
        except AdminError as exc:
            return self.fail(request, exc)
        return self.render(request, "acls.html", acls=acls)

    def users(self, request: Request) -> Response:
        try:
            users = self.admin.describe_scram_users(None)
        except AdminError as exc:
            return self.fail(request, exc)
        return self.render(request, "users.html", users=users)

    def _txn_admin(self) -> TransactionsAdmin:
        return TransactionsAdmin(
            self.settings.bootstrap, self.settings.client_conf, self.settings.timeout_s, self.settings.security
        )

    def quotas(self, request: Request) -> Response:
        try:
            entries = describe_client_quotas(self.wire, [], strict=False)
        except (AdminError, OSError) as exc:
            return self.fail(request, exc)
        rows = [(", ".join(f"{t}={n if n is not None else '<default>'}" for t, n in entity), values)
                for entity, values in entries]
        return self.render(request, "quotas.html", rows=rows)

    def transactions(self, request: Request) -> Response:
        q = request.query_params
        try:
            txa = self._txn_admin()
            rows = transactions.describe_all(txa)
            hanging = None
            if "find-hanging" in q:
                max_min = float(q.get("max_timeout_min") or transactions.DEFAULT_MAX_TIMEOUT_MIN)
                topic = q.get("topic", "").strip()
                hanging = transactions.find_hanging(txa, self.admin, topic or None, int(max_min * 60_000))
        except (AdminError, ConnectionError, OSError, ValueError) as exc:
            return self.fail(request, exc, 400 if isinstance(exc, ValueError) else 502)
        return self.render(request, "transactions.html", rows=rows, hanging=hanging, q=q,
                           default_max=transactions.DEFAULT_MAX_TIMEOUT_MIN)

    async def abort_transaction(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form

        def abort() -> str:
            topic, pid = form.get("topic", ""), form.get("producer_id", "")
            if form.get("confirm", "").strip() != pid:
                raise ValueError("Type the producer id to confirm the abort: nothing was aborted.")
            partition = int(form.get("partition", ""))
            self._txn_admin().abort(topic, partition, int(pid), int(form.get("producer_epoch", "")),
                                    int(form.get("coordinator_epoch", "")))
            return f"Aborted the transaction of producer {pid} on {topic}-{partition}"

        done = await self.act(request, abort)
        return done if isinstance(done, Response) else self.redirect("/transactions", done)

    # --- changes ------------------------------------------------------------------------------------

    async def create_topic(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        name = form.get("name", "").strip()

        def create() -> None:
            partitions = int(form["partitions"]) if form.get("partitions") else None
            rf = int(form["replication_factor"]) if form.get("replication_factor") else None
            configs = _key_values(form.get("configs", ""))
            self.admin.create_topic(name, partitions, rf, configs or None)
            # the page this redirects to describes the topic through whichever broker the client asks, and the
            # controller's metadata reaches the brokers one by one: wait (a little) until every broker has it with
            # its leaders, or the page could say "does not exist" under the "Topic created" flash
            deadline = time.monotonic() + _NEW_TOPIC_VISIBLE_S
            while time.monotonic() < deadline:
                try:
                    if cluster.led_on_every_broker(self.wire, name):
                        return
                except (AdminError, ConnectionError):
                    pass
                time.sleep(0.1)

        done = await self.act(request, create)
        return done if isinstance(done, Response) else self.redirect(f"/topics/{quote(name, safe='')}", "Topic created")

    async def alter_config(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        name = request.path_params["name"]
        key = form.get("key", "").strip()
        delete = form.get("action") == "delete"

        def alter() -> None:
            if not key:
                raise ValueError("a config name is required")
            self.admin.alter_configs("topic", name, {} if delete else {key: form.get("value", "")},
                                     [key] if delete else [])

        done = await self.act(request, alter)
        if isinstance(done, Response):
            return done
        return self.redirect(f"/topics/{quote(name, safe='')}", f"{key} {'deleted' if delete else 'set'}")

    async def delete_topic(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        name = request.path_params["name"]
        if form.get("confirm") != name:
            return self.render(request, "error.html", 400, error="Type the topic's name to confirm its deletion.")
        done = await self.act(request, lambda: self.admin.delete_topic(name))
        return done if isinstance(done, Response) else self.redirect("/topics", f"Topic {name} deleted")

    async def produce(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        name = request.path_params["name"]

        def send() -> tuple[int, int]:
            part = form.get("partition", "").strip()
            headers = [(k, v.encode()) for k, v in _key_values(form.get("headers", "")).items()]
            key = form.get("key", "")
            return browse.produce(
                self.producer, name, key.encode() if key else None, form.get("value", "").encode(),
                int(part) if part else None, headers,
            )

        done = await self.act(request, send)
        if isinstance(done, Response):
            return done
        p, off = done
        return RedirectResponse(
            f"/topics/{quote(name, safe='')}/messages?"
            + urlencode({"partition": p, "seek": "offset", "position": off,
                         "msg": f"Produced to partition {p} at offset {off}"}),
            status_code=303,
        )

    async def reset_offsets(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        gid = request.path_params["group"]
        execute = form.get("action") == "execute"

        def reset() -> list[cluster.ResetRow]:
            plan = cluster.plan_reset(self.admin, gid, form.get("topic", ""), form.get("strategy", ""),
                                      form.get("value", ""))
            if execute:
                state = self.admin.describe_groups([gid])[0].state
                # Kafka's rule (ConsumerGroupCommand): offsets of a group with live members are not reset
                if state not in ("Empty", "Dead"):
                    raise ValueError(f"Group {gid} is {state}: stop its consumers before resetting its offsets "
                                     "(Kafka's rule).")
                self.admin.alter_group_offsets(gid, [(r.topic, r.partition, r.new) for r in plan])
            return plan

        done = await self.act(request, reset)
        if isinstance(done, Response):
            return done
        if execute:
            return self.redirect(f"/groups/{quote(gid, safe='')}", "Offsets reset")
        return await run_in_threadpool(self.group, request, done, form)

    # --- the app ------------------------------------------------------------------------------------

    def app(self) -> ASGIApp:
        routes = [
            Route("/", self.overview),
            Route("/topics", self.topics),
            Route("/topics", self.create_topic, methods=["POST"]),
            Route("/topics/{name}", self.topic),
            Route("/topics/{name}/messages", self.messages),
            Route("/topics/{name}/configs", self.alter_config, methods=["POST"]),
            Route("/topics/{name}/delete", self.delete_topic, methods=["POST"]),
            Route("/topics/{name}/produce", self.produce, methods=["POST"]),
            Route("/groups", self.groups),
            Route("/groups/{group:path}/reset", self.reset_offsets, methods=["POST"]),
            Route("/groups/{group:path}", self.group),
            Route("/acls", self.acls),
            Route("/users", self.users),
            Route("/quotas", self.quotas),
            Route("/transactions", self.transactions),
            Route("/transactions/abort", self.abort_transaction, methods=["POST"]),
        ]

        @asynccontextmanager
        async def lifespan(_: Starlette) -> AsyncIterator[None]:
            self.lag.start()
            yield
            self.lag.stop()
            if self._producer is not None:
                self._producer.flush(5)

        app: ASGIApp = Starlette(routes=routes, lifespan=lifespan)
        if self.settings.users is not None:
            app = _BasicAuth(app, self.settings.users)
        return app


def _refresh(request: Request, default: int = 5) -> int:
    """Seconds between a live page's reloads (overview, a group's lag); ?refresh=0 stops them."""
    try:
        return max(0, int(request.query_params.get("refresh", default)))
    except ValueError:
        return default


def _human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _key_values(text: str) -> dict[str, str]:
    """`key=value` lines (or comma-separated), as the forms take configs and headers."""
    out: dict[str, str] = {}
    for item in text.replace("\r", "").replace(",", "\n").split("\n"):
        if not item.strip():
            continue
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise ValueError(f"expected key=value, got {item.strip()!r}")
        out[k.strip()] = v.strip()
    return out
