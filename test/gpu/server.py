"""Start an SGLang server (with this plugin, which SGLang loads through its entry point) and stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


class Server:
    def __init__(self, name: str, argv: list[str], port: int, log_dir: Path, env: dict | None = None):
        self.name, self.port = name, port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log_dir / f"{name}.log"
        self.cmd = [sys.executable, "-m", "sglang.launch_server", *argv, "--host", "127.0.0.1", "--port", str(port)]
        self.env = dict(env) if env is not None else dict(os.environ)  # the whole environment of the server
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float, give_up: str | None = None) -> None:
        """Wait for /health_generate; raise with the log tail if the server exits, is not healthy within
        `timeout` s, or prints `give_up` (a fatal line after which SGLang may linger instead of exiting)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "w") as f:
            f.write(" ".join(self.cmd) + "\n")
        self.proc = subprocess.Popen(self.cmd, stdout=open(self.log, "a"), stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)  # own process group: stop() ends its children too
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} server exited with {self.proc.returncode} during startup; "
                                   f"log tail ({self.log}):\n{self.tail()}")
            if give_up and give_up in self.log.read_text(errors="replace"):
                self.stop()
                raise RuntimeError(f"{self.name} server printed {give_up!r} during startup; log tail ({self.log}):\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health_generate", timeout=30) as r:
                    if r.status == 200:
                        return
            except Exception:
                pass
            time.sleep(2)
        self.stop()
        raise RuntimeError(f"{self.name} server not healthy after {timeout:.0f} s; log tail ({self.log}):\n{self.tail()}")

    def tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """End the server's process group (idempotent; safe from two threads at once)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the group this server started (start_new_session)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=60)
        except ProcessLookupError:  # already gone (stopped by the other caller)
            pass
