# A CPE on a VLAN, played by scapy (tests/control/dhcp.py): this kernel has no VLAN devices.
# Shared by the control and relay suites (sourced, not run); they define `inns` (netns.sh),
# `apiget` (their control API) and `jq_py`, and set $root and $tmp.

# One DORA from namespace $1 by MAC prefix $2 on outer VLAN $3; prints the address leased,
# or nothing.
vlan_dora() {
    inns "$1" /usr/bin/python3 "$root/tests/control/dhcp.py" dora e0 "$2" 1 "$3" \
        2>>"$tmp/clients.log" | jq_py 'list(d.items())[0][1] if d else ""'
}

# The sessions on outer VLAN $1, one "state mac plan N ip captive=B" each, joined by ';'.
sessions_on_vlan() {
    apiget "/v1/sessions?limit=1000&outerVlan=$1" | jq_py '";".join("%s %s plan %s %s captive=%s" % (s["state"], s["mac"], s["planId"], s.get("ip"), s["captive"]) for s in d["sessions"])'
}
