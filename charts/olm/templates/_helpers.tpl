{{/* The managers' namespace: namespace.name, else the release's namespace (`helm install -n
     NS --create-namespace`), else olm-system for a release in `default` (`helm install olm
     charts/olm`, as docs/install.md shows). */}}
{{- define "olm.namespace" -}}
{{- if .Values.namespace.name -}}
{{- .Values.namespace.name -}}
{{- else if eq .Release.Namespace "default" -}}
olm-system
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* "true" when the chart creates (and owns) the managers' namespace. It never creates the
     release's own namespace: helm creates that one (--create-namespace) or it exists, and an
     object helm did not create cannot be part of the release. namespace.create: null (the
     default) creates any other; false none; true asks for it, and is refused for the
     release's namespace with what to type instead. */}}
{{- define "olm.createNamespace" -}}
{{- $ns := include "olm.namespace" . -}}
{{- $own := eq $ns .Release.Namespace -}}
{{- if kindIs "invalid" .Values.namespace.create -}}
{{- if not $own }}true{{ end -}}
{{- else if .Values.namespace.create -}}
{{- if $own -}}
{{- fail (printf "namespace.create=true asks the chart to create %s, the namespace the release is installed in: helm creates that one itself (--create-namespace), and a namespace cannot be both. Type `helm install %s charts/olm -n %s --create-namespace` without namespace.create (the chart then runs in %s and catalogd sets its Pod Security label), or `helm install %s charts/olm` (the release in default, the chart creating and owning olm-system)." $ns .Release.Name $ns $ns .Release.Name) -}}
{{- end -}}
true
{{- end -}}
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
     "manager" NAME "kind" KIND). A rule naming the namespace olm-system by name (catalogd's
     Pod Security label) names the managers' namespace instead. */}}
{{- define "olm.rules" -}}
{{- $ns := include "olm.namespace" .root -}}
{{- $file := .root.Files.Get (printf "files/rbac/%s.yaml" .manager) -}}
{{- range $doc := regexSplit "(?m)^---$" $file -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if eq (default "" $obj.kind) $.kind -}}
{{- $rules := list -}}
{{- range $rule := $obj.rules -}}
{{- if and (has "namespaces" (default list $rule.resources)) $rule.resourceNames -}}
{{- $names := list -}}
{{- range $name := $rule.resourceNames -}}
{{- $names = append $names (ternary $ns $name (eq $name "olm-system")) -}}
{{- end -}}
{{- $_ := set $rule "resourceNames" $names -}}
{{- end -}}
{{- $rules = append $rules $rule -}}
{{- end -}}
{{ toYaml $rules }}
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

{{/* The IPv4 address `a.b.c.d` as an integer. */}}
{{- define "olm.ipv4" -}}
{{- $o := splitList "." . -}}
{{- add (mul (atoi (index $o 0)) 16777216) (mul (atoi (index $o 1)) 65536) (mul (atoi (index $o 2)) 256) (atoi (index $o 3)) -}}
{{- end -}}

{{/* "true" when the CIDR `.inner` lies inside `.outer` (dict "outer" CIDR "inner" CIDR), as a
     NetworkPolicy `except` must: same family, a longer prefix (a strict subset), and the same network
     bits. IPv6 is compared only against ::/0 (which holds every IPv6 CIDR). */}}
{{- define "olm.cidrContains" -}}
{{- $o := splitList "/" .outer -}}
{{- $i := splitList "/" .inner -}}
{{- $v6 := contains ":" .outer -}}
{{- if ne $v6 (contains ":" .inner) -}}
{{- else if $v6 -}}
{{- if eq (index $o 1) "0" }}true{{ end -}}
{{- else if gt (atoi (index $i 1)) (atoi (index $o 1)) -}}
{{- $size := 1 -}}
{{- range until (sub 32 (atoi (index $o 1)) | int) }}{{ $size = mul $size 2 }}{{ end -}}
{{- if eq (div (include "olm.ipv4" (index $o 0) | atoi) $size) (div (include "olm.ipv4" (index $i 0) | atoi) $size) }}true{{ end -}}
{{- end -}}
{{- end -}}

{{/* A memory quantity (`1Gi`, `1536Mi`, `2G`, `1073741824`) in bytes. */}}
{{- define "olm.bytes" -}}
{{- $q := toString . -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 "k" 1000 "K" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 -}}
{{- $number := regexFind "^[0-9]+" $q -}}
{{- $suffix := trimPrefix $number $q -}}
{{- if and $number (or (eq $suffix "") (hasKey $units $suffix)) -}}
{{- mul (int64 $number) (default 1 (get $units $suffix)) -}}
{{- else -}}
{{- fail (printf "catalogd.resources.limits.memory %q is not a quantity the chart reads (an integer with Ki, Mi, Gi, Ti, k, M, G or T)" $q) -}}
{{- end -}}
{{- end -}}

