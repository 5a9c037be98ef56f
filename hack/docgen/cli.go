package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/flotilla-dev/flotilla/internal/cli"
)

// machineDependent is written for a flag default that differs between two machines.
const machineDependent = "depends on the machine"

// environments are the two settings the command tree is built under: the first gives the
// defaults written down (placeholders where the environment names a directory), the second
// differs in everything a default may read, so what differs is machine-dependent.
var environments = []struct {
	env        map[string]string
	gomaxprocs int
}{
	{env: map[string]string{"HOME": "/home/user", "XDG_STATE_HOME": "$XDG_STATE_HOME", "FLOTILLA_BIN_DIR": "$FLOTILLA_BIN_DIR", "TMPDIR": "/tmp", "KUBECONFIG": "", "FLOTILLA_INVENTORY_URL": ""}, gomaxprocs: 1},
	{env: map[string]string{"HOME": "/other/home", "XDG_STATE_HOME": "$XDG_STATE_HOME", "FLOTILLA_BIN_DIR": "$FLOTILLA_BIN_DIR", "TMPDIR": "/other/tmp", "KUBECONFIG": "", "FLOTILLA_INVENTORY_URL": ""}, gomaxprocs: 64},
}

// buildTree builds the command tree under one environment, as the binary named flotilla.
func buildTree(i int) (*cobra.Command, error) {
	e := environments[i]
	for k, v := range e.env {
		if err := os.Setenv(k, v); err != nil {
			return nil, err
		}
	}
	prev := runtime.GOMAXPROCS(e.gomaxprocs)
	defer runtime.GOMAXPROCS(prev)
	os.Args[0] = "flotilla"
	root := cli.NewRootCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: io.Discard, ErrOut: io.Discard})
	root.InitDefaultCompletionCmd()
	return root, nil
}

// cliReference returns one page per visible command, named after its path
// (flotilla_release_get.md), and README.md, the index.
func cliReference() (map[string]string, error) {
	root, err := buildTree(0)
	if err != nil {
		return nil, err
	}
	other, err := buildTree(1)
	if err != nil {
		return nil, err
	}
	defaults := map[string]string{} // "command path/flag" -> default under the other environment
	walk(other, func(c *cobra.Command) {
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) { defaults[c.CommandPath()+"/"+f.Name] = f.DefValue })
	})
	files := map[string]string{}
	var index bytes.Buffer
	index.WriteString("# Command-line reference\n\n")
	index.WriteString("Generated from the command tree by `make docs` (`go run ./hack/docgen`); do not edit.\n")
	index.WriteString("The binary also answers as the kubectl plugin `kubectl-flotilla` (`kubectl flotilla ...`).\n\n")
	index.WriteString("| command | what it does |\n|---|---|\n")
	walk(root, func(c *cobra.Command) {
		files[pageName(c)] = commandPage(c, defaults)
		fmt.Fprintf(&index, "| [%s](%s) | %s |\n", cell(c.CommandPath()), pageName(c), cell(c.Short))
	})
	files["README.md"] = index.String()
	return files, nil
}

// walk visits c and its visible subcommands, depth first, in name order.
func walk(c *cobra.Command, visit func(*cobra.Command)) {
	if !visible(c) {
		return
	}
	visit(c)
	subs := c.Commands()
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
	for _, s := range subs {
		walk(s, visit)
	}
}

func visible(c *cobra.Command) bool {
	return c == c.Root() || c.IsAvailableCommand()
}

func pageName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

func commandPage(c *cobra.Command, other map[string]string) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", c.CommandPath())
	if c.Short != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(c.Short))
	}
	if c.Long != "" && strings.TrimSpace(c.Long) != strings.TrimSpace(c.Short) {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(c.Long))
	}
	if c.Runnable() {
		fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
	}
	if len(c.Aliases) > 0 {
		fmt.Fprintf(&b, "Aliases: %s\n\n", strings.Join(c.Aliases, ", "))
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "## Examples\n\n```\n%s\n```\n\n", strings.TrimRight(c.Example, "\n"))
	}
	flagTable(&b, "Flags", c.NonInheritedFlags(), c.CommandPath(), other)
	if c.HasParent() {
		flagTable(&b, "Flags of every command", c.InheritedFlags(), "", nil)
	}
	var subs []*cobra.Command
	for _, s := range c.Commands() {
		if visible(s) {
			subs = append(subs, s)
		}
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
	if len(subs) > 0 {
		b.WriteString("## Commands\n\n")
		for _, s := range subs {
			fmt.Fprintf(&b, "- [%s](%s): %s\n", s.CommandPath(), pageName(s), cell(s.Short))
		}
		b.WriteString("\n")
	}
	if c.HasParent() {
		fmt.Fprintf(&b, "Part of [%s](%s); all commands: [index](README.md).\n", c.Parent().CommandPath(), pageName(c.Parent()))
	} else {
		b.WriteString("All commands: [index](README.md).\n")
	}
	return b.String()
}

// flagTable writes the flags of fs, sorted by name; a default that differs under the other
// environment (keyed by path/name) is written as machine-dependent.
func flagTable(b *bytes.Buffer, title string, fs *pflag.FlagSet, path string, other map[string]string) {
	var flags []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			flags = append(flags, f)
		}
	})
	if len(flags) == 0 {
		return
	}
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	fmt.Fprintf(b, "## %s\n\n| flag | type | default | description |\n|---|---|---|---|\n", title)
	for _, f := range flags {
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		_, usage := pflag.UnquoteUsage(f)
		def := f.DefValue
		switch {
		case other != nil && other[path+"/"+f.Name] != def:
			def = machineDependent
		case def == "" || def == "[]" || (def == "false" && f.Value.Type() == "bool"):
			def = ""
		default:
			def = code(def)
		}
		if f.Deprecated != "" {
			usage += " (deprecated: " + f.Deprecated + ")"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", code(name), cell(f.Value.Type()), def, cell(usage))
	}
	b.WriteString("\n")
}
