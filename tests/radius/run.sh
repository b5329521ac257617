#!/usr/bin/env bash
# End-to-end suite of kbng-control's RADIUS adapter against a real FreeRADIUS, with the real
# kbng-dataplane on veth pairs in network namespaces and real DHCP clients:
#
#   ns cN (client) ⇄ ns hub (bridge) ⇄ ns dut: kbng-dataplane ⇄ ns core (192.0.2.1, HTTP)
#   kbng-control (host namespace) ── RADIUS auth/acct ──▶ freeradius -X (freeradius.sh)
#        ▲ DAS (CoA/Disconnect, UDP)  ◀── radclient             on a loopback address of its own
#
# FreeRADIUS answers from a users file (MAC → Filter-Id naming the plan, Acct-Interim-Interval,
# Session-Timeout, Termination-Action, Framed-IP-Address, Framed-Pool, Idle-Timeout) and writes accounting to a
# detail file, which the checks read; radclient sends CoA (plan, Session-Timeout) and
# Disconnect. The control's first RADIUS
# server is a dead port, so every first request proves failover. Midway the control restarts
# with CHAP instead of PAP; then a drain and a clean shutdown end the accounting; last, with
# 8 s leases, a client killed without RELEASE runs out its lease (Stop with Session-Timeout);
# then a dataplane restarted with room for one session fewer refuses one (Stop with NAS-Error)
# while the interims of one it keeps go on counting from its totals before the restart, and
# still do after the control restarts too; last, a dataplane killed without warning loses
# nothing read between interims.
# Prints "ok - ..." or "not ok - ..." per check; exits non-zero on any failure. Stops what it
# started by pid.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tag=kr$$ # used by tests/lib/netns.sh
export tag
tmp=$(mktemp -d /tmp/kbng-radius-e2e.XXXXXX)
chmod 755 "$tmp"
sock=$tmp/dp.sock
# A loopback address and ports of this run's own, away from a system FreeRADIUS on 1812.
rip=127.$((($$ >> 16) % 200 + 20)).$((($$ >> 8) % 256)).$(($$ % 250 + 2))
base=$((21000 + ($$ % 500) * 8))
auth_port=$base acct_port=$((base + 1)) dead_port=$((base + 2)) das_port=$((base + 3)) dead_acct=$((base + 5))
api=127.0.0.1:$((base + 4))
metrics=127.0.0.1:$((base + 6))
secret=kbng-radius-secret-$$
das_secret=kbng-das-secret-$$
passed=0
failed=0
pids=()
dp_pid=
ctl_pid=
rad_pid=

