"""The response encoder (protocol/messages.py) takes one dict for every version of a response and
refuses a key that no version has: a misspelt field raises instead of being dropped silently."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from kafka_sidecar.protocol.messages import UnknownFieldError, decode_response, encode_body
from kafka_sidecar.server.dispatch import SUPPORTED_APIS


def _metadata(**topic: object) -> dict[str, object]:
    return {"throttle_time": 0, "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
            "cluster_id": "c", "controller_id": 1,
            "topics": [{"error_code": 0, "name": "t", "is_internal": False, "partitions": [], **topic}]}


def test_a_field_of_another_version_is_dropped() -> None:
    """Metadata v0 has no cluster id nor topic id (v2+, v10+): one dict encodes for v0 and v12."""
    data = _metadata(topic_id=uuid.UUID(int=7))
    for version, header in ((0, b""), (12, b"\x00")):
        _, decoded = decode_response(3, version, (7).to_bytes(4, "big") + header + encode_body(3, version, data))
        assert decoded.topics[0].name == "t"
    assert decoded.cluster_id == "c" and decoded.topics[0].topic_id == uuid.UUID(int=7)


@pytest.mark.parametrize("where", ["top", "nested"])
def test_a_key_no_version_has_raises(where: str) -> None:
    data = _metadata(partitons=[]) if where == "nested" else {**_metadata(), "clusterid": "c"}
    misspelt = "partitons" if where == "nested" else "clusterid"
    for version in (0, 12):
        with pytest.raises(UnknownFieldError, match=misspelt):
            encode_body(3, version, data)


def test_every_served_response_schema_is_indexed() -> None:
    """Each API we serve has its response fields indexed for every version we serve (the check
    cannot reject a field the schema has)."""
    from kafka_sidecar.protocol.messages import _known_fields, response_schema

    for spec in SUPPORTED_APIS.values():
        for version in range(spec.min_version, spec.max_version + 1):
            cls = response_schema(spec.key, version)
            known = _known_fields(cls)
            assert known is not None and {f.name for f in dataclasses.fields(cls)} <= known, (spec.name, version)
