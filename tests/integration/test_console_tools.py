"""``kafka-sidecar produce`` / ``consume`` over real TCP, against kafka-sidecar and Apache Kafka,
cross-checked with real clients; and the command line's ``--version``, usage and help."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.reference import ReferenceKafka, unavailable_reason
from tests.support import RECENT_TS, SidecarProcess, sidecar_command

TIMEOUT = 60


def cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*sidecar_command(), *args], input=input, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = SidecarProcess(tmp_path_factory.mktemp("console") / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    yield server.bootstrap
    server.stop()


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    why = unavailable_reason()
    if why:
        pytest.skip(why)
    with ReferenceKafka() as k:
        yield k.bootstrap


@pytest.fixture(params=["ours", "kafka"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(request.param)


def new_topic(bootstrap: str, partitions: int = 3) -> str:
    name = f"console-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def read_all(bootstrap: str, topic: str, n: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    try:
        for _ in range(200):
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m)
            if len(out) >= n:
                break
    finally:
        c.close()
    return out


def test_version_usage_and_help() -> None:
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("kafka-sidecar ") and version.stdout.split()[1][0].isdigit()
    bare = cli()
    assert bare.returncode == 0
    for command in ("serve", "produce", "consume", "topics", "groups", "delete-records", "dump-log", "config"):
        assert f"\n    {command}" in bare.stdout, bare.stdout
    for command in ("produce", "consume", "topics", "serve"):
        helped = cli(command, "--help")
        example = helped.stdout.split("example:\n", 1)[-1]
        assert helped.returncode == 0 and f"kafka-sidecar {command} " in example, helped.stdout


def test_produce_is_read_by_a_real_client(bootstrap: str) -> None:
    """Keys go to Kafka's murmur2 partition, headers and values arrive as sent."""
    topic = new_topic(bootstrap)
    done = cli("produce", "-b", bootstrap, "-t", topic, "-K", ":", "-H", "origin=cli", "-H", "n=1",
               input="k1:one\nk2:two\nk1:three\n:empty key\nno separator\n")
    assert done.returncode == 0, done.stderr
    got = read_all(bootstrap, topic, 5)
    by_value = {m.value(): m for m in got}
    assert sorted(by_value) == [b"empty key", b"no separator", b"one", b"three", b"two"]
    assert by_value[b"one"].key() == b"k1" and by_value[b"one"].partition() == by_value[b"three"].partition()
    assert by_value[b"empty key"].key() == b"" and by_value[b"no separator"].key() is None
    assert by_value[b"two"].headers() == [("origin", b"cli"), ("n", b"1")]
    # The partitioner agrees with librdkafka's murmur2_random for keyed records.
    p = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    delivered = []
    p.produce(topic, key=b"k2", value=b"check", on_delivery=lambda err, m: delivered.append(m))
    p.flush(30)
    assert delivered[0].partition() == by_value[b"two"].partition()


def test_consume_what_real_clients_produced(bootstrap: str) -> None:
    topic = new_topic(bootstrap, 1)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("h", f"{i}".encode())],
                  timestamp=RECENT_TS + i * 1000, partition=0)
    assert p.flush(30) == 0
    done = cli("consume", "-b", bootstrap, "-t", topic, "--from-beginning", "-e", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["offset"], r["key"], r["value"], r["headers"], r["timestamp"]) for r in rows] == [
        (i, f"k{i}", f"v{i}", [["h", str(i)]], RECENT_TS + i * 1000) for i in range(5)]
    text = cli("consume", "-b", bootstrap, "-t", topic, "--from-beginning", "-c", "2", "--print-key", "-K", "=")
    assert text.stdout == "k0=v0\nk1=v1\n" and "Processed a total of 2 messages" in text.stderr
    by_time = cli("consume", "-b", bootstrap, "-t", topic, "--timestamp", str(RECENT_TS + 3000), "-e")
    assert by_time.stdout == "v3\nv4\n", by_time.stderr
    tail = cli("consume", "-b", bootstrap, "-t", topic, "-o", "-1", "-e")
    assert tail.stdout == "v4\n"
    at = cli("consume", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "2", "-c", "1")
    assert at.stdout == "v2\n"
    # The default start is the end, as Kafka's console consumer: nothing new, nothing printed.
    idle = cli("consume", "-b", bootstrap, "-t", topic, "--timeout-ms", "500")
    assert idle.returncode == 0 and idle.stdout == ""


def test_consume_with_a_group_resumes_where_it_stopped(bootstrap: str) -> None:
    topic, group = new_topic(bootstrap, 2), f"console-group-{uuid.uuid4().hex[:6]}"
    assert cli("produce", "-b", bootstrap, "-t", topic, "-p", "1", *[f"m{i}" for i in range(6)]).returncode == 0
    first = cli("consume", "-b", bootstrap, "-t", topic, "-g", group, "--from-beginning", "-c", "4")
    assert first.stdout.split() == ["m0", "m1", "m2", "m3"], first.stderr
    second = cli("consume", "-b", bootstrap, "-t", topic, "-g", group, "--from-beginning", "-e")
    assert second.stdout.split() == ["m4", "m5"], second.stderr
    # The committed offsets are the group's, as a real client sees them.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        from confluent_kafka import TopicPartition

        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
    finally:
        c.close()
    assert [(tp.partition, tp.offset) for tp in committed] == [(0, 0), (1, 6)]


