#!/usr/bin/python3
"""QinQ (802.1ad outer, 802.1Q inner) DHCP subscribers for the lab: the DORA of
tests/control/dhcp.py with both tags on every frame.

    qinq.py HELPERS IFACE PREFIX N OUTER INNER   prints JSON {mac: ip}
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import dhcp  # noqa: E402  (tests/control/dhcp.py, found through HELPERS)
from scapy.all import Dot1AD, Dot1Q, Ether  # noqa: E402

untagged = dhcp.frame


def qinq_frame(mac, tags, opts, xid, **kw):
    outer, inner = tags
    e = untagged(mac, 0, opts, xid, **kw)
    return Ether(src=e.src, dst=e.dst) / Dot1AD(vlan=outer) / Dot1Q(vlan=inner) / e.payload


dhcp.frame = qinq_frame
_, _, iface, prefix, n, outer, inner = sys.argv
print(json.dumps(dhcp.dora(iface, prefix, int(n), (int(outer), int(inner)))))
