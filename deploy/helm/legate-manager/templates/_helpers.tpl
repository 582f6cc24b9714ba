{{- define "legate-manager.fullname" -}}
{{- printf "%s-legate-manager" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "legate-manager.selectorLabels" -}}
legate.dev/app: legate-manager
legate.dev/instance: {{ .Release.Name | quote }}
{{- end -}}

{{- define "legate-manager.labels" -}}
{{ include "legate-manager.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{- define "legate-manager.masterKeySecret" -}}
{{- if .Values.masterKey.existingSecret -}}
{{- .Values.masterKey.existingSecret -}}
{{- else -}}
{{- printf "%s-master-key" (include "legate-manager.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "legate-manager.adminKeySecret" -}}
{{- if .Values.adminKey.existingSecret -}}
{{- .Values.adminKey.existingSecret -}}
{{- else -}}
{{- printf "%s-admin-key" (include "legate-manager.fullname" .) -}}
{{- end -}}
{{- end -}}
