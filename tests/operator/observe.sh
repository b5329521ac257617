# shellcheck shell=bash
# Sourced by run.sh: what SREs observe kbng through. The OpenTelemetry environment and the
# /metrics port of the operator (from the chart) and of the control and dataplane pods (from
# the operator), the chart's Grafana dashboard ConfigMap, and its Prometheus Operator resources.

# The OTLP endpoint the suite installs the chart with. Nothing listens there: the operator
# process this suite runs is started without it (see operator.env), and no container runs.
OTLP_ENDPOINT=http://otel-collector.observability.svc:4317

# expect_otel ENV-JSON SERVICE NAMESPACE POD WHAT: the resolved env names the service, the
# pod, its namespace, its node and its UID (as the API server has them), and the endpoint.
expect_otel() {
  local env=$1 service=$2 ns=$3 pod=$4 what=$5 json node uid rc=0
  json=$(kubectl -n "$ns" get pod "$pod" -o json) || return 1
  node=$(jq -r '.spec.nodeName // ""' <<<"$json")
  uid=$(jq -r .metadata.uid <<<"$json")
  [[ -n $node ]] || { echo "$what: pod $pod has no node yet"; return 1; }
  expect_eq "$(jq -r .OTEL_SERVICE_NAME <<<"$env")" "$service" "$what OTEL_SERVICE_NAME" || rc=1
  expect_eq "$(jq -r .OTEL_RESOURCE_ATTRIBUTES <<<"$env")" \
    "k8s.pod.name=$pod,k8s.namespace.name=$ns,k8s.node.name=$node,service.instance.id=$uid" \
    "$what OTEL_RESOURCE_ATTRIBUTES" || rc=1
  expect_eq "$(jq -r .OTEL_EXPORTER_OTLP_ENDPOINT <<<"$env")" "$OTLP_ENDPOINT" \
    "$what OTEL_EXPORTER_OTLP_ENDPOINT" || rc=1
  return $rc
}

# expect_metrics_port STS WHAT: `--metrics-listen` on the named port.
expect_metrics_port() {
  local c
  c=$(k get sts "$1" -o json | jq '.spec.template.spec.containers[0]') || return 1
  expect_eq "$(jq -r '.args | index("--metrics-listen") as $i | if $i then .[$i + 1] else "absent" end' <<<"$c")" \
    0.0.0.0:9090 "$2 --metrics-listen" &&
  expect_eq "$(jq -c '[.ports[] | select(.name == "metrics") | .containerPort]' <<<"$c")" '[9090]' "$2 metrics port"
}

t_telemetry_env_reaches_every_workload() {
  local rc=0 pod
  # The chart's operator pods (on kwok): the chart's values and the downward API.
  pod=$(kubectl -n "$OPERATOR_NS" get pods -l app.kubernetes.io/name=kbng-operator \
    -o jsonpath='{.items[0].metadata.name}') || return 1
  expect_otel "$(pod_env "$OPERATOR_NS" "$pod")" kbng-operator "$OPERATOR_NS" "$pod" "operator" || rc=1
  expect_eq "$(pod_env "$OPERATOR_NS" "$pod" | jq -r .KBNG_WORKLOAD_OTLP_ENDPOINT)" "$OTLP_ENDPOINT" \
    "operator told the workloads' endpoint" || rc=1
  # The pods of the StatefulSets the operator made for BNG lab: the chart's endpoint went
  # through the operator to them.
  eventually 30 jq_true k get pod lab-control-0 -o json -- '.spec.nodeName != null' || rc=1
  expect_otel "$(pod_env "$NS" lab-control-0)" kbng-control "$NS" lab-control-0 "control" || rc=1
  expect_otel "$(pod_env "$NS" lab-dataplane-0)" kbng-dataplane "$NS" lab-dataplane-0 "dataplane" || rc=1
  expect_metrics_port lab-control control || rc=1
  expect_metrics_port lab-dataplane dataplane || rc=1
  return $rc
}

t_grafana_dashboard_configmap() {
  local rc=0 cm json
  # The chart's default (grafanaDashboard.enabled: true) as installed by helm_install.
  cm=$(kubectl -n "$OPERATOR_NS" get cm -l grafana_dashboard=1 -o json) || return 1
  expect_eq "$(jq -r '[.items[].metadata.name] | join(",")' <<<"$cm")" "$RELEASE-grafana-dashboard" \
    "ConfigMaps with Grafana's sidecar label" || rc=1
  json=$(jq -r '.items[0].data["kbng.json"] // ""' <<<"$cm")
  if ! jq -e . >/dev/null 2>&1 <<<"$json"; then
    echo "kbng.json is not valid JSON: $(head -c 200 <<<"$json")"; return 1
  fi
  # A dashboard Grafana can load: a title, panels that each query something, and the same
  # document as the chart's file (nothing lost in templating).
  expect_eq "$(jq -r '.title | length > 0' <<<"$json")" true "dashboard has a title" || rc=1
  expect_eq "$(jq '[.panels[] | select(.type != "row") | select((.targets // []) | length == 0)] | length' <<<"$json")" 0 \
    "panels without a query" || rc=1
  expect_match "$(jq '[.panels[] | select(.type != "row")] | length' <<<"$json")" '^[1-9][0-9]*$' "panel count" || rc=1
  expect_eq "$(jq -cS . <<<"$json")" "$(jq -cS . "$CHART/dashboards/kbng.json")" "installed == charts/kbng/dashboards/kbng.json" || rc=1
  # Disabled, the chart renders no dashboard ConfigMap; a custom label is carried.
  expect_eq "$(helm template x "$CHART" -f "$CHART/ci/lab-values.yaml" --set grafanaDashboard.enabled=false |
    grep -c 'grafana-dashboard')" 0 "no dashboard when disabled" || rc=1
  expect_match "$(helm template x "$CHART" -f "$CHART/ci/lab-values.yaml" --set grafanaDashboard.label=my_dash --show-only templates/grafana-dashboard.yaml)" \
    'my_dash: "1"' "custom sidecar label" || rc=1
  return $rc
}

