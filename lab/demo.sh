#!/usr/bin/env bash
# The lab: a whole kbng on this machine, with no cluster. Called by lab/run with the folder of
# the release binaries. Builds this topology in network namespaces of its own:
#
#   ns <tag>-cN (dhclient, dhcpcd, udhcpc, scapy)  ⇄  ns <tag>-hub (bridge) ⇄ d0 ┐
#                               ns <tag>-dut: kbng-dataplane (DPDK, net_af_packet) ┤
#                                                   ns <tag>-core (uplink, web) ⇄ d1 ┘
#   kbng-control in the host namespace: DHCP over the punt stream, API on 127.0.0.1
#
# then onboards a demo set of subscribers (known ones on two plans, untagged and 802.1Q, and
# an unknown one that lands in the walled garden), prints a live summary, and removes
# everything it created on exit or Ctrl-C. KBNG_LAB_SECONDS bounds the summary (default 600).
set -uo pipefail
bin=${1:?usage: lab/demo.sh <folder of release binaries>}
root=$(cd "$(dirname "$0")/.." && pwd)
helpers=$root/tests/control
tag=kl$$
tmp=$(mktemp -d /tmp/kbng-lab.XXXXXX)
sock=$tmp/dp.sock
api=127.0.0.1:$((30000 + $$ % 20000))
seconds=${KBNG_LAB_SECONDS:-600}
pids=()
dp_pid=
ctl_pid=

say() { printf '\033[1m[%s] %s\033[0m\n' "$(date +%T)" "$*"; }
# shellcheck source=../tests/lib/netns.sh
source "$root/tests/lib/netns.sh"

cleanup() {
    set +e
    trap - EXIT INT TERM
    say "cleaning up"
    [[ -n $ctl_pid ]] && kill -TERM "$ctl_pid" 2>/dev/null
    [[ -n $dp_pid ]] && kill -TERM "$dp_pid" 2>/dev/null
    sleep 1
    [[ -n $ctl_pid ]] && kill -9 "$ctl_pid" 2>/dev/null
    [[ -n $dp_pid ]] && kill -9 "$dp_pid" 2>/dev/null
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    topology_down
    rm -rf "$tmp"
    say "removed namespaces $tag-*, processes and $tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "lab licence: verified with the lab public key"
"$bin/kbngctl" licence verify --public-key "$(cat "$root/deploy/samples/lab-licence-public.key")" \
    "$root/deploy/samples/licence.yaml" | tee "$tmp/licence.txt" || exit 1
awk '/^maxSessions:/ {print $2}' "$tmp/licence.txt" >"$tmp/cap"

say "network namespaces: access hub, dataplane, uplink"
topology_up
mkdir -p "$tmp/www" && echo "hello from the uplink" >"$tmp/www/index.html"
ip netns exec "$(ns core)" /usr/bin/python3 -m http.server 8080 --bind 192.0.2.1 \
    --directory "$tmp/www" >/dev/null 2>&1 &
pids+=($!)

say "kbng-dataplane: DPDK on net_af_packet (access d0, uplink d1), no hugepages"
ip netns exec "$(ns dut)" "$bin/kbng-dataplane" --cores 0,1 \
    --access net_af_packet0,iface=d0 --uplink net_af_packet1,iface=d1 \
    --no-huge --no-pci -m 512 --no-shconf --uplink-address 192.0.2.254/24 --next-hop 192.0.2.1 \
    --sessions 4096 --plans 16 --grpc-listen "unix:$sock" >"$tmp/dataplane.log" 2>&1 &
dp_pid=$!

say "kbng-control: two plans, local subscribers, walled garden, cap $(cat "$tmp/cap") from the licence"
cat >"$tmp/subscribers.csv" <<CSV
mac,circuit_id,remote_id,plan
02:00:00:00:01:01,,,gold
02:00:00:00:01:02,,,silver
02:00:00:00:01:03,,,gold
0a:cc:00:00:00:00,,,silver
0a:cc:00:00:00:01,,,silver
CSV
cat >"$tmp/control.yaml" <<YAML
dataplanes: ["unix:$sock"]
pools:
  - {name: residential, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53]}
plans:
  - {name: gold, id: 10, rateBps: 100000000}
  - {name: silver, id: 20, rateBps: 20000000}
