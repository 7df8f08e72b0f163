"""``python -m kafka_sidecar.server`` runs the same CLI as ``kafka-sidecar``."""

import sys

from .cli import main

sys.exit(main())
