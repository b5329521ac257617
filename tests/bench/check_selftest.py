#!/usr/bin/env python3
"""The report check must refuse what is incomplete: run it on broken reports and fail if any
passes. (A check that cannot fail proves nothing.)"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

machine = dict(report.machine_start(), loadavg_end=report.loadavg())
good = report.figure("x", "a figure", 1.0, "ops/s", "platform", "two vCPUs", 1.2, 1.0,
                     report.same_run("ref", 2.0, 1.0))
base = {"machine": machine, "figures": [good]}
assert not report.problems(base), report.problems(base)

def broken(mutate):
    r = copy.deepcopy(base)
    mutate(r["figures"][0], r)
    return r

cases = {
    "no limited_by": lambda f, r: f.pop("limited_by"),
    "unknown limit class": lambda f, r: f["limited_by"].update({"class": "vibes"}),
    "generator-limited shown as a ceiling": lambda f, r: f["limited_by"].update({"class": "generator"}),
    "no headroom": lambda f, r: f.pop("offered_headroom"),
    "zero headroom": lambda f, r: f.update({"offered_headroom": 0}),
    "completion above 1": lambda f, r: f.update({"completion": 1.5}),
    "no completion": lambda f, r: f.pop("completion"),
    "no reference": lambda f, r: f.pop("reference"),
    "reference without ratio": lambda f, r: f["reference"].update({"ratio": None}),
    "none without why": lambda f, r: f.update({"reference": {"kind": "none"}}),
    "value not a number": lambda f, r: f.update({"value": None}),
    "no machine load at end": lambda f, r: r["machine"].update({"loadavg_end": None}),
    "no figures": lambda f, r: r.update({"figures": []}),
}
failed = [name for name, m in cases.items() if not report.problems(broken(m))]
for name in failed:
    print(f"report check accepted a broken report: {name}")
sys.exit(1 if failed else 0)