{{/* Refuses values with which catalogd could use more memory than its limit: the bound of
     catalogd's --unpack-budget-bytes (docs/install.md, "Memory"), the same formula as
     catalogd::budget::memory_bound. */}}
{{- define "olm.checkCatalogdMemory" -}}
{{- $c := .Values.catalogd -}}
{{- $max := int64 $c.maxContentBytes -}}
{{- $budget := int64 $c.unpackBudgetBytes -}}
{{- if gt $max $budget -}}
{{- fail (printf "catalogd.maxContentBytes (%d) is larger than catalogd.unpackBudgetBytes (%d): one catalog would not fit the budget that bounds catalogd's memory" $max $budget) -}}
{{- end -}}
{{- with $c.resources.limits -}}
{{- with .memory -}}
{{- $limit := include "olm.bytes" . | int64 -}}
{{- $pulls := 2 -}}
{{- $bound := add 134217728 (mul 10 $budget) (mul (int64 $c.maxConcurrentGenerators) $max) (mul $pulls 8388608) (int64 $c.maxServedIndexBytes) -}}
{{- if lt $limit $bound -}}
{{- fail (printf "catalogd.resources.limits.memory (%v) is below what catalogd may use with these values, %d MiB: 128Mi + 10 × unpackBudgetBytes + maxConcurrentGenerators × maxContentBytes + 16Mi + maxServedIndexBytes (docs/install.md, \"Memory\"). Raise the limit, or lower unpackBudgetBytes and maxContentBytes." . (div $bound 1048576)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The cluster's own ranges (cluster.*), as a YAML list of CIDRs. */}}
{{- define "olm.clusterCIDRs" -}}
{{ toYaml (concat .serviceCIDRs .podCIDRs .apiServerCIDRs) }}
{{- end -}}

{{/* The flags of a sources block (catalogd.sources, provisioner.sources), as a YAML list:
     where the manager's fetches may connect (docs/catalogs.md, "Network policy"). Called with
     (dict "sources" <block> "cluster" .Values.cluster): the cluster's ranges are denied too. */}}
{{- define "olm.sourceArgs" -}}
{{- $args := list -}}
{{- $s := .sources -}}
{{- if $s.allowLoopback }}{{ $args = append $args "--allow-loopback-sources" }}{{ end -}}
{{- if $s.allowLinkLocal }}{{ $args = append $args "--allow-link-local-sources" }}{{ end -}}
{{- $denied := concat (fromYamlArray (include "olm.clusterCIDRs" .cluster)) ($s.deniedCIDRs | default list) -}}
{{- with $denied }}{{ $args = append $args (printf "--denied-source-cidrs=%s" (join "," .)) }}{{ end -}}
{{- with $s.allowedHosts }}{{ $args = append $args (printf "--allowed-source-hosts=%s" (join "," .)) }}{{ end -}}
{{- if $s.allowCredentialsWithoutTLSVerify }}{{ $args = append $args "--allow-credentials-without-tls-verify" }}{{ end -}}
{{ toYaml $args }}
{{- end -}}

{{/* The managers the chart runs, as a YAML list. */}}
{{- define "olm.managers" -}}
{{- $managers := list "catalogd" "operator-controller" -}}
{{- if .Values.catalogSwitcher.enabled }}{{ $managers = append $managers "catalog-switcher" }}{{ end -}}
{{- if .Values.provisioner.enabled }}{{ $managers = append $managers "provisioner" }}{{ end -}}
{{ toYaml $managers }}
{{- end -}}

{{/* catalogApi's values with their defaults, so that `helm upgrade --reuse-values` from a
     release made before catalogApi existed (whose stored values lack it) renders: enabled,
     replicas, aggregateToView and port. */}}
{{- define "olm.catalogApi" -}}
{{- $api := default dict .Values.catalogApi -}}
enabled: {{ and (hasKey $api "enabled") $api.enabled | ternary true false }}
replicas: {{ hasKey $api "replicas" | ternary $api.replicas 2 }}
aggregateToView: {{ hasKey $api "aggregateToView" | ternary $api.aggregateToView true }}
port: {{ dig "catalogApi" 8443 (default dict .Values.ports) }}
{{- end -}}
