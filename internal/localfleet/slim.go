package localfleet

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// slimStages are the workload Stages of a slim member's kwok; see the file's header.
//
//go:embed slim-stages.yaml
var slimStages string

// slimAPIGroups are the API group versions a slim member serves (--runtime-config): what
// Flotilla reads and writes there (core, apps and batch workloads, RBAC and authentication for
// its identity, discovery, CRDs and APIServices it watches, events), what kwok needs (nodes and
// their leases) and the kinds templates commonly carry beside a workload (autoscaling, policy,
// networking, storage, scheduling, admission policies). Left out: DRA (resource.k8s.io),
// certificates, flowcontrol (priority and fairness is off), node (RuntimeClass), storage
// migration and the alpha and beta versions, none of which a slim member can act on.
var slimAPIGroups = []string{
	"v1", "apps/v1", "batch/v1", "autoscaling/v1", "autoscaling/v2", "policy/v1",
	"networking.k8s.io/v1", "discovery.k8s.io/v1", "events.k8s.io/v1",
	"rbac.authorization.k8s.io/v1", "coordination.k8s.io/v1",
	"authentication.k8s.io/v1", "authorization.k8s.io/v1",
	"apiextensions.k8s.io/v1", "apiregistration.k8s.io/v1", "admissionregistration.k8s.io/v1",
	"storage.k8s.io/v1", "scheduling.k8s.io/v1",
}

// slimAPIServerArgs make a member's kube-apiserver small: a member of a scale fleet serves one
// manager and its own kwok, not a cluster's worth of controllers and users. Each flag cuts
// memory or background load that a hundred apiservers on one etcd would multiply. The savings
// named are each flag's own, measured one after the other with `flotilla bench up --profile
// slim --members 10` (CPU seconds an apiserver spends from its start to the fleet's Ready).
func slimAPIServerArgs() []string {
	runtimeConfig := []string{"api/all=false"}
	for _, gv := range slimAPIGroups {
		runtimeConfig = append(runtimeConfig, gv+"=true")
	}
	return []string{
		// Lists and watches go to etcd: the per-resource caches (and their history) are most
		// of an idle apiserver's heap, and etcd serves a few watchers per member cheaply.
		"--watch-cache=false",
		// Plain in-flight limits instead of priority and fairness, which writes its dozen
		// bootstrap FlowSchemas and PriorityLevelConfigurations into every member and runs a
		// controller over them: 1.5 s less CPU per member start (4.9 to 3.4 s).
		"--enable-priority-and-fairness=false",
		"--max-requests-inflight=50", "--max-mutating-requests-inflight=25",
		// Only the groups above: each group's storage, OpenAPI and discovery are built at start
		// and its bootstrap objects written: 0.9 s less CPU per member start (3.4 to 2.5 s).
		"--runtime-config=" + strings.Join(runtimeConfig, ","),
		// No identity lease per apiserver (renewed every 10 s, a hundred members on one etcd)
		// and no proxy between apiservers of different versions, which watches those leases:
		// 0.4 s less CPU per member start (2.5 to 2.1 s) and a write every 0.1 s less at 100.
		"--feature-gates=APIServerIdentity=false,UnknownVersionInteroperabilityProxy=false",
		// With no kube-controller-manager nothing would remove the finalizers of a foreground
		// or orphan deletion: the apiserver deletes at once instead.
		"--enable-garbage-collector=false",
		// The control plane's apiserver and etcd's own periodic compaction keep the shared
		// etcd compacted; a hundred members polling object counts would be a steady load.
		"--etcd-compaction-interval=0", "--etcd-count-metric-poll-period=0", "--etcd-db-metric-poll-interval=0",
		// Admission that acts on pods, nodes, volumes and certificates only: none of them
		// exists on a slim member, and each plugin keeps informers of its own.
		"--disable-admission-plugins=" + strings.Join([]string{"ServiceAccount", "LimitRanger", "PodSecurity", "Priority",
			"TaintNodesByCondition", "DefaultTolerationSeconds", "RuntimeClass", "DefaultStorageClass",
			"StorageObjectInUseProtection", "PersistentVolumeClaimResize", "CertificateApproval", "CertificateSigning",
			"CertificateSubjectRestriction", "ClusterTrustBundleAttest", "DefaultIngressClass"}, ","),
	}
}

// slimAPIServerEnv holds a slim member's apiserver to a soft heap limit: idle, Go lets the heap
// grow to twice the live one before collecting; at the limit it collects sooner, which costs
// CPU only while the heap is near it (about 3 s more of a start, measured here). An idle slim
// apiserver lives on about 60 MiB of heap but keeps about 118 MiB: what its start allocated
// (OpenAPI documents of every type compiled in, whichever groups are served) and fragmented
// spans, under this limit. Measured and left: 96MiB keeps 20 MiB less but thrashes the start
// (12 s of CPU instead of 2.1); GOGC=50 changes nothing and GOGC=30 keeps 3 MiB less for
// 0.3 s more CPU.
var slimAPIServerEnv = []string{"GOMEMLIMIT=128MiB"}

// slimKwokEnv collects kwok's small heap (about 25 MiB) sooner: 3 MiB less RSS per kwok and no
// more CPU, measured; its supervisor, which inherits it, keeps less of its start too.
var slimKwokEnv = []string{"GOGC=50"}

// slimStagesPath is the kwok configuration of slim members with the given node count.
func (f *LocalFleet) slimStagesPath(nodes int) string {
	return filepath.Join(f.opts.StateDir, fmt.Sprintf("kwok-stages-slim-%dnodes.yaml", nodes))
}

// writeSlimKwokStages writes one kwok configuration per node count of the slim members: the
// node stages of the tools and the workload stages, DaemonSets counting that many nodes.
func (f *LocalFleet) writeSlimKwokStages() error {
	written := map[int]bool{}
	for _, m := range f.state.Fleet.Members {
		if !m.Slim() || written[m.Nodes] {
			continue
		}
		written[m.Nodes] = true
		var buf bytes.Buffer
		for _, s := range kwokNodeStages {
			data, err := os.ReadFile(filepath.Join(f.opts.BinDir, "kwok-stages", s))
			if err != nil {
				return err
			}
			buf.Write(data)
			buf.WriteString("\n---\n")
		}
		buf.Write(bytes.ReplaceAll([]byte(slimStages), []byte("__NODES__"), []byte(strconv.Itoa(m.Nodes))))
		if err := os.WriteFile(f.slimStagesPath(m.Nodes), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startSlimMember starts a slim member's kwok, its nodes and Flotilla's identity in it: no
// kube-controller-manager and no kube-scheduler.
func (f *LocalFleet) startSlimMember(ctx context.Context, m Member) error {
	kwok := f.proc(m.Name+"-kwok", "kwok")
	kwok.env = slimKwokEnv
	if !kwok.running() {
		// Node IPs only name the simulated nodes of this member; no pod ever gets an IP here.
		// kwok renews each node's lease every quarter of its duration: a full member's 10 s
		// (pods come back soon after a kwok restart) was 80 lease writes a second across 100
		// slim members with two nodes each, most of an idle scale fleet's load on its
		// apiservers and etcd. A slim member has no pods and nothing that reads the leases,
		// so it takes the kubelet's default.
		if err := kwok.start("--kubeconfig="+f.Kubeconfig(m.Name), "--config="+f.slimStagesPath(m.Nodes),
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-ip=10.0.0.1", "--cidr=10.128.0.0/16", "--node-lease-duration-seconds=40"); err != nil {
			return err
		}
		f.out.linef("  %-36s started", kwok.name)
	}
	return f.finishMember(ctx, m)
}