# yaml_docs_json: every YAML document on stdin as one JSON array (empty documents left out),
# with the Debian python3 that python3-yaml (tests/operator/PACKAGES) installs into.
yaml_docs_json() {
  /usr/bin/python3 -c 'import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))'
}

# labels_of JSON: a selector's matchLabels as k=v,k=v for kubectl -l.
labels_of() { jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")' <<<"$1"; }

t_monitoring_resources_select_the_real_pods() {
  local rc=0 docs rule workloads operator pods
  expect_eq "$(helm template "$RELEASE" "$CHART" -f "$CHART/ci/lab-values.yaml" | grep -c 'monitoring.coreos.com')" 0 \
    "no Prometheus Operator resources by default" || rc=1
  docs=$(helm template "$RELEASE" "$CHART" -f "$CHART/ci/lab-values.yaml" --namespace "$OPERATOR_NS" \
    --set monitoring.podMonitors=true --set monitoring.prometheusRule=true --set monitoring.labels.release=kps \
    --show-only templates/monitoring.yaml | yaml_docs_json) || return 1
  expect_eq "$(jq -c '[.[] | .kind] | sort' <<<"$docs")" '["PodMonitor","PodMonitor","PrometheusRule"]' "rendered kinds" || rc=1
  expect_eq "$(jq '[.[] | select(.metadata.labels.release == "kps")] | length' <<<"$docs")" 3 \
    "every resource carries the label Prometheus selects by" || rc=1
  # The rule's groups are the chart's rule file (which promtool tests), nothing lost in templating.
  rule=$(jq -cS '.[] | select(.kind == "PrometheusRule") | .spec' <<<"$docs")
  expect_eq "$rule" "$(yaml_docs_json <"$CHART/alerts/kbng.rules.yaml" | jq -cS '.[0]')" \
    "PrometheusRule spec == alerts/kbng.rules.yaml" || rc=1
  # The workloads' PodMonitor selects the pods the operator made (BNG lab's among them; other
  # BNGs of earlier tests may still be going), only control and dataplane pods, each with the
  # port it scrapes.
  workloads=$(jq -c '.[] | select(.kind == "PodMonitor" and (.metadata.name | endswith("-workloads")))' <<<"$docs")
  pods=$(kubectl get pods -A -l "$(labels_of "$workloads")" -o json) || return 1
  expect_eq "$(jq -r --arg ns "$NS" '[.items[] | select(.metadata.namespace == $ns and (.metadata.name | startswith("lab-"))) | .metadata.name] | sort | join(" ")' <<<"$pods")" \
    "lab-control-0 lab-dataplane-0" "BNG lab's pods selected" || rc=1
  expect_eq "$(jq -c '[.items[].metadata.labels["app.kubernetes.io/component"]] | unique' <<<"$pods")" \
    '["control","dataplane"]' "components selected" || rc=1
  expect_eq "$(jq --arg p "$(jq -r '.spec.podMetricsEndpoints[0].port' <<<"$workloads")" \
    '[.items[] | select(all(.spec.containers[].ports[]?; .name != $p))] | length' <<<"$pods")" 0 \
    "selected pods without the scraped port" || rc=1
  # The operator's PodMonitor selects the chart's operator pods on their admin port.
  operator=$(jq -c '.[] | select(.kind == "PodMonitor" and (.metadata.name | endswith("-operator")))' <<<"$docs")
  pods=$(kubectl -n "$OPERATOR_NS" get pods -l "$(labels_of "$operator")" -o json) || return 1
  expect_match "$(jq '.items | length' <<<"$pods")" '^[1-9][0-9]*$' "operator pods selected" || rc=1
  expect_eq "$(jq --arg p "$(jq -r '.spec.podMetricsEndpoints[0].port' <<<"$operator")" \
    '[.items[] | select(all(.spec.containers[0].ports[]?; .name != $p))] | length' <<<"$pods")" 0 \
    "operator pods without the scraped port" || rc=1
  return $rc
}
