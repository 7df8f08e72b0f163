"""Kafka clients that need no server: the blocking wire client the tools and spark/ use, and how
a client connects (TLS, SASL) from Kafka client properties. Imports protocol/ and storage/'s
config errors, never server/ (tests/unit/test_layering.py)."""

from .blocking import KafkaClient, KafkaClientError, parse_bootstrap
from .security import ClientSecurity, client_security

__all__ = ["ClientSecurity", "KafkaClient", "KafkaClientError", "client_security", "parse_bootstrap"]
