{{- define "keb.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "keb.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "keb.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "keb.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "keb.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "keb.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kyma-environment-broker
{{- end -}}

{{/* Selector labels of one component: include "keb.selector" (list . "broker") */}}
{{- define "keb.selector" -}}
app.kubernetes.io/name: {{ include "keb.name" (index . 0) }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "keb.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "keb.serviceAccountName" -}}
{{- if .Values.broker.serviceAccount.create -}}
{{- default (include "keb.fullname" .) .Values.broker.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.broker.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The database variables every process on PostgreSQL reads, from the database Secret. */}}
{{- define "keb.databaseEnv" -}}
- name: APP_DATABASE_DRIVER
  value: postgres
- name: APP_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret names the Secret with the PostgreSQL URL" .Values.database.existingSecret }}
      key: {{ .Values.database.urlKey }}
- name: APP_DATABASE_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.secretKeyKey }}
{{- if .Values.database.previousSecretKeysKey }}
- name: APP_DATABASE_SECRET_KEYS_PREVIOUS
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.previousSecretKeysKey }}
{{- end }}
- name: APP_LOG_FORMAT
  value: {{ .Values.log.format | quote }}
- name: APP_LOG_LEVEL
  value: {{ .Values.log.level | quote }}
{{- end -}}

{{/* Variables from a values map (env: plain values; secretEnv: valueFrom), sorted by name. */}}
{{- define "keb.extraEnv" -}}
{{- $env := index . 0 -}}
{{- $secretEnv := index . 1 -}}
{{- range $name := keys $env | sortAlpha }}
- name: {{ $name }}
  value: {{ index $env $name | toString | quote }}
{{- end }}
{{- range $name := keys $secretEnv | sortAlpha }}
- name: {{ $name }}
  valueFrom:
{{ toYaml (index $secretEnv $name) | indent 4 }}
{{- end }}
{{- end -}}

{{- define "keb.podSecurityContext" -}}
{{ toYaml .Values.securityContext }}
{{- end -}}

{{- define "keb.containerSecurityContext" -}}
{{ toYaml .Values.containerSecurityContext }}
{{- end -}}

{{/* The namespace of a "namespace/name" Secret reference. */}}
{{- define "keb.refNamespace" -}}
{{- index (splitList "/" .) 0 -}}
{{- end -}}
{{- define "keb.refName" -}}
{{- index (splitList "/" .) 1 -}}
{{- end -}}
