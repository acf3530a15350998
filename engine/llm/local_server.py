"""`LocalModelServer`: the built-in model's llama.cpp server, a subprocess started on demand.

One instance per Thoughtmap process, shared by every run (Services owns it). It listens on a free
port of 127.0.0.1 only, answers a health check that proves it is *our* server (the model alias
carries a random token), is stopped at exit, and is started again when it died. Its output goes
to THOUGHTMAP_HOME/logs/local-model.log, whose tail is quoted when it fails to start.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from engine.config import LocalModelSettings
from engine.llm.local_model import LocalModelError, resolve_model_file, runtime_installed

log = logging.getLogger("thoughtmap.local_model")

_PORT_TAKEN_SIGNS = ("address already in use", "errno 98", "only one usage of each socket address")
_LOAD_FAILURE_SIGNS = ("failed to load model", "error loading model", "gguf_init", "valueerror", "failed to read")


# The child gets only these variables: llama.cpp's server reads its settings from the environment
# too (PORT, HOST, MODEL... which then win over our flags), and PORT is what scripts/run sets for
# Streamlit.
_PASSED_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "SYSTEMROOT",
        "VIRTUAL_ENV",
        "THOUGHTMAP_LOCAL_GRAMMAR_FIRST",
    }
)  # benchmarks: the runtime's own sampling order
_PASSED_PREFIXES = ("LC_", "XDG_", "OPENBLAS_", "OMP_")


def server_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of the server process: the basics, and our package importable from anywhere."""
    env = {k: v for k, v in environ.items() if k in _PASSED_VARIABLES or k.startswith(_PASSED_PREFIXES)}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, environ.get("PYTHONPATH", "")) if p)
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]  # AF_INET: (host, port)
        return port


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class LocalModelServer:
    """Starts, health-checks, restarts and stops the llama.cpp server process. Thread-safe."""

    def __init__(
        self,
        settings: LocalModelSettings,
        log_dir: Path,
        *,
        python: str = sys.executable,
        resolve_model: Callable[[LocalModelSettings], Path] = resolve_model_file,
        pick_port: Callable[[], int] = free_port,
    ) -> None:
        self._settings = settings
        self._log_path = log_dir / "local-model.log"
        self._python = python
        self._resolve_model = resolve_model
        self._pick_port = pick_port
        self._lock = threading.RLock()
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._model_file: Path | None = None
        self.alias = f"thoughtmap-local-{secrets.token_hex(4)}"
        self.starts = 0  # how many times a server process was started (restarts included)
        self.last_load_s: float | None = None
        self._atexit_registered = False

    # ------------------------------------------------------------------ state

    @property
    def base_url(self) -> str | None:
        with self._lock:
            return f"http://127.0.0.1:{self._port}/v1" if self._port else None

    @property
    def pid(self) -> int | None:
        with self._lock:
            return self._process.pid if self._process is not None else None

    @property
    def model_file(self) -> Path | None:
        return self._model_file

    def alive(self) -> bool:
        with self._lock:
            return self._process is not None and self._process.poll() is None

    def dies_within(self, seconds: float) -> bool:
        """Whether the server process is gone, or goes within `seconds`. A killed process closes its
        socket before it can be reaped, so a call refused at that moment still finds it "alive":
        a caller that met a refused connection gives it this long to finish dying."""
        with self._lock:
            process = self._process
        if process is None:
            return True
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    # ------------------------------------------------------------------ lifecycle

    def ensure_running(self) -> str:
        """The server's base URL, starting (or restarting) it first when it is not running."""
        with self._lock:
            if self.alive() and self._port is not None:
                return f"http://127.0.0.1:{self._port}/v1"
            if self._process is not None:
                log.warning(
                    "the local model server (pid %s) is gone (exit code %s); starting it again",
                    self._process.pid,
                    self._process.returncode,
                )
                self._process = None
            self._start()
            return f"http://127.0.0.1:{self._port}/v1"

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            process, self._process = self._process, None
            if process is None or process.poll() is not None:
                return
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout_s)

    def _start(self) -> None:
        if not runtime_installed():
            raise LocalModelError(
                "the built-in model's runtime (llama-cpp-python with its server extra) is not installed.",
                hint="Run scripts/setup, which builds it for this machine (about 7 minutes, once), or connect "
                "an OpenAI-compatible server in Settings, or use --llm fake for an offline demo.",
            )
        model_file = self._resolve_model(self._settings)
        self._model_file = model_file
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        last_error: LocalModelError | None = None
        for attempt in range(3):
            port = self._choose_port(first=attempt == 0)
            try:
                self._launch(model_file, port)
                return
            except _PortTaken as taken:
                log.info("port %s was taken before the local model server could bind it; trying another", port)
                last_error = LocalModelError(f"the local model server could not bind a port: {taken}")
        raise last_error or LocalModelError("the local model server did not start")

    def _choose_port(self, *, first: bool) -> int:
        preferred = self._settings.port
        if first and preferred:
            if port_is_free(preferred):
                return preferred
            log.info("THOUGHTMAP_LOCAL_PORT %s is in use; the local model server takes a free port", preferred)
        return self._pick_port()

    def _launch(self, model_file: Path, port: int) -> None:
        command = [
            self._python,
            "-m",
            "engine.llm.llama_server_main",
            "--parent-pid",
            str(os.getpid()),
            "--",
            "--model",
            str(model_file),
            "--model_alias",
            self.alias,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(self._settings.context_tokens),
            "--n_threads",
            str(self._settings.threads),
            "--n_threads_batch",
            str(self._settings.threads),
            # The server keeps every prompt token's logits by default (151k floats each for Qwen): we
            # never use them, and they slowed prompt processing and grew memory by GBs. Flash attention
            # is faster on the CPU too (prompt processing 106 -> 130 tokens/s here).
            "--logits_all",
            "False",
            "--flash_attn",
            "True",
        ]
        if self._settings.prompt_cache_mb > 0:
            command += [
                "--cache",
                "True",
                "--cache_type",
                "ram",
                "--cache_size",
                str(self._settings.prompt_cache_mb * 1024 * 1024),
            ]
        # One log per start, the previous one kept beside it: bounded, and the crash that caused a
        # restart stays readable.
        if self._log_path.exists():
            os.replace(self._log_path, self._log_path.with_name(self._log_path.name + ".previous"))
        with self._log_path.open("wb") as log_file:
            start_offset = 0
            log_file.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(command)}\n".encode())
            log_file.flush()
            started = time.monotonic()
            env = server_environment(os.environ)
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self._process = process
        self._port = None
        self.starts += 1
        deadline = started + self._settings.start_timeout_s
        while time.monotonic() < deadline:
            code = process.poll()
            if code is not None:
                self._process = None
                self._fail(model_file, code, start_offset)
            if self._healthy(port):
                self._port = port
                self.last_load_s = time.monotonic() - started
                log.info(
                    "local model server ready on 127.0.0.1:%s in %.1f s (pid %s)", port, self.last_load_s, process.pid
                )
                if not self._atexit_registered:
                    atexit.register(self.stop)
                    self._atexit_registered = True
                return
            time.sleep(0.1)
        process.kill()
        process.wait(5)
        self._process = None
        raise LocalModelError(
            f"the local model server did not become ready within {self._settings.start_timeout_s:g} s "
            f"(model {model_file}).",
            hint=f"See {self._log_path}. A slow disk or a large model may need more time.",
        )

    def _healthy(self, port: int) -> bool:
        """True when our server (its alias proves it) answers on the port."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1.0) as response:
                body = json.loads(response.read().decode("utf-8", "replace"))
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return any(item.get("id") == self.alias for item in body.get("data", []) if isinstance(item, dict))

    def _fail(self, model_file: Path, code: int, start_offset: int) -> None:
        tail = self._log_tail(start_offset)
        lowered = tail.lower()
        if any(sign in lowered for sign in _PORT_TAKEN_SIGNS):
            lines = [line for line in tail.splitlines() if any(sign in line.lower() for sign in _PORT_TAKEN_SIGNS)]
            raise _PortTaken(lines[-1].strip() if lines else "address already in use")
        last = "\n".join(tail.strip().splitlines()[-6:])
        if any(sign in lowered for sign in _LOAD_FAILURE_SIGNS):
            raise LocalModelError(
                f"llama.cpp could not load the model file {model_file} (exit code {code}). Last lines of its log:\n"
                f"{last}",
                hint="The file may be truncated or not a llama.cpp model. Download it again or choose another GGUF "
                "file (THOUGHTMAP_LOCAL_MODEL); for the built-in model run `thoughtmap model prepare --force`.",
            )
        raise LocalModelError(
            f"the local model server exited while starting (exit code {code}). Last lines of its log:\n{last}",
            hint=f"The full log is {self._log_path}.",
        )

    def _log_tail(self, offset: int, limit: int = 8000) -> str:
        try:
            with self._log_path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except OSError:
            return ""
        return data[-limit:].decode("utf-8", "replace")


class _PortTaken(Exception):
    pass
