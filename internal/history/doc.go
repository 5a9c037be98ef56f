// Package history stores the deployment history of the fleet: one record for every change of
// what runs in a member cluster (a release wave, a rollback, a failover, a suspend, ...), and
// answers queries over it per application, per cluster and fleet-wide.
//
// It owns the records' schema and its migrations, appends (idempotent by record ID), keyset
// paged queries, the newest record per template and cluster, and retention. One DSN chooses
// the backend: SQLite for a single control-plane replica, PostgreSQL for several.
//
// It does not talk to Kubernetes, decide what a record says (its producers do) or authorize
// anyone: callers pass the control-plane namespaces a user may read as Filter.Namespaces.
package history
