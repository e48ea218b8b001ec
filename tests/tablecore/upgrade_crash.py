"""A process that upgrades a table to version 8 and SIGKILLs itself after a given step (crash tests of the upgrade).

Usage: python -m tests.tablecore.upgrade_crash <table path> <step to die after>; prints the number of steps when it
is not killed. No Spark: a copy-on-write table needs no compaction.
"""

from __future__ import annotations

import os
import signal
import sys

from tablecore.context import TableContext
from tablecore.io import file_io_for
from tablecore.services.upgrade import upgrade
from tablecore.table_properties import read_config


def main() -> None:
    path, kill_after = sys.argv[1], int(sys.argv[2])
    io = file_io_for(path)
    ctx = TableContext.of(read_config(io, path), io)
    done = 0

    def step(_name: str) -> None:
        nonlocal done
        if done == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        done += 1

    upgrade(ctx, 8, on_step=step)
    print(done)


if __name__ == "__main__":
    main()
