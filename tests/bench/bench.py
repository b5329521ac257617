#!/usr/bin/env python3
"""Runs every benchmark of kbng in one go and writes a JSON report and a Markdown table.

  --full   the real run (minutes): writes tests/bench/results/<date>.{json,md}
  --smoke  the same harness with tiny counts, to check the report is complete and well-formed;
           its figures mean nothing and it writes only under --out (default: a temporary dir)

Benchmarks: dataplane pipeline (cnf-dataplane/benches/pipeline.rs, ingested from its JSON),
sessions programmed per second over gRPC (cnf-control/benches/program_rate.rs), restore of
persisted sessions and memory per session (cnf-control/benches/restore.rs), and DHCP with
perfdhcp against kbng and Kea 2.2 (dhcp.py). Exit status: 0 when the report is complete and
well-formed, 1 otherwise (the problems are printed).

Whatever the run creates goes on any exit, also on SIGINT, SIGTERM or SIGHUP: its network
namespaces (<tag>k-* and <tag>b-*, with what runs in them), the process groups of the
benchmark executables (with the dataplanes and testpmd they start), any child still running,
and its scratch folder (kept with KBNG_KEEP_TMP=1, or when it holds the report).
"""

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import dhcp  # noqa: E402
import report  # noqa: E402

PLANS = {
    "full": {
        "dataplane": {"KBNG_BENCH_SECS": "6", "KBNG_BENCH_ROUNDS": "3"},
        "program": {"KBNG_PROGRAM_SESSIONS": "200000", "KBNG_PROGRAM_BATCHES": "100,1000,10000"},
        "restore": {"KBNG_RESTORE_SESSIONS": "1000000"},
        # Ten steps reach 34,360/s: nine stopped at 21,475/s, where kbng with an interval
        # sync was still clean on an Intel host (a floor set by the search, not a ceiling).
        # Every run takes fresh MACs: up to about 800,000 of them, inside the /12 pool.
        "dhcp": {"start": 500, "factor": 1.6, "steps": 10, "bisect": 2, "secs": 5,
                 "max_rate": 60000, "subscribers": 900_000},
    },
    "smoke": {
        # testpmd's figure skips its first two one-second samples: 4 s is the least that gives one.
        # Callgrind runs take minutes; the smoke checks the report's shape, not instructions.
        "dataplane": {"KBNG_BENCH_SECS": "4", "KBNG_BENCH_ROUNDS": "1", "KBNG_BENCH_CALLGRIND": "0"},
        "program": {"KBNG_PROGRAM_SESSIONS": "2000", "KBNG_PROGRAM_BATCHES": "500"},
        "restore": {"KBNG_RESTORE_SESSIONS": "2000"},
        "dhcp": {"start": 100, "factor": 2, "steps": 2, "bisect": 0, "secs": 1,
                 "max_rate": 400, "subscribers": 5000},
    },
}


def target_dir():
    return os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))


