#!/usr/bin/python3
"""Reads what FreeRADIUS's debug log (-X) says it received: each packet's type and its
attribute lines ("(7) Received Access-Request ...", then "(7)   Attr = value"). Exit status
answers the question asked; used by run.sh.

    debuglog.py signed LOG         every Access-Request carries Message-Authenticator, and
                                   the server refused none for lacking it
    debuglog.py asked LOG LINE...  some Access-Request carries every attribute LINE given
"""
import re
import sys

UNSIGNED = "does not contain required Message-Authenticator"


def access_requests(path):
    """The attribute lines of every Access-Request received, and whether any was refused
    unsigned."""
    kind, attrs, unsigned = {}, {}, False
    for line in open(path, errors="replace"):
        unsigned |= UNSIGNED in line
        m = re.match(r"\((\d+)\)\s+(.*)", line)
        if not m:
            continue
        n, rest = m.groups()
        if rest.startswith("Received "):
            kind[n], attrs[n] = rest.split()[1], set()
        elif n in attrs:
            attrs[n].add(rest.strip())
    return [a for n, a in attrs.items() if kind[n] == "Access-Request"], unsigned


def main():
    cmd, log, *want = sys.argv[1:]
    requests, unsigned = access_requests(log)
    if cmd == "signed":
        sig = re.compile(r"Message-Authenticator = 0x[0-9a-f]{32}$")
        signed = [a for a in requests if any(sig.match(x) for x in a)]
        return 0 if requests and len(signed) == len(requests) and not unsigned else 1
    if cmd == "asked":
        return 0 if any(set(want) <= a for a in requests) else 1
    sys.exit(f"debuglog.py: unknown command {cmd!r}")


sys.exit(main())
