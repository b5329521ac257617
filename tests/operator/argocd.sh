# shellcheck shell=bash
# Sourced by run.sh: Argo CD's health checks of deploy/argocd/argocd-cm-health.yaml, run the
# way Argo CD runs them (argo_health.lua under lua5.1: Argo embeds gopher-lua, a Lua 5.1) on
# objects fetched from the API server while the operator manages them.

ARGO_CM=$ROOT/deploy/argocd/argocd-cm-health.yaml

# argo_health KIND OBJECT-JSON-FILE [SCRIPT-SED]: Argo's verdict, "STATUS<TAB>MESSAGE".
# SCRIPT-SED edits the script first (for the check that the harness can fail).
argo_health() {
  local kind=$1 obj=$2 script=$WORK/argo/$1.lua
  mkdir -p "$WORK/argo"
  kubectl create --dry-run=client -o json -f "$ARGO_CM" |
    jq -r --arg k "resource.customizations.health.kbng.dev_$kind" '.data[$k] // error("no health check for \($k)")' |
    sed -e "${3:-}" >"$script" || return 1
  lua5.1 "$HERE/argo_health.lua" "$script" <"$obj"
}

# expect_health KIND OBJECT-JSON-FILE STATUS MESSAGE WHAT
expect_health() {
  local out
  out=$(argo_health "$1" "$2" 2>&1) || { echo "health script failed on $5: $out"; return 1; }
  expect_eq "$out" "$3	$4" "Argo CD health of $5"
}

# The Ready (or Stalled) condition's "reason: message", read from the object itself.
condition_text() { # FILE TYPE
  jq -r --arg t "$2" '.status.conditions[] | select(.type == $t) | "\(.reason): \(.message // "")"' "$1"
}

t_argocd_health_checks() {
  local rc=0 d=$WORK/argo
  mkdir -p "$d"
  command -v lua5.1 >/dev/null || { echo "lua5.1 is not installed (tests/operator/PACKAGES)"; return 1; }
  # Healthy: BNG real, saved by real_control_reports_to_status_and_drains while a real control
  # and dataplane served it.
  [[ -s $d/real-bng.json ]] || { echo "no saved BNG real (its check failed earlier)"; rc=1; }
  [[ -s $d/real-bng.json ]] && { expect_health BNG "$d/real-bng.json" Healthy "all launch gates passed" \
    "BNG real with a real control and dataplane" || rc=1; }
  # Progressing: BNG lab, current generation, Ready False (no control process behind kwok).
  k get bng lab -o json >"$d/lab.json" || return 1
  expect_eq "$(jq -r '[.status.observedGeneration == .metadata.generation, (.status.conditions[] | select(.type == "Ready") | .status)] | @tsv' "$d/lab.json")" \
    "true	False" "BNG lab observed and not Ready" || rc=1
  expect_health BNG "$d/lab.json" Progressing "$(condition_text "$d/lab.json" Ready)" "BNG lab" || rc=1
  # Progressing: the same object after a spec edit the operator has not seen yet (the API
  # server bumps metadata.generation; status keeps the old observedGeneration).
  jq '.metadata.generation += 1' "$d/lab.json" >"$d/lab-edited.json"
  expect_health BNG "$d/lab-edited.json" Progressing "status is for an older generation" "BNG lab just edited" || rc=1
  # Degraded: a BNG whose plan does not exist is Stalled.
  bng_json argo-stalled '.spec.plans = [{"name": "no-such-plan"}]' | kubectl apply -f - >/dev/null || return 1
  eventually 30 jq_true k get bng argo-stalled -o json -- \
    '.status.observedGeneration == .metadata.generation and (.status.conditions[] | select(.type == "Stalled") | .status == "True")' || rc=1
  k get bng argo-stalled -o json >"$d/stalled.json"
  expect_health BNG "$d/stalled.json" Degraded "$(condition_text "$d/stalled.json" Stalled)" "BNG argo-stalled" || rc=1
  expect_match "$(condition_text "$d/stalled.json" Stalled)" '^PlanNotFound: .*no-such-plan' "why it is stalled" || rc=1
  k delete bng argo-stalled --wait=false >/dev/null
  # SubscriberPlan and Licence.
  k get subscriberplan basic-50m -o json >"$d/plan.json"
  expect_health SubscriberPlan "$d/plan.json" Healthy "" "SubscriberPlan basic-50m" || rc=1
  k get licence lab-licence -o json >"$d/licence.json"
  expect_health Licence "$d/licence.json" Healthy "$(jq -r .status.daysRemaining "$d/licence.json") days remaining" "Licence lab-licence" || rc=1
  k get licence expired -o json >"$d/expired.json"
  expect_health Licence "$d/expired.json" Degraded "Expired: free baseline applies" "Licence expired" || rc=1
  # The harness can fail: a script that returns a status Argo does not know is refused, and
  # one that breaks on the object is an error, not a verdict.
  if out=$(argo_health BNG "$d/lab.json" 's/"Progressing"/"Waiting"/g' 2>&1); then
    echo "ACCEPTED an unknown status: $out"; rc=1
  else
    expect_match "$out" "no valid status: Waiting" "unknown status refused" || rc=1
  fi
  if out=$(argo_health BNG "$d/lab.json" 's/obj.status.conditions/obj.status.nothing.conditions/' 2>&1); then
    echo "ACCEPTED a broken script: $out"; rc=1
  else
    expect_match "$out" "health script failed" "script error reported" || rc=1
  fi
  return $rc
}
