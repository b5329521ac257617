#!/usr/bin/python3
"""Subscriber-side traffic for the kbng dataplane end-to-end test (runs inside the `sub`
network namespace, driven by cnf-dataplane/tests/e2e_netns.rs).

    traffic.py probe IFACE JSON   send frames, capture replies, print a JSON summary
    traffic.py listen IFACE JSON  capture for a while, print what matched

Every loop is bounded by a count and a timeout.
"""
import json
import sys
import time

from scapy.all import (ARP, BOOTP, DHCP, ICMP, IP, TCP, UDP, AsyncSniffer, Dot1AD, Dot1Q,
                       Ether, conf, sendp)
from scapy.layers.inet import UDPerror

conf.verb = 0


def l2(spec, dst_mac):
    frame = Ether(src=spec["src_mac"], dst=dst_mac)
    vlans = spec.get("vlans", [])
    if len(vlans) == 2:
        outer = Dot1AD if spec.get("outer_tpid", 0x8100) == 0x88A8 else Dot1Q
        frame = frame / outer(vlan=vlans[0]) / Dot1Q(vlan=vlans[1])
    elif len(vlans) == 1:
        frame = frame / Dot1Q(vlan=vlans[0])
    return frame


def build(spec, seq):
    kind = spec["kind"]
    if kind == "icmp":
        return l2(spec, spec["gw_mac"]) / IP(src=spec["src_ip"], dst=spec["dst_ip"]) / ICMP(
            id=0x4b42, seq=seq) / (b"kbng" * 4)
    if kind == "ttl1":
        # A traceroute probe: the first hop (the BNG) must answer with ICMP Time Exceeded.
        return l2(spec, spec["gw_mac"]) / IP(src=spec["src_ip"], dst=spec["dst_ip"], ttl=1) / UDP(
            sport=40000 + seq, dport=33434 + seq) / (b"kbng" * 4)
    if kind == "tcp":
        return l2(spec, spec["gw_mac"]) / IP(src=spec["src_ip"], dst=spec["dst_ip"]) / TCP(
            sport=40000 + seq, dport=spec["dport"], flags="S", seq=1000)
    if kind == "dhcp":
        return l2(spec, "ff:ff:ff:ff:ff:ff") / IP(src="0.0.0.0", dst="255.255.255.255") / UDP(
            sport=68, dport=67) / BOOTP(chaddr=bytes.fromhex(spec["src_mac"].replace(":", "")),
                                        xid=0x1000 + seq) / DHCP(
            options=[("message-type", "discover"), "end"])
    if kind == "arp":
        return l2(spec, "ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=spec["src_mac"], psrc=spec["src_ip"],
                                                   pdst=spec["dst_ip"])
    raise SystemExit(f"unknown kind {kind}")


def matches(spec, p):
    """Is `p` a reply to the probe `spec`?"""
    if Ether not in p or p[Ether].dst.lower() != spec["src_mac"].lower():
        return False
    kind = spec["kind"]
    if kind == "arp":
        return ARP in p and p[ARP].op == 2 and p[ARP].psrc == spec["dst_ip"]
    if kind == "ttl1":
        # From any source (the test asserts which); it must quote our probe.
        return (IP in p and p[IP].dst == spec["src_ip"] and ICMP in p and p[ICMP].type == 11
                and p[ICMP].code == 0 and UDPerror in p and p[UDPerror].dport >= 33434)
    if IP not in p or p[IP].dst != spec["src_ip"] or p[IP].src != spec["dst_ip"]:
        return False
    if kind == "icmp":
        return ICMP in p and p[ICMP].type == 0
    if kind == "tcp":
        return TCP in p and p[TCP].sport == spec["dport"]
    return False


def vlans_of(p):
    out = []
    layer = p
    while layer is not None and layer.payload is not None:
        if isinstance(layer, (Dot1Q, Dot1AD)):
            out.append(layer.vlan)
        if not layer.payload or isinstance(layer.payload, bytes):
            break
        layer = layer.payload
    return out


def probe(iface, spec):
    count = int(spec.get("count", 3))
    timeout = float(spec.get("timeout", 2.0))
    sniffer = AsyncSniffer(iface=iface, store=True, lfilter=lambda p: matches(spec, p))
    sniffer.start()
    time.sleep(0.3)
    for i in range(count):
        sendp(build(spec, i), iface=iface)
        time.sleep(0.05)
    time.sleep(timeout)
    got = sniffer.stop() or []
    print(json.dumps({
        "sent": count,
        "replies": len(got),
        "reply_vlans": [vlans_of(p) for p in got][:4],
        "reply_src_mac": [p[Ether].src for p in got][:1],
        # The outer ethertype/TPID as delivered here (0x88a8 for an 802.1ad S-tag).
        "reply_tpids": [p[Ether].type for p in got][:4],
        "reply_src_ip": [p[IP].src for p in got if IP in p][:4],
    }))


def listen(iface, spec):
    """Capture for `seconds` and count UDP frames to `dst_mac` with destination port `dport`."""
    seconds = float(spec.get("seconds", 3.0))

    def ok(p):
        return (Ether in p and p[Ether].dst.lower() == spec["dst_mac"].lower() and UDP in p
                and p[UDP].dport == spec["dport"])

    got = AsyncSniffer(iface=iface, store=True, lfilter=ok, timeout=seconds)
    got.start()
    got.join()
    print(json.dumps({"frames": len(got.results or [])}))


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    cmd, iface, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    {"probe": probe, "listen": listen}[cmd](iface, spec)


if __name__ == "__main__":
    main()
