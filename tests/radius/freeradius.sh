# shellcheck shell=bash
# A FreeRADIUS of the suite's own, shared by tests/radius and tests/relay (sourced, not run).
#
#   freeradius_conf DIR IP AUTH_PORT ACCT_PORT SECRET <USERS
#       writes DIR/raddb: one client (127.0.0.1, SECRET, Message-Authenticator required),
#       listeners on IP:AUTH_PORT (auth) and IP:ACCT_PORT (accounting), PAP and CHAP, the
#       users file from stdin (files module) and accounting into DIR/radacct/detail.
#   freeradius_start DIR [PREFIX...]
#       starts `freeradius -X` in the foreground (under PREFIX, e.g. `ip netns exec NS`),
#       appending to DIR/freeradius.log; sets rad_pid; true once it is ready (10 s at most).
#   freeradius_records DIR
#       the accounting records FreeRADIUS wrote, as a JSON list of {attribute: value}.
#   freeradius_has DIR ACCT-SESSION-ID STATUS PYTHON-CONDITION-ON-r
#       true when a record of that session and Acct-Status-Type meets the condition.
#   wait_for SECONDS COMMAND...
#       retries COMMAND every 0.2 s until it succeeds, for SECONDS at most.
#
# Nothing from /etc/freeradius is read: the configuration is minimal and complete, so a
# Debian default (its clients, its listeners on 1812) never takes part.

freeradius_conf() {
    local dir=$1 ip=$2 auth_port=$3 acct_port=$4 secret=$5
    local rdb=$dir/raddb
    mkdir -p "$rdb/mods-config/files" "$dir/radacct" "$dir/run" "$dir/log"
    echo "# no local attributes" >"$rdb/dictionary"
    : >"$rdb/mods-config/files/accounting"
    : >"$rdb/mods-config/files/pre-proxy"
    cat >"$rdb/mods-config/files/authorize"
    cat >"$rdb/radiusd.conf" <<EOF
prefix = /usr
exec_prefix = /usr
sysconfdir = /etc
localstatedir = /var
sbindir = /usr/sbin
logdir = $dir/log
raddbdir = $rdb
radacctdir = $dir/radacct
name = freeradius
confdir = \${raddbdir}
modconfdir = \${confdir}/mods-config
run_dir = $dir/run
db_dir = $dir
libdir = /usr/lib/freeradius
pidfile = $dir/run/radiusd.pid
max_request_time = 30
cleanup_delay = 5
max_requests = 1024
hostname_lookups = no
proxy_requests = no
log {
	destination = files
	file = $dir/log/radius.log
	auth = yes
}
security {
	allow_core_dumps = no
	max_attributes = 200
	reject_delay = 0
	status_server = no
}
thread pool {
	start_servers = 2
	max_servers = 4
	min_spare_servers = 1
	max_spare_servers = 4
	max_requests_per_server = 0
}
client kbng {
	ipaddr = 127.0.0.1
	secret = $secret
	require_message_authenticator = yes
}
modules {
	pap {
		normalise = yes
	}
	chap {
	}
	files {
		moddir = \${modconfdir}/files
		filename = \${moddir}/authorize
		acctusersfile = \${moddir}/accounting
		preproxy_usersfile = \${moddir}/pre-proxy
	}
	detail {
		filename = $dir/radacct/detail
		permissions = 0600
		header = "%t"
		locking = no
	}
}
server default {
	listen {
		type = auth
		ipaddr = $ip
		port = $auth_port
	}
	listen {
		type = acct
		ipaddr = $ip
		port = $acct_port
	}
	authorize {
		files
		chap
		pap
	}
	authenticate {
		Auth-Type PAP {
			pap
		}
		Auth-Type CHAP {
			chap
		}
	}
	preacct {
	}
	accounting {
		detail
	}
	post-auth {
	}
}
EOF
}

freeradius_start() {
    local dir=$1 mark
    shift
    mark=$(grep -cs "Ready to process requests" "$dir/freeradius.log")
    "$@" freeradius -X -d "$dir/raddb" >>"$dir/freeradius.log" 2>&1 &
    rad_pid=$!
    for _ in $(seq 1 50); do
        (($(grep -cs "Ready to process requests" "$dir/freeradius.log") > mark)) && return 0
        kill -0 "$rad_pid" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}

freeradius_records() {
    /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/detail.py" "$1/radacct/detail"
}

freeradius_has() {
    freeradius_records "$1" | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin)
print(any(r.get('Acct-Session-Id') == '$2' and r.get('Acct-Status-Type') == '$3' and ($4) for r in d))" | grep -q True
}

wait_for() {
    local n=$(($1 * 5))
    shift
    for _ in $(seq 1 "$n"); do "$@" && return 0; sleep 0.2; done
    return 1
}
