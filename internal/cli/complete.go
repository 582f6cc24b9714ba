package cli

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// Shell completion (legate completion bash|zsh|fish|powershell, from
// cobra) completes the names the manager knows — recent task and run IDs,
// delegate, token, API key, org, project, connector, configuration and
// pipeline names — by asking it with the configured URL and API key. A completion must never
// get in the way: on any error (no configuration, manager down, refused
// key) it quietly offers nothing, and it gives up after completionTimeout.

// completionTimeout bounds the manager calls of one completion.
const completionTimeout = 2 * time.Second

// lister fetches completion candidates: a value, optionally followed by a
// tab and a description (cobra's format).
type lister func(ctx context.Context, c *client.Client, cmd *cobra.Command) ([]string, error)

// complete returns a completion function for the first argument of a
// command, from the manager.
func (a *app) complete(list lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return a.fetch(cmd, list, toComplete)
	}
}

// completeFlag is complete for a flag's value.
func (a *app) completeFlag(list lister) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return a.fetch(cmd, list, toComplete)
	}
}

// fetch asks the manager and keeps the candidates that start with
// toComplete; any failure is no candidates.
func (a *app) fetch(cmd *cobra.Command, list lister, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c, err := a.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	items, err := list(ctx, c, cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, it := range items {
		if strings.HasPrefix(it, toComplete) {
			out = append(out, it)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// fixed completes one of values.
func fixed(values ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range values {
			if strings.HasPrefix(v, toComplete) {
				out = append(out, v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// describe joins a value and its description for cobra; the description
// is stored text, escaped and kept on one line.
func describe(value string, desc ...string) string {
	d := strings.Join(slices.DeleteFunc(desc, func(s string) bool { return s == "" }), ", ")
	if d == "" {
		return value
	}
	return value + "\t" + escape(strings.NewReplacer("\t", " ", "\n", " ").Replace(d))
}

// completionTaskLimit is how many recent tasks are offered.
const completionTaskLimit = 50

// tasksLister lists recent task IDs, newest first, with their status; with
// active, only queued and running tasks (for cancel).
func (a *app) tasksLister(active bool) lister {
	return func(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
		list, err := c.ListTasks(ctx, "", completionTaskLimit)
		if err != nil {
			return nil, err
		}
		now := a.now()
		var out []string
		for _, t := range list.Tasks {
			if active && protocol.Terminal(t.Status) {
				continue
			}
			out = append(out, describe(t.ID, t.Status, t.Type, age(now, t.CreatedAt)))
		}
		return out, nil
	}
}

// delegatesLister lists delegate (group) names with their instance count.
func delegatesLister(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
	list, err := c.ListDelegates(ctx)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, d := range list.Delegates {
		count[d.Name]++
	}
	var out []string
	for _, name := range delegateNames(list.Delegates) {
		n := count[name]
		out = append(out, describe(name, fmt.Sprintf("%d instance%s", n, plural(n))))
	}
	return out, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// selectorsLister lists what a selector can name: the delegates' tags,
// names and hostnames, each once, sorted.
func selectorsLister(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
	list, err := c.ListDelegates(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range list.Delegates {
		out = append(out, d.Tags...)
		out = append(out, d.Name, d.Hostname)
	}
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out), nil
}

// tokensLister lists the names of active delegate tokens.
func tokensLister(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
	list, err := c.ListTokens(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range list.Tokens {
		if t.Status == protocol.TokenActive {
			out = append(out, describe(t.Name, scope(t.Org, t.Project)))
		}
	}
	return out, nil
}

// apiKeysLister lists the names of active API keys.
func apiKeysLister(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
	list, err := c.ListAPIKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range list.APIKeys {
		if k.Status == protocol.TokenActive {
			cur := ""
			if k.Current {
				cur = "the key in use"
			}
			out = append(out, describe(k.Name, cur))
		}
	}
	return out, nil
}

// principalsLister lists the names of enabled users and service
// accounts, or of those of one kind ("" for both), with their kind.
func principalsLister(kind string) lister {
	return func(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
		var list protocol.UserList
		if err := c.Admin(ctx, "list users", http.MethodGet, protocol.PathUsers, nil, &list); err != nil {
			return nil, err
		}
		var out []string
		for _, u := range list.Users {
			if !u.Disabled && (kind == "" || u.Kind == kind) {
				out = append(out, describe(u.Name, strings.ReplaceAll(u.Kind, "_", " ")))
			}
		}
		return out, nil
	}
}

// orgsLister lists organization names.
func orgsLister(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
	list, err := c.ListOrgs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list.Orgs))
	for i, o := range list.Orgs {
		out[i] = o.Name
	}
	return out, nil
}

// projectsLister lists project names: those of --org when the command has
// it set, else every org's (described by their org).
func projectsLister(ctx context.Context, c *client.Client, cmd *cobra.Command) ([]string, error) {
	org := ""
	if f := cmd.Flags().Lookup("org"); f != nil {
		org = f.Value.String()
	}
	list, err := c.ListProjects(ctx, org)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range list.Projects {
		out = append(out, describe(p.Name, "org "+p.Org))
	}
	return out, nil
}

// connectorsLister lists connector names with their URL.
func connectorsLister(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
	list, err := c.ListConnectors(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list.Connectors))
	for i, k := range list.Connectors {
		out[i] = describe(k.Name, k.URL)
	}
	return out, nil
}

// configurationsLister lists delegate configuration names.
func configurationsLister(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
	list, err := c.ListConfigurations(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list.Configurations))
	for i, k := range list.Configurations {
		out[i] = describe(k.Name, fmt.Sprintf("v%d", k.Version), scope(k.Org, k.Project))
	}
	return out, nil
}

// completionRunLimit is how many recent runs are offered.
const completionRunLimit = 50

// pipelinesLister lists pipeline names, each once, with the scopes that
// have one of that name: with --org set, only those of that org (or of
// --project in it), as the command will look for it; else every scope's.
func pipelinesLister(ctx context.Context, c *client.Client, cmd *cobra.Command) ([]string, error) {
	org, project := "", ""
	if f := cmd.Flags().Lookup("org"); f != nil {
		org = f.Value.String()
	}
	if f := cmd.Flags().Lookup("project"); f != nil {
		project = f.Value.String()
	}
	list, err := c.ListPipelines(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	scopes := map[string][]string{}
	for _, p := range list.Pipelines {
		if org != "" && (p.Org != org || p.Project != project) {
			continue
		}
		if _, ok := scopes[p.Name]; !ok {
			names = append(names, p.Name)
		}
		scopes[p.Name] = append(scopes[p.Name], scope(p.Org, p.Project))
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = describe(n, scopes[n]...)
	}
	return out, nil
}

// runsLister lists recent run IDs, newest first, with their pipeline,
// status and age; with active, only running runs (for cancel).
func (a *app) runsLister(active bool) lister {
	return func(ctx context.Context, c *client.Client, _ *cobra.Command) ([]string, error) {
		q := client.RunQuery{Limit: completionRunLimit}
		if active {
			q.Status = protocol.RunRunning
		}
		list, err := c.ListRunsPage(ctx, q)
		if err != nil {
			return nil, err
		}
		now := a.now()
		out := make([]string, len(list.Runs))
		for i, r := range list.Runs {
			out[i] = describe(r.ID, r.Pipeline, r.Status, age(now, r.CreatedAt))
		}
		return out, nil
	}
}

// completeRunIDs completes the run ID argument of a command: recent runs,
// or with active the running ones.
func (a *app) completeRunIDs(active bool) cobra.CompletionFunc {
	return a.complete(a.runsLister(active))
}

// completePipelineNames completes the pipeline name argument of a command.
func (a *app) completePipelineNames() cobra.CompletionFunc {
	return a.complete(pipelinesLister)
}

// argCompletions are the argument completions registered by command path
// (without the root's name), for commands that do not set their own:
// pipeline names and run IDs.
func (a *app) argCompletions() map[string]cobra.CompletionFunc {
	pipelines, runs := a.completePipelineNames(), a.completeRunIDs(false)
	return map[string]cobra.CompletionFunc{
		"pipeline get": pipelines, "pipeline delete": pipelines, "pipeline run": pipelines,
		"pipeline webhook enable": pipelines, "pipeline webhook disable": pipelines,
		"run get": runs, "run logs": runs, "run rerun": runs, "run cancel": a.completeRunIDs(true),
	}
}

// completeFlags registers value completion for the flags that mean the
// same on every command: --org, --project, --connector, --selector
// (a delegate's tag, name or hostname), --pipeline, --status and --type
// of a task; and the arguments of argCompletions.
func (a *app) completeFlags(root *cobra.Command) {
	flags := map[string]cobra.CompletionFunc{
		"org":       a.completeFlag(orgsLister),
		"project":   a.completeFlag(projectsLister),
		"connector": a.completeFlag(connectorsLister),
		"selector":  a.completeFlag(selectorsLister),
		"pipeline":  a.completeFlag(pipelinesLister), // run list --pipeline
		// apikey create --owner; role bind --user, --service-account.
		"owner":           a.completeFlag(principalsLister("")),
		"user":            a.completeFlag(principalsLister(protocol.PrincipalUser)),
		"service-account": a.completeFlag(principalsLister(protocol.PrincipalServiceAccount)),
	}
	args := a.argCompletions()
	walk(root, func(c *cobra.Command) {
		if fn, ok := args[strings.TrimPrefix(c.CommandPath(), root.Name()+" ")]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = fn
		}
		for name, fn := range flags {
			if c.Flags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, fn)
			}
		}
		if c.ValidArgsFunction == nil && c.ValidArgs == nil && !c.HasSubCommands() {
			c.ValidArgsFunction = cobra.NoFileCompletions // a new name, or no argument
		}
	})
}
