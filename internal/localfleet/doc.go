// Package localfleet runs a fleet of real Kubernetes clusters on one machine: one etcd, the
// control-plane kube-apiserver (with a kube-controller-manager limited to the namespace,
// garbage-collector and service-account controllers, so no workload runs in the control plane)
// and, per member, a kube-apiserver, kube-controller-manager, kube-scheduler and kwok that
// simulates nodes and pods. `flotilla up` and every end-to-end test start fleets through it.
//
// A member of the slim profile (for scale work) runs only a kube-apiserver made small (no
// watch cache, a soft heap limit, no pod/node admission, only the API groups it needs) and
// kwok, whose Stages write the status the workload controllers would (slim-stages.yaml): about
// a third of a full member's memory, at the price of no pods, no failing rollouts and no kinds
// of other API groups. See docs/install.md for figures.
//
// It owns the state directory (fleet definition, chosen ports, PKI, kubeconfigs, pid files and
// logs) and the processes it starts; it stops only processes whose pid file it wrote and whose
// command line still names the binary it started.
//
// Every component runs under its own supervisor (`flotilla supervise`, a hidden command of the
// same binary), which starts it again whenever it exits, whatever the exit status, with a
// backoff of 1s doubling to 30s (back to 1s after a minute of running), and records its own pid,
// the component's pid and the restarts (count, last exit and when) in pids/. So the
// controller-manager, which exits when it loses its leadership during a control-plane outage,
// comes back and elects itself again once the control plane answers. A deliberate stop (`down`,
// `fleet stop`, the tests' StopComponent) signals the supervisor, which forwards the signal and
// does not restart; a supervisor is recognised by its command line (component and state
// directory), so `down` still stops exactly what `up` started. In a real install restarting is
// the hosting system's job: the controller-manager's Deployment (restartPolicy Always, with
// the kubelet's CrashLoopBackOff) or a systemd unit with Restart=always; the controller-manager
// itself does not retry a lost election in-process. It must not talk to Flotilla's APIs beyond
// installing the CRDs and starting the controller-manager binary it is given: joining members
// belongs to the registration package.
//
// Trade-off: members share the one etcd (each apiserver under its own prefix) and etcd runs
// without fsync. That halves memory and start time; a machine crash can lose the last writes of
// a local fleet, which is acceptable for a development and test bed and not for production.
package localfleet
