"""The benchmark report: what a figure must carry, the machine it ran on, the checks that a
report is complete, and the short Markdown table.

A figure is a dict:
  bench, figure, value, unit           what was measured
  limited_by: {class, detail}          class is one of LIMIT_CLASSES
  bound: "floor" | "measured"          a figure limited by the generator is a floor, never a
                                       ceiling: the system under test may do more
  offered_headroom: number | "unbounded"   offered / achieved
  completion: number in [0, 1]          completed / started
  reference: {kind, figure, value, ratio}  kind is "same-run" (a figure measured in this run),
                                       "target" (a stated goal, not a measurement) or "none"
                                       (with "why")
"""

import json
import os
import platform
import subprocess

LIMIT_CLASSES = (
    "platform",
    "generator",
    "cpu of the generator",
    "licence cap",
    "none",
)
GENERATOR_CLASSES = ("generator", "cpu of the generator")


def loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def machine_start():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "loadavg_start": loadavg(),
        "loadavg_end": None,
    }


def git_commit(root):
    try:
        return subprocess.run(
            ["git", "-C", root, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def figure(bench, name, value, unit, limit_class, limit_detail, headroom,
           completion, reference, **extra):
    """A figure; the bound follows from the limit: a generator limit makes it a floor."""
    f = {
        "bench": bench,
        "figure": name,
        "value": value,
        "unit": unit,
        "limited_by": {"class": limit_class, "detail": limit_detail},
        "bound": "floor" if limit_class in GENERATOR_CLASSES else "measured",
        "offered_headroom": headroom,
        "completion": completion,
        "reference": reference,
    }
    f.update(extra)
    return f


def same_run(ref_figure, ref_value, value):
    ratio = value / ref_value if ref_value else None
    return {"kind": "same-run", "figure": ref_figure, "value": ref_value, "ratio": ratio}


def target(what, goal, value):
    return {"kind": "target", "figure": what, "value": goal,
            "ratio": value / goal if goal else None}


def no_reference(why):
    return {"kind": "none", "why": why}


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def problems(report):
    """Every way the report is incomplete or malformed, as sentences (empty: well-formed)."""
    out = []
    m = report.get("machine") or {}
    for k in ("nproc", "cpu_model", "kernel", "loadavg_start", "loadavg_end"):
        if m.get(k) in (None, ""):
            out.append(f"machine.{k} missing")
    figs = report.get("figures")
    if not figs:
        out.append("no figures")
        return out
    for f in figs:
        at = f"{f.get('bench', '?')}: {f.get('figure', '?')}"
        if not _num(f.get("value")):
            out.append(f"{at}: value is not a number ({f.get('value')!r})")
        if not f.get("unit"):
            out.append(f"{at}: no unit")
        lb = f.get("limited_by") or {}
        if lb.get("class") not in LIMIT_CLASSES:
            out.append(f"{at}: limited_by.class {lb.get('class')!r} not one of {LIMIT_CLASSES}")
        if not lb.get("detail"):
            out.append(f"{at}: limited_by.detail missing")
        want = "floor" if lb.get("class") in GENERATOR_CLASSES else "measured"
        if f.get("bound") != want:
            out.append(f"{at}: bound {f.get('bound')!r} but limited by {lb.get('class')!r}")
        h = f.get("offered_headroom")
        if not (h == "unbounded" or (_num(h) and h > 0)):
            out.append(f"{at}: offered_headroom {h!r} is neither a positive number nor 'unbounded'")
        c = f.get("completion")
        if not (_num(c) and 0 <= c <= 1):
            out.append(f"{at}: completion {c!r} not in [0, 1]")
        r = f.get("reference") or {}
        if r.get("kind") in ("same-run", "target"):
            if not r.get("figure") or not _num(r.get("value")):
                out.append(f"{at}: reference without figure or value")
            if not _num(r.get("ratio")):
                out.append(f"{at}: reference ratio {r.get('ratio')!r} is not a number")
        elif r.get("kind") == "none":
            if not r.get("why"):
                out.append(f"{at}: reference 'none' without why")
        else:
            out.append(f"{at}: reference kind {r.get('kind')!r} missing or unknown")
    for e in report.get("errors", []):
        out.append(f"error: {e}")
    return out


def fmt(v):
    if not _num(v):
        return str(v)
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def markdown(report):
    m = report["machine"]
    lines = [
        f"# kbng benchmark {report['date']} ({report['mode']})",
        "",
        f"Machine: {m['nproc']} CPUs, {m['cpu_model']}, Linux {m['kernel']}, "
        f"{m.get('memory_gib')} GiB; load average {m['loadavg_start']} at start, "
        f"{m['loadavg_end']} at end. Commit {report.get('commit')}.",
        "",
        "A **floor** is limited by the load generator: the system under test may do more.",
        "",
        "| bench | figure | value | unit | bound | limited by | headroom | completion | reference (ratio) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in report["figures"]:
        r = f["reference"]
        if r["kind"] == "none":
            ref = "none"
        else:
            ref = f"{r['kind']}: {r['figure']} = {fmt(r['value'])} ({fmt(r['ratio'])}×)"
        lb = f["limited_by"]
        lines.append(
            f"| {f['bench']} | {f['figure']} | {fmt(f['value'])} | {f['unit']} | {f['bound']} "
            f"| {lb['class']}: {lb['detail']} | {fmt(f['offered_headroom'])} "
            f"| {fmt(f['completion'])} | {ref} |"
        )
    if report.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {n}" for n in report["notes"]]
    if report.get("errors"):
        lines += ["", "Errors:", ""] + [f"- {e}" for e in report["errors"]]
    return "\n".join(lines) + "\n"


def write(report, json_path, md_path):
    with open(json_path, "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(md_path, "w") as f:
        f.write(markdown(report))
