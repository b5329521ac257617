#!/usr/bin/env bash
# End-to-end suite of kbng-control in DHCP relay mode: the real kbng-dataplane and kbng-control
# relay real clients' DHCP to a real Kea DHCPv4 server, and the sessions come from Kea's ACKs.
#
#   ns cN (dhclient, udhcpc, scapy) ⇄ ns hub ⇄ d0 ┐ ns dut: kbng-dataplane ┌ d1 ⇄ c0 ns core 192.0.2.1
#                                                  └── gRPC (unix socket) ──┘
#   ns ctl: kbng-control (giaddr 100.64.0.1 on lo, API on 127.0.0.1) r0 203.0.113.1
#        ⇄ k0 203.0.113.2 ns srv: Kea (memfile, WARN) + a sniffer of what the relay sends
#   relay.servers = [203.0.113.3 (nobody: failover), 203.0.113.2 (Kea)]
#   late in the run: the control restarts with a FreeRADIUS (tests/radius/freeradius.sh) on ns
#   ctl's loopback, and a relayed subscriber is authorised and accounted there; another,
#   whose Session-Timeout is shorter than Kea's lease, ends at it
#
# Installs nothing (tests/relay/PACKAGES). Every process it starts is stopped by its pid and
# every namespace deleted on exit. One line per check ("ok - ..." / "not ok - ..."), then
# "N passed, M failed"; exits non-zero on any failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tag=kr$$
tmp=$(mktemp -d /tmp/kbng-relay-e2e.XXXXXX)
sock=$tmp/dp.sock
api=127.0.0.1:8080
passed=0
failed=0
failures=()
dp_pid=
ctl_pid=
kea_pid=
sniff_pid=
www_pid=
rad_pid=

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
ok() { passed=$((passed + 1)); echo "ok - $1"; }
bad() { failed=$((failed + 1)); failures+=("$1"); echo "not ok - $1: ${2:-}"; }
# shellcheck source=../lib/netns.sh
source "$root/tests/lib/netns.sh"
# shellcheck source=../lib/vlan_cpe.sh
source "$root/tests/lib/vlan_cpe.sh"

cleanup() {
    set +e
    for p in $ctl_pid $kea_pid $sniff_pid $www_pid $rad_pid; do kill -9 "$p" 2>/dev/null; done
    dataplane_stop
    topology_down # kills what still runs inside the namespaces (dhclient daemons), by pid
    [[ ${KEEP_TMP:-0} == 1 ]] || rm -rf "$tmp"
}
trap cleanup EXIT

for tool in ip ethtool dhclient udhcpc curl python3 kea-dhcp4 freeradius; do
    command -v "$tool" >/dev/null || { echo "not ok - missing $tool (see tests/relay/PACKAGES)"; echo "0 passed, 1 failed"; exit 1; }
