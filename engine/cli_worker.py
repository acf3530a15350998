"""`thoughtmap worker [--concurrency N]`: execute queued runs (THOUGHTMAP_EXECUTION=queue).

Start one or more on any machine that reaches the database (THOUGHTMAP_DATABASE_URL on PostgreSQL);
each logs on stderr which run it executes and how it ended. Ctrl-C (SIGTERM) stops taking new runs
and hands the runs it executes on (each stops at its next step, interrupted, and is queued again for
another worker, its finished nodes kept); a worker killed outright leaves its runs to the others
after --stalled-after seconds.
"""

from __future__ import annotations

import logging

from engine.cli_input import positive_type


def add_worker_parser(sub) -> None:
    worker = sub.add_parser(
        "worker", help="execute queued runs (distributed mode: THOUGHTMAP_EXECUTION=queue on PostgreSQL)",
        description="Take runs from the queue in the database and execute them. The app and `thoughtmap run` "
        "only enqueue runs when THOUGHTMAP_EXECUTION=queue; start as many workers as you like, on any machine "
        "that reaches THOUGHTMAP_DATABASE_URL (PostgreSQL). LLM calls in flight stay within "
        "THOUGHTMAP_LLM_CONCURRENCY across all workers (set the same value everywhere). SIGTERM or Ctrl-C "
        "hands this worker's runs on to the other workers (each stops at its next step, finished work kept, "
        "and is queued again) and exits; a second one exits at once.")
    worker.add_argument("--concurrency", type=positive_type("--concurrency", int, "runs", "the default, 2"),
                        default=2, metavar="N",
                        help="runs this worker executes at a time (default 2)")
    worker.add_argument("--stalled-after", default=30.0, metavar="SECONDS",
                        type=positive_type("--stalled-after", float, "seconds", "the default, 30"),
                        help="a worker silent this long is taken for dead and its runs go to another worker, "
                        "which resumes them from their stored graph (default 30)")
    worker.add_argument("--heartbeat", default=5.0, metavar="SECONDS",
                        type=positive_type("--heartbeat", float, "seconds", "the default, 5"),
                        help="how often this worker says it is alive (default 5; keep it well under "
                        "--stalled-after)")


def cmd_worker(args) -> int:
    from engine import cli  # the shared CLI helpers (imported here: cli imports this module)
    from engine.terminal_logging import log_to_stderr
    from engine.worker import Worker, WorkerOptions

    services = cli._services()
    if services.queue is None:
        raise cli.CLIError("a worker executes queued runs: set THOUGHTMAP_EXECUTION=queue and "
                           "THOUGHTMAP_DATABASE_URL=postgresql+psycopg://... (the app and the CLI must use the same)")
    log_to_stderr(logging.INFO, "%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    try:
        worker = Worker(services, WorkerOptions(concurrency=args.concurrency, stalled_after_s=args.stalled_after,
                                                heartbeat_s=args.heartbeat))
    except ValueError as exc:
        raise cli.CLIError(str(exc)) from exc
    services.runner.recover_interrupted()
    try:
        worker.run()
    finally:
        services.close()
    return cli.EXIT_OK
