"""The web console (issue 28), over real TCP: pages, escaping, bad input, writes, login and ACLs,
agreement with Kafka's own tools, and a real headless Chromium (Debian's chromium and
chromium-driver, installed by tests/tools/install-tools.sh) driven by Selenium, saving a
screenshot of each page under test-artifacts/console/.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_sidecar.testing import EmbeddedBroker

from tests.support import REPO, SidecarProcess, kafka_bin, kafka_tool_missing, sidecar_command

ARTIFACTS = REPO / "test-artifacts" / "console"
TIMEOUT = 20.0
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


# ---- helpers ---------------------------------------------------------------------------------


class _Tables(HTMLParser):
    """Every <table class=...> of a page: class -> rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._cls: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._cls = dict(attrs).get("class") or ""
            self.tables.setdefault(self._cls, [])
        elif tag == "tr" and self._cls is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join(" ".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._cls is not None:
            self.tables[self._cls].append(self._row)
            self._row = None
        elif tag == "table":
            self._cls = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def tables(page: str) -> dict[str, list[list[str]]]:
    p = _Tables()
    p.feed(page)
    return p.tables


def rows(page: str, cls: str) -> list[dict[str, str]]:
    """The rows of table ``cls`` as dicts keyed by the header cells."""
    t = tables(page)[cls]
    return [dict(zip(t[0], r, strict=False)) for r in t[1:] if len(r) == len(t[0])]


def http(base: str, path: str, *, data: dict[str, str] | bytes | None = None, auth: tuple[str, str] | None = None,
         redirect: bool = True) -> tuple[int, str, dict[str, str]]:
    """(status, body, headers) of a GET (or a POST of ``data``)."""
    body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
    req = urllib.request.Request(base.rstrip("/") + path, data=body)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    if body is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    opener = urllib.request.build_opener() if redirect else urllib.request.build_opener(_NoRedirect())
    try:
        with opener.open(req, timeout=TIMEOUT) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def token_of(page: str) -> str:
    m = re.search(r'name="token" value="([0-9a-f]+)"', page)
    assert m, "no form token on the page"
    return m.group(1)


def ends(bootstrap: str, topic: str, partitions: int, conf: dict | None = None) -> list[tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "console-watermarks", **(conf or {})})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT) for p in range(partitions)]
    finally:
        c.close()


def create_topic(bootstrap: str, name: str, partitions: int = 2, config: dict[str, str] | None = None, conf: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(conf or {})})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(TIMEOUT)