done
/usr/bin/python3 -c 'import scapy' 2>/dev/null || { echo "not ok - missing python3-scapy"; echo "0 passed, 1 failed"; exit 1; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
# KBNG_NO_BUILD=1 uses the release binaries already built (tests/run builds the workspace first).
if [[ ${KBNG_NO_BUILD:-0} != 1 ]]; then
    log "building kbng-dataplane and kbng-control (release)"
    (cd "$root" && cargo build -q --release -p kbng-dataplane -p kbng-control) || { echo "not ok - build"; echo "0 passed, 1 failed"; exit 1; }
fi
dp_bin=$CARGO_TARGET_DIR/release/kbng-dataplane
ctl_bin=$CARGO_TARGET_DIR/release/kbng-control

# ---- topology: the control suite's, plus the control's and the server's namespaces
topology_up
for n in ctl srv; do
    ip netns add "$(ns $n)"
    inns $n ip link set lo up
    inns $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1
done
ip link add r0 netns "$(ns ctl)" type veth peer name k0 netns "$(ns srv)"
inns ctl ip addr add 203.0.113.1/24 dev r0
inns ctl ip addr add 100.64.0.1/32 dev lo
inns ctl ip link set r0 up
inns srv ip addr add 203.0.113.2/24 dev k0
inns srv ip link set k0 up
inns srv ip route add 100.64.0.0/10 via 203.0.113.1
inns ctl ethtool -K r0 tx off >/dev/null
inns srv ethtool -K k0 tx off >/dev/null

mkdir -p "$tmp/www" && echo kbng-core >"$tmp/www/index.html"
core_www_start "$tmp/www"

# ---- Kea: memfile in the temp dir, WARN logging, its pid and lock files there too
cat >"$tmp/kea.json" <<EOF
{"Dhcp4": {
  "interfaces-config": {"interfaces": ["k0"], "dhcp-socket-type": "udp"},
  "lease-database": {"type": "memfile", "persist": true, "name": "$tmp/kea-leases.csv", "lfc-interval": 0},
  "valid-lifetime": 60, "renew-timer": 15, "rebind-timer": 45,
  "store-extended-info": true,
  "host-reservation-identifiers": ["circuit-id", "hw-address"],
  "subnet4": [{"id": 1, "subnet": "100.64.0.0/24",
               "pools": [{"pool": "100.64.0.100 - 100.64.0.199"}],
               "reservations": [{"circuit-id": "'0/0/300/0'", "ip-address": "100.64.0.250"}],
               "option-data": [{"name": "routers", "data": "100.64.0.1"},
                               {"name": "domain-name-servers", "data": "192.0.2.53"}]}],
  "loggers": [{"name": "kea-dhcp4", "severity": "WARN",
               "output_options": [{"output": "$tmp/kea.log"}]}]
}}
EOF
start_kea() {
    # Kea opens no socket on a link without carrier, and does not retry.
    for _ in $(seq 1 50); do
        [[ $(inns srv cat /sys/class/net/k0/operstate) == up ]] && break
        sleep 0.1
    done
    ip netns exec "$(ns srv)" env KEA_PIDFILE_DIR="$tmp" KEA_LOCKFILE_DIR="$tmp" \
        kea-dhcp4 -c "$tmp/kea.json" >>"$tmp/kea.out" 2>&1 &
    kea_pid=$!
    for _ in $(seq 1 50); do
        inns srv ss -Hlun 'sport = :67' | grep -q 203.0.113.2 && return 0
        sleep 0.2
    done
    return 1
}
if start_kea; then ok "kea_starts"; else bad kea_starts "$(tail -5 "$tmp/kea.out" "$tmp/kea.log" 2>/dev/null)"; fi
ip netns exec "$(ns srv)" timeout 280 /usr/bin/python3 "$here/sniff.py" k0 "$tmp/relayed.jsonl" 280 2>>"$tmp/sniff.log" &
sniff_pid=$!

log "starting kbng-dataplane"
dataplane_start "$dp_bin" "$sock" "$tmp/dataplane.log"

# ---- control in relay mode. The pool's lease time (600) differs from Kea's (60) on purpose.
cat >"$tmp/subscribers.csv" <<EOF
mac,circuit_id,remote_id,plan
02:00:00:00:02:01,,,gold
02:00:00:00:02:02,,,gold
02:00:00:00:02:03,,,gold
EOF
cat >"$tmp/control.yaml" <<EOF
dataplanes: ["unix:$sock"]
pools:
  - {name: p0, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53]}
plans: [{name: gold, id: 10, rateBps: 100000000}]
defaultPlan: gold
unknownSubscribers: captive
subscribersFile: $tmp/subscribers.csv
store: $tmp/sessions.redb
apiListen: "$api"
walledGarden: {portalUrl: "http://portal.kbng.test/login", allowed: [{prefix: 192.0.2.53/32}]}
maxSessionsPerLine: 16
dhcp: {mode: relay}
relay:
  servers: ["203.0.113.3", "203.0.113.2"]
  listen: "0.0.0.0:67"
  option82: {policy: insert, remoteId: kbng-relay-test}
  timeoutMs: 1000
EOF

apiget() { inns ctl curl -sf "http://$api$1"; }
jq_py() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
counter() { apiget /v1/status | jq_py "dict(d['counters']).get('$1', 0)"; }
session_field() { # ip field
    apiget "/v1/sessions?ip=$1" | jq_py "d['sessions'][0]['$2'] if d['sessions'] else None"
}
count_ip() { apiget "/v1/sessions?ip=$1" | jq_py 'len(d["sessions"])'; }
audit_clean() {
    local a
    a=$(apiget /v1/audit) || return 1
    echo "$a"
    echo "$a" | jq_py 'all(not x["diff"]["leaks"] and not x["diff"]["orphans"] and not x["diff"]["mismatched"] for x in d)' | grep -q True
}
start_control() { # [CONFIG]: the relay configuration above unless named
    ip netns exec "$(ns ctl)" "$ctl_bin" --config "${1:-$tmp/control.yaml}" --log info >>"$tmp/control.log" 2>&1 &
    ctl_pid=$!
    control_wait_connected "$api" ctl
}