defaultPlan: silver
unknownSubscribers: captive
subscribersFile: $tmp/subscribers.csv
licence: {capFile: $tmp/cap}
store: $tmp/sessions.redb
apiListen: "$api"
walledGarden: {portalUrl: "http://portal.kbng.test/signup", allowed: [{prefix: 192.0.2.53/32}]}
YAML
"$bin/kbng-control" --config "$tmp/control.yaml" --log warn >"$tmp/control.log" 2>&1 &
ctl_pid=$!
connected=0
for _ in $(seq 1 150); do
    curl -sf "http://$api/v1/dataplanes" 2>/dev/null | grep -q '"connected":true' && { connected=1; break; }
    sleep 0.2
done
if ((!connected)); then
    say "control did not connect to the dataplane"; tail -5 "$tmp/control.log" "$tmp/dataplane.log"; exit 1
fi

addr_of() { inns "$1" ip -4 -o addr show dev e0 | awk '{print $4}' | head -1; }
mkdir -p "$tmp/etc" && touch "$tmp/etc/resolv.conf"

say "subscriber c1 (gold): dhclient"
client c1 02:00:00:00:01:01
inns c1 unshare -m sh -c "mount --bind $tmp/etc/resolv.conf /etc/resolv.conf &&
    timeout 30 dhclient -4 -1 -pf $tmp/dhclient.pid -lf $tmp/dhclient.leases e0" >>"$tmp/clients.log" 2>&1
echo "    leased $(addr_of c1)"
say "subscriber c2 (silver): dhcpcd"
client c2 02:00:00:00:01:02
inns c2 timeout 30 dhcpcd -4 -1 -B -c /bin/true e0 >>"$tmp/clients.log" 2>&1
echo "    leased $(addr_of c2)"
say "subscriber c3 (gold): udhcpc"
client c3 02:00:00:00:01:03
inns c3 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
echo "    leased $(addr_of c3)"
say "subscribers behind 802.1Q VLAN 100 (silver): scapy DHCP clients"
client t1 0a:cc:00:00:ff:ff
inns t1 ip link set e0 promisc on
inns t1 /usr/bin/python3 "$helpers/dhcp.py" dora e0 0a:cc:00:00 2 100 2>>"$tmp/clients.log" | sed 's/^/    leased /'
say "unknown subscriber c4: udhcpc, admitted to the walled garden"
client c4 02:00:00:00:0f:04
inns c4 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
echo "    leased $(addr_of c4)"

say "traffic: known subscribers fetch a page from the uplink; the captive one is redirected"
for c in c1 c2 c3; do
    printf '    %s: %s\n' "$c" "$(inns "$c" curl -s -m 3 http://192.0.2.1:8080/ 2>&1 || echo unreachable)"
done
printf '    c4: %s\n' "$(inns c4 curl -s -i -m 3 http://198.51.100.7/ 2>&1 | tr -d '\r' | grep -E '^(HTTP|Location)' | tr '\n' ' ')"

summary() {
    curl -sf "http://$api/v1/sessions?limit=1000" | /usr/bin/python3 -c '
import collections, json, sys
d = json.load(sys.stdin)["sessions"]
names = {0: "none", 10: "gold", 20: "silver"}  # the plan ids of control.yaml above
by = collections.Counter((s["state"], names.get(s.get("planId"), str(s.get("planId", "-"))))
                         for s in d)
print("    sessions: %d active, %d captive" % (sum(1 for s in d if s["state"] == "active"),
                                             sum(1 for s in d if s["state"] == "captive")))
for (state, plan), n in sorted(by.items()):
    print("      %-8s %-8s %d" % (state, plan, n))
'
    curl -sf "http://$api/v1/dataplanes/0/counters" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
rows = d if isinstance(d, list) else d.get("nodes", [])
drops = [r for r in rows if r.get("value") and r.get("node") != "dataplane"]
print("    dataplane node counters:")
for r in drops:
    print("      %-18s %-28s %d" % (r.get("node"), r.get("reason"), r.get("value")))
'
}

say "live summary every 5 s for up to ${seconds} s (Ctrl-C ends the lab and cleans up)"
say "try: curl -s http://$api/v1/sessions | python3 -m json.tool"
end=$((SECONDS + seconds))
while ((SECONDS < end)); do
    say "summary"
    summary
    sleep 5
done
