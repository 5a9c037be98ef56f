// Package registration joins member clusters to the control plane and removes them: it
// validates a member (reachable, credentials accepted) before it writes anything, then stores
// the credentials Secret and the Cluster together, undoing the Secret when the Cluster cannot
// be written. It also joins the members of a local fleet and waits for them to be Ready.
//
// By default join uses the given (admin) kubeconfig once, to create Flotilla's own identity in
// the member (a ServiceAccount bound to the flotilla:agent ClusterRole), and stores only a token
// of it; anything it created in the member is removed again when a later step fails. Unjoin
// removes that identity with the token itself. The trade-off: join needs rights to manage RBAC
// in the member, in exchange the control plane never holds an admin credential; with
// --credentials as-given it stores an identity the platform made instead.
//
// It must not probe members after joining (the cluster controller and clustercache own health,
// and the cluster controller renews the token) and touches nothing in a member but the identity.
package registration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1alpha1 "github.com/flotilla-dev/flotilla/api/cluster/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// ClusterNameLabel marks the credentials Secret with the name of its Cluster.
const ClusterNameLabel = "cluster.flotilla.dev/name"

// JoinOptions describe a member to join.
type JoinOptions struct {
	// Name of the Cluster, a DNS label.
	Name string
	// Kubeconfig for the member; loaded from a file so relative certificate paths resolve.
	Kubeconfig *clientcmdapi.Config
	// Context in the kubeconfig; empty means its current context.
	Context string
	// Labels of the Cluster (region, zone, env, ...).
	Labels map[string]string
	// Description, ShortName and Environment are the Cluster's metadata for people (spec);
	// empty keeps what an overwritten Cluster has.
	Description, ShortName, Environment string
	// Overwrite replaces an existing Cluster's endpoint, credentials and labels.
	Overwrite bool
	// Timeout bounds contacting the member; 10s when zero.
	Timeout time.Duration
	// AllowExecPlugins names the exec credential plugins (command base names) the platform
	// allows in member kubeconfigs; none by default.
	AllowExecPlugins []string
	// Warn receives warnings about the credentials (an admin identity); nil says nothing.
	Warn io.Writer
	// Credentials says what is stored: empty or CredentialsServiceAccount creates Flotilla's
	// identity in the member; CredentialsAsGiven stores Kubeconfig itself.
	Credentials CredentialsMode
	// TokenTTL is the life asked for the identity's token; DefaultTokenTTL when zero.
	TokenTTL time.Duration
	// DryRun prints to Out what would be created, in the member and the control plane, and
	// writes nothing anywhere.
	DryRun bool
	Out    io.Writer
}

func (o JoinOptions) timeout() time.Duration {
	if o.Timeout == 0 {
		return 10 * time.Second
	}
	return o.Timeout
}

func (o JoinOptions) tokenTTL() time.Duration {
	if o.TokenTTL == 0 {
		return DefaultTokenTTL
	}
	return o.TokenTTL
}

func (o JoinOptions) credentials() CredentialsMode {
	if o.Credentials == "" {
		return CredentialsServiceAccount
	}
	return o.Credentials
}

func (o JoinOptions) validate() error {
	switch o.credentials() {
	case CredentialsServiceAccount, CredentialsAsGiven:
	default:
		return fmt.Errorf("--credentials %q: use %s (create Flotilla's identity in the member and store only its token) or %s (store the kubeconfig given)", o.Credentials, CredentialsServiceAccount, CredentialsAsGiven)
	}
	if o.TokenTTL != 0 && o.TokenTTL < kube.MinTokenTTL {
		return fmt.Errorf("--token-ttl %s: the API server issues tokens of at least %s; give %s or more", o.TokenTTL, kube.MinTokenTTL, kube.MinTokenTTL)
	}
	return nil
}

