{{/* The account's six-letter code: the first six letters or digits of accountId, lowercased. */}}
{{- define "legate-delegate.code" -}}
{{- $code := regexReplaceAll "[^a-z0-9]" (lower (required "accountId is required" .Values.accountId)) "" | trunc 6 -}}
{{- if lt (len $code) 6 -}}
{{- fail "accountId needs at least six letters or digits (the delegate's name carries the first six)" -}}
{{- end -}}
{{- $code -}}
{{- end -}}

{{/* NAME-CODE: the StatefulSet, ServiceAccount and RBAC objects. */}}
{{- define "legate-delegate.fullname" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,54}[a-z0-9])?$" .Values.name) -}}
{{- fail (printf "name %q: use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 56 characters" .Values.name) -}}
{{- end -}}
{{- printf "%s-%s" .Values.name (include "legate-delegate.code" .) -}}
{{- end -}}

{{- define "legate-delegate.selectorLabels" -}}
legate.dev/app: legate-delegate
legate.dev/account: {{ include "legate-delegate.code" . | quote }}
legate.dev/name: {{ .Values.name | quote }}
{{- end -}}

{{- define "legate-delegate.labels" -}}
{{ include "legate-delegate.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{- define "legate-delegate.secretName" -}}
{{- if .Values.existingSecret -}}
{{- .Values.existingSecret -}}
{{- else -}}
{{- printf "%s-token" (include "legate-delegate.fullname" .) -}}
{{- end -}}
{{- end -}}
