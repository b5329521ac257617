"""Running Kea's perfdhcp and reading what it prints.

perfdhcp acts as a relay: it sends from its own address (giaddr) on port 67 to the server's
address and takes the replies there. With `-R N` it uses N client MACs counted up from the base
(`-b mac=...`) in sequence, so a run of fewer than N exchanges never repeats a client; each run
gets a fresh base so that no run meets the leases of an earlier one. `-x t` prints the send and
receive time of every completed exchange, from which the latency percentiles are computed.
"""

import re
import resource
import subprocess
import time


def children_cpu_secs():
    """User + system CPU seconds of this process's children that have been waited for."""
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def mac_at(index):
    """The MAC at `index` counted up from 02:b0:00:00:00:00 (four octets of room)."""
    b = index.to_bytes(4, "big")
    return "02:b0:" + ":".join(f"{x:02x}" for x in b)


def percentiles(samples, ps=(50, 90, 99, 99.9)):
    if not samples:
        return {f"p{p}": None for p in ps}
    s = sorted(samples)
    out = {}
    for p in ps:
        k = min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))
        out[f"p{p}"] = s[k]
    return out


def parse(text):
    """perfdhcp's final report: rate, per-exchange counters and latencies (ms)."""
    r = {"rate": None, "exchanges": {}}
    m = re.search(r"^Rate: ([0-9.]+) 4-way exchanges/second", text, re.M)
    if m:
        r["rate"] = float(m.group(1))
    # "***Statistics for: DISCOVER-OFFER***" blocks, then "***Timestamps for packets: X***".
    parts = re.split(r"^\*\*\*(Statistics for|Timestamps for packets): ([A-Z-]+)\*\*\*$", text, flags=re.M)
    for i in range(1, len(parts) - 2, 3):
        kind, name, body = parts[i], parts[i + 1], parts[i + 2]
        e = r["exchanges"].setdefault(name, {})
        if kind == "Statistics for":
            for key, pat in (("sent", r"sent packets: (\d+)"), ("received", r"received packets: (\d+)"),
                             ("drops", r"drops: (\d+)"), ("orphans", r"orphans: (\d+)")):
                mm = re.search(pat, body)
                e[key] = int(mm.group(1)) if mm else None
            for key, pat in (("min_ms", r"min delay: ([0-9.]+) ms"), ("avg_ms", r"avg delay: ([0-9.]+) ms"),
                             ("max_ms", r"max delay: ([0-9.]+) ms"), ("stddev_ms", r"std deviation: ([0-9.]+) ms")):
                mm = re.search(pat, body)
                e[key] = float(mm.group(1)) if mm else None
        else:
            lat = [(float(b) - float(a)) * 1000.0
                   for a, b in re.findall(r"sent / received: ([0-9.]+) / ([0-9.]+)", body)]
            e["latency_ms"] = percentiles(lat)
            e["latency_samples"] = len(lat)
    return r


def socket_drops(netns):
    """UDP datagrams the kernel dropped in `netns` because a receive buffer was full
    (RcvbufErrors of /proc/net/snmp): replies that reached perfdhcp's socket but that perfdhcp
    did not read in time. None when unreadable."""
    p = subprocess.run(["ip", "netns", "exec", netns, "cat", "/proc/net/snmp"],
                       capture_output=True, text=True)
    rows = [line.split()[1:] for line in p.stdout.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2 or "RcvbufErrors" not in rows[0]:
        return None
    return int(rows[1][rows[0].index("RcvbufErrors")])


def run(netns, iface, server, rate, secs, base_index, log_path, drop_secs=1.0):
    """One bounded perfdhcp run at `rate` for `secs`; returns the parsed report plus what was
    offered. perfdhcp exits by itself after the period (plus a 2 s wait for late replies); the
    timeout is only a backstop."""
    clients = int(rate * secs) + 1000
    cmd = ["ip", "netns", "exec", netns, "perfdhcp", "-4", "-l", iface,
           "-r", str(int(rate)), "-R", str(clients), "-b", f"mac={mac_at(base_index)}",
           "-p", str(secs), "-W", "2000000", "-d", str(drop_secs), "-x", "t", server]
    sock_before = socket_drops(netns)
    # `ip netns exec` execs perfdhcp in its own process, so the children's rusage of this
    # process grows by perfdhcp's CPU once it has been waited for.
    cpu_before, wall_before = children_cpu_secs(), time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 60)
        text, code = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        text, code = (e.stdout or b"").decode(errors="replace"), "timeout"
    generator_cpu = children_cpu_secs() - cpu_before
    generator_wall = time.monotonic() - wall_before
    with open(log_path, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n(exit {code})\n")
        f.write("\n".join(line for line in text.splitlines() if not line.startswith("sent / received")))
        f.write("\n\n")
    sock_after = socket_drops(netns)
    r = parse(text)
    r["exit"] = code
    # Replies the generator's own socket dropped: the server sent them and they arrived.
    r["generator_socket_drops"] = (sock_after - sock_before
                                   if sock_before is not None and sock_after is not None else None)
    r["generator_cpu_s"] = round(generator_cpu, 3)
    r["generator_wall_s"] = round(generator_wall, 3)
    r["requested_rate"] = rate
    r["secs"] = secs
    r["clients"] = clients
    do = r["exchanges"].get("DISCOVER-OFFER", {})
    ra = r["exchanges"].get("REQUEST-ACK", {})
    sent = do.get("sent") or 0
    acked = ra.get("received") or 0
    r["discovers_sent"] = sent
    r["acks"] = acked
    r["offered_rate"] = sent / secs
    # perfdhcp's own "Rate" divides by the period plus the exit wait; the replies counted in
    # the wait answer requests sent in the period, so the period is the divisor.
    r["perfdhcp_rate"] = r.pop("rate")
    r["rate"] = acked / secs
    r["completion"] = acked / sent if sent else 0.0
    r["drops"] = (do.get("drops") or 0) + (ra.get("drops") or 0)
    r["zero_drop"] = sent > 0 and r["drops"] == 0 and acked == sent
    return r, clients
