# shellcheck shell=bash
# NetworkPolicies of a BNG, checked against the real pods on the real API server. kwok runs
# no CNI, so nothing here enforces a policy: what is proved is that each policy selects the
# pods it is meant to, that its peers select exactly the pods meant to reach them, and that
# every port it opens is one those pods declare. Sourced by run.sh.

# pod_names NS-FLAG SELECTOR: sorted names of the pods SELECTOR (k=v,...) selects.
pod_names() {
  kubectl get pods "$1" -l "$2" -o json | jq -r '[.items[].metadata.name] | sort | join(" ")'
}

# selector_of JSON: a LabelSelector's matchLabels as k=v,... ("" for an empty one).
selector_of() { jq -r '(.matchLabels // {}) | to_entries | map("\(.key)=\(.value)") | join(",")' <<<"$1"; }

t_network_policies_select_the_real_pods() {
  local rc=0 dp cp grpc_from admin_from
  eventually 20 k get networkpolicy lab-dataplane || return 1
  dp=$(k get networkpolicy lab-dataplane -o json) || return 1
  cp=$(k get networkpolicy lab-control -o json) || return 1
  expect_eq "$(pod_names "-n=$NS" "$(selector_of "$(jq -c .spec.podSelector <<<"$dp")")")" lab-dataplane-0 \
    "the dataplane policy selects the dataplane pod" || rc=1
  expect_eq "$(pod_names "-n=$NS" "$(selector_of "$(jq -c .spec.podSelector <<<"$cp")")")" lab-control-0 \
    "the control policy selects the control pod" || rc=1
  expect_eq "$(jq -c '.spec.policyTypes' <<<"$dp")$(jq -c '.spec.policyTypes' <<<"$cp")" '["Ingress"]["Ingress"]' \
    "ingress only (egress is not restricted)" || rc=1
  # gRPC: from the control pod of the same BNG, and nothing else.
  grpc_from=$(jq -c '[.spec.ingress[] | select(any(.ports[]; .port == 50051))][0].from' <<<"$dp")
  expect_eq "$(jq 'length' <<<"$grpc_from")" 1 "one gRPC peer" || rc=1
  expect_eq "$(pod_names "-n=$NS" "$(selector_of "$(jq -c '.[0].podSelector' <<<"$grpc_from")")")" lab-control-0 \
    "gRPC peer: exactly the BNG's control pod" || rc=1
  # Admin API: labelled clients in any namespace; the chart labels the operator's pods so.
  admin_from=$(jq -c '[.spec.ingress[] | select(any(.ports[]; .port == 8080))][0].from' <<<"$cp")
  expect_eq "$(jq -c '.[0].namespaceSelector' <<<"$admin_from")" '{}' "admin API peers from any namespace" || rc=1
  expect_eq "$(pod_names -A "$(selector_of "$(jq -c '.[0].podSelector' <<<"$admin_from")")")" \
    "$(pod_names "-n=$OPERATOR_NS" "$(labels_of "$(kubectl -n "$OPERATOR_NS" get deploy kbng-operator -o json)")")" \
    "admin API peers: exactly the operator's pods" || rc=1
  # Not two empty lists found equal: the chart runs two operator pods.
  expect_match "$(pod_names "-n=$OPERATOR_NS" "app.kubernetes.io/name=kbng-operator")" '^[^ ]+ [^ ]+$' "two operator pods" || rc=1
  # Every port opened is one the selected pods declare.
  expect_eq "$(k get pod lab-dataplane-0 -o json | jq -c '[.spec.containers[].ports[] | .containerPort] | sort')" \
    "$(jq -c '[.spec.ingress[].ports[].port] | sort' <<<"$dp")" "dataplane: opened ports == declared ports" || rc=1
  expect_eq "$(k get pod lab-control-0 -o json | jq -c '[.spec.containers[].ports[] | .containerPort] | sort')" \
    "$(jq -c '[.spec.ingress[].ports[].port] | sort' <<<"$cp")" "control: opened ports == declared ports" || rc=1
  return $rc
}
