"""`thoughtmap serve`: the HTTP API (engine/service/http.py); `thoughtmap token create|list|revoke`:
its bearer tokens, stored hashed (engine/service/tokens.py)."""

from __future__ import annotations

import argparse
import ipaddress
import socket

from engine.cli import common
from engine.cli.basics import EXIT_OK, CLIError
from engine.safe_text import one_line


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from engine.service.api import Thoughtmap
    from engine.service.http import create_app
    from storage.tokens import TokenStore

    if not 0 <= args.port <= 65535:
        raise CLIError(f"--port must be from 0 to 65535 (got {args.port})")
    services = common.services()
    require_token = args.require_token or not is_loopback(args.host)
    if require_token and TokenStore(services.db).active_token_count() == 0:
        services.close()
        where = "on a loopback address with --require-token" if is_loopback(args.host) else f"on {args.host}"
        raise CLIError(f"serving {where} needs a bearer token on every request, and there is none: "
                       "create one with: thoughtmap token create NAME (or serve on 127.0.0.1)")
    tm = Thoughtmap(llm=args.llm, services=services)
    common.err(f"LLM: {tm.default_llm} (runs may ask for another); search: {services.settings.search}")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
        sock.listen(2048)  # connections wait in the backlog until the server takes them: none is refused
    except OSError as exc:
        services.close()
        raise CLIError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from exc
    port = sock.getsockname()[1]
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    common.err(f"Thoughtmap API on http://{shown}:{port}/v1 (OpenAPI: /openapi.json)"
               + ("; bearer token required" if require_token else "") + ". Ctrl-C stops it.")
    # The access log names paths and statuses only: a token is in a header, never logged.
    server = uvicorn.Server(uvicorn.Config(create_app(tm, require_token=require_token), log_level="warning",
                                           timeout_graceful_shutdown=2))
    try:
        server.run(sockets=[sock])
    finally:
        tm.close()
    return EXIT_OK


def cmd_token(args: argparse.Namespace) -> int:
    from engine.service.tokens import create_token
    from storage.tokens import TokenNotFound, TokenStore

    services = common.services()
    try:
        store = TokenStore(services.db)
        if args.action == "create":
            try:
                token, row = create_token(store, args.name)
            except ValueError as exc:
                raise CLIError(str(exc)) from exc
            common.err(f"token {row.id} '{one_line(row.name)}' created; it is shown once, here. Send it as "
                       "'Authorization: Bearer <token>'.")
            print(token, flush=True)
        elif args.action == "list":
            rows = store.list_tokens()
            if not rows:
                common.err("no tokens yet. Create one with: thoughtmap token create NAME")
                return EXIT_OK
            common.say(f"{'ID':>4}  {'NAME':<24}  {'STARTS':<10}  {'CREATED':<16}  {'LAST USED':<16}  REVOKED")
            for row in rows:
                def when(moment: object) -> str:
                    return moment.strftime("%Y-%m-%d %H:%M") if hasattr(moment, "strftime") else "-"
                common.say(f"{row.id:>4}  {one_line(row.name)[:24]:<24}  {row.prefix + '...':<10}  "
                           f"{when(row.created_at):<16}  {when(row.last_used_at):<16}  {when(row.revoked_at)}")
        else:
            try:
                revoked = store.revoke(args.which)
            except TokenNotFound as exc:
                raise CLIError(str(exc)) from exc
            for row in revoked:
                common.err(f"revoked token {row.id} '{one_line(row.name)}'")
    finally:
        services.close()
    return EXIT_OK