// Join validates the member and then writes its credentials Secret and Cluster. When it fails,
// the control plane holds what it held before, and the member too.
func Join(ctx context.Context, c client.Client, o JoinOptions) (*clusterv1alpha1.Cluster, error) {
	if err := validateName(o.Name); err != nil {
		return nil, err
	}
	if err := validateLabels(o.Labels); err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	creds, kc, cfg, err := memberCredentials(o)
	if err != nil {
		return nil, err
	}
	// Only stored admin credentials are worth a warning: the default mode uses them once.
	warnAdmin := o.Warn
	if o.credentials() != CredentialsAsGiven {
		warnAdmin = nil
	}
	if err := checkMember(ctx, o.Name, cfg, o.Timeout, warnAdmin); err != nil {
		return nil, err
	}

	if errs := validation.IsDNS1123Label(o.Environment); o.Environment != "" && len(errs) > 0 {
		return nil, fmt.Errorf("--environment %q: %s", o.Environment, strings.Join(errs, "; "))
	}
	if len(o.Description) > 1024 {
		return nil, fmt.Errorf("--description: %d characters, at most 1024", len(o.Description))
	}
	if err := checkShortName(ctx, c, o.Name, o.ShortName); err != nil {
		return nil, err
	}
	existing := &clusterv1alpha1.Cluster{}
	switch err := c.Get(ctx, client.ObjectKey{Name: o.Name}, existing); {
	case err == nil && !o.Overwrite:
		return nil, fmt.Errorf("cluster %q is already joined (endpoint %s): pass --overwrite to replace its endpoint, credentials and labels, or unjoin it first", o.Name, existing.Spec.Endpoint)
	case err == nil:
	case apierrors.IsNotFound(err):
		existing = nil
	default:
		return nil, fmt.Errorf("reading cluster %q: %w", o.Name, err)
	}
	if o.DryRun {
		if err := printPlan(ctx, o, cfg, existing != nil, o.Out); err != nil {
			return nil, err
		}
		return &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: o.Labels}, Spec: clusterv1alpha1.ClusterSpec{Endpoint: cfg.Host}}, nil
	}

	var annotations map[string]string
	undoMember := func() {}
	if o.credentials() == CredentialsServiceAccount {
		var token kube.AgentToken
		if creds, token, undoMember, err = createIdentity(ctx, o, kc, cfg); err != nil {
			return nil, err
		}
		annotations = token.Annotations()
	}
	cluster, err := writeControlPlane(ctx, c, o, existing, cfg.Host, creds, annotations)
	if err != nil {
		undoMember()
		return nil, err
	}
	return cluster, nil
}

// writeControlPlane stores the Secret and the Cluster, or leaves the control plane as it was.
func writeControlPlane(ctx context.Context, c client.Client, o JoinOptions, existing *clusterv1alpha1.Cluster, endpoint string, creds []byte, annotations map[string]string) (*clusterv1alpha1.Cluster, error) {
	if err := ensureNamespace(ctx, c); err != nil {
		return nil, err
	}
	secret, previous, err := writeSecret(ctx, c, o.Name, creds, annotations)
	if err != nil {
		return nil, err
	}
	cluster, err := writeCluster(ctx, c, existing, o, endpoint, secret)
	if err != nil {
		// Put the Secret back as it was, so a failed join leaves nothing half-written.
		if previous == nil {
			_ = c.Delete(context.WithoutCancel(ctx), secret)
		} else {
			_ = c.Update(context.WithoutCancel(ctx), secretWith(secret, previous))
		}
		return nil, err
	}
	// The Cluster owns its Secret: the control plane's garbage collector removes the Secret
	// if someone deletes the Cluster with kubectl.
	patch := client.MergeFrom(secret.DeepCopy())
	secret.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: clusterv1alpha1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
	}}
	if err := c.Patch(ctx, secret, patch); err != nil {
		return nil, fmt.Errorf("linking secret %s/%s to cluster %q: %w", secret.Namespace, secret.Name, o.Name, err)
	}
	return cluster, nil
}

func secretWith(s, previous *corev1.Secret) *corev1.Secret {
	out := s.DeepCopy()
	out.Data, out.Annotations = previous.Data, previous.Annotations
	return out
}

func validateName(name string) error {
	if name == "" {
		return errors.New("cluster name is empty: give the member a DNS-label name such as east-1")
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("cluster name %q: %s", name, msgs[0])
	}
	return nil
}

func validateLabels(labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return fmt.Errorf("label key %q: %s", k, msgs[0])
		}
		if msgs := validation.IsValidLabelValue(labels[k]); len(msgs) > 0 {
			return fmt.Errorf("label %q value %q: %s", k, labels[k], msgs[0])
		}
	}
	return nil
}

