"""Entry point of the built-in model's server process: llama.cpp's OpenAI-compatible server that
exits by itself when the Thoughtmap process that started it is gone.

Run as `python -m engine.llm.llama_server_main --parent-pid PID -- <llama_cpp.server args>`.
The server is a separate process because llama.cpp is native code: a crash there must cost one
request (which is retried), never the web app. If the app is killed without running its exit
handlers, the watchdog below still ends the server within a second, so no orphan keeps 650 MB.
Structured output samples the grammar last, as llama.cpp's own server does (`grammar_sampling.py`).
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time


def _watch_parent(parent_pid: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)  # the parent is gone: nothing will ever call this server again


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[0] != "--parent-pid" or "--" not in argv:
        raise SystemExit("usage: python -m engine.llm.llama_server_main --parent-pid PID -- <server args>")
    parent_pid = int(argv[1])
    server_args = argv[argv.index("--") + 1 :]
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="parent-watchdog").start()
    if os.environ.get("THOUGHTMAP_LOCAL_GRAMMAR_FIRST") != "1":  # the runtime's own order, to compare
        from engine.llm.grammar_sampling import install

        install()
    sys.argv = ["llama_cpp.server", *server_args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
