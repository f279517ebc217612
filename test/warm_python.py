"""Fresh SGLang processes without paying SGLang's import each time (CPU boxes only).

Importing what `sglang.launch_server` imports before it calls load_plugins() (sglang.srt.server_args and
its torch/transformers stack) costs about 15 s of CPU per interpreter; the tests start dozens of fresh
interpreters. Here one interpreter (the server; test/helpers.py starts one in the background when it is
first imported, from the environment every test subprocess starts from) imports exactly those modules,
then forks one child per request. Each child is a new process in the state `python -m sglang.launch_server`
is in when it reaches load_plugins(): SGLang's modules imported, no plugin loaded (`_plugins_loaded` is
False), nothing of sglang_kimi_eagle3 imported. The child takes the request's environment, working folder, argv and
stdout/stderr files, runs `-c CODE` or `-m MODULE` as the interpreter does (`__main__`, SystemExit codes,
uncaught tracebacks exit 1, thread joins and atexit handlers at exit, then os._exit without the module
teardown) and exits.

There is one server per start-up environment: the request's environment less the variables read only
after start-up (LAZY_ENV: this plugin's switches, COLUMNS, ...). A request whose PYTHONPATH, HOME,
HF_HUB_OFFLINE or any other variable differs gets its own server (e.g. the exported upstream tree, whose
sglang is another one), started from exactly that environment. A request runs in a plain `subprocess.run`
instead (the old, slower way, same result) on a GPU box (CUDA must not be initialised before a fork;
TRITON_INTERPRET is off there), with interpreter flags other than -c/-m, while MAX_SERVERS warm ones are
all busy, or with SGLANG_KIMI_EAGLE3_TEST_FRESH=1 (every subprocess a plain one, for a check).
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

# read by SGLang or this plugin only when used (after start-up), never at import of the modules preloaded
LAZY_ENV_PREFIXES = ("SGLANG_KIMI_EAGLE3",)
LAZY_ENV = {"PYTEST_CURRENT_TEST", "COLUMNS", "GATE_DEVICE", "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN",
            "SGLANG_PLUGINS", "CUDA_VISIBLE_DEVICES"}

SERVER = r'''
import json, os, select, sys, threading
import sglang.srt.arg_groups.overrides, sglang.srt.plugins, sglang.srt.server_args, sglang.srt.utils  # noqa
import sglang.srt.utils.common  # noqa  (launch_server's imports before its load_plugins() call)
bad = [m for m in sys.modules if m.split(".")[0] == "sglang_kimi_eagle3"]
why = ("threads started: %d" % threading.active_count() if threading.active_count() != 1 else
       "the plugin is imported: %s" % bad[:3] if bad else
       "plugins loaded" if sglang.srt.plugins._plugins_loaded else "")
req_fd, rep_fd = os.dup(0), os.dup(1)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 0)
os.dup2(null, 1)
rep = os.fdopen(rep_fd, "w", buffering=1)
rep.write(json.dumps({"ready": not why, "why": why}) + "\n")
if why:
    sys.exit(0)
buf, running = b"", {}


def child(req):
    import builtins, importlib, random, runpy, types
    rep.close()
    os.close(req_fd)
    os.close(null)
    importlib.invalidate_caches()  # files written since the server started are found, as by a new interpreter
    random.seed()  # fresh entropy, as a new interpreter's (children must not share the server's state)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    os.environ.clear()
    os.environ.update(req["env"])
    os.chdir(req["cwd"])
    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    mode, target, args = req["mode"], req["target"], req["args"]
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    rc = 0
    try:
        if mode == "-c":
            sys.argv = ["-c", *args]
            exec(compile(target, "<string>", "exec"), main.__dict__)
        else:
            sys.argv = ["-m", *args]
            sys.path[0] = os.getcwd()
            runpy._run_module_as_main(target, alter_argv=True)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            rc = 0
        elif isinstance(code, int):
            rc = code
        else:
            print(code, file=sys.stderr)
            rc = 1
    except BaseException:  # as the interpreter reports it: through sys.excepthook (a plugin may set one),
        kind, exc, tb = sys.exc_info()  # from the first frame of the code run, not this function's
        tb = tb.tb_next if tb is not None else None
        sys.excepthook(kind, exc.with_traceback(tb), tb)
        rc = 1
    # the interpreter's exit (Py_FinalizeEx) up to its teardown of every module: join the threads, run the
    # atexit handlers (multiprocessing's, weakref.finalize's), flush; the teardown itself (seconds of C++
    # destructors and page copies in a forked torch process) frees nothing another process could see
    import atexit, threading
    threading._shutdown()
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os._exit(rc & 0xFF)


while True:
    ready, _, _ = select.select([req_fd], [], [], 0.02)
    if ready:
        data = os.read(req_fd, 1 << 20)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            req = json.loads(line)
            pid = os.fork()
            if pid == 0:
                child(req)
            running[pid] = req["id"]
            rep.write(json.dumps({"id": req["id"], "pid": pid}) + "\n")
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        rep.write(json.dumps({"id": running.pop(pid), "rc": os.waitstatus_to_exitcode(status)}) + "\n")
'''


class _Server:
    def __init__(self, env: dict, cwd: str):
        self.env, self.cwd = dict(env), cwd
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=self.env, cwd=cwd, text=True, bufsize=1)
        hello = json.loads(self.proc.stdout.readline() or '{"ready": false, "why": "server exited"}')
        self.ready = hello["ready"]
        self.lock, self.next_id, self.waiting, self.used = threading.Lock(), 0, {}, time.monotonic()
        if self.ready:
            threading.Thread(target=self._read, name="warm-python-replies", daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            with self.lock:
                slot = self.waiting[msg["id"]]
            slot.update(msg)
            if "rc" in msg:
                slot["done"].set()
            else:
                slot["started"].set()
        with self.lock:  # the server is gone: nobody waits forever
            for slot in self.waiting.values():
                slot.setdefault("rc", -9)
                slot["started"].set()
                slot["done"].set()

    def run(self, mode, target, args, env, cwd, timeout):
        tmp = tempfile.mkdtemp(prefix="warm-python-")
        out, err = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        slot = {"started": threading.Event(), "done": threading.Event()}
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            self.waiting[rid] = slot
            self.proc.stdin.write(json.dumps({"id": rid, "mode": mode, "target": target, "args": args, "env": env,
                                              "cwd": cwd, "stdout": out, "stderr": err}) + "\n")
        try:
            slot["started"].wait()
            timed_out = not slot["done"].wait(timeout)
            if timed_out:
                try:
                    os.kill(slot["pid"], 9)
                except (KeyError, ProcessLookupError):
                    pass
                slot["done"].wait()
            stdout, stderr = (open(p).read() if os.path.exists(p) else "" for p in (out, err))
        finally:
            with self.lock:
                self.waiting.pop(rid, None)
            for p in (out, err):
                if os.path.exists(p):
                    os.unlink(p)
            os.rmdir(tmp)
        argv = [sys.executable, mode, target, *args]
        if timed_out:
            raise subprocess.TimeoutExpired(argv, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(argv, slot["rc"], stdout, stderr)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(30)
        except Exception:
            self.proc.kill()


_SERVERS: dict = {}
_START = threading.Lock()
MAX_SERVERS = 3  # warm at once, one per start-up environment (each holds about 1 GB); LRU ones handed back


def _on_cpu_only() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1" and not os.path.exists("/dev/nvidia0")


def _lazy(key: str) -> bool:
    return key in LAZY_ENV or key.startswith(LAZY_ENV_PREFIXES)


def _server_for(env: dict, cwd: str) -> _Server | None:
    """The warm interpreter for this start-up environment (`env` less LAZY_ENV), started on first use."""
    start_env = {k: v for k, v in env.items() if not _lazy(k)}
    key = tuple(sorted(start_env.items()))
    with _START:
        if key not in _SERVERS:
            live = [k for k, v in _SERVERS.items() if v is not None]
            if len(live) >= MAX_SERVERS:  # hand back the least recently used idle one, else run plainly
                idle = [k for k in live if not _SERVERS[k].waiting]
                if not idle:
                    return None
                _SERVERS.pop(min(idle, key=lambda k: _SERVERS[k].used)).close()
            s = _Server(start_env, cwd)
            if not s.ready:
                s.close()
                s = None
            else:
                atexit.register(s.close)
            _SERVERS[key] = s
        if _SERVERS[key] is not None:
            _SERVERS[key].used = time.monotonic()
        return _SERVERS[key]


def run(argv: list[str], *, env: dict, cwd: str, timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout), through a
    child of a warm interpreter where that is the same process state (see the module docstring)."""
    s = None
    if (os.environ.get("SGLANG_KIMI_EAGLE3_TEST_FRESH") != "1" and _on_cpu_only() and len(argv) >= 3
            and argv[0] == sys.executable and argv[1] in ("-c", "-m")):
        s = _server_for(env, cwd)
    t0 = time.monotonic()
    try:
        if s is None:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
        return s.run(argv[1], argv[2], list(argv[3:]), env, cwd, timeout)
    finally:
        if os.environ.get("WARM_PYTHON_LOG"):  # one line per run: warm or plain, seconds, what ran
            with open(os.environ["WARM_PYTHON_LOG"], "a") as f:
                f.write(f"{'warm ' + str(id(s))[-4:] if s else 'plain'} {time.monotonic() - t0:7.1f} s "
                        f"{' '.join(argv[1:3])[:90]!r}\n")


def prestart(env: dict, cwd: str) -> None:
    """Start the warm interpreter for `env` in the background (its import overlaps whatever runs meanwhile,
    on the other core); a request that comes before it is ready waits for it."""
    if os.environ.get("SGLANG_KIMI_EAGLE3_TEST_FRESH") != "1" and _on_cpu_only():
        threading.Thread(target=_server_for, args=(dict(env), cwd), name="warm-python-start", daemon=True).start()
