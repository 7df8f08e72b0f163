"""``make fuzz-long``: atheris over the request path with coverage from kafka-sidecar and kio.

    python -m tests.fuzz.fuzz_long [libFuzzer flags] [CORPUS_DIR ...]

Coverage needs the code instrumented as it is imported, so this imports the fuzz target (and
through it every kafka_sidecar module and kio) inside ``atheris.instrument_imports`` before
anything else loads them; then runs ``tests/fuzz/fuzz_requests.py``'s atheris target: raw
frames and schema-valid requests (inputs starting ``ff fe``) into dispatch on a real in-process
broker. Seeds: tests/fuzz/corpus, tests/fuzz/crashes and the golden captures.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["kafka_sidecar", "kio"]):
    from tests.fuzz import fuzz_requests

if __name__ == "__main__":
    fuzz_requests._quiet()
    sys.exit(fuzz_requests.run_atheris(list(sys.argv)))
