"""`thoughtmap steer RUN COMMAND [--node N] [--set key=value ...]`, `thoughtmap pause|stop|delete RUN`:
steering and control from the terminal, through the Python API (engine/service/api.py) as the HTTP
API and the MCP server do it. A run executing in another process (the app, `serve`, a worker) gets
the command there; a finished run that a command reopens is executed here and watched to its end."""

from __future__ import annotations

import argparse

from engine.cli import common
from engine.cli.basics import EXIT_FAILED, EXIT_OK, CLIError
from engine.safe_text import one_line


def cmd_steer(args: argparse.Namespace) -> int:
    from engine.service.api import ApiError, BadRequest, Thoughtmap

    payload: dict[str, object] = {}
    for pair in args.set:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"'{pair}' is not key=value; write it like --set question=\"...\"")
        payload[key.strip()] = value
    if args.node is not None:
        payload["node_id"] = args.node
    services = common.services()
    try:
        tm = Thoughtmap(services=services, user=common.user_named(services, args))
        command = tm.steer(args.run_id, args.steer_command, payload)
    except BadRequest as exc:
        raise CLIError(str(exc)) from exc
    except ApiError as exc:
        raise CLIError(str(exc), EXIT_FAILED if exc.status >= 409 else 2) from exc
    common.err(f"{one_line(command.kind)} queued for run {args.run_id}")
    if not services.runner.is_active(args.run_id):
        common.err("the process executing the run applies it at its next step")
        return EXIT_OK
    common.watch(services, args.run_id, args.quiet)  # reopened here: executed by this process
    return common.finish(services, args.run_id, None)


def cmd_control(args: argparse.Namespace) -> int:
    from engine.service.api import ApiError, Thoughtmap

    services = common.services()
    try:
        tm = Thoughtmap(services=services, user=common.user_named(services, args))
        if args.command == "pause":
            run = tm.pause(args.run_id)
        elif args.command == "stop":
            run = tm.stop(args.run_id)
        else:
            tm.delete(args.run_id)
            common.err(f"deleted run {args.run_id}")
            return EXIT_OK
    except ApiError as exc:
        raise CLIError(str(exc), 2 if exc.status in (403, 404, 422) else EXIT_FAILED) from exc
    common.err(f"{args.command} sent to run {args.run_id} ({run.status}); it applies it at its next step")
    return EXIT_OK