// memberCredentials reduces the kubeconfig to the chosen context with every file inlined, so the
// stored Secret stands on its own.
func memberCredentials(o JoinOptions) ([]byte, *clientcmdapi.Config, *rest.Config, error) {
	if o.Kubeconfig == nil {
		return nil, nil, nil, errors.New("kubeconfig is empty: pass --kubeconfig with the member's kubeconfig file")
	}
	kc := o.Kubeconfig.DeepCopy()
	if o.Context != "" {
		if _, ok := kc.Contexts[o.Context]; !ok {
			return nil, nil, nil, fmt.Errorf("--context %q is not in the kubeconfig (contexts: %v)", o.Context, slices.Sorted(maps.Keys(kc.Contexts)))
		}
		kc.CurrentContext = o.Context
	}
	if kc.CurrentContext == "" {
		return nil, nil, nil, fmt.Errorf("the kubeconfig has no current context: pass --context (contexts: %v)", slices.Sorted(maps.Keys(kc.Contexts)))
	}
	if err := clientcmdapi.MinifyConfig(kc); err != nil {
		return nil, nil, nil, fmt.Errorf("kubeconfig context %q: %w", kc.CurrentContext, err)
	}
	if err := clientcmdapi.FlattenConfig(kc); err != nil {
		return nil, nil, nil, fmt.Errorf("kubeconfig context %q: reading its certificate files: %w", kc.CurrentContext, err)
	}
	// Before anything contacts the member: an exec plugin would run right here, and later in
	// the controller-manager.
	if err := kube.CheckMemberCredentials(kc, o.AllowExecPlugins); err != nil {
		return nil, nil, nil, fmt.Errorf("kubeconfig context %q: %w", kc.CurrentContext, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kubeconfig context %q: %w", kc.CurrentContext, err)
	}
	if cfg.Host == "" {
		return nil, nil, nil, fmt.Errorf("kubeconfig context %q has no server URL", kc.CurrentContext)
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, nil, nil, err
	}
	return data, kc, cfg, nil
}

// checkMember proves the member answers and accepts the credentials before anything is written.
func checkMember(ctx context.Context, name string, cfg *rest.Config, timeout time.Duration, warn io.Writer) error {
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("cluster %q: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("cluster %q: cannot reach the API server at %s: %v; check the kubeconfig's server URL and that the cluster is up", name, cfg.Host, err)
	}
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("cluster %q: the API server at %s refused the kubeconfig's credentials: %v; use credentials that may manage the cluster", name, cfg.Host, err)
	}
	if warn != nil {
		// Checked, not refused: a platform may knowingly use an admin identity.
		if r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); err == nil &&
			slices.Contains(r.Status.UserInfo.Groups, "system:masters") {
			fmt.Fprintf(warn, "warning: cluster %q: these credentials (%s) are in system:masters, which bypasses RBAC there; join with an identity of Flotilla's own bound to the flotilla:agent ClusterRole (docs/install.md: Member credentials are data)\n", name, r.Status.UserInfo.Username)
		}
	}
	return nil
}

func ensureNamespace(ctx context.Context, c client.Client) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kube.SystemNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", kube.SystemNamespace, err)
	}
	return nil
}

// SecretName is the name of a cluster's credentials Secret.
func SecretName(cluster string) string { return "cluster-" + cluster + "-credentials" }

// writeSecret creates or updates the credentials Secret and returns the Secret as it was before.
// annotations replace the identity annotations the Secret had: none for credentials as given.
func writeSecret(ctx context.Context, c client.Client, name string, creds []byte, annotations map[string]string) (*corev1.Secret, *corev1.Secret, error) {
	key := client.ObjectKey{Namespace: kube.SystemNamespace, Name: SecretName(name)}
	secret := &corev1.Secret{}
	err := c.Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{ClusterNameLabel: name}, Annotations: annotations},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{clusterv1alpha1.CredentialsSecretKey: creds},
		}
		if err := c.Create(ctx, secret); err != nil {
			return nil, nil, fmt.Errorf("storing credentials secret %s: %w", key, err)
		}
		return secret, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("reading credentials secret %s: %w", key, err)
	}
	previous := secret.DeepCopy()
	secret.Data = map[string][]byte{clusterv1alpha1.CredentialsSecretKey: creds}
	if secret.Labels == nil {
		secret.Labels = map[string]string{}
	}
	secret.Labels[ClusterNameLabel] = name
	for _, k := range []string{kube.IdentityAnnotation, kube.TokenIssuedAtAnnotation, kube.TokenExpiresAtAnnotation} {
		delete(secret.Annotations, k)
	}
	if len(annotations) > 0 && secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	maps.Copy(secret.Annotations, annotations)
	if err := c.Update(ctx, secret); err != nil {
		return nil, nil, fmt.Errorf("storing credentials secret %s: %w", key, err)
	}
	return secret, previous, nil
}

