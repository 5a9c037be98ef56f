package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workv1alpha1 "github.com/flotilla-dev/flotilla/api/work/v1alpha1"
)

// Shell completion comes from cobra's `completion bash|zsh|fish|powershell`; these functions
// add the names of what is in the control plane. They answer within a few seconds or not at
// all: a slow or unreachable control plane must not hang the shell.

const completionTimeout = 3 * time.Second

// completeGet completes `get`'s kind, then the names of objects of that kind.
func (g *globals) completeGet(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	switch len(args) {
	case 0:
		kinds := []string{"clusters", "bindings", "clusterbindings", "works", "teams", "applications", "targetpolicies", "clustertargetpolicies"}
		return prefixed(kinds, toComplete), cobra.ShellCompDirectiveNoFileComp
	case 1:
		res, ok := getResources[args[0]]
		if !ok || res.kind == "Work" {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.completeNames(res)(cmd, nil, toComplete)
	}
	return nil, cobra.ShellCompDirectiveNoFileComp
}

// completeNames completes the first argument with the names of res's objects in the
// namespace -n or the kubeconfig context names; a team is completed by its namespace.
func (g *globals) completeNames(res getResource) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := g.controlPlaneClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(res.gv.WithKind(res.kind + "List"))
		var opts []client.ListOption
		if ns := g.scope(res, false); ns != "" {
			opts = append(opts, client.InNamespace(ns))
		}
		if c.List(ctx, list, opts...) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, o := range list.Items {
			if res.kind == "Team" {
				names = append(names, o.GetNamespace())
			} else {
				names = append(names, o.GetName())
			}
		}
		return prefixed(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeReleased completes KIND/NAME with the templates released in waves (those whose
// binding records revisions) in the namespace -n or the kubeconfig context names.
func (g *globals) completeReleased(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := g.controlPlaneClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	var bindings []workv1alpha1.Binding
	rbs := &workv1alpha1.ResourceBindingList{}
	if c.List(ctx, rbs, client.InNamespace(g.namespace())) == nil {
		for i := range rbs.Items {
			bindings = append(bindings, &rbs.Items[i])
		}
	}
	if g.templateNamespace() == "" { // cluster-scoped templates are found then too
		crbs := &workv1alpha1.ClusterResourceBindingList{}
		if c.List(ctx, crbs) == nil {
			for i := range crbs.Items {
				bindings = append(bindings, &crbs.Items[i])
			}
		}
	}
	var out []string
	for _, b := range bindings {
		if s := b.BindingSpec(); s.Revisions != nil {
			out = append(out, strings.ToLower(s.Resource.Kind)+"/"+s.Resource.Name)
		}
	}
	return prefixed(out, toComplete), cobra.ShellCompDirectiveNoFileComp
}

func prefixed(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
