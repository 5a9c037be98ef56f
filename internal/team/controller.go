// Package team keeps each team's namespace of the control plane in step with its Team: two
// RoleBindings, its contributor groups to the flotilla-contributor ClusterRole and its reader
// groups to flotilla-reader. Kubernetes RBAC grants nothing else, so no team gets anything in
// another team's namespace.
//
// It writes only those two RoleBindings (owned by the Team, so they go with it) and the Team's
// status; it never touches members, and never grants more than the two ClusterRoles. Groups that
// mean everyone or bypass authorization (tenancyv1alpha1.NeverBoundGroups) are never bound:
// admission refuses them, and a Team stored before that rule gets its other groups bound and
// Ready=False naming the field to fix.
package team

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/kube"
)

// Controller reconciles Teams into RoleBindings.
type Controller struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// SetupWithManager registers the controller; a RoleBinding changed or deleted by hand is put
// back.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("team").
		For(&tenancyv1alpha1.Team{}).
		Owns(&rbacv1.RoleBinding{}).
		Complete(kube.RequeueConflicts(c))
}

// roleBindings are what the Team grants in its namespace, and what it asks for but never gets:
// one message per group of NeverBoundGroups, naming its field.
func roleBindings(t *tenancyv1alpha1.Team) (bindings []*rbacv1.RoleBinding, refused []string) {
	rb := func(name, role, field string, groups []string) *rbacv1.RoleBinding {
		b := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name, Labels: map[string]string{"tenancy.flotilla.dev/team": t.Namespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		}
		for i, g := range groups {
			if why := tenancyv1alpha1.WhyNeverBound(g); why != "" {
				refused = append(refused, fmt.Sprintf("spec.%s[%d]: %s is %s and is never bound; remove it and name the team's own groups", field, i, g, why))
			}
		}
		for _, g := range slices.Sorted(slices.Values(groups)) {
			if tenancyv1alpha1.WhyNeverBound(g) == "" {
				b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: g})
			}
		}
		return b
	}
	return []*rbacv1.RoleBinding{
		rb(tenancyv1alpha1.ContributorRoleBinding, tenancyv1alpha1.ContributorClusterRole, "contributors", t.Spec.Contributors),
		rb(tenancyv1alpha1.ReaderRoleBinding, tenancyv1alpha1.ReaderClusterRole, "readers", t.Spec.Readers),
	}, refused
}

// Teams become two RoleBindings in their namespace, to the two roles a Team grants; bind is
// allowed on those two roles only.
// +kubebuilder:rbac:groups=tenancy.flotilla.dev,resources=teams,verbs=get;list;watch
// +kubebuilder:rbac:groups=tenancy.flotilla.dev,resources=teams/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=flotilla-contributor;flotilla-reader

// Reconcile writes the Team's RoleBindings when they differ, and its Ready condition.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &tenancyv1alpha1.Team{}
	if err := c.Client.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // its RoleBindings go with it (owner references)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	bindings, refused := roleBindings(t)
	cond := metav1.Condition{Type: tenancyv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: tenancyv1alpha1.ReasonRoleBindingsInSync,
		Message:            fmt.Sprintf("%d contributor and %d reader groups bound in namespace %s", len(bindings[0].Subjects), len(bindings[1].Subjects), t.Namespace),
		ObservedGeneration: t.Generation}
	if len(refused) > 0 {
		// The other groups are bound all the same: the team keeps working while it fixes its spec.
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, tenancyv1alpha1.ReasonGroupNeverBound, strings.Join(refused, "; ")
	}
	var syncErr error
	for _, want := range bindings {
		if err := c.ensure(ctx, t, want); err != nil {
			syncErr = err
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, tenancyv1alpha1.ReasonRoleBindingsFailed, err.Error()
			break
		}
	}
	status := t.Status.DeepCopy()
	status.ObservedGeneration = t.Generation
	changed := meta.SetStatusCondition(&status.Conditions, cond)
	if changed || status.ObservedGeneration != t.Status.ObservedGeneration {
		patch := client.MergeFrom(t.DeepCopy())
		t.Status = *status
		if err := c.Client.Status().Patch(ctx, t, patch); err != nil {
			return ctrl.Result{}, err
		}
		if c.Recorder != nil && cond.Status == metav1.ConditionFalse {
			c.Recorder.Eventf(t, nil, corev1.EventTypeWarning, cond.Reason, "Sync", "%s", cond.Message)
		}
	}
	return ctrl.Result{}, syncErr
}

// ensure creates or corrects one RoleBinding. A roleRef cannot change, so a RoleBinding of
// that name bound to another role is replaced.
func (c *Controller) ensure(ctx context.Context, t *tenancyv1alpha1.Team, want *rbacv1.RoleBinding) error {
	if err := controllerutil.SetControllerReference(t, want, c.Client.Scheme()); err != nil {
		return err
	}
	got := &rbacv1.RoleBinding{}
	err := c.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := c.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("creating RoleBinding %s/%s: %w", want.Namespace, want.Name, err)
		}
		return nil
	case err != nil:
		return err
	}
	if got.RoleRef != want.RoleRef {
		if err := c.Client.Delete(ctx, got); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing RoleBinding %s/%s bound to %s: %w", got.Namespace, got.Name, got.RoleRef.Name, err)
		}
		return c.Client.Create(ctx, want)
	}
	if apiequality.Semantic.DeepEqual(got.Subjects, want.Subjects) && apiequality.Semantic.DeepEqual(got.Labels, want.Labels) &&
		apiequality.Semantic.DeepEqual(got.OwnerReferences, want.OwnerReferences) {
		return nil
	}
	got.Subjects, got.Labels, got.OwnerReferences = want.Subjects, want.Labels, want.OwnerReferences
	if err := c.Client.Update(ctx, got); err != nil {
		return fmt.Errorf("updating RoleBinding %s/%s: %w", got.Namespace, got.Name, err)
	}
	return nil
}
