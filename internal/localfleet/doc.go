// Package localfleet runs a fleet of real Kubernetes clusters on one machine: one etcd, the
// control-plane kube-apiserver (with a kube-controller-manager limited to the namespace,
// garbage-collector and service-account controllers, so no workload runs in the control plane)
// and, per member, a kube-apiserver, kube-controller-manager, kube-scheduler and kwok that
// simulates nodes and pods. `flotilla up` and every end-to-end test start fleets through it.
//
// It owns the state directory (fleet definition, chosen ports, PKI, kubeconfigs, pid files and
// logs) and the processes it starts; it stops only processes whose pid file it wrote and whose
// command line still names the binary it started. It must not talk to Flotilla's APIs beyond
// installing the CRDs and starting the controller-manager binary it is given: joining members
// belongs to the registration package.
//
// Trade-off: members share the one etcd (each apiserver under its own prefix) and etcd runs
// without fsync. That halves memory and start time; a machine crash can lose the last writes of
// a local fleet, which is acceptable for a development and test bed and not for production.
package localfleet
