#!/usr/bin/python3
"""Reads FreeRADIUS detail files (one record per blank-line-separated block, a timestamp line
then `Attribute = value` lines) and prints them as a JSON list of {attribute: value} maps,
values unquoted. Usage: detail.py FILE..."""
import json
import sys

records = []
for path in sys.argv[1:]:
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except FileNotFoundError:
        continue
    for block in text.split("\n\n"):
        rec = {}
        for line in block.splitlines():
            if "=" not in line or not line.startswith(("\t", " ")):
                continue
            k, v = line.strip().split("=", 1)
            rec[k.strip()] = v.strip().strip('"')
        if rec:
            records.append(rec)
json.dump(records, sys.stdout)
