{{/* Names: <release>-kraft-quorum unless the release name already holds the chart's. */}}
{{- define "kraft-quorum.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kraft-quorum.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kraft-quorum.controllerName" -}}{{ include "kraft-quorum.fullname" . }}-controller{{- end -}}
{{- define "kraft-quorum.controllerHeadless" -}}{{ include "kraft-quorum.fullname" . }}-controller-headless{{- end -}}
{{- define "kraft-quorum.brokerName" -}}{{ include "kraft-quorum.fullname" . }}-broker{{- end -}}
{{- define "kraft-quorum.brokerHeadless" -}}{{ include "kraft-quorum.fullname" . }}-broker-headless{{- end -}}
{{- define "kraft-quorum.configName" -}}{{ include "kraft-quorum.fullname" . }}-config{{- end -}}
{{- define "kraft-quorum.clusterIdSecret" -}}{{ include "kraft-quorum.fullname" . }}-cluster-id{{- end -}}

{{- define "kraft-quorum.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kraft-quorum.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kraft-quorum.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "kraft-quorum.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of every pod of the release; add the role with selectorLabelsFor. */}}
{{- define "kraft-quorum.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kraft-quorum.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Call with (dict "root" $ "role" "controller"). */}}
{{- define "kraft-quorum.selectorLabelsFor" -}}
{{ include "kraft-quorum.selectorLabels" .root }}
app.kubernetes.io/component: {{ .role }}
{{- end -}}

{{- define "kraft-quorum.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The DNS name of controller pod N (call with (dict "root" $ "ordinal" N)). */}}
{{- define "kraft-quorum.controllerHost" -}}
{{- $root := .root -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "kraft-quorum.controllerName" $root) (int .ordinal) (include "kraft-quorum.controllerHeadless" $root) $root.Release.Namespace $root.Values.clusterDomain -}}
{{- end -}}

{{/* controller.quorum.voters: id@host:port for every controller pod. */}}
{{- define "kraft-quorum.voters" -}}
{{- $root := . -}}
{{- $voters := list -}}
{{- range $i := until (int .Values.controllers.replicas) -}}
{{- $host := include "kraft-quorum.controllerHost" (dict "root" $root "ordinal" $i) -}}
{{- $voters = append $voters (printf "%d@%s:%d" (add (int $root.Values.controllers.nodeIdBase) $i) $host (int $root.Values.controllers.port)) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}

{{/* controller.quorum.voters of the controllers (of the brokers: `kraft-quorum.voters`, every replica). */}}
{{- define "kraft-quorum.controllerVoters" -}}
{{- if eq (include "kraft-quorum.kraftVersion" .) "1" -}}
{{- include "kraft-quorum.initialVoters" . -}}
{{- else -}}
{{- include "kraft-quorum.voters" . -}}
{{- end -}}
{{- end -}}

{{/* The controllers' node ids, comma-separated (recorded on the StatefulSet). */}}
{{- define "kraft-quorum.voterIds" -}}
{{- $ids := list -}}
{{- range $i := until (int .Values.controllers.replicas) -}}
{{- $ids = append $ids (add (int $.Values.controllers.nodeIdBase) $i) -}}
{{- end -}}
{{- join "," $ids -}}
{{- end -}}

{{/* The ids in the controllers' controller.quorum.voters: the initial voters (kraft.version 1), else every replica. */}}
{{- define "kraft-quorum.staticVoterIds" -}}
{{- if eq (include "kraft-quorum.kraftVersion" .) "1" -}}
{{- include "kraft-quorum.initialVoterIds" . -}}
{{- else -}}
{{- include "kraft-quorum.voterIds" . -}}
{{- end -}}
{{- end -}}

{{/* host:port of every controller, for QUORUMCTL_BOOTSTRAP. */}}
{{- define "kraft-quorum.bootstrap" -}}
{{- $root := . -}}
{{- $hosts := list -}}
{{- range $i := until (int .Values.controllers.replicas) -}}
{{- $hosts = append $hosts (printf "%s:%d" (include "kraft-quorum.controllerHost" (dict "root" $root "ordinal" $i)) (int $root.Values.controllers.port)) -}}
{{- end -}}
{{- join "," $hosts -}}
{{- end -}}

{{/*
The cluster id: clusterId if set; else the one in the release's cluster-id Secret
(so an id from an earlier install or chart version is kept); else derived from the
namespace and release name. Deriving it, not drawing it at random, keeps it the
same in every render: `helm template`, Argo CD and `--dry-run` see no Secret
(lookup answers nothing there), and a random id would change on every render
while the formatted volumes keep the old one. The result is a canonical
22-character URL-safe base64 id: 21 hex digits of a SHA-256, then one of A, Q,
g, w (the last character carries only 2 bits of the 16 bytes).
*/}}
{{- define "kraft-quorum.clusterId" -}}
{{- if .Values.clusterId -}}
{{- .Values.clusterId -}}
{{- else -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "kraft-quorum.clusterIdSecret" .) -}}
{{- $kept := "" -}}
{{- if $secret -}}
{{- $kept = index (default (dict) $secret.data) "cluster.id" | default "" | b64dec -}}
{{- end -}}
{{- if $kept -}}
{{- $kept -}}
{{- else -}}
{{- $hash := sha256sum (printf "kraft-quorum/%s/%s" .Release.Namespace .Release.Name) -}}
{{- $tail := dict "0" "A" "1" "Q" "2" "g" "3" "w" "4" "A" "5" "Q" "6" "g" "7" "w" "8" "A" "9" "Q" "a" "g" "b" "w" "c" "A" "d" "Q" "e" "g" "f" "w" -}}
{{- printf "%s%s" (substr 0 21 $hash) (index $tail (substr 21 22 $hash)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Pod anti-affinity across nodes: call with (dict "root" $ "role" R "mode" M). */}}
{{- define "kraft-quorum.antiAffinity" -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "kraft-quorum.selectorLabelsFor" (dict "root" .root "role" .role) | fromYaml)) -}}
{{- if eq .mode "required" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - {{ toYaml $term | nindent 6 | trim }}
{{- else if eq .mode "preferred" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        {{- toYaml $term | nindent 8 }}
{{- end }}
{{- end -}}

{{/* Topology spread by zone: call with (dict "root" $ "role" R "spread" S). */}}
{{- define "kraft-quorum.topologySpread" -}}
{{- if .spread.enabled }}
topologySpreadConstraints:
  - maxSkew: {{ .spread.maxSkew }}
    topologyKey: {{ .spread.topologyKey | quote }}
    whenUnsatisfiable: {{ .spread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "kraft-quorum.selectorLabelsFor" (dict "root" .root "role" .role) | nindent 8 }}
{{- end }}
{{- end -}}

{{/* Refusals the schema cannot express, each with the reason. */}}
{{- define "kraft-quorum.validate" -}}
{{- $c := .Values.controllers -}}
{{- if eq (mod (int $c.replicas) 2) 0 -}}
{{- $n := int $c.replicas -}}
{{- fail (printf "controllers.replicas=%d: a Raft quorum needs an odd number of voters (3 or 5): %d voters need a majority of %d and so tolerate %d failure(s), no more than %d voters do" $n $n (add1 (div $n 2)) (sub $n (add1 (div $n 2))) (sub $n 1)) -}}
{{- end -}}
{{- $b := .Values.brokers -}}
{{- $cLast := add (int $c.nodeIdBase) (int $c.replicas) -}}
{{- $bLast := add (int $b.nodeIdBase) (int $b.replicas) -}}
{{- if and (gt (int $b.replicas) 0) (lt (int $b.nodeIdBase) $cLast) (lt (int $c.nodeIdBase) $bLast) -}}
{{- fail (printf "brokers.nodeIdBase=%d: broker node ids %d-%d overlap the controllers' %d-%d; node ids must be unique in the cluster" (int $b.nodeIdBase) (int $b.nodeIdBase) (sub $bLast 1) (int $c.nodeIdBase) (sub $cLast 1)) -}}
{{- end -}}
{{- if le (mul (int $b.terminationGracePeriodSeconds) 1000) (int $b.controlledShutdownTimeoutMs) -}}
{{- fail (printf "brokers.terminationGracePeriodSeconds=%d must exceed brokers.controlledShutdownTimeoutMs=%d, or Kubernetes kills a broker in the middle of its controlled shutdown" (int $b.terminationGracePeriodSeconds) (int $b.controlledShutdownTimeoutMs)) -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.secretName) -}}
{{- fail "tls.enabled=true needs tls.secretName: a Secret with tls.crt, tls.key and ca.crt" -}}
{{- end -}}
{{- if and .Values.tls.enabled (eq .Values.tls.clientAuth "required") (not .Values.tls.controllerPrincipal) -}}
{{- fail "tls.clientAuth=required binds each voter id to a certificate: set tls.controllerPrincipal to the subject of the controllers' certificate (User:CN=...)" -}}
{{- end -}}
{{- if eq (int $c.port) (int .Values.metrics.port) -}}
{{- fail (printf "metrics.port=%d is the controllers' listener port" (int .Values.metrics.port)) -}}
{{- end -}}
{{- include "kraft-quorum.checkVoterChange" . -}}
{{- end -}}

{{/*
The controllers' StatefulSet as installed (empty at install and under `helm template`).
*/}}
{{- define "kraft-quorum.installedControllers" -}}
{{- $sts := lookup "apps/v1" "StatefulSet" .Release.Namespace (include "kraft-quorum.controllerName" .) -}}
{{- if $sts -}}{{- toYaml (default (dict) $sts.metadata.annotations) -}}{{- end -}}
{{- end -}}

{{/*
"1" when the voters live in the metadata log (KIP-853, kraft.version 1): every
release installed by this chart version, and upgrades of one (its StatefulSet
carries kraft-quorum/kraft-version). "0" for a release installed by an older
chart (static controller.quorum.voters, kept as they were).
*/}}
{{- define "kraft-quorum.kraftVersion" -}}
{{- $installed := include "kraft-quorum.installedControllers" . | fromYaml -}}
{{- if or (not $installed) (eq (index $installed "kraft-quorum/kraft-version" | default "") "1") -}}1{{- else -}}0{{- end -}}
{{- end -}}

{{/*
The node ids of the voters the release was installed with (formatted with
--initial-controllers): kept from the installed StatefulSet across upgrades, so
controller.properties (and the pods) do not change when the voter set does.
*/}}
{{- define "kraft-quorum.initialVoterIds" -}}
{{- $installed := include "kraft-quorum.installedControllers" . | fromYaml -}}
{{- $kept := "" -}}
{{- if $installed -}}
{{- $kept = index $installed "kraft-quorum/initial-voter-ids" | default (index $installed "kraft-quorum/voter-ids") | default "" -}}
{{- end -}}
{{- default (include "kraft-quorum.voterIds" .) $kept -}}
{{- end -}}

{{/*
The directory id an initial voter is formatted with (call with (dict "root" $ "id" N)):
derived from the cluster id and node id, so every initial controller writes the
same VotersRecord without talking to the others. A controller formatted later
(a new one, or a lost volume) draws a random one, which tells it from the original.
*/}}
{{- define "kraft-quorum.directoryId" -}}
{{- $hash := sha256sum (printf "kraft-quorum/directory/%s/%d" (include "kraft-quorum.clusterId" .root) (int .id)) -}}
{{- $tail := dict "0" "A" "1" "Q" "2" "g" "3" "w" "4" "A" "5" "Q" "6" "g" "7" "w" "8" "A" "9" "Q" "a" "g" "b" "w" "c" "A" "d" "Q" "e" "g" "f" "w" -}}
{{- printf "%s%s" (substr 0 21 $hash) (index $tail (substr 21 22 $hash)) -}}
{{- end -}}

{{/* id@host:port of voter id N (call with (dict "root" $ "id" N)). */}}
{{- define "kraft-quorum.voterEndpoint" -}}
{{- $c := .root.Values.controllers -}}
{{- printf "%d@%s:%d" (int .id) (include "kraft-quorum.controllerHost" (dict "root" .root "ordinal" (sub (int .id) (int $c.nodeIdBase)))) (int $c.port) -}}
{{- end -}}

{{/* controller.quorum.voters of the controllers: the initial voters (kraft.version 1). */}}
{{- define "kraft-quorum.initialVoters" -}}
{{- $root := . -}}
{{- $voters := list -}}
{{- range $id := splitList "," (include "kraft-quorum.initialVoterIds" .) -}}
{{- $voters = append $voters (include "kraft-quorum.voterEndpoint" (dict "root" $root "id" $id)) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}

{{/* `quorumctl storage format --initial-controllers`: id@host:port:directory-id of each initial voter. */}}
{{- define "kraft-quorum.initialControllers" -}}
{{- $root := . -}}
{{- $voters := list -}}
{{- range $id := splitList "," (include "kraft-quorum.initialVoterIds" .) -}}
{{- $voters = append $voters (printf "%s:%s" (include "kraft-quorum.voterEndpoint" (dict "root" $root "id" $id)) (include "kraft-quorum.directoryId" (dict "root" $root "id" $id))) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}

{{/*
What an upgrade may change of the voters. kraft.version 1: replicas (3 <-> 5) through
the voter-change Jobs (templates/voters-jobs.yaml), but not nodeIdBase, which would
renumber every voter at once. A release of an older chart (static voters): nothing,
since pods rolled onto a new static set while others still run the old one could
elect two leaders; it keeps the voters it was installed with.
*/}}
{{- define "kraft-quorum.checkVoterChange" -}}
{{- $installed := include "kraft-quorum.installedControllers" . | fromYaml -}}
{{- if $installed -}}
{{- $old := index $installed "kraft-quorum/voter-ids" | default "" -}}
{{- $new := include "kraft-quorum.voterIds" . -}}
{{- $initial := index $installed "kraft-quorum/initial-voter-ids" | default "" -}}
{{- if and $initial (ne (int (first (splitList "," $initial))) (int .Values.controllers.nodeIdBase)) -}}
{{- fail (printf "controllers.nodeIdBase=%d: the controllers were installed with node ids from %s; changing the base would renumber every voter at once. Voters are added and removed one at a time: keep nodeIdBase and change controllers.replicas" (int .Values.controllers.nodeIdBase) (first (splitList "," $initial))) -}}
{{- end -}}
{{- if and $old (not $initial) (ne $old $new) (not .Values.controllers.allowVoterChange) -}}
{{- fail (printf "controllers: this upgrade would change the voter set from node ids %s to %s. This release was installed by an older chart with static voters (controller.quorum.voters, kraft.version 0); changing them on a running quorum needs dynamic membership (KIP-853, kraft.version 1), which a release installed by this chart has, but an upgrade of kraft.version is not supported yet: pods rolled onto the new set while others still run the old one could elect two leaders. Keep controllers.replicas and controllers.nodeIdBase as installed, or set controllers.allowVoterChange=true after stopping every controller" $old $new) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Where the TLS Secret is mounted. */}}
{{- define "kraft-quorum.tlsDir" -}}/etc/kraft-quorum-tls{{- end -}}

{{/* "true" when the metrics listener serves HTTPS. */}}
{{- define "kraft-quorum.metricsHttps" -}}
{{- if and .Values.tls.enabled .Values.metrics.tls.enabled -}}true{{- end -}}
{{- end -}}

{{/* metrics.listener and its client auth (every pod). */}}
{{- define "kraft-quorum.metricsListener" -}}
{{- if include "kraft-quorum.metricsHttps" . -}}
metrics.listener=https://:{{ .Values.metrics.port }}
metrics.listener.ssl.client.auth={{ .Values.metrics.tls.clientAuth }}
{{- else -}}
metrics.listener=http://:{{ .Values.metrics.port }}
{{- end -}}
{{- end -}}

{{/* Kafka's TLS keys with the Secret's files; call with (dict "root" $ "map" M). */}}
{{- define "kraft-quorum.sslProperties" -}}
{{- $dir := include "kraft-quorum.tlsDir" .root -}}
listener.security.protocol.map={{ .map }}
ssl.certificate.location={{ $dir }}/tls.crt
ssl.key.location={{ $dir }}/tls.key
ssl.ca.location={{ $dir }}/ca.crt
{{- end -}}

{{/*
TLS environment of a pod's containers (call with (dict "root" $ "headless" NAME)):
the pod's own DNS name, which its certificate names and the probes verify it by
(they dial 127.0.0.1), and quorumctl's TLS files, so `kubectl exec ... quorumctl`
needs no flags.
*/}}
{{- define "kraft-quorum.tlsEnv" -}}
{{- if .root.Values.tls.enabled -}}
{{- $dir := include "kraft-quorum.tlsDir" .root }}
- name: POD_DNS_NAME
  value: "$(POD_NAME).{{ .headless }}.{{ .root.Release.Namespace }}.svc.{{ .root.Values.clusterDomain }}"
- name: QUORUMCTL_SSL_CA_LOCATION
  value: {{ $dir }}/ca.crt
- name: QUORUMCTL_SSL_CERTIFICATE_LOCATION
  value: {{ $dir }}/tls.crt
- name: QUORUMCTL_SSL_KEY_LOCATION
  value: {{ $dir }}/tls.key
{{- end -}}
{{- end -}}

{{/* The probe script's TLS flag (empty without TLS). */}}
{{- define "kraft-quorum.probeTls" -}}
{{- if .Values.tls.enabled }}, --tls, {{ include "kraft-quorum.tlsDir" . }}{{ end -}}
{{- end -}}

{{/* Environment of the controller pods' containers. */}}
{{- define "kraft-quorum.controllerEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: NODE_ID_BASE
  value: {{ .Values.controllers.nodeIdBase | quote }}
- name: CLUSTER_ID
  valueFrom:
    secretKeyRef:
      name: {{ include "kraft-quorum.clusterIdSecret" . }}
      key: cluster.id
- name: QUORUMCTL_BOOTSTRAP
  value: {{ include "kraft-quorum.bootstrap" . | quote }}
{{- include "kraft-quorum.tlsEnv" (dict "root" . "headless" (include "kraft-quorum.controllerHeadless" .)) }}
{{- end -}}

{{/* Mounts shared by every container: properties and scripts, the written config, data, /tmp. */}}
{{- define "kraft-quorum.volumeMounts" -}}
- name: config
  mountPath: /etc/kraft-quorum
  readOnly: true
- name: run
  mountPath: /var/run/kraft-quorum
- name: data
  mountPath: /var/lib/kraft-quorum
- name: tmp
  mountPath: /tmp
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/kraft-quorum-tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* Every static voter id bound to the controllers' certificate (controller.quorum.voter.principals). */}}
{{- define "kraft-quorum.voterPrincipals" -}}
{{- $ids := splitList "," (include "kraft-quorum.staticVoterIds" .) -}}
{{- $entries := list -}}
{{- range $id := $ids -}}
{{- $entries = append $entries (printf "%d@%s" (int $id) $.Values.tls.controllerPrincipal) -}}
{{- end -}}
{{- join ";" $entries -}}
{{- end -}}

{{/* Pod volumes; call with (dict "root" $ "secret" NAME), NAME the TLS Secret to mount. */}}
{{- define "kraft-quorum.volumes" -}}
- name: config
  configMap:
    name: {{ include "kraft-quorum.configName" .root }}
- name: run
  emptyDir:
    medium: Memory
    sizeLimit: 1Mi
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if .root.Values.tls.enabled }}
- name: tls
  secret:
    secretName: {{ .secret }}
{{- end }}
{{- end -}}

{{/* Environment of the broker pods' containers. */}}
{{- define "kraft-quorum.brokerEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: NODE_ID_BASE
  value: {{ .Values.brokers.nodeIdBase | quote }}
- name: CLUSTER_ID
  valueFrom:
    secretKeyRef:
      name: {{ include "kraft-quorum.clusterIdSecret" . }}
      key: cluster.id
- name: QUORUMCTL_BOOTSTRAP
  value: {{ include "kraft-quorum.bootstrap" . | quote }}
{{- include "kraft-quorum.tlsEnv" (dict "root" . "headless" (include "kraft-quorum.brokerHeadless" .)) }}
{{- if .Values.brokers.rack.enabled }}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
{{- end }}
{{- end -}}
