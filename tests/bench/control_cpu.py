#!/usr/bin/env python3
"""kbng-control's CPU per DORA at one fixed offered rate, for before/after comparisons.

The DHCP bench's own topology (`dhcp.Kbng`: real kbng-dataplane on af_packet veths punting to
the real kbng-control, server mode, pacing and punt policer out of the way), a fresh start for
every run, then one perfdhcp run at --rate for --secs. The control's CPU is utime + stime from
/proc/<pid>/stat over the perfdhcp run, divided by the ACKs it sent (its own counter). CPU per
DORA falls as the rate rises (fixed costs per batch and per wake-up are shared by more
exchanges), so two builds are compared only at the same rate, in the same conditions. The
dataplane's CPU per ACK and every thread's of both processes (from /proc/<pid>/task) are
printed beside it, since a change on one side of the punt path moves cost to the other.
KBNG_DHCP_IDLE_SLEEP_US sets the dataplane worker's idle sleep, as in the DHCP bench.

    tests/bench/control_cpu.py --rate 1500 --secs 10 --runs 3 \
        [--control BIN] [--dataplane BIN] [--label NAME]

Prints one line per run and the medians, and with --json FILE appends them there. Not a timed
test: nothing passes or fails on a figure.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import dhcp  # noqa: E402
import perfdhcp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


def load_avg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def thread_stats(pid):
    """(CPU seconds, context switches) of every thread of `pid` so far, summed by thread name.

    Context switches (voluntary + involuntary) count the thread's sleeps and wake-ups: on a
    KVM guest each wake-up of a parked thread costs an IPI, so a change to the punt path is
    judged by these as much as by the CPU seconds."""
    out, switches = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
        switches[name] = switches.get(name, 0) + context_switches(pid, tid)
    return out, switches


def context_switches(pid, tid):
    try:
        with open(f"/proc/{pid}/task/{tid}/status") as f:
            return sum(int(line.split()[1]) for line in f
                       if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
    except OSError:
        return 0  # the thread ended meanwhile


def per_thread_us(before, after, acks):
    """µs per ACK of each thread name over the run (threads that used under 5 ms left out)."""
    out = {}
    for name, t in after.items():
        used = t - before.get(name, 0.0)
        if used >= 0.005 and acks:
            out[name] = round(used / acks * 1e6, 1)
    return out


def per_thread_switches(before, after, acks):
    """Context switches per ACK of each thread name over the run (under 0.05 left out)."""
    out = {}
    for name, n in after.items():
        per = (n - before.get(name, 0)) / acks if acks else 0
        if per >= 0.05:
            out[name] = round(per, 2)
    return out


def one_run(tmp, tag, bins, subs, rate, secs, base):
    kb = dhcp.Kbng(tmp, tag, bins, subs)
    try:
        kb.up(pacing_rate=1_000_000)
        time.sleep(1.0)  # let the connection's reconcile and first ticks settle
        cost = dhcp.Cost(kb)
        pids = {"control": kb.ctl.pid, "dataplane": kb.dp.pid}
        before = {side: thread_stats(pid) for side, pid in pids.items()}
        r, _ = perfdhcp.run(kb.netns, "e0", dhcp.SERVER, rate, secs, base, f"{tmp}/perfdhcp.log")
        r.update(cost.end(r["acks"]))
        acks = r.get("control_acks_sent")
        after = {side: thread_stats(pid) for side, pid in pids.items()}
        r["threads_us_per_ack"] = {side: per_thread_us(before[side][0], after[side][0], acks)
                                   for side in pids}
        r["threads_switches_per_ack"] = {
            side: per_thread_switches(before[side][1], after[side][1], acks) for side in pids}
        if acks and r.get("dataplane_cpu_s") is not None:
            r["dataplane_us_per_ack"] = round(r["dataplane_cpu_s"] / acks * 1e6, 1)
        return r
    finally:
        kb.down()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=1500.0, help="offered DORA/s (default 1500)")
    ap.add_argument("--secs", type=int, default=10, help="seconds per run (default 10)")
    ap.add_argument("--runs", type=int, default=3, help="runs, each from a fresh start (default 3)")
    tgt = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ap.add_argument("--control", default=os.path.join(tgt, "release", "kbng-control"))
    ap.add_argument("--dataplane", default=os.path.join(tgt, "release", "kbng-dataplane"))
    ap.add_argument("--label", default="", help="a name for this build in the output")
    ap.add_argument("--json", help="append the result as one JSON line to this file")
    args = ap.parse_args()
    if args.rate <= 0 or args.secs <= 0 or not 1 <= args.runs <= 10:
        ap.error("--rate and --secs must be positive, --runs 1..10")
    for flag, path in (("--control", args.control), ("--dataplane", args.dataplane)):
        if not os.access(path, os.X_OK):
            ap.error(f"{flag} {path}: not an executable")
    bins = {"control": args.control, "dataplane": args.dataplane}
    tag = f"ccpu{os.getpid() % 10000}"
    load_start = load_avg()
    runs = []
    with tempfile.TemporaryDirectory(prefix="kbng-ccpu-") as tmp:
        subs = f"{tmp}/subscribers.csv"
        per_run = int(args.rate * args.secs * 2) + 1000
        with open(subs, "w") as f:
            f.write("mac,circuit_id,remote_id,plan\n")
            for i in range(per_run * args.runs):
                f.write(f"{perfdhcp.mac_at(i)},,,gold\n")
        for i in range(args.runs):
            r = one_run(tmp, tag, bins, subs, args.rate, args.secs, i * per_run)
            keep = {k: r.get(k) for k in ("discovers_sent", "acks", "drops", "generator_socket_drops",
                                          "rate", "control_cpu_s", "dataplane_cpu_s",
                                          "control_acks_sent", "control_us_per_ack",
                                          "dataplane_us_per_ack", "threads_us_per_ack",
                                          "threads_switches_per_ack", "kbng_counters")}
            # REQUEST-ACK latency: a change to the punt/commit/inject path moves it too.
            keep["ack_latency_ms"] = ((r.get("exchanges") or {}).get("REQUEST-ACK") or {}).get("latency_ms")
            runs.append(keep)
            lat = keep["ack_latency_ms"] or {}
            print(f"run {i + 1}: sent {keep['discovers_sent']}, acked {keep['acks']}, drops "
                  f"{keep['drops']}, ACK latency p50 {lat.get('p50')} p99 {lat.get('p99')} ms; "
                  f"control {keep['control_cpu_s']} s for "
                  f"{keep['control_acks_sent']} ACKs = {keep['control_us_per_ack']} us/ACK, "
                  f"dataplane {keep['dataplane_cpu_s']} s = {keep['dataplane_us_per_ack']} us/ACK; "
                  f"per thread (us/ACK): {keep['threads_us_per_ack']}; context switches per "
                  f"ACK: {keep['threads_switches_per_ack']}"
                  + (dhcp.kbng_losses(keep) if keep["drops"] else ""), flush=True)
    us = [r["control_us_per_ack"] for r in runs if r["control_us_per_ack"]]
    out = {"label": args.label, "control": args.control, "rate": args.rate, "secs": args.secs,
           "runs": runs, "median_control_us_per_ack": statistics.median(us) if us else None,
           "median_control_cpu_s": statistics.median(r["control_cpu_s"] for r in runs
                                                     if r["control_cpu_s"] is not None),
           "load_avg_start": load_start, "load_avg_end": load_avg()}
    print(f"{args.label or 'build'}: median {out['median_control_us_per_ack']} us control CPU per "
          f"ACK at {args.rate:.0f}/s offered over {len(us)} runs; load {load_start} -> "
          f"{out['load_avg_end']}", flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(out) + "\n")
    return 0 if us else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print(f"control_cpu: {e}", file=sys.stderr)
        sys.exit(1)