def bench_exe(package, bench):
    """Build `--bench bench` of `package` and return its executable. Built with `--no-run`
    and run directly, so that cargo's lock on the target directory is not held (and others'
    builds are not waited on) while the benchmark runs."""
    if NO_BUILD:
        old = prebuilt(f"deps/{bench}-")
        if not old:
            raise RuntimeError(f"--no-build: no executable of bench {bench} has been built")
        return old
    # The same selection as tests/run's build (the whole workspace, every bench): cargo
    # resolves features over the packages selected, so `-p package` would build the
    # dependencies again with other features instead of finding them fresh.
    p = subprocess.run(["cargo", "bench", "--no-run", "-q", "--workspace", "--bench", "*",
                        "--message-format=json"], cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        # Others edit the tree in parallel: a tree that does not compile right now falls back
        # to the newest executable of this bench already built, and the report says so.
        old = prebuilt(f"deps/{bench}-")
        if old:
            NOTES.append(f"bench {bench}: the tree did not compile ({last_error(p.stderr)}); "
                         f"ran the newest earlier build {old}")
            return old
        raise RuntimeError(f"building bench {bench} failed: {p.stderr[-800:]}")
    for line in p.stdout.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if m.get("reason") == "compiler-artifact" and m.get("executable") \
                and m.get("target", {}).get("name") == bench:
            return m["executable"]
    raise RuntimeError(f"cargo reported no executable for bench {bench}")


NOTES = []
NO_BUILD = []


def last_error(text):
    errs = [line for line in text.splitlines() if line.startswith("error")]
    return errs[0] if errs else text.strip()[-200:]


def prebuilt(prefix):
    """The newest executable under <target>/release whose path starts with prefix (only the
    target directory in use: another one may hold a build of other code)."""
    found = []
    d = os.path.join(target_dir(), "release", os.path.dirname(prefix))
    base = os.path.basename(prefix)
    if os.path.isdir(d):
        for n in os.listdir(d):
            f = os.path.join(d, n)
            if n.startswith(base) and "." not in n[len(base):] and os.access(f, os.X_OK) \
                    and os.path.isfile(f):
                found.append((os.path.getmtime(f), f))
    return max(found)[1] if found else None


def cargo_bench(package, bench, env, timeout):
    """Run `--bench bench` of `package` (as `cargo bench` would, with `--bench`) with env;
    returns its output text."""
    e = dict(os.environ, **env)
    p = run_group([bench_exe(package, bench), "--bench"], timeout,
                  cwd=os.path.join(ROOT, package_dir(package)), env=e)
    if p.returncode != 0:
        raise RuntimeError(f"cargo bench --bench {bench} failed ({p.returncode}): "
                           f"{(p.stderr or p.stdout)[-800:]}")
    return p.stdout


def run_group(cmd, timeout, **kw):
    """subprocess.run with its output captured, in a process group of its own: the group goes
    when the command ends, times out or is interrupted, so what it started (a dataplane,
    testpmd) does not outlive it."""
    with subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw) as p:
        GROUPS.append(p.pid)
        try:
            out, err = p.communicate(timeout=timeout)
        finally:
            kill_group(p.pid)
            p.wait()
            GROUPS.remove(p.pid)
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


GROUPS = []


