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
