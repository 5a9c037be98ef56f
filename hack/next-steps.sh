#!/usr/bin/env bash
# Printed at the end of `make demo`.
cat <<'MSG'

The local fleet is up and its members are Ready. Try next:
  export KUBECONFIG=$(bin/flotilla kubeconfig)        # the control plane, for bin/kubectl (or yours)
  bin/kubectl get clusters -o wide                    # the same table as bin/flotilla get clusters
  bin/flotilla status                                 # processes, memory, readiness
  bin/flotilla fleet stop west                        # a member goes away...
  bin/kubectl get clusters -w                         # ...and turns NotReady within ~30s
  bin/flotilla fleet start west                       # and comes back
  bin/kubectl --kubeconfig $(bin/flotilla kubeconfig east) get nodes
  bin/kubectl apply -f examples/propagation/shop.yaml # propagate an app (see its README)
  bin/flotilla release get deployment/shop -n demo    # the demo's last release, as a tree
  bin/kubectl -n demo set image deployment/shop shop=registry.example/shop:2.0-bad
  bin/flotilla release watch deployment/shop -n demo  # watch analysis roll it back
  bin/flotilla dashboard                              # the web dashboard: open the link it prints
  bin/flotilla down                                   # stop everything (data kept; --purge removes it)
MSG
