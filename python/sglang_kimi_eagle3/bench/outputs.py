"""`bench` sanity around a run (pure): output paths that cannot collide, a baseline that really is the plain
server, and the verdict on a finished run.

Before the first request (exit 2, one line):
  - a --json file already there was written by bench (a user's file is never replaced);
  - --json, --baseline-json and the two PNGs under --plots are distinct files (--json equal to
    --baseline-json would overwrite the expensive baseline; --plots equal to --json fails after the run);
  - --baseline-url is not the --url server (same scheme, host and port; localhost spellings are one host);
  - a --baseline-json comes from a run against a server without speculation (no spec fields in its
    answers, no speculative_algorithm in its /server_info), and shares at least one concurrency level;
  - the --baseline-url server's /server_info does not report a speculative algorithm.
After the run: no request answered -> status "failed" (exit 1); a baseline whose answers carry spec
fields -> no speedup, and a warning.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from ..errors import UserError
from ..validate import expand_path

PLOT_FILES = ("tau_speedup.png", "acceptance.png")  # bench/plots.py writes these under --plots
_LOCAL = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}


def _same_file(a: str, b: str, flags: tuple[str, str] = ("--json", "--baseline-json")) -> bool:
    return os.path.realpath(expand_path(a, flags[0])) == os.path.realpath(expand_path(b, flags[1]))


def check_distinct(json_path: str, plots: str | None, baseline_json: str | None) -> None:
    if baseline_json and _same_file(json_path, baseline_json):
        raise UserError(f"--json {json_path} is the --baseline-json file: this run would overwrite the baseline it "
                        "compares against; give another --json")
    if plots:
        if _same_file(json_path, plots, ("--json", "--plots")):
            raise UserError(f"--plots {plots} is the --json file: --plots is a folder for {' and '.join(PLOT_FILES)}; "
                            "give another folder")
        for name in PLOT_FILES:
            png = os.path.join(plots, name)
            for flag, path in (("--json", json_path), ("--baseline-json", baseline_json)):
                if path and _same_file(path, png, (flag, "--plots")):
                    raise UserError(f"{flag} {path} is the plot --plots {plots} writes ({name}); choose another path")


def check_plots(plots: str) -> None:
    """--plots DIR: a plot file already there that bench did not write (no MARK in its PNG text) is never replaced."""
    from .plots import MARK

    for name in PLOT_FILES:
        png = os.path.join(expand_path(plots, "--plots"), name)
        if not os.path.lexists(png):
            continue
        try:
            with open(png, "rb") as fh:
                ours = os.path.isfile(png) and MARK.encode() in fh.read(1 << 16)
        except OSError:
            ours = False
        if not ours:
            raise UserError(f"--plots {plots}: {png} exists and was not written by bench (this run would replace it); "
                            "move it away, or give another --plots folder")


def check_json(json_path: str) -> None:
    """--json FILE: a file already there that bench did not write (no schema line of ours at its start; an empty file
    holds nothing) is never replaced."""
    from .document import SCHEMA

    path = expand_path(json_path, "--json")
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except FileNotFoundError:
        return
    except OSError:
        head = b"?"
    if head.strip() and f'"schema": "{SCHEMA}"'.encode() not in head:
        raise UserError(f"--json {json_path}: exists and was not written by bench (this run would replace it); move it "
                        "away, or give another --json")


def measured_levels(doc: dict) -> int:
    """Levels of `doc` where at least one request to the speculative (--url) server succeeded."""
    levels = doc.get("levels") if isinstance(doc, dict) else None
    return sum(1 for lv in levels or [] if isinstance(lv, dict) and isinstance(lv.get("spec"), dict)
               and isinstance(lv["spec"].get("ok"), int) and lv["spec"]["ok"] > 0)


def earlier_result(json_path: str) -> tuple[int, str] | None:
    """(measured levels, date) of a result bench wrote at --json earlier and that measured something; else None.
    A rerun that measures nothing leaves such a file as it was (a typo in --url must not cost yesterday's run)."""
    import json

    try:
        with open(expand_path(json_path, "--json"), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError, UserError):
        return None
    n = measured_levels(doc)
    return (n, str(doc.get("date") or "date unknown")) if n else None


def _endpoint(url: str) -> tuple:
    u = urlsplit(url)
    host = (u.hostname or "").lower()
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, "localhost" if host in _LOCAL else host, port, u.path.rstrip("/")


def check_baseline_url(spec_url: str, base_url: str) -> None:
    if _endpoint(spec_url) == _endpoint(base_url):
        raise UserError(f"--baseline-url {base_url} is the --url server: a baseline must be the same model served "
                        "without speculation, on another port (docs/bench.md)")


def _speculating_levels(doc: dict) -> list[str]:
    """Levels of a bench JSON whose measured ('spec' role) answers carried spec fields."""
    out = []
    for lv in doc.get("levels") or []:
        s = lv.get("spec") or {}
        if s.get("tau") is not None or any(s.get("histogram") or []):
            out.append(f"c={lv.get('concurrency')} tau {s.get('tau')}")
    return out


def check_baseline_doc(doc: dict, path: str, levels: list[int]) -> None:
    algo = ((doc.get("servers") or {}).get("spec") or {}).get("speculative_algorithm")
    spec = _speculating_levels(doc)
    if algo or spec:
        why = f"its server reported speculative_algorithm {algo}" if algo else f"its answers carried spec fields ({spec[0]})"
        raise UserError(f"--baseline-json {path}: a run against a speculating server ({why}); the baseline is a run "
                        "against the same model without --speculative-algorithm")
    have = sorted(lv["concurrency"] for lv in doc["levels"])
    if not set(have) & set(levels):
        raise UserError(f"--baseline-json {path} measured concurrency {','.join(map(str, have))}, this run "
                        f"--concurrency {','.join(map(str, levels))}: no level to compare; pass --concurrency "
                        f"{','.join(map(str, have))} (or measure the baseline at these levels)")


def check_baseline_info(info: dict, url: str, flag: str = "--baseline-url") -> None:
    algo = info.get("speculative_algorithm")
    if algo:
        raise UserError(f"{flag} {url}: its /server_info reports speculative_algorithm {algo}; the baseline "
                        "is the same model served without speculation (restart it without --speculative-* flags)")


def check_baseline_mode(doc: dict, path: str, stream: bool) -> None:
    """A streamed run and a non-streamed one do not compare (streaming costs the server a little per chunk)."""
    theirs = bool((doc.get("config") or {}).get("stream"))
    if theirs != stream:
        raise UserError(f"--baseline-json {path} was measured {'with' if theirs else 'without'} --stream, this run "
                        f"{'with' if stream else 'without'}: measure both the same way "
                        f"({'add' if theirs else 'drop'} --stream)")


def baseline_config_notes(doc: dict, config: dict, path: str) -> list[str]:
    """Warnings where the --baseline-json run sent other requests than this one (its config vs this config)."""
    base = doc.get("config") or {}
    notes = []
    for key, flag in (("sampling_params", "--max-new-tokens/--temperature/--ignore-eos"),
                      ("prompts_file", "--prompts"), ("categories", "--categories")):
        if key in base and base.get(key) != config.get(key):
            notes.append(f"warning: --baseline-json {path} was measured with {key} {base.get(key)}, this run with "
                         f"{config.get(key)} ({flag}): the speedup compares different requests")
    return notes


def plan_accepts(doc: dict, path: str) -> str | None:
    """Why `plan --bench PATH` would refuse this run's file (None when it reads it)."""
    from ..planner import sources

    spec = [lv for lv in doc.get("levels") or [] if (lv.get("spec") or {}).get("histogram")]
    if not spec or (doc.get("config") or {}).get("spec_off_baseline"):
        return None  # nothing speculative measured: the notes above say so
    try:
        sources.from_bench(doc, path)
    except UserError as exc:
        return str(exc)
    return None


def after_run(doc: dict, path: str = "bench.json") -> list[str]:
    """Set the run's verdict on `doc`; return the lines to print (stderr)."""
    notes = [f"warning: {n}" for n in (doc.get("setting") or {}).get("notes") or []]
    levels = doc.get("levels") or []
    if levels and not measured_levels(doc):
        first = next(((lv.get("spec") or {}).get("first_error") for lv in levels if (lv.get("spec") or {}).get("first_error")),
                     None)
        doc["status"] = "failed"
        doc["interrupted"] = {"error": f"no request succeeded (first error: {first})", "finished_levels": len(levels)}
        notes.append(f"error: no request to {doc.get('config', {}).get('urls', {}).get('spec', '--url')} succeeded "
                     f"(first error: {first}); nothing was measured")
    speculating = [lv["concurrency"] for lv in levels if (lv.get("baseline") or {}).get("tau") is not None]
    if speculating:
        for lv in levels:
            lv["speedup"] = None
        doc["baseline_speculates"] = True
        notes.append(f"warning: the baseline's answers carry spec fields (c={','.join(map(str, speculating))}): it "
                     "speculates too, so no speedup is reported; measure it on a server without --speculative-algorithm")
    if (doc.get("config") or {}).get("spec_off_baseline") and _speculating_levels(doc):
        notes.append(f"warning: --spec-off-baseline, but the answers carry spec fields ({_speculating_levels(doc)[0]}): "
                     "this server speculates, and the speculative run will refuse this file as --baseline-json; "
                     "restart the server without --speculative-* flags and measure again")
    base_levels = (doc.get("config") or {}).get("baseline_levels")
    if base_levels is not None:
        missing = [lv["concurrency"] for lv in levels if lv.get("baseline") is None]
        if missing:
            notes.append(f"note: --baseline-json has no level c={','.join(map(str, missing))} (it measured "
                         f"{','.join(map(str, base_levels))}): no speedup there")
    refused = plan_accepts(doc, path)
    if refused:
        notes.append(f"warning: `plan --bench {path}` will refuse this file: {refused}")
    return notes
