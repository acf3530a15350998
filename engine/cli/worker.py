"""`thoughtmap worker [--concurrency N]`: execute queued runs (THOUGHTMAP_EXECUTION=queue).

Start one or more on any machine that reaches the database (THOUGHTMAP_DATABASE_URL on PostgreSQL);
each logs on stderr which run it executes and how it ended. Ctrl-C (SIGTERM) stops taking new runs
and hands the runs it executes on (each stops at its next step, interrupted, and is queued again for
another worker, its finished nodes kept); a worker killed outright leaves its runs to the others
after --stalled-after seconds.
"""

from __future__ import annotations

import argparse
import logging

from engine.cli import common
from engine.cli.basics import EXIT_OK, CLIError


def cmd_worker(args: argparse.Namespace) -> int:
    from engine.terminal_logging import log_to_stderr
    from engine.worker import Worker, WorkerOptions

    services = common.services()
    if services.queue is None:
        raise CLIError(
            "a worker executes queued runs: set THOUGHTMAP_EXECUTION=queue and "
            "THOUGHTMAP_DATABASE_URL=postgresql+psycopg://... (the app and the CLI must use the same)"
        )
    log_to_stderr(logging.INFO, "%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    try:
        worker = Worker(
            services,
            WorkerOptions(concurrency=args.concurrency, stalled_after_s=args.stalled_after, heartbeat_s=args.heartbeat),
        )
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    services.runner.recover_interrupted()
    try:
        worker.run()
    finally:
        services.close()
    return EXIT_OK
