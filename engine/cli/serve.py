"""`thoughtmap serve`: the HTTP API (engine/service/http.py); `thoughtmap mcp`: the MCP server
(engine/service/mcp_server.py), on stdio or streamable HTTP; `thoughtmap token create|list|revoke`:
the bearer tokens both need off loopback, stored hashed (engine/service/tokens.py)."""

from __future__ import annotations

import argparse
import ipaddress
import signal
import socket
from typing import TYPE_CHECKING, Any

from engine.cli import common
from engine.cli.basics import EXIT_OK, CLIError
from engine.safe_text import one_line

if TYPE_CHECKING:
    from engine.service.api import Thoughtmap
    from engine.services import Services


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_address(args: argparse.Namespace, services: Services) -> bool:
    """Whether every request needs a bearer token; CLIError when one is needed and none exists."""
    from storage.tokens import TokenStore

    if not 0 <= args.port <= 65535:
        raise CLIError(f"--port must be from 0 to 65535 (got {args.port})")
    # With sign-in on, every request is someone's, and only a token says whose.
    require_token = bool(args.require_token) or not is_loopback(args.host) or services.settings.team.sign_in
    if require_token and TokenStore(services.db).active_token_count() == 0:
        where = "on a loopback address with --require-token" if is_loopback(args.host) else f"on {args.host}"
        raise CLIError(
            f"serving {where} needs a bearer token on every request, and there is none: "
            "create one with: thoughtmap token create NAME (or serve on 127.0.0.1)"
        )
    return require_token


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, as getaddrinfo would: asyncio sets TCP_NODELAY only on sockets that say so,
    # and without it a kept-alive connection waits 40 ms for a delayed ACK on every response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)  # connections wait in the backlog until the server takes them: none is refused
    except OSError as exc:
        sock.close()
        raise CLIError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def _address(host: str, sock: socket.socket) -> str:
    shown = f"[{host}]" if sock.family == socket.AF_INET6 else host
    return f"http://{shown}:{sock.getsockname()[1]}"


def _stopped(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def _run_app(app: Any, sock: socket.socket) -> None:
    import uvicorn

    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again for the handler that was
    # there before: this one turns it into SystemExit, so the caller's `finally` still interrupts
    # the runs this process executes (resumable) instead of the default handler killing it.
    signal.signal(signal.SIGTERM, _stopped)
    # The access log names paths and statuses only: a token is in a header, never logged.
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    server.run(sockets=[sock])


def _open(args: argparse.Namespace, *, listen: bool) -> tuple[Thoughtmap, bool, socket.socket | None]:
    """The Python API over this process's services, whether a token is needed, and the listening
    socket (`listen`); the services are closed again if any of it fails."""
    from engine.service.api import Thoughtmap

    services = common.services()
    try:
        require_token = _check_address(args, services) if listen else False
        # Listening, each request is its token's person's; on stdio, the person --user names.
        tm = Thoughtmap(
            llm=args.llm,
            services=services,
            user=None if listen else common.user_named(services, args),
            anonymous=listen,
        )
        return tm, require_token, _listen(args.host, args.port) if listen else None
    except BaseException:
        services.close()
        raise


def cmd_serve(args: argparse.Namespace) -> int:
    from engine.service.http import create_app

    tm, require_token, sock = _open(args, listen=True)
    assert sock is not None
    services = tm.services
    common.err(
        f"LLM: {tm.describe_llm()} (llm={tm.default_llm}; a request may ask for another); "
        f"search: {services.settings.search}"
    )
    common.err(
        f"Thoughtmap API on {_address(args.host, sock)}/v1 (OpenAPI: /openapi.json)"
        + ("; bearer token required" if require_token else "")
        + ". Ctrl-C stops it."
    )
    try:
        _run_app(create_app(tm, require_token=require_token), sock)
    finally:
        tm.close()
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    from engine.service.mcp_server import build_mcp

    tm, require_token, sock = _open(args, listen=args.transport == "http")
    mcp = build_mcp(tm)
    try:
        if sock is None:
            # stdout is the protocol's: everything said goes to stderr.
            common.err(f"Thoughtmap MCP server on stdio; LLM: {tm.describe_llm()}")
            mcp.run("stdio")
        else:
            from engine.service.http import BearerGuard

            app = mcp.streamable_http_app(host=args.host)
            common.err(
                f"Thoughtmap MCP server on {_address(args.host, sock)}/mcp (streamable HTTP)"
                + ("; bearer token required" if require_token else "")
                + f"; LLM: {tm.describe_llm()}"
            )
            _run_app(BearerGuard(app, tm) if require_token else app, sock)
    finally:
        tm.close()
    return EXIT_OK


def cmd_token(args: argparse.Namespace) -> int:
    from engine.service.tokens import create_token
    from storage.tokens import TokenNotFound, TokenStore

    services = common.services()
    try:
        store = TokenStore(services.db)
        person = common.viewer(services, args)
        mine = None if not person.signed_in else person.user_id  # single-user: every token is the local user's
        if args.action == "create":
            try:
                token, row = create_token(store, args.name, person.user_id)
            except ValueError as exc:
                raise CLIError(str(exc)) from exc
            common.err(
                f"token {row.id} '{one_line(row.name)}' created; it is shown once, here. Send it as "
                "'Authorization: Bearer <token>'."
            )
            print(token, flush=True)
        elif args.action == "list":
            rows = store.list_tokens(user_id=mine)
            if not rows:
                common.err("no tokens yet. Create one with: thoughtmap token create NAME")
                return EXIT_OK
            common.say(f"{'ID':>4}  {'NAME':<24}  {'STARTS':<13}  {'CREATED':<16}  {'LAST USED':<16}  REVOKED")
            for row in rows:

                def when(moment: object) -> str:
                    return moment.strftime("%Y-%m-%d %H:%M") if hasattr(moment, "strftime") else "-"

                common.say(
                    f"{row.id:>4}  {one_line(row.name)[:24]:<24}  {row.prefix + '...':<13}  "
                    f"{when(row.created_at):<16}  {when(row.last_used_at):<16}  {when(row.revoked_at)}"
                )
        else:
            try:
                revoked = store.revoke(args.which, user_id=mine)
            except TokenNotFound as exc:
                raise CLIError(str(exc)) from exc
            for row in revoked:
                common.err(f"revoked token {row.id} '{one_line(row.name)}'")
    finally:
        services.close()
    return EXIT_OK
