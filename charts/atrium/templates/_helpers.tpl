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
{{- if and .Values.existingSecretKeys (not .Values.existingSecret) }}
{{- fail "existingSecretKeys maps the keys of existingSecret: set existingSecret to the name of that Secret (the Secret the chart makes uses the settings' own names)" }}
{{- end }}
envFrom:
  - configMapRef:
      name: {{ include "atrium.configMapName" . }}
  - secretRef:
      name: {{ include "atrium.secretName" . }}
{{- $secret := include "atrium.secretName" . }}
{{- if or .Values.extraEnvVars .Values.caBundle.existingConfigMap .Values.existingSecretKeys }}
env:
  {{- /* existingSecret's keys under other names: set here, these win over the secretRef above. */}}
  {{- range $name, $key := .Values.existingSecretKeys }}
  - name: {{ $name }}
    valueFrom:
      secretKeyRef:
        name: {{ $secret }}
        key: {{ $key | quote }}
  {{- end }}
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
{{- $ignored := list }}
{{- if ne .Values.image.pullPolicy "Always" }}
{{- $ignored = append $ignored "container-image-pull-policy" }}
{{- end }}
{{- /*
OpenShift (podSecurityContext.runAsUser and runAsGroup null, none set on the container either): the
restricted SCC gives each pod a user from the namespace's range (1000000000 and up) and group 0; a
fixed ID outside that range would be refused. kube-score wants IDs above 10000 written in the spec,
which the platform makes true at admission but no spec can say beforehand.
*/}}
{{- $pod := .Values.podSecurityContext | default dict }}
{{- $container := .Values.containerSecurityContext | default dict }}
{{- /* By key, not by value: runAsUser 0 (root) is set, and must be scored. */}}
{{- if not (and (or (hasKey $pod "runAsUser") (hasKey $container "runAsUser")) (or (hasKey $pod "runAsGroup") (hasKey $container "runAsGroup"))) }}
{{- $ignored = append $ignored "container-security-context-user-group-id" }}
{{- end }}
{{- with $ignored }}
kube-score/ignore: {{ join "," . }}
{{- end }}
{{- end }}

{{- /*
An object's annotations: its own (`extra`, a dict), then commonAnnotations; nothing when both are
empty. Its own win, so a hook or a policy annotation cannot be overridden by accident.
*/}}
{{- define "atrium.annotations" -}}
{{- $all := merge (dict) (.extra | default dict) (.ctx.Values.commonAnnotations | default dict) }}
{{- with $all }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- /*
A pod's labels: the selector labels and component first (podLabels and commonLabels cannot take a
pod out of its Deployment, Service or NetworkPolicy), then podLabels, then commonLabels (as Bitnami's
charts put them on pods). `extra` adds more of the chart's own (the Deployment's version label).
*/}}
{{- define "atrium.podLabels" -}}
{{- $own := merge (fromYaml (include "atrium.selectorLabels" .ctx)) (dict "app.kubernetes.io/component" .component) (.extra | default dict) }}
{{- toYaml (merge $own (.ctx.Values.podLabels | default dict) (.ctx.Values.commonLabels | default dict)) }}
{{- end }}

{{- /*
What every Atrium pod shares besides its containers: pull secrets, security context, scheduling,
DNS. Pods whose names resolve with the site's own DNS settings (a corporate search domain, ndots)
need them in the migration Job and the helm test as much as in the server.
*/}}
{{- define "atrium.podCommon" -}}
{{- include "atrium.imagePullSecrets" . }}
{{- include "atrium.podSecurityContext" . }}
{{- include "atrium.scheduling" . }}
{{- with .Values.dnsPolicy }}
dnsPolicy: {{ . }}
{{- end }}
{{- with .Values.dnsConfig }}
dnsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
