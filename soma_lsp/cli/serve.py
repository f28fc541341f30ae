"""`soma-lsp serve` (the default): the language server over stdio, `--pipe PATH` (a Unix socket only
the user can connect to) or `--tcp [HOST:]PORT` (unauthenticated: any local user can connect)."""

from __future__ import annotations

import argparse
import logging
import os
import sys


LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("serve", help="serve LSP over stdio (the default), a Unix socket or TCP",
                                   description="Serve the Language Server Protocol over stdio, over a Unix "
                                               "socket only you can connect to with --pipe, or over TCP "
                                               "with --tcp (127.0.0.1 unless a host is given). TCP is "
                                               "unauthenticated: any user who can reach the port becomes "
                                               "the client; prefer --pipe.")
    parser.add_argument("--stdio", action="store_true", help="serve over stdio (the default; accepted "
                                                             "for clients that pass it)")
    transports = parser.add_mutually_exclusive_group()
    transports.add_argument("--tcp", metavar="[HOST:]PORT",
                            help="listen on HOST:PORT (HOST defaults to 127.0.0.1); unauthenticated: "
                                 "the first client to connect, whoever it is, is served")
    transports.add_argument("--pipe", metavar="PATH",
                            help="listen on a Unix socket at PATH, created owner-only (0600) in a "
                                 "directory you own, removed at exit; serves the first client")
    env_level = os.environ.get("SOMA_LOG_LEVEL", "WARNING").upper()
    parser.add_argument("--log-level", default=env_level if env_level in LEVELS else "WARNING",
                        choices=LEVELS,
                        help="server log level on stderr (default WARNING, or $SOMA_LOG_LEVEL); what the "
                             "user needs to know also goes to the client as window/logMessage")
    parser.add_argument("--log-file", help="also write the server log to this file")
    parser.set_defaults(run=run)


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise SystemExit(f"soma-lsp serve: --tcp expects [HOST:]PORT, got {text!r}") from None
    if not 0 <= number <= 65535:
        raise SystemExit(f"soma-lsp serve: port out of range: {number}")
    return host, number


def _logging(level: str, log_file: str | None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logging.basicConfig(level=getattr(logging, level), handlers=handlers,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # pygls warns about routine events (a cancel for a request already answered): keep them out of
    # the client's log unless debugging
    logging.getLogger("pygls").setLevel(logging.DEBUG if level == "DEBUG" else logging.ERROR)


def run(args: argparse.Namespace) -> int:
    _logging(args.log_level, args.log_file)
    from ..server import create_server

    server = create_server()
    if args.pipe:
        def listening(path: str) -> None:
            print(f"soma-lsp listening on {path}", file=sys.stderr, flush=True)

        try:
            code = server.serve_pipe(args.pipe, listening)
        except (ValueError, OSError) as error:
            print(f"soma-lsp serve: --pipe: {error}", file=sys.stderr, flush=True)
            code = 2
    elif args.tcp:
        host, port = parse_address(args.tcp)

        def ready(bound_host: str, bound_port: int) -> None:
            print(f"soma-lsp listening on {bound_host}:{bound_port}", file=sys.stderr, flush=True)

        code = server.serve_tcp(host, port, ready)
    else:
        # The protocol owns the real stdout; anything else printing goes to stderr instead.
        out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        sys.stdout = sys.stderr
        code = server.serve_stdio(sys.stdin.buffer, out)
    sys.stderr.flush()
    os._exit(code)  # worker threads (a pool load, the watcher) must not hold the exit up
