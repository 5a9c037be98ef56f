// Package clustercache owns every connection Flotilla makes to member clusters: the REST
// config, the typed and dynamic clients, the member-side informers, and the health probe of
// each member. Every controller that reads or writes a member goes through it, so credentials,
// timeouts and health live in one place.
//
// Each member has its own probe goroutine with a bounded per-probe timeout: a member that
// hangs delays only its own probe, never another member's or a controller's queue. After each
// probe the cache sends a generic event for the Cluster, and the cluster controller turns the
// member's Health into status; the cache itself never writes to the control plane.
//
// Health is a small state machine (see nextHealth): a member becomes not Ready only after
// FailureThreshold consecutive failed probes, and Ready again on the first success. Discovery,
// the costliest call, is read on recovery, about a second after a CRD or APIService changes in
// the member (a metadata-only watch; at most one such read per 5 s), and otherwise every
// DiscoveryInterval (5m by default; 30 s while the watch has not listed, e.g. credentials that
// may not list CRDs), so a CRD installed in a member becomes schedulable within seconds.
// Node and pod informers (pods stripped to what the resource summary needs) feed the node
// count and the allocatable-versus-requested summary without listing on every probe.
// The member object informers keep each object as the JSON it was decoded from (compact.go):
// a quarter of the memory of the decoded maps, for a decode on each read.
package clustercache