log() { printf '# [%s] %s\n' "$(date +%T)" "$*"; }
ok() { passed=$((passed + 1)); echo "ok - $1"; }
bad() { failed=$((failed + 1)); echo "not ok - $1"; [[ -n ${2:-} ]] && echo "$2" | sed 's/^/#   /' | head -20; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# shellcheck source=../lib/netns.sh
source "$root/tests/lib/netns.sh"

cleanup() {
    set +e
    [[ -n $ctl_pid ]] && kill -9 "$ctl_pid" 2>/dev/null && wait "$ctl_pid" 2>/dev/null
    [[ -n $rad_pid ]] && kill "$rad_pid" 2>/dev/null
    dataplane_stop
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    topology_down
    [[ ${KEEP_TMP:-0} == 1 ]] || rm -rf "$tmp"
}
trap cleanup EXIT

for tool in ip ethtool dhclient udhcpc curl python3 freeradius radclient; do
    command -v "$tool" >/dev/null || { echo "not ok - missing $tool (see tests/radius/PACKAGES)"; exit 1; }
done

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
log "building kbng-dataplane and kbng-control (release)"
# KBNG_PREBUILT=1 uses the binaries already in $CARGO_TARGET_DIR/release (while iterating).
if [[ ${KBNG_PREBUILT:-0} != 1 ]]; then
    (cd "$root" && cargo build -q --release -p kbng-dataplane -p kbng-control) || { echo "not ok - build"; exit 1; }
fi
dp_bin=$CARGO_TARGET_DIR/release/kbng-dataplane
ctl_bin=$CARGO_TARGET_DIR/release/kbng-control

# ---- FreeRADIUS: a minimal configuration of our own (freeradius.sh), in the foreground
# shellcheck source=freeradius.sh
source "$here/freeradius.sh"
freeradius_conf "$tmp" "$rip" "$auth_port" "$acct_port" "$secret" <<EOF
"02:00:00:00:0a:01" Cleartext-Password := "02:00:00:00:0a:01"
	Filter-Id := "gold",
	Acct-Interim-Interval := 3

"02:00:00:00:0a:02" Cleartext-Password := "02:00:00:00:0a:02"
	Filter-Id := "silver",
	Acct-Interim-Interval := 3

"02:00:00:00:0a:05" Cleartext-Password := "02:00:00:00:0a:05"
	Filter-Id := "gold"

"02:00:00:00:0a:06" Cleartext-Password := "02:00:00:00:0a:06"
	Filter-Id := "silver"

"02:00:00:00:0a:07" Cleartext-Password := "not-the-mac"
	Filter-Id := "gold"

"02:00:00:00:0a:08" Cleartext-Password := "02:00:00:00:0a:08"
	Filter-Id := "gold"

"02:00:00:00:0a:09" Cleartext-Password := "02:00:00:00:0a:09"
	Filter-Id := "gold",
	Class := "kbng-billing-c9",
	Acct-Interim-Interval := 3

"02:00:00:00:0a:0a" Cleartext-Password := "02:00:00:00:0a:0a"
	Filter-Id := "gold"

"02:00:00:00:0a:0b" Cleartext-Password := "02:00:00:00:0a:0b"
	Filter-Id := "gold",
	Session-Timeout := 6

"02:00:00:00:0a:0c" Cleartext-Password := "02:00:00:00:0a:0c"
	Filter-Id := "gold",
	Framed-IP-Address := 100.64.0.201

"02:00:00:00:0a:0d" Cleartext-Password := "02:00:00:00:0a:0d"
	Filter-Id := "gold",
	Framed-Pool := "p1"

"02:00:00:00:0a:0e" Cleartext-Password := "02:00:00:00:0a:0e"
	Filter-Id := "gold",
	Framed-IP-Address := 100.64.0.201

"02:00:00:00:0a:0f" Cleartext-Password := "02:00:00:00:0a:0f"
	Filter-Id := "gold",
	Idle-Timeout := 4

"02:00:00:00:0a:10" Cleartext-Password := "02:00:00:00:0a:10"
	Filter-Id := "gold",
	Idle-Timeout := 16

"02:00:00:00:0a:11" Cleartext-Password := "02:00:00:00:0a:11"
	Filter-Id := "gold"

"02:00:00:00:0a:12" Cleartext-Password := "02:00:00:00:0a:12"
	Filter-Id := "gold"

"02:00:00:00:0a:13" Cleartext-Password := "02:00:00:00:0a:13"
	Filter-Id := "gold",
	Session-Timeout := 3,
	Termination-Action := RADIUS-Request
EOF
start_freeradius() { freeradius_start "$tmp"; }
log "starting freeradius on $rip:$auth_port/$acct_port"
if start_freeradius; then ok "freeradius runs with the generated configuration"; else
    bad "freeradius runs with the generated configuration" "$(tail -15 "$tmp/freeradius.log")"; exit 1; fi

# ---- topology, dataplane, a server in the core namespace
topology_up
mkdir -p "$tmp/www" && echo kbng-core >"$tmp/www/index.html"
head -c 3000000 /dev/zero >"$tmp/www/big"
core_www_start "$tmp/www"
pids+=("$www_pid")
dataplane_start "$dp_bin" "$sock" "$tmp/dataplane.log"

# ---- control with RADIUS: a dead first server, then FreeRADIUS
echo "$secret" >"$tmp/secret"
export KBNG_DAS_SECRET=$das_secret
cat >"$tmp/control.yaml" <<EOF
dataplanes: ["unix:$sock"]
pools:
  - {name: p0, cidr: 100.64.0.0/24, gateway: 100.64.0.1, leaseSecs: 600, dns: [192.0.2.53], exclusions: [100.64.0.200/29]}
  - {name: p1, cidr: 100.64.1.0/24, gateway: 100.64.1.1, leaseSecs: 600, dns: [192.0.2.53]}
plans:
  - {name: gold, id: 10, rateBps: 100000000}
  - {name: silver, id: 11, rateBps: 20000000}
defaultPlan: gold
unknownSubscribers: captive
store: $tmp/sessions.redb
apiListen: "$api"
walledGarden: {portalUrl: "http://portal.kbng.test/login", allowed: [{prefix: 192.0.2.53/32}]}
aaa:
  radius:
    servers:
      - {address: "$rip:$dead_port", accountingAddress: "$rip:$dead_acct", secretFile: $tmp/secret}
      - {address: "$rip:$auth_port", accountingAddress: "$rip:$acct_port", secretFile: $tmp/secret}
    timeoutMs: 400
    retries: 1
    nasIdentifier: kbng-e2e
    nasIpAddress: 127.0.0.1
    accounting: {interimSecs: 0}
    das: {listen: "$rip:$das_port", clients: [{address: 127.0.0.1, secretEnv: KBNG_DAS_SECRET}]}
EOF
sed 's#secretFile: '"$tmp"'/secret}#secretFile: /nonexistent/secret}#' "$tmp/control.yaml" >"$tmp/bad.yaml"
out=$(timeout 10 "$ctl_bin" --config "$tmp/bad.yaml" 2>&1); st=$?
stopped_naming_secret_file() { ((st != 0 && st != 124)) && grep -q 'aaa.radius.servers\[0\].secretFile: /nonexistent/secret' <<<"$out"; }
check "a bad RADIUS secret file stops the control naming the field (exit $st)" stopped_naming_secret_file

"$ctl_bin" --config "$tmp/control.yaml" --log info,kbng_control=debug --metrics-listen "$metrics" >"$tmp/control.log" 2>&1 &
ctl_pid=$!
if control_wait_connected "$api"; then ok "control connects to the dataplane with RADIUS configured"; else
    bad "control connects to the dataplane with RADIUS configured" "$(tail -5 "$tmp/control.log")"; exit 1; fi
# Starts the control again with config $1, appending to its log; true once it is connected.
start_control() {
    "$ctl_bin" --config "$1" --log info,kbng_control=debug --metrics-listen "$metrics" >>"$tmp/control.log" 2>&1 &
    ctl_pid=$!
    control_wait_connected "$api"
}
# Stops the control with SIGTERM; true when it exits 0 within 30 s.
stop_control() {
    local rc
    kill -TERM "$ctl_pid"
    for _ in $(seq 1 150); do kill -0 "$ctl_pid" 2>/dev/null || break; sleep 0.2; done
    wait "$ctl_pid"; rc=$?
    ctl_pid=
    ((rc == 0))
}

apiget() { curl -sf "http://$api$1"; }
py() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
counter() { apiget /v1/status | py "dict(d['counters']).get('$1', 0)"; }
# One series of the control's /metrics, by its exact name and labels (0 when absent).
metric() { curl -sf "http://$metrics/metrics" | awk -v s="$1" 'index($0, s " ") == 1 { v = $NF } END { print v + 0 }'; }
session_of() { apiget "/v1/sessions?limit=1000&ip=$1" | py "d['sessions'][0]['$2'] if d['sessions'] else None"; }
audit_clean() {
    local a
    a=$(apiget /v1/audit) || return 1
    echo "$a" | py 'all(not x["diff"]["leaks"] and not x["diff"]["orphans"] and not x["diff"]["mismatched"] for x in d)' | grep -q True
}
detail() { freeradius_records "$tmp"; }
# nas_record STATUS: a record of that status names this NAS and no subscriber
nas_record() {
    detail | py "any(r.get('Acct-Status-Type') == '$1' and r.get('NAS-Identifier') == 'kbng-e2e' and r.get('NAS-IP-Address') == '127.0.0.1' and not {'User-Name', 'Framed-IP-Address', 'Acct-Input-Octets', 'Calling-Station-Id'} & set(r) for r in d)" | grep -q True
}
nas_count() { detail | py "sum(1 for r in d if r.get('Acct-Status-Type') == '$1')"; }
detail_has() { freeradius_has "$tmp" "$@"; }
addr_of() { inns "$1" ip -4 -o addr show dev e0 | awk '{print $4}' | cut -d/ -f1 | head -1; }
reach() { local _i; for _i in 1 2 3 4 5 6 7 8; do inns "$1" curl -s -m 2 http://192.0.2.1:8080/ 2>/dev/null | grep -q kbng-core && return 0; sleep 1; done; return 1; }
coa() { # KIND SECRET ATTRS...: radclient's output (-x), one try, 3 s timeout
    local kind=$1 s=$2; shift 2
    printf '%s\n' "$@" | timeout 10 radclient -x -r 1 -t 3 "$rip:$das_port" "$kind" "$s" 2>&1
}
mkdir -p "$tmp/etc" && touch "$tmp/etc/resolv.conf"
dhclient_in() { # NS ARGS...: dhclient in a client namespace, its resolv.conf kept there
    local n=$1; shift
    inns "$n" unshare -m sh -c "mount --bind $tmp/etc/resolv.conf /etc/resolv.conf &&
        timeout 30 dhclient -4 -v -pf $tmp/dhclient-$n.pid -lf $tmp/dhclient-$n.leases $* e0" >>"$tmp/clients.log" 2>&1
}

check "Accounting-On reached FreeRADIUS at start-up (NAS-Identifier and NAS-IP-Address, no subscriber attributes)" \
    wait_for 5 nas_record Accounting-On

# ---- admission: two known MACs get their plan from FreeRADIUS, an unknown one is captive
client c1 02:00:00:00:0a:01
client c2 02:00:00:00:0a:02
client c3 02:00:00:00:0a:03
inns c1 unshare -m sh -c "mount --bind $tmp/etc/resolv.conf /etc/resolv.conf &&
    timeout 30 dhclient -4 -1 -v -pf $tmp/dhclient-c1.pid -lf $tmp/dhclient-c1.leases e0" >>"$tmp/clients.log" 2>&1
inns c2 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
inns c3 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
ip1=$(addr_of c1) ip2=$(addr_of c2) ip3=$(addr_of c3)
log "leases: c1=$ip1 c2=$ip2 c3=$ip3"
p1=$(session_of "$ip1" planId) p2=$(session_of "$ip2" planId)
if [[ $p1 == 10 && $p2 == 11 ]] && reach c1; then ok "known MACs get the plan named by FreeRADIUS (gold=$p1, silver=$p2) and forward"; else
    bad "known MACs get the plan named by FreeRADIUS" "c1 plan=$p1 c2 plan=$p2 $(tail -5 "$tmp/control.log")"; fi
check "the dataplane holds the sessions with those plans (audit: no leak, orphan or mismatch)" audit_clean
c3_captive=$(session_of "$ip3" captive)
resp=$(inns c3 curl -s -i -m 5 http://198.51.100.7/ 2>&1 | tr -d '\r')
if [[ $c3_captive == True ]] && grep -q '^HTTP/1.1 302' <<<"$resp"; then ok "an unknown MAC is rejected by FreeRADIUS and admitted captive (portal 302)"; else
    bad "an unknown MAC is rejected by FreeRADIUS and admitted captive" "captive=$c3_captive $(head -3 <<<"$resp")"; fi
check "FreeRADIUS logged the Access-Reject of the unknown MAC" grep -q 'Login incorrect.*02:00:00:00:0a:03' "$tmp/freeradius.log"
rej=$(counter "authorization rejected") acc=$(counter "authorization accepted") fo=$(counter "RADIUS failovers")
if ((rej >= 1 && acc >= 2 && fo >= 1)); then ok "counters: accepted=$acc rejected=$rej failovers from the dead server=$fo"; else
    bad "counters of accepts, rejects and failovers" "accepted=$acc rejected=$rej failovers=$fo"; fi
# Read from the server's dump of each Access-Request; a request without it is logged by the
# server as "does not contain required Message-Authenticator", which must not appear.
signed_requests() { /usr/bin/python3 "$here/debuglog.py" signed "$tmp/freeradius.log"; }
check "Access-Requests carry Message-Authenticator (the client requires it)" signed_requests

# ---- accounting: Start, then Interim-Update with octets after traffic
id1=$(session_of "$ip1" id)
asid1=$(printf '%016x' "$id1")
check "accounting Start of c1 reached FreeRADIUS (Acct-Session-Id $asid1)" \
    wait_for 5 detail_has "$asid1" Start "r.get('Framed-IP-Address') == '$ip1' and r.get('NAS-Identifier') == 'kbng-e2e'"
inns c1 curl -s -m 20 -o /dev/null http://192.0.2.1:8080/big
check "an Interim-Update of c1 carries the traffic (output octets >= 3000000, input > 0)" \
    wait_for 10 detail_has "$asid1" Interim-Update "int(r.get('Acct-Output-Octets', 0)) >= 3000000 and int(r.get('Acct-Input-Octets', 0)) > 0"

# ---- CoA: change c1's plan live, with a Class its accounting carries from then on
out=$(coa coa "$das_secret" "Acct-Session-Id = \"$asid1\"" 'Filter-Id = "silver"' 'Class = "kbng-billing-c1-silver"')
p1=$(session_of "$ip1" planId)
if grep -q 'Received CoA-ACK' <<<"$out" && [[ $p1 == 11 ]]; then ok "CoA-Request with Filter-Id changes c1's plan live (CoA-ACK, planId 11)"; else
    bad "CoA-Request changes the plan" "plan=$p1 $out"; fi
check "the dataplane holds c1 with its new plan (audit clean)" audit_clean
check "c1 still forwards after the plan change" reach c1
out=$(coa coa "$das_secret" 'Framed-IP-Address = 100.64.0.250' 'Filter-Id = "gold"')
check "CoA for no session is NAKed with Session-Context-Not-Found" grep -q 'Session-Context-Not-Found' <<<"$out"
out=$(coa coa "$das_secret" "Acct-Session-Id = \"$asid1\"" 'Filter-Id = "platinum"')
check "CoA naming an unknown plan is NAKed with Invalid-Attribute-Value" grep -q 'Invalid-Attribute-Value' <<<"$out"
before=$(counter "DAS bad authenticator")
out=$(coa coa "wrong-$das_secret" "Acct-Session-Id = \"$asid1\"" 'Filter-Id = "gold"')
bad_counted() { after=$(counter "DAS bad authenticator"); ((after == before + 1)); }
wait_for 4 bad_counted
p1=$(session_of "$ip1" planId)
if ! grep -q 'Received CoA-' <<<"$out" && ((after > before)) && [[ $p1 == 11 ]]; then ok "a CoA with a wrong secret is discarded, counted ($before -> $after) and changes nothing"; else
    bad "a CoA with a wrong secret is discarded and counted" "before=$before after=$after plan=$p1 $out"; fi

# ---- Disconnect: ends c1 in control and dataplane; Stop with octets and Admin-Reset
out=$(coa disconnect "$das_secret" "Framed-IP-Address = $ip1")
sleep 1
n=$(apiget "/v1/sessions?limit=1000&ip=$ip1" | py 'len(d["sessions"])')
if grep -q 'Received Disconnect-ACK' <<<"$out" && [[ $n == 0 ]] && audit_clean; then ok "Disconnect-Request removes c1 from control and dataplane (Disconnect-ACK)"; else
    bad "Disconnect-Request removes the session" "left=$n $out"; fi
check "accounting Stop of c1 reached FreeRADIUS with Admin-Reset and nonzero octets" \
    wait_for 5 detail_has "$asid1" Stop "r.get('Acct-Terminate-Cause') == 'Admin-Reset' and int(r.get('Acct-Output-Octets', 0)) >= 3000000 and int(r.get('Acct-Session-Time', -1)) >= 0"
# c1's Access-Accept had no Class: its Start has none, its Stop the CoA's (hex in the detail file).
class1="0x$(printf kbng-billing-c1-silver | od -An -tx1 | tr -d ' \n')"
check "c1's Stop carries the Class of its CoA, its Start none" \
    detail_has "$asid1" Stop "r.get('Class') == '$class1' and '$asid1' not in [x.get('Acct-Session-Id') for x in d if x.get('Acct-Status-Type') == 'Start' and 'Class' in x]"
out=$(coa disconnect "$das_secret" "Acct-Session-Id = \"$asid1\"")
check "a second Disconnect for c1 is NAKed: the session is gone" grep -q 'Received Disconnect-NAK' <<<"$out"

# A new client NS with MAC $2 leases with dhclient and downloads the 3 MB file; prints its
# address, its Acct-Session-Id and the bytes downloaded.
lease_and_download() {
    local ip
    client "$1" "$2"
    dhclient_in "$1" -1
    ip=$(addr_of "$1")
    printf '%s %016x %s\n' "${ip:--}" "$(session_of "$ip" id)" \
        "$(inns "$1" curl -s -m 20 -o /dev/null -w '%{size_download}' http://192.0.2.1:8080/big)"
}

# ---- final counters: c5 has no interims, so only a Stop read at RELEASE can carry its traffic
read -r ip5 asid5 got5 < <(lease_and_download c5 02:00:00:00:0a:05)
stale_before=$(counter "RADIUS Stop without final counters")
dhclient_in c5 -r
stop5_final() {
    detail_has "$asid5" Stop "r.get('Acct-Terminate-Cause') == 'User-Request' and int(r.get('Acct-Output-Octets', 0)) >= int('${got5:-0}' or 0) > 0 and int(r.get('Acct-Input-Octets', 0)) > 0" &&
        ! detail_has "$asid5" Interim-Update True &&
        (($(counter "RADIUS Stop without final counters") == stale_before))
}
if wait_for 8 stop5_final; then ok "after RELEASE c5's Stop carries its final octets (>= the ${got5} bytes downloaded, no interim before it) and User-Request"; else
    bad "c5's Stop carries its final octets" "downloaded=$got5 $(detail | py "[r for r in d if r.get('Acct-Session-Id') == '$asid5']")"; fi

# ---- Session-Timeout: c11's Access-Accept allows 6 s of service; its lease is cut to that
# (the pool's is longer) and the session ends then, Stop with Session-Timeout
client c11 02:00:00:00:0a:0b
inns c11 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
ip11=$(addr_of c11)
id11=$(session_of "$ip11" id) lease11=$(session_of "$ip11" leaseSecs) ends11=$(session_of "$ip11" endsAtNs)
asid11=$(printf '%016x' "${id11:-0}")
c11_gone() { [[ $(session_of "$ip11" id) == None ]]; }
# What is left of the 6 s when the ACK leaves, in whole seconds: 5 or 6.
if [[ $lease11 =~ ^[56]$ && $ends11 =~ ^[0-9]+$ ]] &&
    wait_for 15 detail_has "$asid11" Stop "r.get('Acct-Terminate-Cause') == 'Session-Timeout' and 5 <= int(r.get('Acct-Session-Time', -1)) <= 9" &&
    wait_for 5 c11_gone && audit_clean >/dev/null; then
    ok "an Access-Accept's Session-Timeout (6 s) cuts c11's lease to it (${lease11} s, the pool's is 600) and ends the session then (Stop with Session-Timeout)"; else
    bad "an Access-Accept's Session-Timeout ends the session" "ip=$ip11 lease=$lease11 endsAtNs=$ends11 $(detail | py "[r for r in d if r.get('Acct-Session-Id') == '$asid11']" | tail -c 600)"; fi

# ---- Termination-Action RADIUS-Request: c19's Access-Accept lasts 3 s and asks to be
# authorized again at its end. FreeRADIUS accepts each time, so the session goes on: the same
# id, its lease not cut to 3 s, no Stop, and it still forwards.
client c19 02:00:00:00:0a:13
reauth0=$(counter "re-authorization accepted")
accepts=kbng_aaa_duration_seconds_count'{backend="radius",result="accept"}'
aaa0=$(metric "$accepts")
inns c19 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
ip19=$(addr_of c19)
id19=$(session_of "$ip19" id) lease19=$(session_of "$ip19" leaseSecs) again19=$(session_of "$ip19" reauthorizeAtEnd)
asid19=$(printf '%016x' "${id19:-0}")
reauthorized_twice() { (($(counter "re-authorization accepted") >= reauth0 + 2)); }
# FreeRADIUS (-X) logged an Access-Request naming the running session and its address.
asked_again() {
    /usr/bin/python3 "$here/debuglog.py" asked "$tmp/freeradius.log" \
        "Acct-Session-Id = \"$asid19\"" "Framed-IP-Address = $ip19"
}
if [[ $lease19 == 600 && $again19 == True ]] && wait_for 15 reauthorized_twice && [[ $(session_of "$ip19" id) == "$id19" ]] &&
    ! detail_has "$asid19" Stop True && asked_again && reach c19 &&
    re19=$(($(counter "re-authorization accepted") - reauth0)) && aaa19=$(($(metric "$accepts") - aaa0)) &&
    ((aaa19 >= re19 + 1)); then
    ok "Termination-Action RADIUS-Request: c19 is authorized again at each 3 s Session-Timeout (Access-Requests naming its Acct-Session-Id and address) and goes on (session $id19, lease $lease19 s, no Stop; $aaa19 accepts in the AAA histogram)"; else
    bad "a session authorized again at its Session-Timeout goes on" "ip=$ip19 id=$id19 now=$(session_of "$ip19" id) lease=$lease19 reauthorizeAtEnd=$again19 accepted=$(($(counter "re-authorization accepted") - reauth0)) histogram accepts=$(($(metric "$accepts") - aaa0)) asked_again=$(asked_again && echo yes) $(detail | py "[r.get('Acct-Status-Type') for r in d if r.get('Acct-Session-Id') == '$asid19']")"; fi
# A CoA sets Termination-Action back to Default with a 2 s Session-Timeout: c19 ends then.
out=$(coa coa "$das_secret" "Acct-Session-Id = \"$asid19\"" 'Session-Timeout = 2' 'Termination-Action = Default')
# (None: the session already ended.)
if grep -q 'Received CoA-ACK' <<<"$out" && [[ $(session_of "$ip19" reauthorizeAtEnd) =~ ^(False|None)$ ]] &&
    wait_for 8 detail_has "$asid19" Stop "r.get('Acct-Terminate-Cause') == 'Session-Timeout'"; then
    ok "a CoA's Termination-Action Default with Session-Timeout 2 ends c19 then (Stop with Session-Timeout)"; else
    bad "a CoA's Termination-Action Default ends the session at its Session-Timeout" "$(tail -3 <<<"$out") $(detail | py "[r.get('Acct-Status-Type') for r in d if r.get('Acct-Session-Id') == '$asid19']")"; fi

# ---- the address from the Access-Accept: c12's Framed-IP-Address is in p0's exclusion (where
# fixed addresses are kept), c13's Framed-Pool names p1; c14 asks for c12's address while c12
# holds it, which no NAS can give: handled as a Reject, so c14 is captive on a pool address
client c12 02:00:00:00:0a:0c
client c13 02:00:00:00:0a:0d
client c14 02:00:00:00:0a:0e
unavailable_before=$(counter "Framed-IP-Address unavailable")
for c in c12 c13 c14; do inns $c timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1; done
ip12=$(addr_of c12) ip13=$(addr_of c13) ip14=$(addr_of c14)
log "leases: c12=$ip12 c13=$ip13 c14=$ip14"
asid12=$(printf '%016x' "$(session_of "$ip12" id)")
if [[ $ip12 == 100.64.0.201 && $(session_of "$ip12" captive) == False ]] && reach c12 &&
    wait_for 5 detail_has "$asid12" Start "r.get('Framed-IP-Address') == '100.64.0.201'"; then
    ok "c12 gets its Framed-IP-Address 100.64.0.201 from p0's exclusions, forwards, and its Start carries it"; else
    bad "c12 gets its Framed-IP-Address" "ip=$ip12 captive=$(session_of "$ip12" captive) $(detail | py "[r for r in d if r.get('Acct-Session-Id') == '$asid12']" | tail -c 400)"; fi
# The fixed address is counted apart: p0's inUse is its leasable addresses held, each a session
# enumerated by the API on p0 other than c12's; c12's is p0's one fixed address.
p0_use=$(apiget /v1/status | py "[(p['inUse'], p['fixed']) for p in d['pools'] if p['name'] == 'p0']")
p0_held=$(apiget "/v1/sessions?limit=1000" | py "len([s for s in d['sessions'] if (s.get('ip') or '').startswith('100.64.0.') and s['ip'] != '100.64.0.201'])")
if [[ $p0_use == "[($p0_held, 1)]" ]]; then
    ok "pool p0 reports c12's address as its one fixed address, apart from the $p0_held leasable ones in use"; else
    bad "pool p0 reports c12's fixed address apart" "status (inUse, fixed)=$p0_use, sessions on leasable p0 addresses=$p0_held"; fi
if [[ $ip13 == 100.64.1.* && $(session_of "$ip13" captive) == False ]] && reach c13; then
    ok "c13 gets an address of its Framed-Pool p1 ($ip13) and forwards"; else
    bad "c13 gets an address of its Framed-Pool p1" "ip=$ip13 $(tail -3 "$tmp/clients.log")"; fi
if [[ $ip14 == 100.64.0.* && $ip14 != 100.64.0.201 && $(session_of "$ip14" captive) == True ]] &&
    (($(counter "Framed-IP-Address unavailable") == unavailable_before + 1)); then
    ok "c14, given the address c12 holds, is captive on a pool address ($ip14), counted as Framed-IP-Address unavailable"; else
    bad "c14, given the address c12 holds, is captive" "ip=$ip14 captive=$(session_of "$ip14" captive) unavailable=$(counter "Framed-IP-Address unavailable")"; fi
check "the dataplane holds c12, c13 and c14 as the control does (audit clean)" audit_clean

# ---- a CoA's Acct-Interim-Interval: c12 has no interims; a CoA asks for one every 2 s and
# they come; another sets 0 and they stop
interims12() { detail | py "sum(1 for r in d if r.get('Acct-Session-Id') == '$asid12' and r.get('Acct-Status-Type') == 'Interim-Update')"; }
two_interims12() { (($(interims12) >= 2)); }
out=$(coa coa "$das_secret" "Acct-Session-Id = \"$asid12\"" 'Acct-Interim-Interval = 2')
if grep -q 'Received CoA-ACK' <<<"$out" && wait_for 8 two_interims12; then
    out=$(coa coa "$das_secret" "Acct-Session-Id = \"$asid12\"" 'Acct-Interim-Interval = 0')
    sleep 0.5 # an interim read just before the CoA may still be on its way
    n12=$(interims12)
    sleep 5
    if grep -q 'Received CoA-ACK' <<<"$out" && (($(interims12) == n12)); then
        ok "a CoA's Acct-Interim-Interval starts c12's interims (every 2 s) and another's 0 stops them"; else
        bad "a CoA's Acct-Interim-Interval 0 stops c12's interims" "interims $n12 then $(interims12); $(tail -2 <<<"$out")"; fi
else
    bad "a CoA's Acct-Interim-Interval starts c12's interims" "interims=$(interims12); $(tail -2 <<<"$out")"
fi

# ---- Idle-Timeout: c15's Access-Accept allows 4 s without upstream traffic. While it fetches
# every half second for 8 s it stays; once it stops, it ends with Stop Idle-Timeout
# udhcpc stays running (no -q): it keeps its lease after the session ends, as a CPE would.
client c15 02:00:00:00:0a:0f
inns c15 udhcpc -i e0 -n -f -p "$tmp/udhcpc-c15.pid" -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1 &
pids+=($!)
c15_bound() { [[ -n $(addr_of c15) ]]; }
wait_for 30 c15_bound
ip15=$(addr_of c15)
asid15=$(printf '%016x' "$(session_of "$ip15" id)")
fetched15=0
for _ in $(seq 16); do
    sent15=$(date +%s) # no later than the fetch's packets: its Stop is due 4 s or more after
    inns c15 curl -s -m 1 -o /dev/null http://192.0.2.1:8080/ && fetched15=$((fetched15 + 1))
    sleep 0.5
done
state15=$(session_of "$ip15" state)
c15_gone() { [[ $(session_of "$ip15" id) == None ]]; }
if ((fetched15 >= 14)) && [[ $state15 == active ]] &&
    wait_for 12 detail_has "$asid15" Stop "r.get('Acct-Terminate-Cause') == 'Idle-Timeout' and int(r.get('Timestamp', 0)) >= $sent15 + 4 and 0 <= int(r.get('Acct-Session-Time', -1)) <= 20" &&
    wait_for 5 c15_gone && audit_clean >/dev/null; then
    ok "c15 (Idle-Timeout 4 s) stays while it sends ($fetched15 fetches over 8 s) and ends once it stops (Stop with Idle-Timeout)"; else
    bad "c15's Idle-Timeout" "fetched=$fetched15 last fetch at $sent15 state after=$state15 $(detail | py "[r for r in d if r.get('Acct-Session-Id') == '$asid15']" | tail -c 600)"; fi

# ---- c15's client still holds its 600 s lease; IPoE cannot tell it the session ended. Its
# renewal (udhcpc's SIGUSR1: a unicast REQUEST with ciaddr, RFC 2131 RENEWING) finds no
# session: the control adopts the address, RADIUS authorizes it again, a new session starts.
kill -USR1 "$(cat "$tmp/udhcpc-c15.pid")"
c15_back() { [[ $(session_of "$ip15" state) == active ]]; }
if wait_for 10 c15_back; then
    id15b=$(session_of "$ip15" id)
    asid15b=$(printf '%016x' "$id15b")
fi
if [[ -n ${id15b:-} && $asid15b != "$asid15" && $(addr_of c15) == "$ip15" ]] && reach c15 &&
    wait_for 5 detail_has "$asid15b" Start True; then
    ok "c15's renewal after its Idle-Timeout starts a new session on its address ($ip15, accounting Start), which forwards"; else
    bad "c15's renewal after its Idle-Timeout starts a new session" "id=${id15b:-none} addr=$(addr_of c15) $(grep -c 'NAK' "$tmp/control.log") NAK lines; $(tail -3 "$tmp/clients.log")"; fi
kill "$(cat "$tmp/udhcpc-c15.pid")"

# ---- CoA Session-Timeout: c13 holds a 600 s lease; a CoA gives it 3 s more, and it ends then
asid13=$(printf '%016x' "$(session_of "$ip13" id)")
out=$(coa coa "$das_secret" "Acct-Session-Id = \"$asid13\"" 'Session-Timeout = 3')
ends13=$(session_of "$ip13" endsAtNs)
c13_gone() { [[ $(session_of "$ip13" id) == None ]]; }
if grep -q 'Received CoA-ACK' <<<"$out" && [[ $ends13 =~ ^[0-9]+$ ]] &&
    wait_for 10 detail_has "$asid13" Stop "r.get('Acct-Terminate-Cause') == 'Session-Timeout'" &&
    wait_for 5 c13_gone && audit_clean >/dev/null; then
    ok "a CoA with Session-Timeout 3 s ends c13 then, its 600 s lease notwithstanding (CoA-ACK, Stop with Session-Timeout)"; else
    bad "a CoA with Session-Timeout ends c13" "endsAtNs=$ends13 $out $(detail | py "[r for r in d if r.get('Acct-Session-Id') == '$asid13']" | tail -c 400)"; fi

# ---- CoA Idle-Timeout: c17's Access-Accept sets none; a CoA gives it 3 s, counted from the
# CoA, and once it stops sending it ends idle
client c17 02:00:00:00:0a:11
inns c17 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
ip17=$(addr_of c17)
asid17=$(printf '%016x' "$(session_of "$ip17" id)")
out=$(coa coa "$das_secret" "Acct-Session-Id = \"$asid17\"" 'Idle-Timeout = 3')
c17_gone() { [[ $(session_of "$ip17" id) == None ]]; }
if [[ -n $ip17 ]] && grep -q 'Received CoA-ACK' <<<"$out" && reach c17 &&
    wait_for 12 detail_has "$asid17" Stop "r.get('Acct-Terminate-Cause') == 'Idle-Timeout'" &&
    wait_for 5 c17_gone && audit_clean >/dev/null; then
    ok "a CoA with Idle-Timeout 3 s ends c17 once it stops sending (CoA-ACK, Stop with Idle-Timeout)"; else
    bad "a CoA with Idle-Timeout ends c17 once idle" "ip=$ip17 $out $(detail | py "[r for r in d if r.get('Acct-Session-Id') == '$asid17']" | tail -c 400)"; fi

# ---- c16 (Idle-Timeout 16 s) binds, sends nothing, and 7 s later the control restarts (below);
# its Idle-Timeout and its last sighting of traffic, kept in the accounting file, must end it
# 16 s after that sighting (its bind), not 16 s after the restart
client c16 02:00:00:00:0a:10
inns c16 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
ip16=$(addr_of c16)
asid16=$(printf '%016x' "$(session_of "$ip16" id)")
sleep 7

# ---- SIGTERM with live sessions: no Accounting-Off; restart with CHAP: no second Accounting-On
if stop_control && (($(nas_count Accounting-Off) == 0)) && grep -q 'no RADIUS Accounting-Off: sessions carry on' "$tmp/control.log"; then
    ok "SIGTERM with live sessions exits 0 without an Accounting-Off (they carry on after a restart)"; else
    bad "SIGTERM with live sessions: no Accounting-Off" "offs=$(nas_count Accounting-Off) $(tail -3 "$tmp/control.log")"; fi
sed 's/^    nasIpAddress: 127.0.0.1$/&\n    authMethod: chap/' "$tmp/control.yaml" >"$tmp/chap.yaml"
ons=$(nas_count Accounting-On)
if start_control "$tmp/chap.yaml" && sleep 1 && (($(nas_count Accounting-On) == ons)); then
    ok "restarted with restored sessions and authMethod chap: no second Accounting-On ($ons in all)"; else
    bad "restart with restored sessions sends no Accounting-On" "ons=$ons now=$(nas_count Accounting-On)"; fi
if [[ $(session_of 100.64.0.201 captive) == False ]] && ! grep -q 'address 100.64.0.201 not free' "$tmp/control.log"; then
    ok "c12's session is restored on its fixed address (an excluded one)"; else
    bad "c12's session is restored on its fixed address" "$(grep -i 'restor' "$tmp/control.log" | tail -3)"; fi
state16=$(session_of "$ip16" state) # restored, not yet idle for 16 s
c16_gone() { [[ $(session_of "$ip16" id) == None ]]; }
stop16() { detail | py "next((r.get('Acct-Session-Time') for r in d if r.get('Acct-Session-Id') == '$asid16' and r.get('Acct-Status-Type') == 'Stop'), None)"; }
# Counted afresh from the restart (8 s or more after the bind), it would end at 24 s or later.
if [[ -n $ip16 && $state16 == active ]] && wait_for 30 detail_has "$asid16" Stop "r.get('Acct-Terminate-Cause') == 'Idle-Timeout' and 16 <= int(r.get('Acct-Session-Time', -1)) <= 20" && wait_for 5 c16_gone; then
    ok "c16's Idle-Timeout outlives the control restart, counted from its last traffic: Stop with Idle-Timeout after $(stop16) s (16-20)"; else
    bad "c16's Idle-Timeout outlives the control restart" "ip=$ip16 state after the restart=$state16 $(detail | py "[r for r in d if r.get('Acct-Session-Id') == '$asid16']" | tail -c 400)"; fi
client c6 02:00:00:00:0a:06
client c7 02:00:00:00:0a:07
inns c6 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
inns c7 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1
ip6=$(addr_of c6) ip7=$(addr_of c7)
p6=$(session_of "$ip6" planId)
if [[ $p6 == 11 ]] && grep -Eq 'CHAP user "02:00:00:00:0a:06" authenticated succ?essfully' "$tmp/freeradius.log" && reach c6; then
    ok "with CHAP a known MAC is authenticated by FreeRADIUS' chap module and gets its plan (silver=$p6)"; else
    bad "CHAP authentication of a known MAC" "plan=$p6 $(grep -i chap "$tmp/freeradius.log" | tail -5)"; fi
c7_captive=$(session_of "$ip7" captive)
if [[ $c7_captive == True ]] && grep -q 'Login incorrect.*02:00:00:00:0a:07' "$tmp/freeradius.log"; then
    ok "a CHAP response over the wrong password is rejected by FreeRADIUS (captive)"; else
    bad "a wrong CHAP password is rejected" "captive=$c7_captive"; fi

# ---- no RADIUS server answering: the unknown-subscriber policy applies, counted apart
kill "$rad_pid"; wait "$rad_pid" 2>/dev/null; rad_pid=
client c4 02:00:00:00:0a:04
if inns c4 timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1; then
    ip4=$(addr_of c4)
    c4_captive=$(session_of "$ip4" captive)
    un=$(counter "authorization unreachable")
    if [[ $c4_captive == True ]] && ((un >= 1)); then ok "with every server silent a subscriber is admitted per policy (captive), counted as unreachable"; else
        bad "servers silent: policy applies" "captive=$c4_captive unreachable=$un"; fi
else
    bad "servers silent: policy applies" "no lease $(tail -3 "$tmp/clients.log")"
fi
check "the control survived the whole run" kill -0 "$ctl_pid"

# ---- drain, then a clean shutdown: Stops with NAS-Request, then Accounting-Off
if start_freeradius; then
    id2=$(session_of "$ip2" id)
    asid2=$(printf '%016x' "$id2")
    curl -sf -X POST "http://$api/v1/sessions/drain" >/dev/null
    check "a drain ends c2 with a Stop carrying NAS-Request" \
        wait_for 8 detail_has "$asid2" Stop "r.get('Acct-Terminate-Cause') == 'NAS-Request'"
    if stop_control && nas_record Accounting-Off; then ok "a clean shutdown with no session left sends Accounting-Off (NAS-Identifier and NAS-IP-Address, no subscriber attributes)"; else
        bad "a clean shutdown sends Accounting-Off" "$(tail -3 "$tmp/control.log")"; fi
else
    bad "freeradius restarts for the drain" "$(tail -5 "$tmp/freeradius.log")"
fi

# ---- lease expiry: c8 stops without a RELEASE and never renews; when its 8 s lease runs out
# the control ends the session, in both, and the Stop says Session-Timeout
sed 's/leaseSecs: 600/leaseSecs: 8/' "$tmp/control.yaml" >"$tmp/short.yaml"
if [[ -n $rad_pid ]] && start_control "$tmp/short.yaml"; then
    client c8 02:00:00:00:0a:08
    dhclient_in c8 -1 # a daemon once bound: it would renew at T1 (4 s)
    # Its pid file is written by the daemon after the fork, so it may lag the parent's exit.
    pid8= gone8=
    for _ in $(seq 1 25); do
        pid8=$(cat "$tmp/dhclient-c8.pid" 2>/dev/null)
        [[ -n $pid8 ]] && kill -0 "$pid8" 2>/dev/null && break
        pid8=; sleep 0.2
    done
    [[ -n $pid8 ]] && kill -9 "$pid8" # SIGKILL: it can send nothing more
    for _ in $(seq 1 25); do [[ -n $pid8 ]] && ! kill -0 "$pid8" 2>/dev/null && { gone8=1; break; }; sleep 0.2; done
    ip8=$(addr_of c8)
    id8=$(session_of "$ip8" id)
    asid8=$(printf '%016x' "${id8:-0}")
    if [[ -n $gone8 && $(session_of "$ip8" leaseSecs) == 8 ]] && detail_has "$asid8" Start True && reach c8; then
        ok "c8 is admitted by FreeRADIUS with an 8 s lease, accounted (Start) and forwards; its client is killed without RELEASE"; else
        bad "c8 admitted with an 8 s lease" "ip=$ip8 id=$id8 dhclient=${pid8:-no pid} killed=${gone8:-no} $(tail -3 "$tmp/clients.log")"; fi
    check "when c8's lease runs out FreeRADIUS gets its Stop with Acct-Terminate-Cause Session-Timeout" \
        wait_for 20 detail_has "$asid8" Stop "r.get('Acct-Terminate-Cause') == 'Session-Timeout' and int(r.get('Acct-Session-Time', -1)) >= 7"
    listed=$(apiget "/v1/sessions?limit=1000&mac=02:00:00:00:0a:08" | py '[s["id"] for s in d["sessions"]]')
    by_id=$(curl -s -o /dev/null -w '%{http_code}' "http://$api/v1/sessions/$id8")
    orphans=$(apiget /v1/audit | py 'sorted(i for x in d for i in x["diff"]["orphans"])')
    fwd=$(inns c8 curl -s -m 2 http://192.0.2.1:8080/ 2>/dev/null)
    if [[ $listed == "[]" && $by_id == 404 && $orphans == "[]" && $fwd != *kbng-core* ]] && audit_clean; then
        ok "c8's session is gone: the control lists none for its MAC, its id is 404, the dataplane's orphan list is empty, its traffic stops"; else
        bad "c8's session is gone from control and dataplane" "listed=$listed by_id=$by_id orphans=$orphans forwarded=${fwd:0:20}"; fi
    stop_control >/dev/null
else
    bad "the control restarts with 8 s leases for the expiry check" "$(tail -3 "$tmp/control.log")"
fi

# ---- the dataplane restarts with room for one session fewer than the control holds: the
# control keeps the others, ends the one refused, and its Stop says NAS-Error
if [[ -n $rad_pid ]] && start_control "$tmp/control.yaml"; then
    client c9 02:00:00:00:0a:09
    client c10 02:00:00:00:0a:0a
    # One after the other: the newer session has the higher id, and the reconcile installs
    # in id order, so it is the one the smaller dataplane refuses.
    for c in c9 c10; do inns $c timeout 30 udhcpc -i e0 -n -q -f -s /etc/udhcpc/default.script >>"$tmp/clients.log" 2>&1; done
    ip9=$(addr_of c9) ip10=$(addr_of c10)
    id9=$(session_of "$ip9" id) id10=$(session_of "$ip10" id)
    asid10=$(printf '%016x' "${id10:-0}")
    bound=$(apiget "/v1/sessions?limit=1000" | py 'sum(1 for s in d["sessions"] if s["state"] in ("active", "captive", "renewing"))')
    asid9=$(printf '%016x' "${id9:-0}")
    if [[ -n $id9 && -n $id10 ]] && ((id10 > id9)) && wait_for 5 detail_has "$asid10" Start True; then
        # c9's traffic before the restart, in its interims; the restarted dataplane counts c9
        # from zero, and the interims after it must still carry the traffic before it.
        inns c9 curl -s -m 20 -o /dev/null http://192.0.2.1:8080/big
        wait_for 10 detail_has "$asid9" Interim-Update "int(r.get('Acct-Output-Octets', 0)) >= 3000000" ||
            bad "c9's interim carries its 3 MB before the restart" "$(detail | tail -c 600)"
        interims9() { detail | py "[int(r.get('Acct-Output-Octets', 0)) for r in d if r.get('Acct-Session-Id') == '$asid9' and r.get('Acct-Status-Type') == 'Interim-Update']"; }
        # 3 MB more just before the stop, likely after c9's last interim read: the dataplane,
        # told to stop, lets the control read its counters first, so they are not lost.
        inns c9 curl -s -m 20 -o /dev/null http://192.0.2.1:8080/big
        n9=$(interims9 | py 'len(d)')
        refused0=$(counter "refused by dataplane")
        read_before0=$(counter "RADIUS sessions read before their dataplane stopped")
        dataplane_stop
        read_before() { (($(counter "RADIUS sessions read before their dataplane stopped") - read_before0 >= 2)); }
        DP_SESSIONS=$((bound - 1)) dataplane_start "$dp_bin" "$sock" "$tmp/dataplane-small.log"
        control_wait_connected "$api"
        six_mb() { interims9 | py "any(o >= 6000000 for o in d[$n9:])" | grep -q True; }
        if wait_for 5 read_before && grep -q "the control read the counters; stopping" "$tmp/dataplane.log" && wait_for 12 six_mb; then
            ok "a stopping dataplane's counters are read first: c9's interims after the restart carry both downloads (6 MB)"; else
            bad "a stopping dataplane's counters are read first" "read=$(($(counter "RADIUS sessions read before their dataplane stopped") - read_before0)) $(grep -i 'stopping\|counter reads' "$tmp/dataplane.log" | tail -3) interims: $(interims9)"; fi
        check "the session a dataplane with room for one fewer refuses ends, and FreeRADIUS gets its Stop with NAS-Error" \
            wait_for 10 detail_has "$asid10" Stop "r.get('Acct-Terminate-Cause') == 'NAS-Error'"
        c10_gone() { [[ $(session_of "$ip10" id) == None ]]; }
        refused=$(($(counter "refused by dataplane") - refused0))
        if ((refused == 1)) && wait_for 5 c10_gone && [[ $(session_of "$ip9" state) == active ]] && audit_clean && reach c9; then
            ok "the others stay: c9 active and forwarding, c10 gone, one refused, the audit clean"; else
            bad "the others stay after the refusal" "refused=$refused c9=$(session_of "$ip9" state) c10=$(session_of "$ip10" id) $(apiget /v1/dataplanes)"; fi
        # Two interims read from the new dataplane (3 s apart), then every interim of c9, in
        # order, never less than the one before: totals since Start, not the new counters.
        # $1 names the restart.
        interims_keep_traffic() {
            local o9
            two_more() { (($(interims9 | py 'len(d)') >= n9 + 2)); }
            wait_for 12 two_more
            o9=$(interims9)
            if py "len(d) >= $n9 + 2 and d[$n9 - 1] >= 3000000 and all(a <= b for a, b in zip(d, d[1:]))" <<<"$o9" | grep -q True; then
                ok "c9's interims after $1 keep its traffic from before (output octets $o9)"; else
                bad "c9's interims after $1 keep its traffic from before" "output octets in order: $o9 (before: $n9)"; fi
        }
        interims_keep_traffic "the dataplane restart"
        # Then both restart: the control (SIGTERM keeps its sessions), and the dataplane while
        # the control is down. The totals come back from the accounting file beside the store,
        # and the new boot is seen as one: c9's interims still never decrease.
        n9=$(interims9 | py 'len(d)')
        if stop_control; then
            dataplane_stop
            dataplane_start "$dp_bin" "$sock" "$tmp/dataplane-again.log"
            start_control "$tmp/control.yaml"
            reach c9 >/dev/null
            interims_keep_traffic "a control restart, with the dataplane restarted meanwhile,"
            # The Class of c9's Access-Accept comes back in every one of its accounting
            # records (RFC 2865 5.25), after both restarts too. The detail file shows it as
            # hex octets.
            classes=$(detail | py "sorted(set(r.get('Class', '-') for r in d if r.get('Acct-Session-Id') == '$asid9'))")
            want="['0x$(printf kbng-billing-c9 | od -An -tx1 | tr -d ' \n')']"
            if [[ $classes == "$want" ]] && (($(interims9 | py 'len(d)') >= n9 + 2)); then
                ok "every accounting record of c9 carries its Access-Accept's Class, after the restarts too"; else
                bad "every accounting record of c9 carries its Access-Accept's Class" "Class values seen: $classes (want $want)"; fi
        else
            bad "the control stops with SIGTERM before the double restart" "$(tail -3 "$tmp/control.log")"
        fi
    else
        bad "c9 and c10 admitted and accounted before the smaller dataplane" "bound=$bound ids=$id9,$id10 $(tail -3 "$tmp/clients.log")"
    fi
    stop_control >/dev/null
else
    bad "the control restarts for the refusal check" "$(tail -3 "$tmp/control.log")"
fi

# ---- a dataplane lost without warning (SIGKILL: no stopping notice, no last read): what it
# counted is kept by the reads between interims (countersReadSecs, 1 s here). c18 has no
# interims, so without them its Stop would carry only what the new dataplane counted.
sed 's/accounting: {interimSecs: 0}/accounting: {interimSecs: 0, countersReadSecs: 1}/' "$tmp/control.yaml" >"$tmp/control-reads.yaml"
if [[ -n $rad_pid && -n ${dp_pid:-} ]] && grep -q countersReadSecs "$tmp/control-reads.yaml" && start_control "$tmp/control-reads.yaml"; then
    read -r ip18 asid18 got18 < <(lease_and_download c18 02:00:00:00:0a:12)
    between0=$(counter "RADIUS sessions read between interims")
    read_since() { (($(counter "RADIUS sessions read between interims") >= between0 + 2)); }
    if ((${got18:-0} >= 3000000)) && wait_for 6 read_since; then
        kill -9 "$dp_pid"; wait "$dp_pid" 2>/dev/null; dp_pid=
        dataplane_start "$dp_bin" "$sock" "$tmp/dataplane-killed.log"
        reach c18 >/dev/null
        dhclient_in c18 -r
        stop18() {
            detail_has "$asid18" Stop "r.get('Acct-Terminate-Cause') == 'User-Request' and int(r.get('Acct-Output-Octets', 0)) >= $got18" &&
                ! detail_has "$asid18" Interim-Update True
        }
        if wait_for 8 stop18; then
            ok "a dataplane killed without warning: c18's Stop (no interims) still carries the $got18 bytes read before it died"; else
            bad "a killed dataplane's counters were kept by the reads between interims" "downloaded=$got18 $(detail | py "[r for r in d if r.get('Acct-Session-Id') == '$asid18']")"; fi
    else
        bad "c18's counters are read between its interims" "ip=$ip18 downloaded=$got18 reads=$(($(counter "RADIUS sessions read between interims") - between0))"
    fi
    stop_control >/dev/null
else
    bad "the control restarts with countersReadSecs for the killed dataplane check" "dataplane=${dp_pid:-none} $(tail -3 "$tmp/control.log")"
fi

if ((failed)); then
    log "logs kept in $tmp"; KEEP_TMP=1
    tail -20 "$tmp/control.log" | sed 's/^/# /'
fi
echo "# $passed passed, $failed failed"
((failed == 0))
