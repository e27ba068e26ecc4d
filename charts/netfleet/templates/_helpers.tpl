{{/* The chart name, or nameOverride. */}}
{{- define "netfleet.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object's name: the release name, with the chart name when it lacks it. */}}
{{- define "netfleet.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "netfleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "netfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: netfleet
{{- end }}

{{/* Labels that select the operator's Pods. */}}
{{- define "netfleet.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "netfleet.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The operator's ServiceAccount. */}}
{{- define "netfleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-operator" (include "netfleet.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator's image reference. */}}
{{- define "netfleet.operatorImage" -}}
{{- $img := .Values.operator.image }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/*
The rules of a Role or ClusterRole that `make manifests` generates into config/rbac and
hack/sync-chart.sh copies into the chart's rbac/ directory: the chart grants exactly those.
*/}}
{{- define "netfleet.rulesFrom" -}}
{{- $role := .root.Files.Get .file | fromYaml }}
{{- if or (not $role) (hasKey $role "Error") (not $role.rules) }}
{{- fail (printf "%s holds no RBAC rules; run make manifests" .file) }}
{{- end }}
{{- toYaml $role.rules }}
{{- end }}