def consume_and_commit(bootstrap: str, topic: str, group: str, n: int) -> Consumer:
    """A consumer of ``group`` that has read ``n`` records and committed; left open (a member)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + TIMEOUT
    while got < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got += 1
    assert got == n
    c.commit(asynchronous=False)
    return c


@pytest.fixture(scope="module")
def cb():
    """A broker with the console on and writes allowed."""
    b = EmbeddedBroker({"num.partitions": 2}, console=True, console_allow_writes=True).start()
    yield b
    b.stop()


# ---- pages over HTTP ---------------------------------------------------------------------------


def test_pages_show_topics_records_groups_and_escape_everything(cb):
    topic = f"esc-{uuid.uuid4().hex[:6]}"
    create_topic(cb.bootstrap_servers, topic, 1)
    p = Producer({"bootstrap.servers": cb.bootstrap_servers})
    p.produce(topic, key=b"<script>alert(1)</script>", value=b'{"name": "<b>bold</b>", "n": 1}',
              headers=[("h<i>", b"v&w"), ("bin", b"\xff\xfe")], partition=0)
    p.produce(topic, key=b"\x00\x01\xfe", value="caf\u00e9 \u2603".encode(), partition=0)
    assert p.flush(TIMEOUT) == 0
    c = consume_and_commit(cb.bootstrap_servers, topic, "esc-group", 2)
    try:
        status, home, headers = http(cb.console_url, "/")
        assert status == 200 and "script-src" not in headers["Content-Security-Policy"] and "default-src 'none'" in headers["Content-Security-Policy"]
        topics = {r["Topic"]: r for r in rows(home, "topics")}
        assert topics[topic]["Partitions"] == "1" and topics[topic]["Records"] == "2" and topics[topic]["cleanup.policy"] == "delete"
        assert f'href="/topic?name={topic}"' in home and 'href="/group?id=esc-group"' in home
        groups = {r["Group"]: r for r in rows(home, "groups")}
        assert groups["esc-group"]["Type"] == "classic" and groups["esc-group"]["Members"] == "1" and groups["esc-group"]["Total lag"] == "0"

        status, page, _ = http(cb.console_url, f"/topic?name={topic}&p=0")
        assert status == 200
        assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "&lt;b&gt;bold&lt;/b&gt;" in page and "h&lt;i&gt;" in page and "v&amp;w" in page
        recs = rows(page, "records")
        assert [r["Offset"] for r in recs] == ["1", "0"]  # newest first
        assert recs[0]["Key"] == "hex 00 01 fe" and recs[0]["Value"] == "text caf\u00e9 \u2603"
        assert recs[1]["Value"].startswith("json {") and '"n": 1' in recs[1]["Value"]
        assert "bin : ff fe hex" in recs[1]["Headers"] and "h<i> : v&w" in recs[1]["Headers"]
        configs = {r["Name"]: r for r in rows(page, "configs")}
        assert configs["cleanup.policy"]["Source"] == "DEFAULT_CONFIG" and configs["file.delete.delay.ms"]["Source"] == "STATIC_BROKER_CONFIG"

        status, page, _ = http(cb.console_url, "/group?id=esc-group")
        assert status == 200
        assert rows(page, "offsets")[0] | {} == {"Topic": topic, "Partition": "0", "Committed offset": "2", "Log end offset": "2", "Lag": "0",
                                                 "Member": rows(page, "members")[0]["Member id"], "Host": "/127.0.0.1", "Client id": "rdkafka"}
        assert http(cb.console_url, "/activity")[0] == 200
        status, page, _ = http(cb.console_url, "/topic?name=<nope>")
        assert status == 404 and "&lt;nope&gt;" in page and "<nope>" not in page
    finally:
        c.close()


def test_paging_by_offset_and_timestamp(cb):
    topic = f"paging-{uuid.uuid4().hex[:6]}"
    create_topic(cb.bootstrap_servers, topic, 1)
    p = Producer({"bootstrap.servers": cb.bootstrap_servers})
    base = int(time.time() * 1000) - 100_000
    for i in range(25):
        p.produce(topic, value=f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
    assert p.flush(TIMEOUT) == 0
    newest = rows(http(cb.console_url, f"/topic?name={topic}&limit=10")[1], "records")
    assert [r["Offset"] for r in newest] == [str(o) for o in range(24, 14, -1)]
    older = rows(http(cb.console_url, f"/topic?name={topic}&limit=10&before=15")[1], "records")
    assert [r["Offset"] for r in older] == [str(o) for o in range(14, 4, -1)]
    page = http(cb.console_url, f"/topic?name={topic}&limit=10&before=15")[1]
    assert "before=5" in page.replace("&amp;", "&")  # the next older page
    from_offset = rows(http(cb.console_url, f"/topic?name={topic}&mode=offset&offset=20&limit=3")[1], "records")
    assert [r["Offset"] for r in from_offset] == ["20", "21", "22"]
    by_time = rows(http(cb.console_url, f"/topic?name={topic}&mode=timestamp&ts={base + 7500}&limit=2")[1], "records")
    assert [r["Offset"] for r in by_time] == ["8", "9"]


def test_bad_input_gets_a_clear_message_and_changes_nothing(cb):
    topic = f"bad-{uuid.uuid4().hex[:6]}"
    create_topic(cb.bootstrap_servers, topic, 1, {"max.message.bytes": "2000"})
    p = Producer({"bootstrap.servers": cb.bootstrap_servers})
    for i in range(3):
        p.produce(topic, value=b"x%d" % i, partition=0)
    assert p.flush(TIMEOUT) == 0
    before = ends(cb.bootstrap_servers, topic, 1)
    status, page, _ = http(cb.console_url, f"/topic?name={topic}")
    token = token_of(page)
    for query, message in [
        ("mode=offset&offset=99", "offset 99 is out of range: partition 0 has offsets 0 to 3"),
        ("p=7", f"topic {topic} has no partition 7"),
        ("offset=abc&mode=offset", "offset must be a whole number"),
        ("mode=timestamp&ts=yesterday", "is neither milliseconds since the epoch nor a date and time"),
    ]:
        status, page, _ = http(cb.console_url, f"/topic?name={topic}&{query}")
        assert status == 200 and message in page, query
    form = {"name": topic, "p": "0", "token": token, "key": "", "key_enc": "text", "value_enc": "text", "headers": ""}
    for data, message in [
        ({**form, "value": "v" * 5000}, "MESSAGE_TOO_LARGE"),
        ({**form, "value": "zz", "value_enc": "hex"}, "the value is not hex"),
        ({**form, "p": "3", "value": "x"}, f"topic {topic} has no partition 3"),
        ({**form, "value": "x", "headers": ": no name"}, "has no name"),
        ({**form, "name": "no-such-topic", "value": "x"}, "UNKNOWN_TOPIC_OR_PARTITION"),
    ]:
        status, page, _ = http(cb.console_url, "/topic/produce", data=data)
        assert status in (400, 404) and message in page and "nothing was written" in page, (data.get("value", "")[:10], page[-600:])
    status, page, _ = http(cb.console_url, "/topic/produce", data=b"name=" + topic.encode() + b"&p=0&value=%FF%FE&token=" + token.encode())
    assert status == 400 and "not valid UTF-8" in page
    status, page, _ = http(cb.console_url, "/topic/produce", data={**form, "value": "x", "token": "0" * 32})
    assert status == 403 and "no valid token" in page
    status, page, _ = http(cb.console_url, "/topic/delete-records", data={"name": topic, "p": "0", "offset": "50", "token": token})
    assert status == 400 and "OFFSET_OUT_OF_RANGE" in page and "nothing was deleted" in page
    status, page, _ = http(cb.console_url, "/topic/produce", data=b"x" * (5 << 20))
    assert status == 413 and "nothing was done" in page
    assert ends(cb.bootstrap_servers, topic, 1) == before

    # And the good ones: a record with a key, a value and headers; then delete records before offset 2.
    status, _, headers = http(cb.console_url, "/topic/produce", data={**form, "key": "k1", "value": '{"ok": true}', "headers": "trace: abc\nempty"},
                              redirect=False)
    assert status == 303 and "done=produced" in headers["Location"] and "at=3" in headers["Location"]
    c = Consumer({"bootstrap.servers": cb.bootstrap_servers, "group.id": f"check-{topic}", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 3)])
    m = c.poll(TIMEOUT)
    c.close()
    assert (m.key(), m.value(), m.headers()) == (b"k1", b'{"ok": true}', [("trace", b"abc"), ("empty", None)])
    status, _, headers = http(cb.console_url, "/topic/delete-records", data={"name": topic, "p": "0", "offset": "2", "token": token}, redirect=False)
    assert status == 303 and "done=deleted" in headers["Location"]
    assert ends(cb.bootstrap_servers, topic, 1) == [(2, 4)]


def test_writes_need_the_switch():
    with EmbeddedBroker(console=True) as b:
        topic = "ro"
        create_topic(b.bootstrap_servers, topic, 1)
        status, page, _ = http(b.console_url, f"/topic?name={topic}")
        assert status == 200 and 'action="/topic/produce"' not in page and 'action="/topic/delete-records"' not in page
        status, page, _ = http(b.console_url, "/topic/produce", data={"name": topic, "p": "0", "value": "x"})
        assert status == 403 and "--console-allow-writes" in page
        assert ends(b.bootstrap_servers, topic, 1) == [(0, 0)]


# ---- the command line, and nothing when off -----------------------------------------------------


def test_serve_prints_the_console_url_and_serves_it(tmp_path):
    proc = subprocess.Popen([*sidecar_command(), "serve", "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0",
                             "--console-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"; console on (http://127\.0\.0\.1:\d+/)$", line.strip())
        assert m, line
        status, page, _ = http(m.group(1), "/")
        assert status == 200 and "<h2>Topics" in page
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)
        proc.stdout.close()
        proc.stderr.close()


def test_a_taken_console_port_is_one_line_before_anything_starts(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([*sidecar_command(), "serve", "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0",
                              "--console-port", str(port)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith(f"kafka-sidecar: error: --console-port: cannot serve the console on 127.0.0.1:{port}")
    assert not (tmp_path / "data" / "meta.properties").exists()  # the data dir was not initialised


def test_console_off_loads_none_of_it():
    code = ("import sys\nfrom kafka_sidecar.testing import EmbeddedBroker\n"
            "b = EmbeddedBroker().start()\nprint(sorted(m for m in sys.modules if m.startswith('kafka_sidecar.server.console')))\nb.stop()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr[-2000:]


# ---- what Kafka's own tools say ----------------------------------------------------------------


@pytest.mark.reference
def test_pages_agree_with_kafkas_tools(cb):
    for script in ("kafka-topics.sh", "kafka-get-offsets.sh", "kafka-consumer-groups.sh"):
        missing = kafka_tool_missing(script)
        if missing:
            pytest.skip(missing)
    b = cb.bootstrap_servers
    topic = f"cmp-{uuid.uuid4().hex[:6]}"
    create_topic(b, topic, 3, {"cleanup.policy": "compact,delete", "retention.ms": "3600000"})
    p = Producer({"bootstrap.servers": b})
    for i in range(17):
        p.produce(topic, key=b"k%d" % (i % 5), value=b"v%d" % i, partition=i % 3)
    assert p.flush(TIMEOUT) == 0
    c = consume_and_commit(b, topic, "cmp-group", 17)
    env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx256m")

    def tool(script: str, *args: str) -> str:
        out = subprocess.run([str(kafka_bin(script)), "--bootstrap-server", b, *args], capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr
        return out.stdout

    try:
        # Produce one more to partition 0 after the commit: lag 1 there.
        p.produce(topic, key=b"late", value=b"late", partition=0)
        assert p.flush(TIMEOUT) == 0
        with ThreadPoolExecutor(4) as pool:  # four JVMs at once: the test's time is their start-up
            described, latest, earliest, groups_out = pool.map(lambda args: tool(*args), [
                ("kafka-topics.sh", "--describe", "--topic", topic), ("kafka-get-offsets.sh", "--topic", topic, "--time", "-1"),
                ("kafka-get-offsets.sh", "--topic", topic, "--time", "-2"), ("kafka-consumer-groups.sh", "--describe", "--group", "cmp-group")])
        page = http(cb.console_url, f"/topic?name={topic}")[1]
        gpage = http(cb.console_url, "/group?id=cmp-group")[1]
    finally:
        c.close()

    head = described.splitlines()[0]
    topic_id = re.search(r"TopicId: (\S+)", head).group(1)
    assert f"<dt>topic id</dt><dd>{uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + '=='))}</dd>" in page
    assert re.search(r"PartitionCount: 3\b", head)
    configs = {r["Name"]: r for r in rows(page, "configs")}
    theirs_configs = dict(re.findall(r"([\w.]+)=(.*?)(?=,[\w.]+=|$)", re.search(r"Configs: (.*)$", head).group(1)))
    assert theirs_configs["cleanup.policy"] == "compact,delete" and theirs_configs["retention.ms"] == "3600000"
    for k, v in theirs_configs.items():  # the configs not at their default: the same values, and where they come from
        assert configs[k]["Value"] == v and configs[k]["Source"] != "DEFAULT_CONFIG", k
    assert {k for k, r in configs.items() if r["Source"] == "DYNAMIC_TOPIC_CONFIG"} == {"cleanup.policy", "retention.ms"}
    assert {k for k, r in configs.items() if r["Source"] != "DEFAULT_CONFIG"} == set(theirs_configs)
    parts = {r["Partition"]: r for r in rows(page, "partitions")}
    for line in described.splitlines()[1:]:
        f = dict(re.findall(r"(\w+): (\S*)", line))
        row = parts[f["Partition"]]
        assert (row["Leader"], row["Replicas"], row["ISR"]) == (f["Leader"], f["Replicas"], f["Isr"])
    for out, column in ((latest, "Log end offset"), (earliest, "Log start offset")):
        got = {line.split(":")[1]: line.split(":")[2] for line in out.split() if line.startswith(topic + ":")}
        assert got == {k: r[column] for k, r in parts.items()}, (out, parts)

    ours = {(r["Topic"], r["Partition"]): r for r in rows(gpage, "offsets")}
    theirs = [line.split() for line in groups_out.splitlines() if line.startswith("cmp-group ")]
    assert len(theirs) == 3 == len(ours)
    for _g, t, part, current, end, lag, consumer, host, client in theirs:
        r = ours[(t, part)]
        assert (r["Committed offset"], r["Log end offset"], r["Lag"], r["Member"], r["Host"], r["Client id"]) == (
            current, end, lag, consumer, host, client)
    assert sum(int(ln[5]) for ln in theirs) == 1


# ---- login and ACLs ------------------------------------------------------------------------------


PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _sasl(user: str, password: str, mechanism: str = "PLAIN") -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


class ConsoleProcess(SidecarProcess):
    """``kafka-sidecar serve`` with its own listeners and the console on a free port."""

    def start(self, timeout: float = TIMEOUT, extra: tuple[str, ...] = ()) -> ConsoleProcess:
        cmd = [*sidecar_command(), "serve", "--data-dir", str(self.data_dir), "--console-port", "0", *extra]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self._log_file = open(self.log_path, "a")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log_file, text=True, env=env)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) .*; console on (\S+)$", line.strip())
        if not m:
            self.kill()
            raise RuntimeError(f"no ready line: {line!r} {self.log_text()[-2000:]}")
        self.port, self.console_url = int(m.group(1)), m.group(2)
        return self


def test_login_and_acls_decide_what_each_user_sees_and_does(tmp_path):
    jaas = (f'{PLAIN} required user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
    srv = ConsoleProcess(tmp_path / "data", {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f'{SCRAM} required user_carol="carol-secret";',
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "User:admin",
        "connection.failed.authentication.delay.ms": "0", "group.initial.rebalance.delay.ms": "0"}).start(extra=("--console-allow-writes",))
    try:
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        admin_conf = _sasl("admin", "admin-secret")
        admin = AdminClient({"bootstrap.servers": srv.bootstrap, **admin_conf})
        for name in ("open", "secret"):
            admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)
        acls = [AclBinding(ResourceType.TOPIC, "open", ResourcePatternType.LITERAL, user, "*", op, AclPermissionType.ALLOW)
                for user, op in (("User:alice", AclOperation.DESCRIBE), ("User:alice", AclOperation.READ),
                                 ("User:bob", AclOperation.WRITE), ("User:bob", AclOperation.DESCRIBE),
                                 ("User:carol", AclOperation.DESCRIBE), ("User:carol", AclOperation.DELETE))]
        for fut in admin.create_acls(acls).values():
            fut.result(TIMEOUT)
        p = Producer({"bootstrap.servers": srv.bootstrap, **admin_conf})
        p.produce("open", value=b"hello", partition=0)
        p.produce("secret", value=b"classified", partition=0)
        assert p.flush(TIMEOUT) == 0

        status, page, headers = http(srv.console_url, "/")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic ")
        assert http(srv.console_url, "/", auth=("alice", "wrong"))[0] == 401
        assert http(srv.console_url, "/", auth=("nobody", "alice-secret"))[0] == 401
        assert http(srv.console_url, "/", auth=("carol", "not-carols"))[0] == 401

        status, page, _ = http(srv.console_url, "/", auth=("alice", "alice-secret"))
        assert status == 200 and "User:alice" in page
        assert [r["Topic"] for r in rows(page, "topics")] == ["open"]
        assert "(not shown: DescribeLogDirs needs DESCRIBE on the cluster)" in page
        status, page, _ = http(srv.console_url, "/topic?name=secret", auth=("alice", "alice-secret"))
        assert status == 404 and "classified" not in page and "TOPIC_AUTHORIZATION_FAILED" in page
        status, page, _ = http(srv.console_url, "/topic?name=open", auth=("alice", "alice-secret"))
        assert status == 200 and [r["Value"] for r in rows(page, "records")] == ["text hello"]
        # alice may read but not write: the Produce handler refuses her, nothing is written.
        status, page, _ = http(srv.console_url, "/topic/produce", auth=("alice", "alice-secret"),
                               data={"name": "open", "p": "0", "value": "from alice", "token": token_of(page)})
        assert status == 400 and "TOPIC_AUTHORIZATION_FAILED" in page and "nothing was written" in page

        # bob may write but not READ: no records shown, his record goes in.
        status, page, _ = http(srv.console_url, "/topic?name=open", auth=("bob", "bob-secret"))
        assert status == 200 and "User:bob may not READ topic open" in page and "hello" not in page
        status, _, headers = http(srv.console_url, "/topic/produce", auth=("bob", "bob-secret"), redirect=False,
                                  data={"name": "open", "p": "0", "value": "from bob", "token": token_of(page)})
        assert status == 303, _
        # bob may not delete; carol (a SCRAM user) may.
        status, page, _ = http(srv.console_url, "/topic/delete-records", auth=("bob", "bob-secret"),
                               data={"name": "open", "p": "0", "offset": "1", "token": token_of(page)})
        assert status == 400 and "TOPIC_AUTHORIZATION_FAILED" in page
        status, page, _ = http(srv.console_url, "/topic?name=open", auth=("carol", "carol-secret"))
        assert status == 200 and "User:carol" in page
        status, _, _ = http(srv.console_url, "/topic/delete-records", auth=("carol", "carol-secret"), redirect=False,
                            data={"name": "open", "p": "0", "offset": "1", "token": token_of(page)})
        assert status == 303
        # A form token is the principal's: bob's does not work for carol.
        status, page, _ = http(srv.console_url, "/topic/delete-records", auth=("carol", "carol-secret"),
                               data={"name": "open", "p": "0", "offset": "2", "token": token_of(http(srv.console_url, "/topic?name=open", auth=("bob", "bob-secret"))[1])})
        assert status == 403
        assert ends(srv.bootstrap, "open", 1, admin_conf) == [(1, 2)]
        status, page, _ = http(srv.console_url, "/", auth=("admin", "admin-secret"))
        assert [r["Topic"] for r in rows(page, "topics") if not r["Topic"].startswith("__")] == ["open", "secret"]
        assert "Principal = User:bob is Denied operation = DELETE" in srv.log_text() and "for request = DeleteRecords" in srv.log_text()
    finally:
        srv.stop()


def test_console_refuses_a_broker_it_cannot_log_users_in_to(tmp_path):
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    key_pem = tmp_path / "key.pem"
    chain_pem = tmp_path / "chain.pem"
    cert.private_key_pem.write_to_path(key_pem)
    cert.cert_chain_pems[0].write_to_path(chain_pem)
    out = subprocess.run([*sidecar_command(), "serve", "--data-dir", str(tmp_path / "data"), "--console-port", "0",
                          "--override", "listeners=SSL://127.0.0.1:0", "--override", "ssl.keystore.type=PEM",
                          "--override", f"ssl.keystore.key={key_pem.read_text()}",
                          "--override", f"ssl.keystore.certificate.chain={chain_pem.read_text()}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--console-port: the console logs users in with the broker's SASL users" in out.stderr, out.stderr


# ---- the cost of the console ----------------------------------------------------------------


def test_an_idle_console_costs_little(cb):
    """Broker CPU per console request (the broker thread's CPU time, this test's thread idle meanwhile)
    and per sampler tick, on this small broker: printed, and bounded loosely (a shared CI box)."""
    broker = cb._broker
    loop_thread = cb._thread
    assert loop_thread is not None

    def cpu_of_broker_thread() -> float:
        # The broker's loop runs on its own thread: its CPU time is /proc/self/task/<tid>/stat's utime+stime.
        with open(f"/proc/self/task/{loop_thread.native_id}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    create_topic(cb.bootstrap_servers, "idle", 1)
    for path in ("/", "/topic?name=idle", "/group?id=none", "/activity"):
        http(cb.console_url, path)  # warm
        n = 40
        before = cpu_of_broker_thread()
        for _ in range(n):
            assert http(cb.console_url, path)[0] in (200, 404)
        per = (cpu_of_broker_thread() - before) / n
        print(f"console {path}: {per * 1000:.2f} ms of broker CPU per request")
        assert per < 0.02, path
    from kafka_sidecar.server.console.sampler import take_sample

    started = time.process_time()
    for _ in range(1000):
        take_sample(broker)
    tick = (time.process_time() - started) / 1000
    print(f"console sampler: {tick * 1e6:.1f} us per {5} s tick")
    assert tick < 0.001


# ---- a real browser ------------------------------------------------------------------------------


def _browser_missing() -> str | None:
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        return "Debian's chromium and chromium-driver are not installed (make tools installs them as root)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (make dev)"
    return None


@pytest.fixture(scope="module")
def browser():
    missing = _browser_missing()
    if missing:
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1360,1600",
                "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(TIMEOUT)
    yield driver
    driver.quit()


def test_in_a_browser_records_links_lag_and_writes(cb, browser):
    from selenium.webdriver.common.by import By

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    b = cb.bootstrap_servers
    topic = f"orders-{uuid.uuid4().hex[:4]}"
    create_topic(b, topic, 2)
    p = Producer({"bootstrap.servers": b})
    for i in range(6):
        p.produce(topic, key=f"customer-{i % 3}".encode(), value=f'{{"order": {i}, "total": {i * 2.5}}}'.encode(),
                  headers=[("source", b"web"), ("trace-id", f"t-{i}".encode())], partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    c = consume_and_commit(b, topic, "billing", 6)
    try:
        browser.get(cb.console_url)
        assert browser.title == "Home · kafka-sidecar"
        browser.save_screenshot(str(ARTIFACTS / "home.png"))
        browser.find_element(By.LINK_TEXT, topic).click()
        assert browser.title == f"Topic {topic} · kafka-sidecar"
        cells = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "table.records tbody td")]
        assert any("customer-" in t for t in cells) and any('"order": 4' in t for t in cells) and any("trace-id: t-4" in t for t in cells)
        browser.save_screenshot(str(ARTIFACTS / "topic.png"))

        # A record produced from the browser's form shows up at the top.
        browser.find_element(By.CSS_SELECTOR, "#produce textarea[name=key]").send_keys("from-browser")
        browser.find_element(By.CSS_SELECTOR, "#produce textarea[name=value]").send_keys('{"hello": "console"}')
        browser.find_element(By.CSS_SELECTOR, "#produce textarea[name=headers]").send_keys("origin: selenium")
        browser.find_element(By.CSS_SELECTOR, "#produce button").click()
        assert "Produced a record to partition 0 at offset 3" in browser.find_element(By.CSS_SELECTOR, "p.notice.ok").text
        first = browser.find_elements(By.CSS_SELECTOR, "table.records tbody tr")[0].text
        assert "from-browser" in first and '"hello": "console"' in first and "origin: selenium" in first

        browser.get(cb.console_url)
        browser.find_element(By.LINK_TEXT, "billing").click()
        assert browser.title == "Group billing · kafka-sidecar"

        def lag_of(partition: int) -> str:
            for row in browser.find_elements(By.CSS_SELECTOR, "table.offsets tbody tr"):
                cols = [td.text for td in row.find_elements(By.TAG_NAME, "td")]
                if cols[:2] == [topic, str(partition)]:
                    return cols[4]
            return ""

        assert lag_of(0) == "1"  # the browser's record is not consumed yet
        browser.save_screenshot(str(ARTIFACTS / "group.png"))
        got = 0
        deadline = time.monotonic() + TIMEOUT
        while got < 1 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got += 1
        c.commit(asynchronous=False)
        browser.refresh()
        assert lag_of(0) == "0" and lag_of(1) == "0"
        browser.find_element(By.LINK_TEXT, topic).click()  # the group's topic links back
        assert browser.title == f"Topic {topic} · kafka-sidecar"

        browser.find_element(By.LINK_TEXT, "Activity").click()
        assert len(browser.find_elements(By.CSS_SELECTOR, "figure svg")) == 4
        browser.save_screenshot(str(ARTIFACTS / "activity.png"))
    finally:
        c.close()



def test_share_group_page_shows_share_partition_state(cb):
    ck = pytest.importorskip("confluent_kafka")
    if not hasattr(ck, "ShareConsumer"):
        pytest.skip("the installed confluent-kafka has no ShareConsumer")
    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    create_topic(cb.bootstrap_servers, topic, 1)
    admin = AdminClient({"bootstrap.servers": cb.bootstrap_servers})
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    from confluent_kafka.admin import ResourceType as RT

    res = ConfigResource(RT.GROUP, group, incremental_configs=[ConfigEntry("share.auto.offset.reset", "earliest",
                                                                            incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(TIMEOUT)
    p = Producer({"bootstrap.servers": cb.bootstrap_servers})
    for i in range(10):
        p.produce(topic, value=b"s%d" % i, partition=0)
    assert p.flush(TIMEOUT) == 0
    c = ck.ShareConsumer({"bootstrap.servers": cb.bootstrap_servers, "group.id": group, "share.acknowledgement.mode": "explicit",
                          "log_level": 3})
    c.subscribe([topic])
    kinds = ck.AcknowledgeType
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(seen) < 10 and time.monotonic() < deadline:
            msgs = c.poll(0.5)
            for m in msgs:
                seen.add(m.offset())
                # 0-4 accepted, 5 rejected (archived), 6-9 released: available again, delivered once
                c.acknowledge(m, kinds.ACCEPT if m.offset() < 5 else kinds.REJECT if m.offset() == 5 else kinds.RELEASE)
            if msgs:
                assert all(v is None for v in c.commit_sync(10).values())
        assert len(seen) == 10
        status, page, _ = http(cb.console_url, f"/group?id={group}")
        assert status == 200 and "<dt>type</dt><dd>share</dd>" in page
        members = rows(page, "members")
        assert len(members) == 1 and members[0]["Assignment"] == f"{topic}: 0"
        state = rows(page, "share-state")
        assert len(state) == 1, state
        assert (state[0]["Start offset"], state[0]["In flight"], state[0]["Available"], state[0]["Acquired"]) == ("6", "4", "4", "0")
        assert state[0]["Delivery counts (records × count)"] == "4×1"
        offsets = rows(page, "offsets")
        assert offsets[0]["Topic"] == topic and offsets[0]["Lag"] == "4" and offsets[0]["Log end offset"] == "10"
        home = {r["Group"]: r for r in rows(http(cb.console_url, "/")[1], "groups")}
        assert home[group]["Type"] == "share" and home[group]["Members"] == "1" and home[group]["Total lag"] == "4"
    finally:
        c.close()


def test_a_consumer_protocol_group_is_listed_and_described(cb):
    """A KIP-848 group (librdkafka with group.protocol=consumer): type, members, assignment and lag."""
    topic, group = f"kip848-{uuid.uuid4().hex[:6]}", f"g848-{uuid.uuid4().hex[:6]}"
    create_topic(cb.bootstrap_servers, topic, 2)
    p = Producer({"bootstrap.servers": cb.bootstrap_servers})
    for i in range(4):
        p.produce(topic, value=b"c%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    c = Consumer({"bootstrap.servers": cb.bootstrap_servers, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    try:
        got = 0
        deadline = time.monotonic() + TIMEOUT
        while got < 3 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got += 1
                c.commit(m, asynchronous=False)
        home = {r["Group"]: r for r in rows(http(cb.console_url, "/")[1], "groups")}
        assert home[group]["Type"] == "consumer" and home[group]["Members"] == "1" and home[group]["Total lag"] == "1"
        page = http(cb.console_url, f"/group?id={group}")[1]
        (member,) = rows(page, "members")
        assert member["Assignment"] == f"{topic}: 0,1" and member["Epoch"] != "-"
        lags = {r["Partition"]: r["Lag"] for r in rows(page, "offsets")}
        assert sorted(lags.values()) == ["0", "1"]
    finally:
        c.close()


def _streams_heartbeat(group: str, member: str, epoch: int, topic: str | None, process: str) -> dict:
    """A StreamsGroupHeartbeat v0 as Kafka Streams sends it: the topology and empty task lists on
    the join, nulls (unchanged) after."""
    topology = None if topic is None else {"epoch": 1, "subtopologies": [{
        "subtopology_id": "0", "source_topics": [topic], "source_topic_regex": [], "state_changelog_topics": [],
        "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout": 30000, "topology": topology,
            "active_tasks": None if topic is None else [], "standby_tasks": None if topic is None else [],
            "warmup_tasks": None if topic is None else [], "process_id": process, "user_endpoint": None,
            "client_tags": [] if topic is not None else None, "task_offsets": [], "task_end_offsets": [],
            "shutdown_application": False}


def test_a_streams_group_is_listed_and_described(cb):
    """A KIP-1071 streams group: its type, member, the tasks' source partitions and lag."""
    from tests.conformance.wire import Wire

    topic, group = f"streams-in-{uuid.uuid4().hex[:6]}", f"gs-{uuid.uuid4().hex[:6]}"
    create_topic(cb.bootstrap_servers, topic, 2)
    p = Producer({"bootstrap.servers": cb.bootstrap_servers})
    for i in range(5):
        p.produce(topic, value=b"s%d" % i, partition=i % 2)
    assert p.flush(TIMEOUT) == 0
    member, process = str(uuid.uuid4()), str(uuid.uuid4())
    with Wire(cb.bootstrap_servers) as w:
        answer = w.call(88, 0, _streams_heartbeat(group, member, 0, topic, process))
        assert answer["error_code"] == 0, answer
        epoch = answer["member_epoch"]
        deadline = time.monotonic() + TIMEOUT
        while not answer.get("active_tasks") and time.monotonic() < deadline:
            time.sleep(0.1)
            answer = w.call(88, 0, _streams_heartbeat(group, member, epoch, None, process))
            assert answer["error_code"] == 0, answer
            epoch = answer["member_epoch"]
        assert [(t["subtopology_id"], sorted(t["partitions"])) for t in answer["active_tasks"]] == [("0", [0, 1])]
        commit = w.call(8, 9, {"group_id": group, "generation_id_or_member_epoch": epoch, "member_id": member,
                               "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                                   {"partition_index": 0, "committed_offset": 2, "committed_leader_epoch": -1,
                                    "committed_metadata": None}]}]})
        assert commit["topics"][0]["partitions"][0]["error_code"] == 0, commit
        home = {r["Group"]: r for r in rows(http(cb.console_url, "/")[1], "groups")}
        assert home[group]["Type"] == "streams" and home[group]["Members"] == "1", home[group]
        page = http(cb.console_url, f"/group?id={group}")[1]
        (shown,) = rows(page, "members")
        assert shown["Assignment"] == f"{topic}: 0,1" and shown["Epoch"] == str(epoch), shown
        lags = {r["Partition"]: r["Lag"] for r in rows(page, "offsets")}
        # Partition 0: 3 records, committed 2 -> lag 1; partition 1: no commit, no lag figure.
        assert lags["0"] == "1", lags
        assert home[group]["Total lag"] == "1"
