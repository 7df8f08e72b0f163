"""One test's outcome on one broker, and the side-by-side table of a run."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class TestResult:
    """``status``: pass, fail, skip, timeout, or error (the harness could not run it)."""

    __test__ = False  # not a pytest class

    name: str
    status: str
    seconds: float
    detail: str = ""
    log: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def table(names: list[str], by_broker: dict[str, dict[str, TestResult]]) -> str:
    """A markdown table: one row per test, one column per broker (status and seconds)."""
    brokers = list(by_broker)
    head = "| test | " + " | ".join(brokers) + " |\n|---|" + "---|" * len(brokers) + "\n"
    rows = []
    for name in names:
        cells = []
        for b in brokers:
            r = by_broker[b].get(name)
            cells.append("not run" if r is None else f"{r.status} ({r.seconds:.0f} s)")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return head + "\n".join(rows)


def counts(results: dict[str, TestResult]) -> str:
    """'N passed, N failed, N skipped' (timeouts and harness errors count as failed)."""
    passed = sum(r.status == "pass" for r in results.values())
    skipped = sum(r.status == "skip" for r in results.values())
    failed = len(results) - passed - skipped
    return f"{passed} passed, {failed} failed, {skipped} skipped"


def shorten_log(path: Path, keep: int = 4 << 20) -> str:
    """The log's text; one over 2 x ``keep`` bytes (a failing ETL test can print an error per
    record: 570 MB once) is cut to its first and last ``keep`` bytes, in the file too."""
    size = path.stat().st_size
    if size <= 2 * keep:
        return path.read_text(errors="replace")
    with open(path, "rb") as f:
        head = f.read(keep)
        f.seek(size - keep)
        tail = f.read()
    text = (head.decode(errors="replace") + f"\n... [{size - 2 * keep} bytes cut by tests/outside] ...\n"
            + tail.decode(errors="replace"))
    path.write_text(text)
    return text
