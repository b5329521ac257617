#!/usr/bin/python3
"""Record what reaches the DHCP server's interface from the relay (run in the server's
namespace by tests/relay/run.sh): one JSON line per BOOTREQUEST with giaddr, hops and option 82.
Bounded by SECONDS.

    sniff.py IFACE OUT SECONDS
"""
import json
import sys

from scapy.all import BOOTP, DHCP, UDP, sniff

iface, out, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
f = open(out, "a", buffering=1)


def opt(p, name):
    for o in p[DHCP].options:
        if isinstance(o, tuple) and o[0] == name:
            return o[1]
    return None


def keep(p):
    if BOOTP not in p or p[BOOTP].op != 1 or DHCP not in p:
        return
    rai = opt(p, "relay_agent_information") or b""
    subs, i = {}, 0
    while i + 2 <= len(rai):
        code, ln = rai[i], rai[i + 1]
        subs[code] = rai[i + 2:i + 2 + ln].decode("latin-1")
        i += 2 + ln
    f.write(json.dumps({
        "type": opt(p, "message-type"),
        "chaddr": p[BOOTP].chaddr[:6].hex(":"),
        "giaddr": p[BOOTP].giaddr,
        "hops": p[BOOTP].hops,
        "circuit_id": subs.get(1),
        "remote_id": subs.get(2),
    }) + "\n")


sniff(iface=iface, lfilter=lambda p: UDP in p and p[UDP].dport == 67, prn=keep, store=False,
      timeout=seconds)
