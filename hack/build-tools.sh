#!/usr/bin/env bash
# Builds the pinned tools of hack/tools into bin/ once; skips when the pins are unchanged.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin
mod=$root/hack/tools
mkdir -p "$bin"
export GONOSUMDB=${GONOSUMDB:-k8s.io,sigs.k8s.io} GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0

# The interop tools (hack/build-interop.sh) have stamps of their own, so a change there never
# rebuilds the Kubernetes components.
interop() { "$root/hack/build-interop.sh"; }

stamp=$bin/.tools-stamp
want=$(cat "$mod/go.mod" "$mod/go.sum" "$0" | sha256sum | cut -d' ' -f1)
tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok controller-gen applyconfiguration-gen)
have_all=1
for t in "${tools[@]}"; do [ -x "$bin/$t" ] || have_all=0; done
if [ "$have_all" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "tools: up to date in bin/ (pins unchanged)"
  interop
  exit 0
fi

kver=$(cd "$mod" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kver" | cut -d. -f2)
# Plain `go build` reports v0.0.0-master; stamp the real release so Cluster status shows it.
kflags=""
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kflags+=" -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  kflags+=" -X $p.buildDate=2026-01-01T00:00:00Z"
done

build() { # name package [ldflags]
  local t0=$SECONDS
  (cd "$mod" && go build -trimpath -ldflags "-s -w ${3:-}" -o "$bin/$1" "$2")
  printf 'tools: built %-24s in %4ds\n' "$1" $((SECONDS - t0))
}
total0=$SECONDS
build etcd go.etcd.io/etcd/server/v3
build kwok sigs.k8s.io/kwok/cmd/kwok "$kflags"
build controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen
build applyconfiguration-gen k8s.io/code-generator/cmd/applyconfiguration-gen
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kflags"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kflags"
# The README's commands use kubectl; the one of the same release as the control plane.
build kubectl k8s.io/kubernetes/cmd/kubectl "$kflags"

# kwok's stage definitions ship in its module; keep a copy beside the binaries.
kwokdir=$(cd "$mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
rm -rf "$bin/kwok-stages" && mkdir -p "$bin/kwok-stages"
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
         pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  cp "$kwokdir/kustomize/stage/$f" "$bin/kwok-stages/"
done
chmod -R u+w "$bin/kwok-stages"
echo "$want" > "$stamp"
interop
echo "tools: all built in $((SECONDS - total0))s"
