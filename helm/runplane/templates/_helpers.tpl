{{/* Names ------------------------------------------------------------------------------------ */}}

{{- define "runplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "runplane.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "runplane.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "runplane.componentName" (dict "ctx" $ "name" "executor") */}}
{{- define "runplane.componentName" -}}
{{- printf "%s-%s" (include "runplane.fullname" .ctx) .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "runplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "runplane.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "runplane.secretName" -}}
{{- if .Values.secret.create -}}
{{- include "runplane.fullname" . -}}
{{- else -}}
{{- required "secret.existingSecret is required when secret.create is false" .Values.secret.existingSecret -}}
{{- end -}}
{{- end -}}

{{- define "runplane.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Labels ----------------------------------------------------------------------------------- */}}

{{- define "runplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "runplane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "runplane.labels" -}}
helm.sh/chart: {{ include "runplane.chart" . }}
{{ include "runplane.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: runplane
{{- end -}}

{{/* "runplane.componentSelectorLabels" (dict "ctx" $ "name" "executor") */}}
{{- define "runplane.componentSelectorLabels" -}}
{{ include "runplane.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "runplane.componentLabels" -}}
{{ include "runplane.labels" .ctx }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* One service's settings: `defaults` overridden by `services.<name>`, as YAML.
     "runplane.service" (dict "ctx" $ "name" "executor") | fromYaml */}}
{{- define "runplane.service" -}}
{{- $override := index .ctx.Values.services .name | default dict -}}
{{- toYaml (mergeOverwrite (deepCopy .ctx.Values.defaults) (deepCopy $override)) -}}
{{- end -}}

{{/* The RUNPLANE_* environment every service and the topics job share, as a YAML map.
     Names are the ones runplane.config.Settings.from_env reads. */}}
{{- define "runplane.commonEnv" -}}
RUNPLANE_BOOTSTRAP_SERVERS: {{ required "kafka.bootstrapServers is required" .Values.kafka.bootstrapServers | quote }}
RUNPLANE_TOPIC_PREFIX: {{ .Values.kafka.topicPrefix | quote }}
RUNPLANE_PARTITIONS: {{ .Values.kafka.partitions | quote }}
RUNPLANE_REPLICATION_FACTOR: {{ .Values.kafka.replicationFactor | quote }}
RUNPLANE_KAFKA_SECURITY_PROTOCOL: {{ .Values.kafka.security.protocol | quote }}
{{- if hasPrefix "SASL_" .Values.kafka.security.protocol }}
RUNPLANE_KAFKA_SASL_MECHANISM: {{ required "kafka.security.saslMechanism is required with a SASL protocol" .Values.kafka.security.saslMechanism | quote }}
{{- end }}
{{- if .Values.kafka.security.caSecret }}
RUNPLANE_KAFKA_SSL_CA_LOCATION: "/etc/runplane/kafka-ca/ca.crt"
{{- end }}
{{- if not .Values.kafka.security.endpointIdentification }}
RUNPLANE_KAFKA_SSL_ENDPOINT_IDENTIFICATION: "false"
{{- end }}
{{- with .Values.config.agentModules }}
RUNPLANE_AGENT_MODULES: {{ . | quote }}
{{- end }}
{{- if not .Values.redis.existingSecret }}
RUNPLANE_REDIS_URL: {{ required "redis.url is required" .Values.redis.url | quote }}
{{- end }}
{{- with .Values.kafka.schemaRegistryUrl }}
RUNPLANE_SCHEMA_REGISTRY_URL: {{ . | quote }}
{{- end }}
RUNPLANE_HTTP_HOST: "0.0.0.0"
RUNPLANE_FORWARDED_ALLOW_IPS: {{ .Values.http.forwardedAllowIps | quote }}
RUNPLANE_LOG_LEVEL: {{ .Values.config.logLevel | quote }}
RUNPLANE_STATE_DIR: "/var/lib/runplane"
RUNPLANE_CALENDARS_FILE: "/etc/runplane/calendars/calendars.yaml"
RUNPLANE_TOOLS_CONFIG: "/etc/runplane/tools/tools.yaml"
{{- if .Values.policy }}
RUNPLANE_POLICY: "/etc/runplane/tools/policy.yaml"
{{- end }}
{{- with .Values.config.openaiBaseUrl }}
RUNPLANE_OPENAI_BASE_URL: {{ . | quote }}
{{- end }}
{{- range $k, $v := .Values.config.extraEnv }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/* One Kafka principal per service (docs/security.md): its SASL user name and password, as
     container env entries; nothing without SASL. (dict "ctx" $ "name" "admission") */}}
{{- define "runplane.kafkaCredentialsEnv" -}}
{{- if hasPrefix "SASL_" .ctx.Values.kafka.security.protocol }}
- name: RUNPLANE_KAFKA_SASL_USERNAME
  value: {{ printf "%s%s" .ctx.Values.kafka.security.usernamePrefix .name | quote }}
- name: RUNPLANE_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "runplane.secretName" .ctx }}
      key: {{ printf "kafka-password-%s" .name }}
{{- end }}
{{- end -}}

{{/* The volume and mount of the brokers' CA (kafka.security.caSecret), or nothing. */}}
{{- define "runplane.kafkaCaVolume" -}}
{{- with .Values.kafka.security.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ . }}
    items:
      - key: ca.crt
        path: ca.crt
{{- end }}
{{- end -}}
{{- define "runplane.kafkaCaMount" -}}
{{- if .Values.kafka.security.caSecret }}
- name: kafka-ca
  mountPath: /etc/runplane/kafka-ca
  readOnly: true
{{- end }}
{{- end -}}

{{/* The variable that sets a service's transaction.timeout.ms, where its code reads one
     (admission, executor); "" for the others (cases, worklist and journal keep 60 s). */}}
{{- define "runplane.transactionTimeoutEnv" -}}
{{- $vars := dict "admission" "RUNPLANE_ADMISSION_TRANSACTION_TIMEOUT_MS" "executor" "RUNPLANE_EXECUTOR_TRANSACTION_TIMEOUT_MS" -}}
{{- get $vars . -}}
{{- end -}}

{{/* The longest transaction timeout of any service, in seconds: the floor of every
     terminationGracePeriodSeconds (a pod stopped sooner may leave a transaction that neither
     committed nor was yet aborted by the broker). */}}
{{- define "runplane.longestTransactionTimeout" -}}
{{- max (int .Values.kafka.transactionTimeoutSeconds) 60 -}}
{{- end -}}

{{/* RUNPLANE_WORKLIST_PUBLIC_ORIGIN (the journal's run page links a run's task there as
     RUNPLANE_JOURNAL_WORKLIST_UI): the value, else https://<host> of the worklist's TLS
     ingress, else "". */}}
{{- define "runplane.worklistPublicOrigin" -}}
{{- $ing := .Values.ingress -}}
{{- if .Values.http.worklistPublicOrigin -}}
{{- .Values.http.worklistPublicOrigin | trimSuffix "/" -}}
{{- else if and $ing.enabled $ing.worklist.enabled $ing.worklist.tls.enabled -}}
{{- printf "https://%s" $ing.worklist.host -}}
{{- end -}}
{{- end -}}

{{/* RUNPLANE_JOURNAL_PUBLIC_ORIGIN (the runs UI's address; the worklist links runs there as
     RUNPLANE_WORKLIST_RUNS_UI): the value, else https://<host> of the journal's TLS ingress,
     else "". */}}
{{- define "runplane.journalPublicOrigin" -}}
{{- $ing := .Values.ingress -}}
{{- if .Values.http.journalPublicOrigin -}}
{{- .Values.http.journalPublicOrigin | trimSuffix "/" -}}
{{- else if and $ing.enabled $ing.journal.enabled $ing.journal.tls.enabled -}}
{{- printf "https://%s" $ing.journal.host -}}
{{- end -}}
{{- end -}}

{{/* A checksum of the Secret keys a service takes as environment variables (they are read
     once, at start, so a change must restart the pod). principals.yaml is left out: it is a
     mounted file the worklist and journal re-read when it changes, so rotating a token
     restarts nothing. Keys: the service's secretEnv ones and its own Kafka password
     (kafka-password-<name>), so rotating one principal's password restarts that service only.
     "runplane.secretEnvChecksum" (dict "ctx" $ "svc" $svc "name" "executor") */}}
{{- define "runplane.secretEnvChecksum" -}}
{{- $data := (include (print .ctx.Template.BasePath "/secret.yaml") .ctx | fromYaml).stringData | default dict -}}
{{- $used := dict -}}
{{- range $var, $key := .svc.secretEnv -}}
{{- $_ := set $used $key (get $data $key | toString) -}}
{{- end -}}
{{- $kafka := printf "kafka-password-%s" .name -}}
{{- if hasKey $data $kafka -}}
{{- $_ := set $used $kafka (get $data $kafka | toString) -}}
{{- end -}}
{{- toJson $used | sha256sum -}}
{{- end -}}

{{/* Guards that keep a broken configuration from rendering at all. */}}
{{- define "runplane.validate" -}}
{{- $ctx := . -}}
{{- range $name, $_ := .Values.services -}}
{{- $svc := include "runplane.service" (dict "ctx" $ctx "name" $name) | fromYaml -}}
{{- if $svc.enabled -}}
{{- $longest := include "runplane.longestTransactionTimeout" $ctx | int -}}
{{- if lt (int $svc.terminationGracePeriodSeconds) $longest -}}
{{- fail (printf "services.%s.terminationGracePeriodSeconds (%v) must be >= the longest transaction timeout (%vs: max(kafka.transactionTimeoutSeconds, 60 for cases, worklist and journal))" $name $svc.terminationGracePeriodSeconds $longest) -}}
{{- end -}}
{{- if gt (int $svc.replicas) (int $ctx.Values.kafka.partitions) -}}
{{- fail (printf "services.%s.replicas (%v) must be <= kafka.partitions (%v)" $name $svc.replicas $ctx.Values.kafka.partitions) -}}
{{- end -}}
{{- if $svc.autoscaling.enabled -}}
{{- if gt (int $svc.autoscaling.maxReplicas) (int $ctx.Values.kafka.partitions) -}}
{{- fail (printf "services.%s.autoscaling.maxReplicas (%v) must be <= kafka.partitions (%v): an instance beyond the partition count gets no partition" $name $svc.autoscaling.maxReplicas $ctx.Values.kafka.partitions) -}}
{{- end -}}
{{- if gt (int $svc.autoscaling.minReplicas) (int $svc.autoscaling.maxReplicas) -}}
{{- fail (printf "services.%s.autoscaling.minReplicas must be <= maxReplicas" $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
