{{/* The managers' namespace. */}}
{{- define "olm.namespace" -}}
{{- .Values.namespace.name -}}
{{- end -}}

{{/* Labels of every object of the release. */}}
{{- define "olm.labels" -}}
app.kubernetes.io/part-of: olm-rs
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The image of manager `name` (dict "root" $ "name" NAME). */}}
{{- define "olm.image" -}}
{{- $tag := .root.Values.image.tag | default (printf "v%s" .root.Chart.AppVersion) -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .name $tag -}}
{{- end -}}

{{/* The rules of the ClusterRole or Role `kind` in config/rbac/<manager>.yaml (dict "root" $
     "manager" NAME "kind" KIND). */}}
{{- define "olm.rules" -}}
{{- $file := .root.Files.Get (printf "files/rbac/%s.yaml" .manager) -}}
{{- range $doc := regexSplit "(?m)^---$" $file -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if eq (default "" $obj.kind) $.kind -}}
{{ toYaml $obj.rules }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The restricted security context of every container. */}}
{{- define "olm.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The Secret holding the certificate (tls.crt, tls.key, ca.crt), or "" without one. */}}
{{- define "olm.tlsSecret" -}}
{{- if eq .Values.tls.source "certManager" -}}olm-tls
{{- else if eq .Values.tls.source "existingSecret" -}}{{ .Values.tls.existingSecret }}
{{- end -}}
{{- end -}}

{{/* "https" when the metrics endpoints serve HTTPS, else "http". */}}
{{- define "olm.metricsScheme" -}}
{{- if or .Values.metrics.secure (include "olm.tlsSecret" .) -}}https{{- else -}}http{{- end -}}
{{- end -}}