def kill_group(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def on_signal(signum, _frame):
    # Unwinds through every finally (the DHCP benchmark's teardown, then cleanup()).
    raise SystemExit(128 + signum)


def own_namespaces(tag):
    """This run's namespaces: the DHCP benchmark names them <tag>k-<role> and <tag>b-<role>.
    The letter after the tag keeps another run whose tag extends this one's out."""
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    names = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    return [n for n in names if n.startswith((f"{tag}k-", f"{tag}b-"))]


def own_children():
    """Processes whose parent is this one, read from /proc."""
    kids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            kids.append(int(d))
    return kids


def cleanup(tag, tmp, keep_tmp):
    """Removes what this run created; returns what could not be removed (enumerated)."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    for g in list(GROUPS):
        kill_group(g)
    for n in own_namespaces(tag):
        pids = subprocess.run(["ip", "netns", "pids", n], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        subprocess.run(["ip", "netns", "del", n], capture_output=True)
    kids = own_children()
    for pid in kids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.time() + 5
    while kids and time.time() < deadline:
        for pid in kids:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    kids.remove(pid)
            except ChildProcessError:
                kids.remove(pid)
        time.sleep(0.1)
    for pid in kids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    if not keep_tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    left = own_namespaces(tag) + [f"pid {k}" for k in own_children()]
    if not keep_tmp and os.path.exists(tmp):
        left.append(tmp)
    return left


def package_dir(package):
    return {"kbng-dataplane": "cnf-dataplane", "kbng-control": "cnf-control"}[package]


def limit_detail(text):
    """The detail of a free-text limit, without its class prefix when it has one."""
    head, _, rest = text.partition(":")
    return rest.strip() if head.strip().lower() in report.LIMIT_CLASSES and rest else text


def limit_class(text):
    """The class a free-text limit names first; the system's own cost when it names none."""
    head = text.split(":", 1)[0].strip().lower()
    if head == "i/o":  # the machine's packet I/O (the dataplane bench's wording)
        return "platform"
    return head if head in report.LIMIT_CLASSES else "none"


def dataplane_figures(plan, tmp):
    out_dir = os.path.join(tmp, "dataplane")
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.time() - 1
    cargo_bench("kbng-dataplane", "pipeline", dict(plan, KBNG_BENCH_OUT=out_dir), 1800)
    # Where the bench writes depends on its version: KBNG_BENCH_OUT/latest.json, or
    # <target>/kbng-bench/pipeline.json; only a file written by this run counts.
    for cand in (os.path.join(out_dir, "latest.json"),
                 os.path.join(target_dir(), "kbng-bench", "pipeline.json"),
                 os.path.join(ROOT, "target", "kbng-bench", "pipeline.json")):
        if os.path.exists(cand) and os.path.getmtime(cand) >= t0:
            with open(cand) as f:
                raw = json.load(f)
            break
    else:
        raise RuntimeError("the pipeline bench wrote no JSON (latest.json or pipeline.json)")
    rows = raw.get("figures", [])
    ref = next((r for r in rows if "testpmd" in r.get("figure", "")), None)
    if ref is not None and not ref.get("mpps_per_core"):
        NOTES.append("dataplane: the pipeline bench's testpmd reference measured 0 Mpps in this "
                     "run (its output was not parsed); no ratio to testpmd is given")
    figs = []
    for r in rows:
        lb = r.get("limited_by") or ""
        h = r.get("offered_headroom")
        note = r.get("offered_headroom_note") or (h if isinstance(h, str) else "")
        if h is None or isinstance(h, str):
            h = "unbounded" if "unbounded" in note else None
        is_ref = r is ref
        if is_ref:
            reference = report.no_reference("testpmd io-forward is the reference (the I/O limit)")
        elif ref is None or not ref.get("mpps_per_core"):
            reference = report.no_reference(
                "the dataplane bench's testpmd reference gave no figure in this run")
        else:
            reference = report.same_run(ref["figure"], ref["mpps_per_core"], r.get("mpps_per_core") or 0.0)
        extra = {k: r.get(k) for k in ("tsc_cycles_per_packet", "ns_per_packet", "wall_mpps",
                                       "instructions_per_packet", "bytes_per_session_per_worker",
                                       "workers", "sessions", "samples_mpps_on_cpu")
                 if r.get(k) is not None}
        figs.append(report.figure("dataplane", r.get("figure"), r.get("mpps_per_core"), "Mpps/core",
                                  limit_class(lb), limit_detail(lb), h, r.get("completion"), reference,
                                  offered_note=note, **extra))
    bps = [r for r in rows if r.get("bytes_per_session_per_worker") and "full" in r.get("figure", "")]
    for r in bps:
        figs.append(report.figure(
            "dataplane", f"bytes of memory per session per worker ({r['figure']})",
            r["bytes_per_session_per_worker"], "bytes/session", "none",
            "table layout: session record, meter and counter lines, index words (per replica)",
            1.0, 1.0, report.no_reference("a size, not a rate: no peer measured"),
            offered_note="a measurement of state, not a rate"))
    return figs, {k: raw.get(k) for k in ("two_worker_scaling", "targets", "pipeline_alone_callgrind",
                                          "reference_vpp_cycles_per_packet", "method")}


def own_bench_figures(bench, plan, tmp, timeout):
    out = os.path.join(tmp, f"{bench}.json")
    cargo_bench("kbng-control", bench, dict(plan, KBNG_BENCH_JSON=out), timeout)
    with open(out) as f:
        raw = json.load(f)
    figs = []
    for r in raw["figures"]:
        lb = r.pop("limited_by")
        name, value, unit = r.pop("figure"), r.pop("value"), r.pop("unit")
        headroom, completion = r.pop("offered_headroom"), r.pop("completion")
        goal = r.pop("target", None)
        ref = (report.target("issue 4 target", goal, value) if goal
               else report.no_reference("no peer of this figure runs on this machine"))
        figs.append(report.figure(bench, name, value, unit, limit_class(lb), limit_detail(lb), headroom,
                                  completion, ref, **r))
    return figs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--full", action="store_true")
    mode.add_argument("--smoke", action="store_true")
    ap.add_argument("--only", default="dataplane,program_rate,restore,dhcp",
                    help="comma-separated subset of dataplane,program_rate,restore,dhcp")
    ap.add_argument("--no-build", action="store_true",
                    help="run the newest binaries and bench executables already built")
    ap.add_argument("--out", help="output directory (default: tests/bench/results for --full)")
    ap.add_argument("--tag", default=f"kbn{os.getpid() % 100000}",
                    help="prefix of the network namespaces this run creates (default: from its pid)")
    args = ap.parse_args()
    mode = "full" if args.full else "smoke"
    plan = PLANS[mode]
    only = set(args.only.split(","))
    unknown = only - {"dataplane", "program_rate", "restore", "dhcp"}
    if unknown:
        ap.error(f"--only: unknown benchmark(s) {sorted(unknown)}")
    if not re.fullmatch(r"[a-z][a-z0-9]{0,11}", args.tag):
        ap.error(f"--tag {args.tag!r}: a lower-case letter, then up to 11 letters or digits")
    if os.geteuid() != 0 and "dhcp" in only:
        ap.error("the DHCP benchmark needs root (network namespaces)")

    tmp = tempfile.mkdtemp(prefix="kbng-bench.")
    out = args.out or (os.path.join(HERE, "results") if mode == "full" else tmp)
    keep_tmp = os.environ.get("KBNG_KEEP_TMP") == "1" or os.path.abspath(out) == tmp
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    status = 1
    try:
        status = run(args, mode, plan, only, tmp, out)
    finally:
        left = cleanup(args.tag, tmp, keep_tmp)
        print(f"cleanup: removed namespaces {args.tag}[kb]-*, processes"
              f"{'' if keep_tmp else ' and ' + tmp}" + (f"; LEFT BEHIND: {left}" if left else ""),
              flush=True)
    return 1 if left else status


def run(args, mode, plan, only, tmp, out):
    """The benchmarks in order, then the report; returns the exit status."""
    tag = args.tag
    date = datetime.datetime.now(datetime.timezone.utc)
    rep = {"date": date.strftime("%Y-%m-%dT%H:%MZ"), "mode": mode, "commit": report.git_commit(ROOT),
           "machine": report.machine_start(), "figures": [], "errors": [], "details": {},
           "plan": plan}
    started = time.time()
    print(f"kbng bench ({mode}); scratch {tmp}", flush=True)
    if args.no_build:
        NO_BUILD.append(True)
        NOTES.append("--no-build: ran the newest binaries and bench executables already built")
    build = subprocess.run(["true"] if args.no_build else
                           ["cargo", "build", "-q", "--release", "--workspace", "--bins"],
                           cwd=ROOT, capture_output=True, text=True)
    bins = {"dataplane": os.path.join(target_dir(), "release", "kbng-dataplane"),
            "control": os.path.join(target_dir(), "release", "kbng-control")}
    if args.no_build:
        bins = {k: prebuilt(f"kbng-{k}") for k in bins}
        missing = [f"kbng-{k}" for k, b in bins.items() if not b]
        if missing:
            # Without this, every benchmark was skipped and the report said only "no figures".
            rep["errors"].append(f"--no-build: {' and '.join(missing)} not built under "
                                 f"{os.path.join(target_dir(), 'release')} (CARGO_TARGET_DIR); "
                                 f"no benchmark ran")
    elif build.returncode != 0:
        for k in bins:
            bins[k] = prebuilt(f"kbng-{k}")
        if all(bins.values()):
            NOTES.append(f"the tree did not compile ({last_error(build.stderr)}); "
                         f"ran the newest earlier builds {bins['dataplane']} and {bins['control']}")
        else:
            rep["errors"].append(f"build failed: {build.stderr[-800:]}")
    ok_bins = all(bins.values())

    steps = [
        ("dataplane", lambda: dataplane_figures(plan["dataplane"], tmp)),
        ("program_rate", lambda: (own_bench_figures(
            "program_rate", dict(plan["program"], KBNG_DATAPLANE_BIN=bins["dataplane"]), tmp, 900), None)),
        ("restore", lambda: (own_bench_figures(
            "restore", dict(plan["restore"], KBNG_RESTORE_DIR=tmp), tmp, 900), None)),
        ("dhcp", lambda: dhcp.run(tmp, tag, bins, plan["dhcp"], rep["errors"])),
    ]
    for name, step in steps:
        if name not in only or not ok_bins:
            continue
        print(f"== {name}", flush=True)
        t = time.time()
        try:
            figs, details = step()
            rep["figures"] += figs
            if details:
                rep["details"][name] = details
        except (RuntimeError, OSError, subprocess.SubprocessError, ValueError, KeyError) as e:
            rep["errors"].append(f"{name}: {e}")
        print(f"   {name}: {time.time() - t:.0f} s", flush=True)

    rep["machine"]["loadavg_end"] = report.loadavg()
    rep["duration_secs"] = round(time.time() - started)
    rep["notes"] = NOTES
    os.makedirs(out, exist_ok=True)
    stem = date.strftime("%Y-%m-%d") if mode == "full" else "smoke"
    report.write(rep, os.path.join(out, f"{stem}.json"), os.path.join(out, f"{stem}.md"))
    print(report.markdown(rep))
    print(f"written: {out}/{stem}.json and {stem}.md")
    bad = report.problems(rep)
    for p in bad:
        print(f"report problem: {p}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