# A bad relay section stops the binary naming the field.
sed 's/servers: \["203.0.113.3", "203.0.113.2"\]/servers: ["nowhere"]/' "$tmp/control.yaml" >"$tmp/bad.yaml"
out=$(timeout 10 "$ctl_bin" --config "$tmp/bad.yaml" 2>&1); st=$?
if ((st == 0 || st == 124)); then bad bad_relay_config_names_the_field "exit $st"; else
    echo "$out" | grep -q 'relay.servers\[0\]' && ok bad_relay_config_names_the_field || bad bad_relay_config_names_the_field "$out"; fi

log "starting kbng-control (relay mode)"
if start_control; then ok control_connects_in_relay_mode; else bad control_connects_in_relay_mode "$(tail -5 "$tmp/control.log")"; fi

# ---- real clients
client c1 02:00:00:00:02:01
client c2 02:00:00:00:02:02
mkdir -p "$tmp/etc" && touch "$tmp/etc/resolv.conf"
dhclient_run() { # ns args...
    local n=$1; shift
    inns "$n" unshare -m sh -c "mount --bind $tmp/etc/resolv.conf /etc/resolv.conf &&
        timeout 30 dhclient -4 $* -v -pf $tmp/dhclient-$n.pid -lf $tmp/dhclient-$n.leases e0" >>"$tmp/clients.log" 2>&1
}
reach() {
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        inns "$1" curl -s -m 2 http://192.0.2.1:8080/ 2>/dev/null | grep -q kbng-core && return 0
        sleep 1
    done
    return 1
}
addr_of() { inns "$1" ip -4 -o addr show dev e0 | awk '{print $4}' | cut -d/ -f1 | head -1; }
in_kea_pool() { [[ $1 =~ ^100\.64\.0\.([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 100 && BASH_REMATCH[1] <= 199)); }
# udhcpc's default script rewrites /etc/resolv.conf: give it its own in a mount namespace.
udhcpc_run() {
    local n=$1; shift
    inns "$n" unshare -m sh -c "mount --bind $tmp/etc/resolv.conf /etc/resolv.conf &&
        timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script $*" >>"$tmp/clients.log" 2>&1
}

# dhclient stays as a daemon after binding: it renews at Kea's T1 (15 s) later in this run.
if dhclient_run c1 -1 && c1_ip=$(addr_of c1) && in_kea_pool "$c1_ip" && reach c1; then
    ok "dhclient_gets_a_kea_address_and_reaches_core ($c1_ip)"; else bad dhclient_gets_a_kea_address_and_reaches_core "ip=${c1_ip:-} $(tail -3 "$tmp/clients.log")"; fi
# udhcpc -q exits once bound and never renews: its session must expire at Kea's lease time.
if udhcpc_run c2 && c2_ip=$(addr_of c2) && in_kea_pool "$c2_ip" && reach c2; then
    c2_bound=$(date +%s); ok "udhcpc_gets_a_kea_address_and_reaches_core ($c2_ip)"; else bad udhcpc_gets_a_kea_address_and_reaches_core "ip=${c2_ip:-} $(tail -3 "$tmp/clients.log")"; fi
c1_ip=${c1_ip:-none}
c2_ip=${c2_ip:-none}

# Kea's own record: both leases, with their MACs, in subnet 1 (chosen by giaddr: Kea's own
# interface is outside it) and with our option 82 in the extended info.
circuit_hex=$(printf '0/0/0/0' | od -An -tx1 | tr -d ' \n')
kea_ok=1
for pair in "$c1_ip 02:00:00:00:02:01" "$c2_ip 02:00:00:00:02:02"; do
    set -- $pair
    line=$(grep "^$1,$2," "$tmp/kea-leases.csv" | tail -1)
    if [[ -z $line ]] || ! echo "$line" | cut -d, -f6 | grep -qx 1 || ! echo "$line" | tr -d ':' | grep -qi "$circuit_hex"; then
        kea_ok=0; log "kea lease for $1 $2: ${line:-none}"
    fi
done
if ((kea_ok)); then ok kea_lease_file_has_both_with_subnet_by_giaddr_and_option82; else bad kea_lease_file_has_both_with_subnet_by_giaddr_and_option82 "$(tail -5 "$tmp/kea-leases.csv")"; fi

# What reached Kea's interface: giaddr, hops, circuit-id and remote-id on every request.
sleep 0.5
wire=$(/usr/bin/python3 - "$tmp/relayed.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
good = [r for r in rows if r["giaddr"] == "100.64.0.1" and r["hops"] == 1
        and r["circuit_id"] == "0/0/0/0" and r["remote_id"] == "kbng-relay-test"]
types = sorted({r["type"] for r in good})
print(f"{len(good)}/{len(rows)} {types}")
EOF
)
if [[ $wire =~ ^([0-9]+)/([0-9]+) ]] && ((BASH_REMATCH[1] > 0 && BASH_REMATCH[1] == BASH_REMATCH[2])) && [[ $wire == *" [1, 3]" ]]; then
    ok "kea_receives_giaddr_hops_and_option82 ($wire)"; else bad kea_receives_giaddr_hops_and_option82 "$wire"; fi

# The sessions carry Kea's address and lease time (60, not the pool's 600); the dataplane
# holds the same (audit: no leak, orphan or mismatch).
st1=$(session_field "$c1_ip" state); ls1=$(session_field "$c1_ip" leaseSecs)
st2=$(session_field "$c2_ip" state); ls2=$(session_field "$c2_ip" leaseSecs)
if [[ $st1 == active && $ls1 == 60 && $st2 == active && $ls2 == 60 ]] && audit_clean >/dev/null; then
    ok sessions_carry_keas_address_and_lease_in_control_and_dataplane; else bad sessions_carry_keas_address_and_lease_in_control_and_dataplane "c1=$st1/$ls1 c2=$st2/$ls2 $(audit_clean)"; fi
fo=$(counter "relay: failover to next server")
if ((fo >= 1)); then ok "silent_first_server_fails_over_to_kea ($fo)"; else bad silent_first_server_fails_over_to_kea "failovers=$fo"; fi

# ---- bad input through the relay (tests/control covers these in server mode; here the point
# is that the relay does not pass a flood on to the server)
client h1 0a:dd:00:00:00:00
inns h1 ip link set e0 promisc on
relayed_before=$(counter "relay: DISCOVER relayed")
inns h1 /usr/bin/python3 "$root/tests/control/dhcp.py" storm e0 0a:dd:00:00:00:01 2000 >>"$tmp/clients.log" 2>&1
sleep 1
storm=$(counter "relay: DISCOVER storm suppressed")
relayed_storm=$(($(counter "relay: DISCOVER relayed") - relayed_before))
log "storm: suppressed=$storm relayed=$relayed_storm"
if ((storm >= 1000 && relayed_storm <= 20)); then ok "discover_storm_suppressed_before_the_server ($storm suppressed, $relayed_storm relayed)"; else
    bad discover_storm_suppressed_before_the_server "suppressed=$storm relayed=$relayed_storm"; fi
# Starvation: 40 full DORAs from random MACs on VLAN 100 and 500 DISCOVERs: the line keeps at
# most maxSessionsPerLine (16) sessions, and Kea hands out no more than that to the line.
inns h1 /usr/bin/python3 "$root/tests/control/dhcp.py" dora e0 0a:ee:00:00 40 100 >"$tmp/starve.json" 2>>"$tmp/clients.log"
inns h1 /usr/bin/python3 "$root/tests/control/dhcp.py" starve e0 500 100 >>"$tmp/clients.log" 2>&1
sleep 2
vlan_sessions=$(apiget "/v1/sessions?limit=1000" | jq_py 'sum(1 for s in d["sessions"] if s["outerVlan"] == 100)')
vlan_hex=$(printf '0/0/100/0' | od -An -tx1 | tr -d ' \n')
kea_vlan=$(tr -d ':' <"$tmp/kea-leases.csv" | grep -i "$vlan_hex" | cut -d, -f1 | sort -u | wc -l)
limited=$(($(counter "line session limit") + $(counter "relay: line pending limit")))
log "starvation: vlan sessions=$vlan_sessions kea leases on the line=$kea_vlan limited=$limited"
if ((vlan_sessions >= 1 && vlan_sessions <= 16 && kea_vlan <= 16 && limited >= 24)); then
    ok "starvation_bounded_per_line_at_control_and_kea ($vlan_sessions sessions, $kea_vlan Kea leases, $limited refused)"; else
    bad starvation_bounded_per_line_at_control_and_kea "sessions=$vlan_sessions kea=$kea_vlan limited=$limited"; fi
if kill -0 "$ctl_pid" 2>/dev/null; then ok control_survives_storm_and_starvation; else bad control_survives_storm_and_starvation "control died"; fi
client c3 02:00:00:00:02:03
if udhcpc_run c3 && c3_ip=$(addr_of c3) && in_kea_pool "$c3_ip" && reach c3; then
    ok "others_still_served_after_the_flood ($c3_ip)"; else bad others_still_served_after_the_flood "$(tail -3 "$tmp/clients.log")"; fi

# ---- renewal: dhclient's unicast REQUEST at T1 is relayed, Kea's ACK extends the session
renewed=
for _ in $(seq 1 30); do
    b=$(session_field "$c1_ip" boundAtNs); r=$(session_field "$c1_ip" renewedAtNs)
    [[ $b =~ ^[0-9]+$ && $r =~ ^[0-9]+$ ]] && ((r > b)) && { renewed=1; break; }
    sleep 1
done
if [[ -n $renewed ]] && [[ $(session_field "$c1_ip" state) == active ]] && audit_clean >/dev/null; then
    ok "renewal_through_kea_extends_the_session (renewals=$(counter 'relay: lease renewed'))"; else bad renewal_through_kea_extends_the_session "bound=$b renewed=$r"; fi

# ---- expiry: udhcpc never renewed, so its session ends at Kea's 60 s, in both
if [[ -n ${c2_bound:-} ]]; then
    while (($(date +%s) < c2_bound + 64)); do sleep 1; done
    n=$(count_ip "$c2_ip")
    # c2 still has the address configured: the dataplane must no longer forward for it.
    fwd=$(inns c2 curl -s -m 2 http://192.0.2.1:8080/ 2>/dev/null)
    if [[ $n == 0 && $fwd != *kbng-core* ]] && audit_clean >/dev/null; then
        ok expiry_at_keas_lease_time_removes_the_session; else bad expiry_at_keas_lease_time_removes_the_session "left=$n forwarded=${fwd:0:20}"; fi
else
    bad expiry_at_keas_lease_time_removes_the_session "c2 never bound"
fi

# ---- RELEASE: relayed to Kea, and the session leaves control and dataplane
rel_before=$(counter "relay: RELEASE relayed")
dhclient_run c1 -r
sleep 1
n=$(count_ip "$c1_ip")
rel=$(($(counter "relay: RELEASE relayed") - rel_before))
kea_rel=$(grep -c '"type": 7,' "$tmp/relayed.jsonl")
if [[ $n == 0 && $rel -ge 1 && $kea_rel -ge 1 ]] && audit_clean >/dev/null; then
    ok release_reaches_kea_and_removes_the_session_in_both; else bad release_reaches_kea_and_removes_the_session_in_both "left=$n relayed=$rel at_kea=$kea_rel"; fi

# ---- 1:1 VLAN access known by its line in relay mode (lineIdentity): a CPE on VLAN 300
# (scapy; this kernel has no VLAN devices) whose MAC no record names is admitted by the
# record keyed by its line, and Kea, which reserves an address for that circuit-id, sees the
# line in the relay's option 82. A CPE swapped on the line ends the old session and gets its
# own from Kea's ACK (Kea still leases the reserved address to the old MAC: another one).
kill -TERM "$ctl_pid"; wait "$ctl_pid" 2>/dev/null; ctl_pid=
{ cat "$tmp/control.yaml"; echo "lineIdentity: true"; } >"$tmp/line.yaml"
echo ",0/0/300/0,,gold" >>"$tmp/subscribers.csv"
if start_control "$tmp/line.yaml"; then
    ip_a=$(vlan_dora h1 0a:f0:00:00 300)
    s_a=$(sessions_on_vlan 300)
    if [[ $ip_a == 100.64.0.250 && $s_a == "active 0a:f0:00:00:00:00 plan 10 100.64.0.250 captive=False" ]] && audit_clean >/dev/null; then
        ok "relayed_line_names_its_subscriber_and_reaches_kea (Kea's reservation for circuit-id 0/0/300/0, admitted by the line's record)"; else
        bad relayed_line_names_its_subscriber_and_reaches_kea "ip=$ip_a sessions=$s_a $(audit_clean)"; fi
    replaced0=$(counter "session replaced: another MAC with its identity")
    ip_b=$(vlan_dora h1 0a:f1:00:00 300)
    [[ -n $ip_b ]] || { sleep 1; ip_b=$(vlan_dora h1 0a:f1:00:00 300); }
    sleep 0.5 # the old session leaves once the dataplane confirms its removal
    s_b=$(sessions_on_vlan 300)
    replaced=$(($(counter "session replaced: another MAC with its identity") - replaced0))
    if [[ -n $ip_b && $s_b == "active 0a:f1:00:00:00:00 plan 10 $ip_b captive=False" && $replaced == 1 ]] && audit_clean >/dev/null; then
        ok "relayed_cpe_swapped_on_its_line_takes_its_place (the new MAC at $ip_b from Kea, the old session ended)"; else
        bad relayed_cpe_swapped_on_its_line_takes_its_place "ip=$ip_b sessions=$s_b replaced=$replaced $(audit_clean)"; fi
else
    bad relayed_line_names_its_subscriber_and_reaches_kea "control did not start with lineIdentity: $(tail -3 "$tmp/control.log")"
fi

# ---- RADIUS in relay mode: the control restarts with a real FreeRADIUS (in its namespace, on
# its loopback) instead of the subscribers file; a session built from Kea's ACK is authorised
# there, takes its plan from the Access-Accept and is accounted
# shellcheck source=../radius/freeradius.sh
source "$root/tests/radius/freeradius.sh"
rad_secret=kbng-relay-radius-$$
echo "$rad_secret" >"$tmp/radius-secret"
freeradius_conf "$tmp/fr" 127.0.0.1 1812 1813 "$rad_secret" <<EOF
"02:00:00:00:02:05" Cleartext-Password := "02:00:00:00:02:05"
	Filter-Id := "silver"

"02:00:00:00:02:06" Cleartext-Password := "02:00:00:00:02:06"
	Session-Timeout := 4
EOF
grep -v '^subscribersFile:' "$tmp/control.yaml" |
    sed 's/^plans: .*/plans: [{name: gold, id: 10, rateBps: 100000000}, {name: silver, id: 11, rateBps: 20000000}]/' >"$tmp/radius.yaml"
cat >>"$tmp/radius.yaml" <<EOF
aaa:
  radius:
    servers: [{address: "127.0.0.1:1812", accountingAddress: "127.0.0.1:1813", secretFile: $tmp/radius-secret}]
    nasIdentifier: kbng-relay
    timeoutMs: 500
    retries: 1
EOF
detail() { freeradius_records "$tmp/fr"; }
detail_has() { freeradius_has "$tmp/fr" "$@"; }
kill -TERM "$ctl_pid"
for _ in $(seq 1 150); do kill -0 "$ctl_pid" 2>/dev/null || break; sleep 0.2; done
kill -9 "$ctl_pid" 2>/dev/null; wait "$ctl_pid" 2>/dev/null; ctl_pid=
if freeradius_start "$tmp/fr" ip netns exec "$(ns ctl)" && start_control "$tmp/radius.yaml"; then
    client c5 02:00:00:00:02:05
    if dhclient_run c5 -1 && c5_ip=$(addr_of c5) && in_kea_pool "$c5_ip" && reach c5; then
        ok "radius_relayed_subscriber_gets_a_kea_address_and_reaches_core ($c5_ip)"; else
        bad radius_relayed_subscriber_gets_a_kea_address_and_reaches_core "ip=${c5_ip:-} $(tail -3 "$tmp/clients.log")"; fi
    c5_ip=${c5_ip:-none}
    id5=$(session_field "$c5_ip" id); p5=$(session_field "$c5_ip" planId); ls5=$(session_field "$c5_ip" leaseSecs)
    asid5=$(printf '%016x' "${id5:-0}" 2>/dev/null)
    # silver is only named by FreeRADIUS: the default plan is gold and no subscribers file is read.
    if [[ $p5 == 11 && $ls5 == 60 ]] && grep -q 'Login OK.*02:00:00:00:02:05' "$tmp/fr/freeradius.log" && audit_clean >/dev/null; then
        ok "radius_authorises_the_relayed_session (FreeRADIUS Login OK, plan silver from its Filter-Id, Kea's 60 s lease, in control and dataplane)"; else
        bad radius_authorises_the_relayed_session "plan=$p5 lease=$ls5 $(grep -i 'login' "$tmp/fr/freeradius.log" | tail -3)"; fi
    if wait_for 5 detail_has "$asid5" Start "r.get('Framed-IP-Address') == '$c5_ip' and r.get('NAS-Identifier') == 'kbng-relay' and r.get('User-Name') == '02:00:00:00:02:05'"; then
        ok "radius_accounting_start_of_the_relayed_session (Acct-Session-Id $asid5, Framed-IP-Address $c5_ip)"; else
        bad radius_accounting_start_of_the_relayed_session "$(detail)"; fi
    dhclient_run c5 -r
    if wait_for 5 detail_has "$asid5" Stop "r.get('Acct-Terminate-Cause') == 'User-Request'" && [[ $(count_ip "$c5_ip") == 0 ]]; then
        ok radius_accounting_stop_after_the_relayed_release; else
        bad radius_accounting_stop_after_the_relayed_release "left=$(count_ip "$c5_ip") $(detail)"; fi
    # Kea leases c6 for 60 s and FreeRADIUS allows it 4 s: the relayed ACK passes unchanged,
    # and the session ends at the Session-Timeout all the same.
    client c6 02:00:00:00:02:06
    inns c6 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
    c6_ip=$(addr_of c6); c6_ip=${c6_ip:-none}
    ls6=$(session_field "$c6_ip" leaseSecs); asid6=$(printf '%016x' "$(session_field "$c6_ip" id)" 2>/dev/null)
    c6_gone() { [[ $(count_ip "$c6_ip") == 0 ]]; }
    if [[ $ls6 == 60 ]] &&
        wait_for 10 detail_has "$asid6" Stop "r.get('Acct-Terminate-Cause') == 'Session-Timeout' and 0 <= int(r.get('Acct-Session-Time', -1)) <= 6" &&
        wait_for 5 c6_gone; then
        ok "radius_session_timeout_ends_a_relayed_session_before_its_lease (Kea's lease 60 s, Session-Timeout 4 s: Stop with Session-Timeout)"; else
        bad radius_session_timeout_ends_a_relayed_session_before_its_lease "ip=$c6_ip lease=$ls6 left=$(count_ip "$c6_ip") $(detail | tail -c 600)"; fi
else
    bad radius_in_relay_mode_starts "$(tail -5 "$tmp/fr/freeradius.log" "$tmp/control.log")"
fi

# ---- Kea stopped: a new client gets no session, and the silence is counted
kill -TERM "$kea_pid" 2>/dev/null; wait "$kea_pid" 2>/dev/null; kea_pid=
none_before=$(counter "relay: no server answered")
# Enumerated by c4's MAC: the flood's sessions are expiring meanwhile (Kea's 60 s leases),
# so a total would move for reasons of its own.
client c4 02:00:00:00:02:04
if udhcpc_run c4 -t 3 -T 2; then bad no_server_no_session "c4 got a lease: $(addr_of c4)"; else
    sleep 2.5
    none=$(($(counter "relay: no server answered") - none_before))
    c4_sessions=$(apiget "/v1/sessions?mac=02:00:00:00:02:04" | jq_py 'len(d["sessions"])')
    if ((none >= 1)) && [[ $c4_sessions == 0 ]] && audit_clean >/dev/null; then
        ok "no_server_no_session_and_counted ($none unanswered)"; else bad no_server_no_session_and_counted "unanswered=$none c4_sessions=$c4_sessions"; fi
fi
if kill -0 "$ctl_pid" 2>/dev/null; then ok control_alive_at_the_end; else bad control_alive_at_the_end "control died"; fi

if ((failed)); then
    log "failed: ${failures[*]}"
    log "logs in $tmp (kept)"; KEEP_TMP=1
    tail -20 "$tmp/control.log" >&2
fi
echo "$passed passed, $failed failed"
((failed == 0))
