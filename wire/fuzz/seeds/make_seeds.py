#!/usr/bin/env python3
"""Write the fuzz seed frames, laid out by hand from the RFCs.

Run from this folder: python3 make_seeds.py. Each target gets a folder of
seeds named after it (see ../README.md).
"""
import os
import struct


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def eth(tags, ethertype, dst=b"\xff" * 6, src=bytes.fromhex("001b21aabbcc")):
    h = dst + src
    for tpid, vid in tags:
        h += struct.pack("!HH", tpid, vid)
    return h + struct.pack("!H", ethertype)


def ipv4_udp(src, dst, sport, dport, payload):
    ulen = 8 + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0, 64, 17, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    pseudo = src + dst + struct.pack("!BBH", 0, 17, ulen)
    udp = struct.pack("!HHHH", sport, dport, ulen, 0) + payload
    c = csum(pseudo + udp) or 0xFFFF
    return ip + udp[:6] + struct.pack("!H", c) + udp[8:]


def dhcp_discover(relay):
    b = struct.pack("!BBBBIHH", 1, 1, 6, 1 if relay else 0, 0x3903F326, 0, 0x8000)
    b += b"\0" * 12 + (bytes([10, 0, 0, 1]) if relay else b"\0" * 4)
    b += bytes.fromhex("001b21aabbcc") + b"\0" * 10 + b"\0" * 192
    b += bytes([99, 130, 83, 99])
    b += bytes([53, 1, 1, 61, 7, 1]) + bytes.fromhex("001b21aabbcc")
    b += bytes([55, 4, 1, 3, 6, 15, 12, 4]) + b"cpe1"
    if relay:
        b += bytes([82, 14, 1, 6]) + b"port-7" + bytes([2, 4, 0xDE, 0xAD, 0xBE, 0xEF])
    b += b"\xff"
    return b.ljust(300, b"\0")


def arp_request():
    return struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + bytes.fromhex("001b21aabbcc") + \
        bytes([10, 0, 0, 23]) + b"\0" * 6 + bytes([10, 0, 0, 1])


# RFC 2865 section 7.1 Access-Request and Access-Accept.
RFC2865_REQUEST = bytes.fromhex(
    "010000380f403f9473978057bd83d5cb98f4227a01066e656d6f02120dbe708d93d413ce3196e43f782a0aee"
    "0406c0a80110050600000003")
RFC2865_ACCEPT = bytes.fromhex(
    "0200002686fe220e7624ba2a1005f6bf9b55e0b20606000000010f06000000000e06c0a80103")

ZERO = bytes(4)
BCAST = b"\xff" * 4
GIADDR = bytes([10, 0, 0, 1])
SERVER = bytes([10, 0, 0, 2])
discover = dhcp_discover(False)
relayed = dhcp_discover(True)
qinq_discover = eth([(0x88A8, 100), (0x8100, 200)], 0x0800) + \
    ipv4_udp(ZERO, BCAST, 68, 67, discover)
afpacket_qinq = eth([(0x8100, 100), (0x8100, 200)], 0x0800) + \
    ipv4_udp(ZERO, BCAST, 68, 67, discover)
relayed_frame = eth([], 0x0800) + ipv4_udp(GIADDR, SERVER, 67, 67, relayed)
arp_frame = eth([(0x8100, 100)], 0x0806) + arp_request()
tcp_syn = bytes.fromhex("c00000500000000100000000600 2ffff0000000002040 5b4".replace(" ", ""))

SEEDS = {
    "parse_l2": {"qinq": qinq_discover[:26], "afpacket_qinq": afpacket_qinq[:26],
                 "dot1q_arp": arp_frame[:18], "untagged": relayed_frame[:14]},
    "arp": {"request": arp_request()},
    "ipv4": {"udp_dhcp": relayed_frame[14:]},
    "udp_tcp": {"udp": relayed_frame[34:], "tcp_syn": tcp_syn},
    "dhcpv4": {"discover": discover, "relayed_discover": relayed},
    "radius": {"rfc2865_request": RFC2865_REQUEST, "rfc2865_accept": RFC2865_ACCEPT},
    "frame": {"qinq_discover": qinq_discover, "afpacket_qinq_discover": afpacket_qinq,
              "relayed": relayed_frame, "arp": arp_frame},
}

for target, seeds in SEEDS.items():
    os.makedirs(target, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(target, name + ".bin"), "wb") as f:
            f.write(data)
