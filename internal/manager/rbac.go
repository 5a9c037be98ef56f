package manager

// The manager's own rights beside its controllers' (each controller's markers are beside its
// Reconcile); `make generate` writes them all to config/rbac/role.yaml. Templates' kinds are
// granted apart, through the aggregated role in config/rbac/templates.yaml.

// Leader election: a Lease in flotilla-system, and events when leadership changes.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=flotilla-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// Events on Flotilla's objects (events.k8s.io; leader election still writes core events).
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;update
// The metrics endpoint, the inventory API and the dashboard authenticate callers by their
// bearer token and ask the control plane whether they may read.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// History asks the audit webhook's heartbeat whether the audit stream is alive.
// +kubebuilder:rbac:groups="",namespace=flotilla-system,resources=configmaps,verbs=get;list;watch
// The inventory and history read the whole of Flotilla's state.
// +kubebuilder:rbac:groups=cluster.flotilla.dev,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=work.flotilla.dev,resources=resourcebindings;clusterresourcebindings;works,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.flotilla.dev,resources=propagationpolicies;clusterpropagationpolicies;overridepolicies;clusteroverridepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=rollout.flotilla.dev,resources=releases;analysisruns;analysistemplates;clusteranalysistemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.flotilla.dev,resources=applications;targetpolicies;clustertargetpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=tenancy.flotilla.dev,resources=teams,verbs=get;list;watch
// +kubebuilder:rbac:groups=config.flotilla.dev,resources=resourceinterpretercustomizations,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch
// Failover taints a Cluster that stays unready (spec.taints).
// +kubebuilder:rbac:groups=cluster.flotilla.dev,resources=clusters,verbs=get;list;watch;update;patch
