package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "github.com/flotilla-dev/flotilla/api/tenancy/v1alpha1"
)

func init() {
	team := getResource{tenancyv1alpha1.GroupVersion, "teams", "Team", true}
	for _, n := range []string{"teams", "team"} {
		getResources[n] = team
	}
}

func newTeamCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "team",
		Short: "Teams: a control-plane namespace whose contributor groups write there and reader groups read there",
		Example: fmt.Sprintf(`  %[1]s team create shop --contributor shop-devs --reader shop-viewers --description "the shop"
  %[1]s team list
  %[1]s team get shop -o yaml`, invokedName()),
	}
	var contributors, readers, repositories []string
	var description, clusters string
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create the team's namespace and its Team (or update the Team's groups)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				return fmt.Errorf("team name %q: it names the team's namespace, so it must be a DNS label: %v", name, errs)
			}
			for _, flag := range []struct {
				name   string
				groups []string
			}{{"--contributor", contributors}, {"--reader", readers}} {
				if i := slices.Index(flag.groups, ""); i >= 0 {
					return fmt.Errorf("%s: an empty group name; give the group as the control plane authenticates it", flag.name)
				}
			}
			var allowed *tenancyv1alpha1.TeamClusters
			if clusters != "" {
				sel, err := policySelector("--clusters", clusters)
				if err != nil {
					return fmt.Errorf("%w (a label selector such as region=us-east,gpu=true)", err)
				}
				allowed = &tenancyv1alpha1.TeamClusters{Selector: *sel}
			}
			c, err := g.controlPlaneClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating namespace %s: %w", name, err)
			}
			t := &tenancyv1alpha1.Team{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: tenancyv1alpha1.TeamName}}
			spec := tenancyv1alpha1.TeamSpec{Description: description, Contributors: contributors, Readers: readers, Repositories: repositories, Clusters: allowed}
			err = c.Get(ctx, client.ObjectKeyFromObject(t), t)
			switch {
			case apierrors.IsNotFound(err):
				t.Spec = spec
				if err := c.Create(ctx, t); err != nil {
					return fmt.Errorf("creating team %s: %w", name, err)
				}
				fmt.Fprintf(g.streams.Out, "team/%s created\n", name)
			case err != nil:
				return err
			default:
				t.Spec = spec
				if err := c.Update(ctx, t); err != nil {
					return fmt.Errorf("updating team %s: %w", name, err)
				}
				fmt.Fprintf(g.streams.Out, "team/%s updated\n", name)
			}
			return nil
		},
	}
	create.Flags().StringSliceVar(&contributors, "contributor", nil, "group that may write the team's templates and policies (repeat or comma-separate)")
	create.Flags().StringSliceVar(&readers, "reader", nil, "group that may only read in the team's namespace (repeat or comma-separate)")
	create.Flags().StringVar(&description, "description", "", "who the team is")
	create.Flags().StringSliceVar(&repositories, "repository", nil, "git repository URL glob the team's Applications may use, e.g. https://git.example.com/shop/* (repeatable; none by default)")
	create.Flags().StringVar(&clusters, "clusters", "", "label selector of the clusters the team's templates may run on (default: every cluster)")
	lf := newGetFlags()
	list := &cobra.Command{
		Use:   "list",
		Short: "List the teams as kubectl does (-o, -l, -w as in get)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.get(cmd.Context(), getResources["teams"], lf, "")
		},
	}
	lf.add(list, false)
	one := newGetFlags()
	get := &cobra.Command{
		Use:               "get NAME",
		Short:             "Show one team (-o yaml|json|jsonpath=..., else a table)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeNames(getResources["teams"]),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.getTeam(cmd.Context(), one, args[0])
		},
	}
	one.add(get, false)
	cmd.AddCommand(create, list, get)
	return cmd
}

// getTeam prints the Team of namespace name: a team is its namespace, the Team in it is
// always called team.
func (g *globals) getTeam(ctx context.Context, f *getFlags, name string) error {
	c, err := g.controlPlaneClient()
	if err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: name, Name: tenancyv1alpha1.TeamName}, &tenancyv1alpha1.Team{}); apierrors.IsNotFound(err) {
		return fmt.Errorf("team %s not found: namespace %s holds no Team (`%s team list` lists them; `%s team create %s` makes one)", name, name, invokedName(), invokedName(), name)
	} else if err != nil {
		return fmt.Errorf("reading team %s: %w", name, err)
	}
	return g.getIn(ctx, getResources["teams"], f, name, tenancyv1alpha1.TeamName)
}
