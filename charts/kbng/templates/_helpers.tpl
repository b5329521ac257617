{{/* Full name of the release's objects. */}}
{{- define "kbng.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kbng.operatorName" -}}
{{- printf "%s-operator" (include "kbng.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kbng.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kbng.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kbng.selectorLabels" -}}
app.kubernetes.io/name: kbng-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kbng.labels" -}}
{{ include "kbng.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kbng
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The operator's OpenTelemetry environment: its identity from the downward API, assembled into
OTEL_RESOURCE_ATTRIBUTES (the kubelet expands $(VAR) from variables defined before it), and
the OTLP endpoint when one is configured. The operator builds the same set for the control
and dataplane pods (operator/src/build/telemetry.rs).
*/}}
{{- define "kbng.otelEnv" -}}
- name: K8S_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: K8S_POD_UID
  valueFrom:
    fieldRef:
      fieldPath: metadata.uid
- name: K8S_NAMESPACE_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: K8S_NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: OTEL_SERVICE_NAME
  value: kbng-operator
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.pod.name=$(K8S_POD_NAME),k8s.namespace.name=$(K8S_NAMESPACE_NAME),k8s.node.name=$(K8S_NODE_NAME),service.instance.id=$(K8S_POD_UID)"
{{- with .Values.telemetry.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ . | quote }}
{{- end }}
{{- end -}}
