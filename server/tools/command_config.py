"""``--command-config``: the Kafka client properties a tool connects with, as Kafka's tools read them.

The file is a Java properties file of Kafka client configs. The tools hand them to
``kafka_sidecar.client.KafkaClient``, which reads ``security.protocol``, the ``ssl.*`` stores and
``sasl.*`` (``client.security``), ``client.id`` and ``request.timeout.ms``. Other keys are
ignored, as Kafka's clients only warn about them.
"""

from __future__ import annotations

from pathlib import Path

from kafka_sidecar.storage.log_config import ConfigError

from ..config import read_properties_file


def command_config(args: object) -> dict[str, str] | None:
    """The properties of a tool's ``--command-config`` argument, None when it has none."""
    path = getattr(args, "command_config", None)
    return read_properties(path) if path else None


def read_properties(path: Path | str) -> dict[str, str]:
    """The properties of ``path``; ConfigError (one line) if it cannot be read."""
    try:
        return read_properties_file(Path(path))
    except OSError as e:
        raise ConfigError(f"cannot read --command-config {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"cannot read --command-config {path}: {e}") from None
