#!/usr/bin/env bash
# Builds the interop tools into bin/: the real third-party controllers and checkers the e2e
# suite runs against the control plane. Called by hack/build-tools.sh; each tool module has a
# stamp of its own and is skipped while its pins and this script are unchanged.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
mkdir -p "$bin"
export GONOSUMDB=${GONOSUMDB:-k8s.io,sigs.k8s.io} GOFLAGS="${GOFLAGS:--mod=mod -buildvcs=false}" CGO_ENABLED=0

# Each tool lives in a module of its own under hack/interop/NAME, pinned to the Go toolchain
# its upstream requires (fetched through the module proxy).
build_interop() { # module-dir name=package...
  local dir=$root/hack/interop/$1; shift
  local istamp=$bin/.interop-$(basename "$dir")-stamp
  local iwant; iwant=$(cat "$dir"/go.mod "$dir"/go.sum "$dir"/*.go "$0" 2>/dev/null | sha256sum | cut -d' ' -f1)
  local ok=1 spec
  for spec in "$@"; do [ -x "$bin/${spec%%=*}" ] || ok=0; done
  if [ "$ok" = 1 ] && [ -f "$istamp" ] && [ "$(cat "$istamp")" = "$iwant" ]; then
    echo "tools: $(basename "$dir") up to date in bin/"
    return
  fi
  for spec in "$@"; do
    local t0=$SECONDS
    (cd "$dir" && GOTOOLCHAIN=auto go build -trimpath -ldflags "-s -w" -o "$bin/${spec%%=*}" "${spec#*=}")
    printf 'tools: built %-24s in %4ds\n' "${spec%%=*}" $((SECONDS - t0))
  done
  echo "$iwant" > "$istamp"
}
module_dir() { # module-dir module: where the pinned module lies in the module cache
  # (downloaded first: on a fresh machine `go list -m` alone answers an empty directory)
  (cd "$root/hack/interop/$1" && GOTOOLCHAIN=auto go mod download "$2" && GOTOOLCHAIN=auto go list -m -f '{{.Dir}}' "$2")
}
copy_crds() { # module-dir module path-in-module: its *-crd.yaml into bin/NAME-crds/
  local out=$bin/$1-crds src
  src=$(module_dir "$1" "$2")
  rm -rf "$out" && mkdir -p "$out"
  cp "$src/$3"/*-crd.yaml "$out/"
  chmod -R u+w "$out"
}
loopback_modfile() { # module-dir module file: a go.mod (for -modfile) building MODULE from a
  # copy of it in bin/ whose "0.0.0.0:%d" listen address in FILE is 127.0.0.1 (go build refuses
  # overlays of files in the module cache, so the module is copied, not overlaid)
  local dir=$root/hack/interop/$1 work=$bin/.interop-$1-loopback src
  src=$(module_dir "$1" "$2")
  grep -q '"0\.0\.0\.0:%d"' "$src/$3" || { echo "tools: no \"0.0.0.0:%d\" in $2/$3 to bind to loopback" >&2; return 1; }
  rm -rf "$work" && mkdir -p "$work"
  cp -R "$src" "$work/src" && chmod -R u+w "$work/src"
  sed -i 's/"0\.0\.0\.0:%d"/"127.0.0.1:%d"/' "$work/src/$3"
  { cat "$dir/go.mod"; echo; echo "replace $2 => $work/src"; } > "$work/go.mod"
  cp "$dir/go.sum" "$work/go.sum"
  echo "$work/go.mod"
}
main() {
  # Argo Rollouts' controller serves metrics and healthz on 0.0.0.0 (a constant; its flags set
  # only the ports): build it with that constant bound to 127.0.0.1.
  local mf; mf=$(loopback_modfile argo-rollouts github.com/argoproj/argo-rollouts controller/controller.go)
  GOFLAGS="$GOFLAGS -modfile=$mf" \
  build_interop argo-rollouts rollouts-controller=github.com/argoproj/argo-rollouts/cmd/rollouts-controller kubectl-argo-rollouts=github.com/argoproj/argo-rollouts/cmd/kubectl-argo-rollouts
  # Argo Rollouts' CRDs, from the pinned module, beside its controller (the e2e test installs them).
  copy_crds argo-rollouts github.com/argoproj/argo-rollouts manifests/crds
  # Gateway API's HTTPRoute and Istio's CRDs (the e2e test installs HTTPRoute and VirtualService
  # in the control plane and the members).
  local gw is out=$bin/traffic-crds
  gw=$(module_dir traffic sigs.k8s.io/gateway-api)
  is=$(module_dir traffic istio.io/api)
  rm -rf "$out" && mkdir -p "$out"
  cp "$gw/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" "$out/"
  cp "$is/kubernetes/customresourcedefinitions.gen.yaml" "$out/istio.yaml"
  chmod -R u+w "$out"
  # INTEROP_TOOLS
  build_interop argocd argocd-check=.
}

main
