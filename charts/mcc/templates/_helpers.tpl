{{/* Common labels. */}}
{{- define "mcc.labels" -}}
app.kubernetes.io/part-of: mcc
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* Image reference: repository:tag, tag defaulting to appVersion. */}}
{{- define "mcc.image" -}}
{{ .image.repository }}:{{ .image.tag | default .appVersion }}
{{- end }}
