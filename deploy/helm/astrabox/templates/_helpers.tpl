{{/* The release's name for every object. */}}
{{- define "astrabox.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "astrabox.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "astrabox.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "astrabox.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "astrabox.boxNamespace" -}}
{{ default .Release.Namespace .Values.sandbox.namespace }}
{{- end -}}

{{- define "astrabox.instance" -}}
{{ default .Release.Name .Values.sandbox.instance }}
{{- end -}}

{{- define "astrabox.secretName" -}}
{{ default (printf "%s-secrets" (include "astrabox.fullname" .)) .Values.secrets.existingSecret }}
{{- end -}}

{{/* config.yaml: the values' config with what the chart decides itself. */}}
{{- define "astrabox.config" -}}
{{- $own := dict
  "http" (dict "addr" (printf ":%d" (int .Values.api.port)))
  "log" (dict "format" "json")
  "sandbox" (dict
    "backend" "kubernetes"
    "limits" .Values.sandbox.limits
    "kubernetes" (dict
      "namespace" (include "astrabox.boxNamespace" .)
      "instance" (include "astrabox.instance" .)
      "default_template" .Values.sandbox.template.name
      "templates" .Values.sandbox.templates
      "runner_port" .Values.sandbox.runnerPort
      "run_as_user" .Values.sandbox.runAsUser
      "storage_class" .Values.sandbox.storageClass
      "workspace_size" .Values.sandbox.workspaceSize
      "ready_timeout" .Values.sandbox.readyTimeout)) -}}
{{- if ne (int .Values.worker.metricsPort) 9464 }}
{{- $_ := set $own "metrics" (dict "listen" (printf ":%d" (int .Values.worker.metricsPort))) }}
{{- end }}
{{- toYaml (mergeOverwrite (deepCopy .Values.config) $own) }}
{{- end -}}

{{/* The restricted security context of every platform container. */}}
{{- define "astrabox.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* Configuration and secrets as every platform container gets them. */}}
{{- define "astrabox.configEnv" -}}
env:
  - name: ASTRABOX_CONFIG
    value: /etc/astrabox/config.yaml
envFrom:
  - secretRef:
      name: {{ include "astrabox.secretName" . }}
{{- end -}}

{{- define "astrabox.secretData" -}}
{{- with .Values.secrets }}
{{- if .databasePassword }}
ASTRABOX_DATABASE_PASSWORD: {{ .databasePassword | quote }}
{{- end }}
{{- if .secretsKey }}
ASTRABOX_SECRETS_KEY: {{ .secretsKey | quote }}
{{- end }}
{{- if .anthropicApiKey }}
ASTRABOX_MODELS_ANTHROPIC_API_KEY: {{ .anthropicApiKey | quote }}
{{- end }}
{{- if .openaiApiKey }}
ASTRABOX_MODELS_OPENAI_API_KEY: {{ .openaiApiKey | quote }}
{{- end }}
{{- if .geminiApiKey }}
ASTRABOX_MODELS_GEMINI_API_KEY: {{ .geminiApiKey | quote }}
{{- end }}
{{- if .temporalApiKey }}
ASTRABOX_TEMPORAL_API_KEY: {{ .temporalApiKey | quote }}
{{- end }}
{{- end }}
{{- end -}}
