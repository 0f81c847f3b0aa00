{{/* Names and labels. */}}
{{- define "atrium.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "atrium.fullname" -}}
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

{{- define "atrium.appVersion" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{- define "atrium.selectorLabels" -}}
app.kubernetes.io/name: {{ include "atrium.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "atrium.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "atrium.selectorLabels" . }}
app.kubernetes.io/version: {{ include "atrium.appVersion" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: atrium
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "atrium.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "atrium.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The server image; global.imageRegistry (air-gapped registries) replaces the registry. */}}
{{- define "atrium.image" -}}
{{- $registry := default .Values.image.registry .Values.global.imageRegistry }}
{{- $ref := printf "%s/%s" $registry .Values.image.repository | trimPrefix "/" }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $ref .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $ref (include "atrium.appVersion" .) }}
{{- end }}
{{- end }}

{{- define "atrium.imagePullSecrets" -}}
{{- with .Values.global.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ if kindIs "string" . }}{{ . }}{{ else }}{{ .name }}{{ end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "atrium.secretName" -}}
{{- default (printf "%s-secrets" (include "atrium.fullname" .)) .Values.existingSecret }}
{{- end }}

{{- define "atrium.configMapName" -}}
{{- printf "%s-config" (include "atrium.fullname" .) }}
{{- end }}

{{/*
The migration Job's name carries a hash of the chart version, the app version and the values: an
upgrade that changes any of them gets a new Job (it migrates once), one that changes nothing keeps
the finished Job, and `helm template` renders the same name every time.
*/}}
{{- define "atrium.migrationJobName" -}}
{{- $hash := printf "%s|%s|%s" .Chart.Version (include "atrium.appVersion" .) (toJson .Values) | sha256sum | trunc 10 }}
{{- printf "%s-migrate-%s" (include "atrium.fullname" . | trunc 42 | trimSuffix "-") $hash }}
{{- end }}

{{/* Settings as the containers read them: the ConfigMap, then the Secret. */}}
{{- define "atrium.envFrom" -}}
envFrom:
  - configMapRef:
      name: {{ include "atrium.configMapName" . }}
  - secretRef:
      name: {{ include "atrium.secretName" . }}
{{- if or .Values.extraEnvVars .Values.caBundle.existingConfigMap }}
env:
  {{- if .Values.caBundle.existingConfigMap }}
  - name: NODE_EXTRA_CA_CERTS
    value: {{ printf "/etc/atrium/ca/%s" .Values.caBundle.key | quote }}
  {{- end }}
  {{- with .Values.extraEnvVars }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* The private CA's and the admin's extra mounts, after the chart's own (every Atrium container). */}}
{{- define "atrium.extraVolumeMounts" -}}
{{- if .Values.caBundle.existingConfigMap }}
- name: ca-bundle
  mountPath: /etc/atrium/ca
  readOnly: true
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The private CA's and the admin's extra volumes, after the chart's own (every Atrium pod). */}}
{{- define "atrium.extraVolumes" -}}
{{- if .Values.caBundle.existingConfigMap }}
- name: ca-bundle
  configMap:
    name: {{ .Values.caBundle.existingConfigMap }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "atrium.podSecurityContext" -}}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "atrium.containerSecurityContext" -}}
{{- with .Values.containerSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "atrium.scheduling" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- /*
kube-score's deliberate exceptions, on every object that runs a pod. imagePullPolicy other than
Always: an air-gapped site's nodes may have no registry to ask again, and the image is pinned (by
digest with image.digest, which the air-gap kit records; else by its immutable release tag), so a
cached copy is the same image. With image.pullPolicy Always there is nothing to except.
*/}}
{{- define "atrium.scoreExceptions" -}}
{{- if ne .Values.image.pullPolicy "Always" }}
kube-score/ignore: container-image-pull-policy
{{- end }}
{{- end }}
