#!/usr/bin/env bash
# Stop the test cluster started by up.sh and remove its state folder.
# Kills exactly the processes listed in $KBNG_CLUSTER_DIR/pids, and only
# while each pid still runs the binary it was started as (a pid reused by
# some other process is left alone). Safe to run twice.
#   --keep-logs   stop the processes but keep the state folder (up.sh uses it
#                 after a failed start, so its logs can be read)
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

STATE=$KBNG_CLUSTER_DIR
STOP_TIMEOUT=${KBNG_STOP_TIMEOUT:-15}

# ours PID EXE: PID is alive and still the process we started. The kernel
# appends " (deleted)" when the binary was removed meanwhile (the cache was
# cleared or rebuilt while the cluster ran); that is still ours.
ours() {
  local exe
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  [[ $exe == "$2" || $exe == "$2 (deleted)" ]]
}

# stop_all: TERM every recorded process (newest first, so kwok and the
# controllers go before the apiserver, and etcd last), then KILL stragglers.
stop_all() {
  local -a names=() pids=() exes=()
  local name pid exe i deadline
  while read -r name pid exe; do
    names+=("$name"); pids+=("$pid"); exes+=("$exe")
  done <"$STATE/pids"
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    if ours "${pids[i]}" "${exes[i]}"; then
      kill -TERM "${pids[i]}" 2>/dev/null || true
      # Wait for each in turn: the apiserver shuts down cleanly only while
      # etcd still answers.
      deadline=$((SECONDS + STOP_TIMEOUT))
      while ours "${pids[i]}" "${exes[i]}" && ((SECONDS < deadline)); do sleep 0.2; done
      if ours "${pids[i]}" "${exes[i]}"; then
        log "${names[i]} (pid ${pids[i]}) ignored TERM; killing"
        kill -KILL "${pids[i]}" 2>/dev/null || true
      fi
      log "stopped ${names[i]} (pid ${pids[i]})"
    fi
  done
}

main() {
  local keep_logs=false
  [[ ${1-} == --keep-logs ]] && keep_logs=true
  if [[ -f $STATE/pids ]]; then
    stop_all
    rm -f "$STATE/pids"
  fi
  if [[ $keep_logs == false ]]; then
    rm -rf "$STATE"
  fi
}

main "$@"
