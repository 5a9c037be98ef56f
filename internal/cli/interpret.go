package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/flotilla-dev/flotilla/api/config/v1alpha1"
	"github.com/flotilla-dev/flotilla/internal/customization"
	"github.com/flotilla-dev/flotilla/internal/interpret"
	"github.com/flotilla-dev/flotilla/internal/kube"
	"github.com/flotilla-dev/flotilla/internal/luavm"
)

func newInterpretCommand(g *globals) *cobra.Command {
	var file, op, observed, desired, items string
	var replicas int32
	cmd := &cobra.Command{
		Use:   "interpret -f CUSTOMIZATION --operation OP [--desired FILE] [--observed FILE] [--status-items FILE] [--replicas N]",
		Short: "Run a ResourceInterpreterCustomization's script locally and print the result",
		Long: `Runs one operation of a customization in the same sandbox the controller uses, with no
control plane, so scripts can be tested before they are applied. Operations that the
customization does not script run the built-in interpreter. -f may also name a bundled
customization (see: customizations list).`,
		Example: fmt.Sprintf(`  %[1]s interpret -f cloneset.yaml --operation InterpretReplica --desired cloneset.yaml
  %[1]s interpret -f kruise-cloneset --operation ReviseReplica --desired cs.yaml --replicas 4
  %[1]s interpret -f my.yaml --operation AggregateStatus --desired cs.yaml --status-items items.yaml
  %[1]s interpret -f my.yaml --operation Retain --desired wf.yaml --observed live-wf.yaml`, invokedName()),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if replicas < 0 {
				return fmt.Errorf("--replicas %d: give a cluster's share, 0 or more", replicas)
			}
			ric, err := loadCustomization(file)
			if err != nil {
				return err
			}
			in := interpret.Input{Replicas: replicas}
			if in.Desired, err = readObject(desired, "--desired"); err != nil {
				return err
			}
			if in.Observed, err = readObject(observed, "--observed"); err != nil {
				return err
			}
			if items != "" {
				data, err := os.ReadFile(items)
				if err != nil {
					return fmt.Errorf("--status-items: %w", err)
				}
				var list []any
				if err := yaml.Unmarshal(data, &list); err != nil {
					return fmt.Errorf("--status-items %s: a YAML list of {clusterName, status, applied, health, revision, current, observed}: %w", items, err)
				}
				if in.StatusItems, err = interpret.ParseStatusItems(list); err != nil {
					return fmt.Errorf("--status-items %s: %w", items, err)
				}
			}
			result, err := RunCustomization(ric, op, in)
			if err != nil {
				return err
			}
			out, err := yaml.Marshal(result)
			if err != nil {
				return err
			}
			_, err = g.streams.Out.Write(out)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&file, "filename", "f", "", "the ResourceInterpreterCustomization (a YAML file, or the name of a bundled one)")
	fs.StringVar(&op, "operation", "", "InterpretReplica, ReviseReplica, InterpretStatus, AggregateStatus, InterpretHealth, Retain or InterpretDependency (the Lua function names work too)")
	fs.StringVar(&desired, "desired", "", "file of the desired object (the template)")
	fs.StringVar(&observed, "observed", "", "file of the observed object (as a member has it)")
	fs.StringVar(&items, "status-items", "", "file of the members' status items for AggregateStatus")
	fs.Int32Var(&replicas, "replicas", 1, "a cluster's share of the replicas for ReviseReplica")
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagRequired("operation")
	return cmd
}

// RunCustomization compiles a customization and runs one operation, as `flotilla interpret`.
func RunCustomization(ric *configv1alpha1.ResourceInterpreterCustomization, op string, in interpret.Input) (any, error) {
	reg := interpret.NewRegistry(luavm.Limits{})
	compiled, err := reg.Compile(ric)
	if err != nil {
		return nil, fmt.Errorf("customization %s: %s", ric.Name, customization.Describe(err))
	}
	for _, obj := range []*unstructured.Unstructured{in.Desired, in.Observed} {
		if obj != nil && (obj.GetAPIVersion() != ric.Spec.Target.APIVersion || obj.GetKind() != ric.Spec.Target.Kind) {
			return nil, fmt.Errorf("the object is %s %s but customization %s targets %s %s", obj.GetAPIVersion(), obj.GetKind(), ric.Name, ric.Spec.Target.APIVersion, ric.Spec.Target.Kind)
		}
	}
	return interpret.Run(reg.With(compiled), op, in)
}

func loadCustomization(file string) (*configv1alpha1.ResourceInterpreterCustomization, error) {
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		bundled, berr := customization.Bundled()
		if berr != nil {
			return nil, berr
		}
		for i := range bundled {
			if bundled[i].Name == file {
				return &bundled[i], nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w (nor is it a bundled customization's name)", file, err)
	}
	ric, err := customization.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", file, err)
	}
	return ric, nil
}

func readObject(file, flag string) (*unstructured.Unstructured, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, file, err)
	}
	if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
		return nil, fmt.Errorf("%s %s: the object needs apiVersion and kind", flag, file)
	}
	normalizeNumbers(obj.Object)
	return obj, nil
}

// normalizeNumbers turns YAML's float64 whole numbers into int64, as the API server's JSON
// decoding gives them to the controller.
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	}
	return v
}

func newCustomizationsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "customizations list|install [NAME...]",
		Short: "List the bundled interpreter customizations, or install them into the control plane",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the bundled customizations and the kinds they teach",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bundled, err := customization.Bundled()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(g.streams.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tAPI-VERSION\tKIND\tOPERATIONS")
			for _, b := range bundled {
				n := 0
				for _, op := range interpret.Operations {
					if op.Script(&b.Spec.Customizations) != nil {
						n++
					}
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", b.Name, b.Spec.Target.APIVersion, b.Spec.Target.Kind, strconv.Itoa(n)+"/7")
			}
			return w.Flush()
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "install [NAME...]",
		Short: "Apply bundled customizations (all when no name is given) to the control plane",
		RunE: func(cmd *cobra.Command, names []string) error {
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			return installBundled(cmd.Context(), c, names, func(name string) { fmt.Fprintf(g.streams.Out, "resourceinterpretercustomization/%s applied\n", name) })
		},
	})
	return cmd
}

// installBundled server-side applies the named bundled customizations, all of them when names
// is empty; an unknown name fails before anything is applied.
func installBundled(ctx context.Context, c client.Client, names []string, applied func(string)) error {
	bundled, err := customization.Bundled()
	if err != nil {
		return err
	}
	byName := map[string]*configv1alpha1.ResourceInterpreterCustomization{}
	for i := range bundled {
		byName[bundled[i].Name] = &bundled[i]
	}
	if len(names) == 0 {
		for _, b := range bundled {
			names = append(names, b.Name)
		}
	}
	for _, n := range names {
		if byName[n] == nil {
			return fmt.Errorf("no bundled customization %q; see `customizations list`", n)
		}
	}
	for _, n := range names {
		obj := &unstructured.Unstructured{}
		data, _ := yaml.Marshal(byName[n])
		if err := yaml.Unmarshal(data, &obj.Object); err != nil {
			return err
		}
		unstructured.RemoveNestedField(obj.Object, "status")
		unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
		if err := c.Patch(ctx, obj, client.Apply, client.FieldOwner(kube.FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", n, err)
		}
		applied(n)
	}
	return nil
}
