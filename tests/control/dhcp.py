#!/usr/bin/python3
"""Many DHCP clients, and bad DHCP, from one interface (run inside a subscriber namespace by
tests/control/run.sh). Every loop is bounded in count and time.

    dhcp.py dora IFACE PREFIX N [VLAN]   DORA for N MACs PREFIX:00:00..; prints JSON {mac: ip}
    dhcp.py release IFACE JSON           RELEASE each {mac: ip} in JSON (a file)
    dhcp.py bad IFACE                    truncated, bad cookie, absurd option lengths
    dhcp.py storm IFACE MAC COUNT        COUNT DISCOVERs from one MAC
    dhcp.py starve IFACE COUNT VLAN      COUNT DISCOVERs from random MACs on VLAN
"""
import json
import random
import sys
import time

from scapy.all import BOOTP, DHCP, IP, UDP, AsyncSniffer, Dot1Q, Ether, conf, raw, sendp

conf.verb = 0
SERVER_ID_OPT = "server_id"


def mac_bytes(mac):
    return bytes.fromhex(mac.replace(":", ""))


def frame(mac, vlan, opts, xid, ciaddr="0.0.0.0", src="0.0.0.0", dst="255.255.255.255",
          dst_mac="ff:ff:ff:ff:ff:ff"):
    e = Ether(src=mac, dst=dst_mac)
    if vlan:
        e = e / Dot1Q(vlan=vlan)
    return e / IP(src=src, dst=dst) / UDP(sport=68, dport=67) / BOOTP(
        chaddr=mac_bytes(mac), xid=xid, ciaddr=ciaddr, flags=0x8000) / DHCP(options=opts + ["end"])


def opt(p, name):
    for o in p[DHCP].options:
        if isinstance(o, tuple) and o[0] == name:
            return o[1]
    return None


def exchange(iface, frames, want, timeout):
    """Send frames, collect replies of message type `want` keyed by xid."""
    got = {}

    def keep(p):
        if BOOTP in p and p[BOOTP].op == 2 and opt(p, "message-type") == want:
            got[p[BOOTP].xid] = p

    sn = AsyncSniffer(iface=iface, store=False, prn=keep,
                      lfilter=lambda p: BOOTP in p and p[BOOTP].op == 2)
    sn.start()
    time.sleep(0.3)
    sendp(frames, iface=iface)
    deadline = time.time() + timeout
    while time.time() < deadline and len(got) < len(frames):
        time.sleep(0.2)
    sn.stop()
    return got


def dora(iface, prefix, n, vlan=0):
    macs = [f"{prefix}:{i // 256:02x}:{i % 256:02x}" for i in range(n)]
    xids = {0x10000 + i: m for i, m in enumerate(macs)}
    offers = exchange(iface, [frame(m, vlan, [("message-type", "discover")], x)
                              for x, m in xids.items()], 2, 20)
    reqs = []
    for x, p in offers.items():
        reqs.append(frame(xids[x], vlan, [("message-type", "request"),
                                          ("requested_addr", p[BOOTP].yiaddr),
                                          (SERVER_ID_OPT, opt(p, SERVER_ID_OPT))], x))
    acks = exchange(iface, reqs, 5, 20)
    return {xids[x]: p[BOOTP].yiaddr for x, p in acks.items()}


def release(iface, leases, vlan=0):
    for i, (mac, ip) in enumerate(leases.items()):
        sendp(frame(mac, vlan, [("message-type", "release"), (SERVER_ID_OPT, "100.64.0.1")],
                    0x20000 + i, ciaddr=ip, src=ip, dst="100.64.0.1"), iface=iface)


def bad(iface):
    mac = "0a:bb:00:00:00:01"
    good = raw(frame(mac, 0, [("message-type", "discover")], 7))
    sent = 0
    # DHCP payloads truncated at several lengths inside valid IPv4/UDP (lengths recomputed).
    payload = good[14 + 20 + 8:]
    for cut in (1, 20, 100, 200, 239):
        p = Ether(src=mac, dst="ff:ff:ff:ff:ff:ff") / IP(src="0.0.0.0", dst="255.255.255.255") / UDP(
            sport=68, dport=67) / payload[:cut]
        sendp(p, iface=iface)
        sent += 1
    # A frame truncated below its IP total length (the dataplane may drop it first).
    sendp(Ether(good[:60]), iface=iface)
    sent += 1
    # Wrong magic cookie.
    b = bytearray(good)
    b[14 + 20 + 8 + 236] = 0x00
    sendp(Ether(bytes(b)), iface=iface)
    sent += 1
    # Absurd option lengths: message-type with length 250, then 255 on a later option.
    for at, val in ((14 + 20 + 8 + 241, 250), (14 + 20 + 8 + 241, 0)):
        b = bytearray(good)
        b[at] = val
        sendp(Ether(bytes(b)), iface=iface)
        sent += 1
    # A BOOTP with no options at all and one with a reply op.
    p = Ether(src=mac, dst="ff:ff:ff:ff:ff:ff") / IP(src="0.0.0.0", dst="255.255.255.255") / UDP(
        sport=68, dport=67) / BOOTP(chaddr=mac_bytes(mac), op=2)
    sendp(p, iface=iface)
    sent += 1
    print(json.dumps({"sent": sent}))


def storm(iface, mac, count):
    frames = [frame(mac, 0, [("message-type", "discover")], 0x30000 + i) for i in range(count)]
    sendp(frames, iface=iface)
    print(json.dumps({"sent": count}))


def starve(iface, count, vlan):
    rnd = random.Random(42)
    frames = []
    for i in range(count):
        mac = "0a:" + ":".join(f"{rnd.randrange(256):02x}" for _ in range(5))
        frames.append(frame(mac, vlan, [("message-type", "discover")], 0x40000 + i))
    sendp(frames, iface=iface)
    print(json.dumps({"sent": count}))


def main():
    cmd, iface = sys.argv[1], sys.argv[2]
    if cmd == "dora":
        vlan = int(sys.argv[5]) if len(sys.argv) > 5 else 0
        print(json.dumps(dora(iface, sys.argv[3], int(sys.argv[4]), vlan)))
    elif cmd == "release":
        with open(sys.argv[3]) as f:
            release(iface, json.load(f))
    elif cmd == "bad":
        bad(iface)
    elif cmd == "storm":
        storm(iface, sys.argv[3], int(sys.argv[4]))
    elif cmd == "starve":
        starve(iface, int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
