"""The start-up progress bar and log lines on one terminal: a log line clears the bar first and
the bar is drawn again after it, so neither overwrites the other."""

from __future__ import annotations

import io
import logging

from kafka_sidecar.server.logging_setup import Progress, setup_logging


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_line_never_lands_on_the_bar():
    out = Terminal()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    setup_logging("INFO", "plain", stream=out)
    try:
        p = Progress("loading logs", 4, delay=0)
        assert p.tty and p.stream is out
        p.update(1)
        logging.getLogger("kafka_sidecar.test").warning("a line while loading")
        p.update(4)
        p.finish()
        logging.getLogger("kafka_sidecar.test").warning("after")
    finally:
        # Put back the session's handlers: a handler on this test's (captured, later closed)
        # stderr would fail every log line after it, up to py4j's at interpreter exit.
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
    text = out.getvalue()
    # Every log line starts at the beginning of a cleared line and ends with its newline.
    before, _, rest = text.partition("a line while loading")
    assert before.endswith(" WARNING kafka_sidecar.test: ")
    cleared = before.rsplit("\r", 1)
    assert cleared[0].endswith(" " * 100) and "#" not in cleared[1]
    # The bar comes back after the line.
    assert rest.startswith("\n\rloading logs [")
    # After finish, lines are plain again.
    assert text.endswith("\r" + " " * 100 + "\r" + text.rsplit("\r", 1)[1]) and text.endswith("after\n")
