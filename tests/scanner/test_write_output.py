"""A command's -o/--output: a regular file is replaced atomically; a special file (a FIFO, a
device such as /dev/null) is written into and stays what it is."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from scanner.cli_common import write_output


def test_a_regular_file_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    write_output("new", target)
    assert target.read_text() == "new"


def test_a_fifo_is_written_into_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write_output(b"report bytes", fifo)
    reader.join(timeout=10)
    assert received == [b"report bytes"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]  # no temporary file left