func writeCluster(ctx context.Context, c client.Client, existing *clusterv1alpha1.Cluster, o JoinOptions, endpoint string, secret *corev1.Secret) (*clusterv1alpha1.Cluster, error) {
	spec := clusterv1alpha1.ClusterSpec{
		Endpoint:             endpoint,
		CredentialsSecretRef: clusterv1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name},
		SyncMode:             clusterv1alpha1.SyncModePush,
		Description:          o.Description, ShortName: o.ShortName, Environment: o.Environment,
	}
	if existing == nil {
		cluster := &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: o.Labels}, Spec: spec}
		if err := c.Create(ctx, cluster); err != nil {
			return nil, fmt.Errorf("creating cluster %q: %w", o.Name, err)
		}
		return cluster, nil
	}
	// The controller-manager writes the Cluster too (its status and finalizer, as soon as a
	// re-run of up starts it): a conflict reads the Cluster again and keeps what it holds.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := spec
		s.Taints, s.DeletionPolicy = existing.Spec.Taints, existing.Spec.DeletionPolicy
		for _, f := range []struct {
			to   *string
			from string
		}{
			{&s.Description, existing.Spec.Description}, {&s.ShortName, existing.Spec.ShortName}, {&s.Environment, existing.Spec.Environment},
		} {
			if *f.to == "" {
				*f.to = f.from
			}
		}
		existing.Spec = s
		existing.Labels = o.Labels
		err := c.Update(ctx, existing)
		if apierrors.IsConflict(err) {
			if gerr := c.Get(ctx, client.ObjectKeyFromObject(existing), existing); gerr != nil {
				return gerr
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("updating cluster %q: %w", o.Name, err)
	}
	return existing, nil
}

// Unjoin deletes the Cluster and its credentials Secret. When join made the member's identity,
// it is removed from the member after the drain, best-effort: an unreachable member is warned
// about, not an error.
func Unjoin(ctx context.Context, c client.Client, name string, o UnjoinOptions) error {
	cluster := &clusterv1alpha1.Cluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("cluster %q is not joined", name)
		}
		return err
	}
	// Read now: the control plane's garbage collector deletes the Secret with the Cluster.
	ref := cluster.Spec.CredentialsSecretRef
	stored := &corev1.Secret{}
	var identity []byte
	if ref.Name != "" { // a Pull member has none: the control plane holds no credentials to it
		if err := c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, stored); err == nil {
			identity = identityOf(stored)
		}
	}
	if o.Objects != "" && o.Objects != cluster.Spec.DeletionPolicy {
		patch := client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.DeletionPolicy = o.Objects
		if err := c.Patch(ctx, cluster, patch); err != nil {
			return fmt.Errorf("setting deletionPolicy %s on cluster %q: %w", o.Objects, name, err)
		}
	}
	if err := c.Delete(ctx, cluster); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting cluster %q: %w", name, err)
	}
	if o.Wait > 0 {
		// The controller-manager drains the cluster's Works first (the finalizer holds it).
		deadline := time.Now().Add(o.Wait)
		said := ""
		for {
			err := c.Get(ctx, client.ObjectKey{Name: name}, &clusterv1alpha1.Cluster{})
			if apierrors.IsNotFound(err) {
				break
			}
			// The controller-manager drains the Works in its memory and counts them on the Cluster.
			left := "its Works"
			cur := &clusterv1alpha1.Cluster{}
			if c.Get(ctx, client.ObjectKey{Name: name}, cur) == nil {
				if d := meta.FindStatusCondition(cur.Status.Conditions, clusterv1alpha1.ConditionDraining); d != nil {
					left = d.Message
					if left != said && o.Progress != nil {
						fmt.Fprintf(o.Progress, "cluster/%s: %s\n", name, left)
					}
					said = left
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster %q is still draining after %s (%s; is the controller-manager running? `kubectl get cluster %s -o yaml` shows its Draining condition); it goes, and its credentials Secret with it, once they are drained", name, o.Wait, left, name)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}}
	if ref.Name == "" {
		return nil
	}
	if err := c.Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting credentials secret %s/%s of cluster %q: %w", ref.Namespace, ref.Name, name, err)
	}
	if identity != nil {
		unjoinIdentity(ctx, c, cluster, identity, o)
	}
	return nil
}

// unjoinIdentity removes the identity join made in the member, or says why it stays.
func unjoinIdentity(ctx context.Context, c client.Client, cluster *clusterv1alpha1.Cluster, kubeconfig []byte, o UnjoinOptions) {
	warn := o.Warn
	if warn == nil {
		warn = io.Discard
	}
	keep := func(why string) {
		fmt.Fprintf(warn, "warning: cluster %q: Flotilla's identity stays in the member (ClusterRoleBinding and ClusterRole %s, ServiceAccount %s/%s): %s\n",
			cluster.Name, kube.AgentRoleName, kube.SystemNamespace, kube.AgentServiceAccount, why)
	}
	if o.Wait == 0 {
		// The drain still needs the identity to delete or release the member's objects.
		keep("--wait 0 returns before the drain, which uses it; delete ClusterRoleBinding " + kube.AgentRoleName + " in the member once the Cluster is gone")
		return
	}
	if other := sharedIdentity(ctx, c, cluster); other != "" {
		keep("cluster " + other + " has the same endpoint and uses it")
		return
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		keep("the stored kubeconfig is unusable: " + err.Error())
		return
	}
	cfg.Timeout = 10 * time.Second
	removed, err := removeIdentity(ctx, cfg)
	if err != nil {
		keep(fmt.Sprintf("%v (is the member at %s reachable?); remove them with the member's admin kubeconfig", err, cluster.Spec.Endpoint))
		return
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "cluster/%s: removed from the member: %s\n", cluster.Name, strings.Join(removed, ", "))
	}
}

// sharedIdentity names another Cluster of this control plane joined to the same member with an
// identity Flotilla made: the ServiceAccount is one per member, so it must stay.
func sharedIdentity(ctx context.Context, c client.Client, cluster *clusterv1alpha1.Cluster) string {
	list := &clusterv1alpha1.ClusterList{}
	if err := c.List(ctx, list); err != nil {
		return ""
	}
	for _, o := range list.Items {
		if o.Name == cluster.Name || o.Spec.Endpoint != cluster.Spec.Endpoint {
			continue
		}
		s := &corev1.Secret{}
		ref := o.Spec.CredentialsSecretRef
		if c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, s) == nil && identityOf(s) != nil {
			return o.Name
		}
	}
	return ""
}

