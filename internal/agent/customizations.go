package agent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/pull"
)

// loadCustomizations reads the platform's customizations from the control plane and puts them
// in force in reg, as the controller-manager's do (a version that does not compile keeps the
// last one that did); those no longer there are removed.
func (a *Agent) loadCustomizations(ctx context.Context, reg *interpret.Registry, loaded map[string]bool) error {
	a.customizationsMu.Lock()
	defer a.customizationsMu.Unlock()
	list := &configv1alpha1.ResourceInterpreterCustomizationList{}
	if err := a.get(ctx, pull.CustomizationsPath, list); err != nil {
		return fmt.Errorf("reading the customizations: %w", err)
	}
	if err := customization.Load(ctx, listed{list}, reg); err != nil {
		return err
	}
	a.lastCustomizations = list
	now := map[string]bool{}
	for _, c := range list.Items {
		now[c.Name] = true
	}
	for name := range loaded {
		if !now[name] {
			reg.Remove(name)
		}
	}
	clear(loaded)
	for name := range now {
		loaded[name] = true
	}
	return nil
}

// listed is a client.Reader over customizations already read.
type listed struct {
	list *configv1alpha1.ResourceInterpreterCustomizationList
}

func (l listed) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: configv1alpha1.GroupVersion.Group, Resource: "resourceinterpretercustomizations"}, key.Name)
}

func (l listed) List(_ context.Context, out client.ObjectList, _ ...client.ListOption) error {
	target, ok := out.(*configv1alpha1.ResourceInterpreterCustomizationList)
	if !ok {
		return fmt.Errorf("the agent lists customizations only, not %T", out)
	}
	l.list.DeepCopyInto(target)
	return nil
}