def test_errors_are_one_line(ours: str) -> None:
    missing = cli("consume", "-b", ours, "-t", "no-such-topic", "-e")
    assert missing.returncode == 1 and missing.stderr.startswith("kafka-sidecar: error: topic no-such-topic")
    topic = new_topic(ours, 2)
    bad_partition = cli("produce", "-b", ours, "-t", topic, "-p", "5", "x")
    assert bad_partition.returncode == 1 and bad_partition.stderr == f"kafka-sidecar: error: topic {topic} has no partition 5 (partitions 0-1)\n"
    usage = cli("produce", "-t", topic)
    assert usage.returncode == 2 and "required: -b/--bootstrap-server" in usage.stderr


def test_the_wheel_carries_every_package_and_the_entry_points(tmp_path) -> None:
    """`pip install .` / a built wheel: the command, the pytest plugin and every package of the tree."""
    import sys
    import zipfile

    from tests.support import REPO

    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("kafka_sidecar-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "kafka-sidecar = kafka_sidecar.server.cli:main" in entry_points
    assert "kafka_sidecar = kafka_sidecar.testing.pytest_plugin" in entry_points
    top = {"protocol": "protocol", "storage": "storage", "client": "client", "server": "server", "spark": "spark"}
    for root, package in top.items():
        for init in (REPO / root).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / root)
            mapped = "kafka_sidecar/testing" if rel.parts[:1] == ("testing",) else "/".join(("kafka_sidecar", package, *rel.parts))
            assert f"{mapped}/__init__.py" in names, f"{init.parent} is not in the wheel"
    schemas = {p.name for p in (REPO / "protocol/schemas/coordinator").glob("*.json")}
    assert schemas and {f"kafka_sidecar/protocol/schemas/coordinator/{n}" for n in schemas} <= set(names)


# ---- a newcomer's first mistakes, and streaming produce ---------------------------------------


def test_produce_to_a_missing_topic_hints_create_and_bad_names_state_the_rule(ours: str) -> None:
    missing = cli("produce", "-b", ours, "-t", f"missing-{uuid.uuid4().hex[:6]}", input="x\n")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr and "add --create" in missing.stderr
    bad = cli("produce", "-b", ours, "-t", "bad topic!", "--create", input="x\n")
    assert bad.returncode == 1
    assert bad.stderr == ("kafka-sidecar: error: Topic name is invalid: 'bad topic!' contains one or more characters "
                          "other than ASCII alphanumerics, '.', '_' and '-'\n")


def test_consume_to_the_end_of_an_empty_topic_reports_zero_as_kafka_does(ours: str) -> None:
    topic = new_topic(ours, 1)
    done = cli("consume", "-b", ours, "-t", topic, "--from-beginning", "-e")
    assert done.returncode == 0 and done.stdout == ""
    # kafka-console-consumer.sh prints this line on stderr when it stops (ConsoleConsumer.reportRecordCount).
    assert done.stderr == "Processed a total of 0 messages\n"
    from tests.support import kafka_bin, kafka_tool_missing

    if kafka_tool_missing("kafka-console-consumer.sh"):
        return  # the line itself is checked above; Kafka's own tool only confirms where it goes
    theirs = subprocess.run([str(kafka_bin("kafka-console-consumer.sh")), "--bootstrap-server", ours, "--topic", topic,
                             "--from-beginning", "--timeout-ms", "1500"], capture_output=True, text=True, timeout=TIMEOUT)
    assert theirs.stdout == ""
    assert theirs.stderr.splitlines()[-1] == "Processed a total of 0 messages"


def end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def wait_end_offset(bootstrap: str, topic: str, n: int, timeout: float = 15.0) -> int:
    import time

    deadline = time.monotonic() + timeout
    while (got := end_offset(bootstrap, topic)) < n and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("mode", ["linger", "sync"])
def test_produce_streams_lines_as_they_arrive_and_flushes_on_a_signal(ours: str, sig: str, mode: str) -> None:
    """A pipe written slowly: each line is in the topic while the producer still runs; a signal
    right after the last writes loses none of them."""
    import signal
    import time

    topic = new_topic(ours, 1)
    extra = ["--sync"] if mode == "sync" else []
    proc = subprocess.Popen([*sidecar_command(), "produce", "-b", ours, "-t", topic, *extra],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    try:
        for i in range(3):  # slowly: each line must arrive before the next is written
            proc.stdin.write(b"slow-%d\n" % i)
            proc.stdin.flush()
            assert wait_end_offset(ours, topic, i + 1) == i + 1, f"line {i} not sent while the pipe stays open"
        for i in range(50):  # then a burst, and the signal at once
            proc.stdin.write(b"burst-%d\n" % i)
        proc.stdin.write(b"no newline yet")
        proc.stdin.flush()
        time.sleep(0.01)
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + getattr(signal, sig), err
    assert err == b"" and out == b""
    values = [m.value() for m in read_all(ours, topic, 54)]
    assert values == [b"slow-%d" % i for i in range(3)] + [b"burst-%d" % i for i in range(50)] + [b"no newline yet"]


def test_produce_reports_each_delivery_error_and_goes_on(ours: str) -> None:
    topic = f"console-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": ours})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "200"})])[topic].result(30)
    done = cli("produce", "-b", ours, "-t", topic, "--sync", input="small-1\n" + "x" * 500 + "\nsmall-2\n")
    assert done.returncode == 1
    assert done.stderr.startswith(f"kafka-sidecar: error: 1 record(s) to {topic}-0 not delivered: MESSAGE_TOO_LARGE (10)")
    assert done.stderr.count("\n") == 1
    assert [m.value() for m in read_all(ours, topic, 2)] == [b"small-1", b"small-2"]