// UnjoinOptions say what unjoining does to the member's objects and whether to wait.
type UnjoinOptions struct {
	// Objects sets the Cluster's deletionPolicy before deleting it; empty keeps the policy
	// the Cluster has (Orphan when unset: the member's objects stay).
	Objects clusterv1alpha1.ClusterDeletionPolicy
	// Wait bounds waiting for the Cluster's Works to drain; 0 does not wait.
	Wait time.Duration
	// Progress receives a line each time the count of Works left changes, and what was
	// removed from the member.
	Progress io.Writer
	// Warn receives why Flotilla's identity stays in the member; nil says nothing.
	Warn io.Writer
}

// WaitReady waits until every named Cluster is Ready, calling onReady once per cluster as it
// becomes Ready. The error names the clusters that are not.
func WaitReady(ctx context.Context, c client.Client, names []string, timeout time.Duration, onReady func(*clusterv1alpha1.Cluster)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending := map[string]string{}
	for _, n := range names {
		pending[n] = "not probed yet"
	}
	for {
		for _, n := range slices.Sorted(maps.Keys(pending)) {
			cl := &clusterv1alpha1.Cluster{}
			if err := c.Get(ctx, client.ObjectKey{Name: n}, cl); err != nil {
				pending[n] = err.Error()
				continue
			}
			cond := meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ConditionReady)
			if cond != nil && cond.Status == metav1.ConditionTrue && cl.Status.NodeSummary != nil {
				delete(pending, n)
				if onReady != nil {
					onReady(cl)
				}
			} else if cond != nil {
				pending[n] = cond.Reason + ": " + cond.Message
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			var msgs []string
			for _, n := range slices.Sorted(maps.Keys(pending)) {
				msgs = append(msgs, fmt.Sprintf("%s (%s)", n, pending[n]))
			}
			sort.Strings(msgs)
			return fmt.Errorf("clusters not Ready after %s: %v", timeout, msgs)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// checkShortName refuses a shortName another cluster has: it names clusters in tables and
// dashboards, so it must be unique in the fleet.
func checkShortName(ctx context.Context, c client.Client, name, short string) error {
	if short == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(short); len(errs) > 0 {
		return fmt.Errorf("--short-name %q: %s", short, strings.Join(errs, "; "))
	}
	list := &clusterv1alpha1.ClusterList{}
	if err := c.List(ctx, list); err != nil {
		return fmt.Errorf("checking --short-name %s: %w", short, err)
	}
	for _, o := range list.Items {
		if o.Name != name && o.Spec.ShortName == short {
			return fmt.Errorf("--short-name %s: cluster %s has it already; short names are unique in the fleet", short, o.Name)
		}
	}
	return nil
}
