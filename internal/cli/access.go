package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// Users, service accounts, groups, roles and bindings, and legate
// login/logout/whoami. Service accounts are users with --service-account
// on create: both are principals that share one namespace of names and
// every verb but the password, so one noun keeps the CLI small
// (`legate user list` shows both, with their kind).

func (a *app) call(cmd *cobra.Command, op, method, path string, in, out any) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	return c.Admin(cmd.Context(), op, method, path, in, out)
}

// readSecretLine reads one line from r (a password from stdin), without
// its line ending.
func readSecretLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func (a *app) userCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "user",
		Aliases: []string{"users"},
		Short:   "Create, list, disable and delete users and service accounts",
		Long: `Users sign in with a password (legate login) and act with the roles bound to
them (legate role bind). Service accounts (create --service-account) are for
automation: they have no password, only API keys (legate apikey create NAME
--owner ACCOUNT). Disabling or deleting one refuses its keys and sessions at
once on every manager.`,
		Example: `  printf '%s\n' "$PASSWORD" | legate user create alice --password-stdin
  legate user create ci-bot --service-account
  legate user disable alice`,
	}
	cmd.AddCommand(a.userCreateCmd(), a.userListCmd(), a.userGetCmd(),
		a.userSetDisabledCmd("disable", "Disable a user: its keys and sessions are refused at once", true),
		a.userSetDisabledCmd("enable", "Enable a disabled user", false), a.userPasswdCmd(), a.userDeleteCmd())
	return cmd
}

func (a *app) userCreateCmd() *cobra.Command {
	var out outputFlags
	var sa, pwStdin bool
	var display string
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a user (or a service account)", Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			req := protocol.CreateUserRequest{Name: args[0], Display: display}
			if sa {
				req.Kind = protocol.PrincipalServiceAccount
			}
			if pwStdin {
				pw, err := readSecretLine(cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("read the password from stdin: %w", err)
				}
				req.Password = pw
			}
			var u protocol.User
			if err := a.call(cmd, "create user", http.MethodPost, protocol.PathUsers, req, &u); err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), u)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Created %s %s. Bind a role to it: legate role bind ROLE --%s %s\n",
				strings.ReplaceAll(u.Kind, "_", " "), u.Name, strings.ReplaceAll(u.Kind, "_", "-"), u.Name)
			return err
		}),
	}
	create.Flags().BoolVar(&sa, "service-account", false, "create a service account (no password; API keys only)")
	create.Flags().BoolVar(&pwStdin, "password-stdin", false, "read the user's password from the first line of stdin (never from a flag)")
	create.Flags().StringVar(&display, "display", "", "display name")
	out.add(create, formatJSON, formatYAML)
	return create
}

func (a *app) userListCmd() *cobra.Command {
	var listOut outputFlags
	list := &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List users and service accounts", Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			var l protocol.UserList
			if err := a.call(cmd, "list users", http.MethodGet, protocol.PathUsers, nil, &l); err != nil {
				return err
			}
			return a.printUsers(cmd.OutOrStdout(), &listOut, l)
		}),
	}
	listOut.add(list, listFormats()...)
	return list
}

func (a *app) userGetCmd() *cobra.Command {
	var getOut outputFlags
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a user or service account", Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			var u protocol.User
			if err := a.call(cmd, "get user", http.MethodGet, protocol.PathUsers+"/"+url.PathEscape(args[0]), nil, &u); err != nil {
				return err
			}
			if !getOut.structured() {
				getOut.format = formatYAML
			}
			return getOut.print(cmd.OutOrStdout(), u)
		}),
	}
	getOut.add(get, formatJSON, formatYAML)
	return get
}

// userSetDisabledCmd builds user disable (disabled) and user enable.
func (a *app) userSetDisabledCmd(use, short string, disabled bool) *cobra.Command {
	return &cobra.Command{
		Use: use + " NAME", Short: short, Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := a.call(cmd, use+" user", http.MethodPatch, protocol.PathUsers+"/"+url.PathEscape(args[0]),
				protocol.UpdateUserRequest{Disabled: &disabled}, nil); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%sd %s\n", strings.ToUpper(use[:1])+use[1:], args[0])
			return err
		}),
	}
}

func (a *app) userPasswdCmd() *cobra.Command {
	return &cobra.Command{
		Use: "passwd NAME", Short: "Set a user's password from the first line of stdin", Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			pw, err := readSecretLine(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("read the password from stdin: %w", err)
			}
			if err := a.call(cmd, "set password", http.MethodPatch, protocol.PathUsers+"/"+url.PathEscape(args[0]),
				protocol.UpdateUserRequest{Password: &pw}, nil); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Password of %s set\n", args[0])
			return err
		}),
	}
}

func (a *app) userDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use: "delete NAME", Short: "Delete a user or service account, its bindings, keys and sessions", Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := a.call(cmd, "delete user", http.MethodDelete, protocol.PathUsers+"/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Deleted %s\n", args[0])
			return err
		}),
	}
}

func scopeText(org, project string) string {
	switch {
	case org == "":
		return "account"
	case project == "":
		return org
	}
	return org + "/" + project
}

func (a *app) groupCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "group", Aliases: []string{"groups"}, Short: "Groups of users and service accounts, to bind roles to"}
	simple := func(use, short, op, method string, nargs int, path func([]string) string, body func([]string) any, done string) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: cobra.ExactArgs(nargs),
			RunE: a.run(func(cmd *cobra.Command, args []string) error {
				var in any
				if body != nil {
					in = body(args)
				}
				if err := a.call(cmd, op, method, path(args), in, nil); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), done+"\n", strings.Join(args, " "))
				return err
			}),
		}
	}
	g := func(args []string) string { return protocol.PathGroups + "/" + url.PathEscape(args[0]) }
	var out outputFlags
	list := &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List groups and their members", Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			var l protocol.GroupList
			if err := a.call(cmd, "list groups", http.MethodGet, protocol.PathGroups, nil, &l); err != nil {
				return err
			}
			return a.printGroups(cmd.OutOrStdout(), &out, l)
		}),
	}
	out.add(list, listFormats()...)
	cmd.AddCommand(
		simple("create NAME", "Create a group", "create group", http.MethodPost, 1,
			func([]string) string { return protocol.PathGroups }, func(a []string) any { return protocol.CreateGroupRequest{Name: a[0]} }, "Created group %s"),
		list,
		simple("delete NAME", "Delete a group and its bindings", "delete group", http.MethodDelete, 1, g, nil, "Deleted group %s"),
		simple("add GROUP MEMBER", "Add a user or service account to a group", "add member", http.MethodPost, 2,
			func(a []string) string { return g(a) + "/members" }, func(a []string) any { return protocol.GroupMemberRequest{Member: a[1]} }, "Added: %s"),
		simple("remove GROUP MEMBER", "Remove a member from a group", "remove member", http.MethodDelete, 2,
			func(a []string) string { return g(a) + "/members/" + url.PathEscape(a[1]) }, nil, "Removed: %s"),
	)
	return cmd
}

func (a *app) roleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "role", Aliases: []string{"roles"}, Short: "Roles (sets of permissions) and their bindings",
		Long: `A role is a set of permissions ("resource:action", e.g. delegate:delete;
"resource:*" for all of a resource's actions). The built-in roles are
account-admin, org-admin, project-admin, delegate-admin and viewer. A binding
grants a role to a user, service account or group at the account, an org or
a project, and applies to everything beneath it.`,
		Example: `  legate role create deleter --permission delegate:delete --permission delegate:view
  legate role bind project-admin --user alice --org eng --project web
  legate role bindings`,
	}
	cmd.AddCommand(a.roleCreateCmd(), a.roleListCmd(), a.roleGetCmd(), a.roleDeleteCmd(), a.roleUpdateCmd(),
		a.roleBindingCmd("bind", "Bind a role to a user, service account or group", true),
		a.roleBindingCmd("unbind", "Remove a binding", false), a.roleBindingsCmd())
	return cmd
}

func (a *app) roleCreateCmd() *cobra.Command {
	var perms []string
	var desc string
	create := &cobra.Command{
		Use: "create NAME", Short: "Create a custom role", Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if len(perms) == 0 {
				return usagef("give at least one --permission RESOURCE:ACTION")
			}
			if err := a.call(cmd, "create role", http.MethodPost, protocol.PathRoles,
				protocol.CreateRoleRequest{Name: args[0], Description: desc, Permissions: perms}, nil); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Created role %s\n", args[0])
			return err
		}),
	}
	create.Flags().StringArrayVar(&perms, "permission", nil, "a permission RESOURCE:ACTION (repeat)")
	create.Flags().StringVar(&desc, "description", "", "what the role is for")
	return create
}

func (a *app) roleListCmd() *cobra.Command {
	var out outputFlags
	list := &cobra.Command{
		Use: "list", Aliases: []string{"ls"}, Short: "List built-in and custom roles", Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			var l protocol.RoleList
			if err := a.call(cmd, "list roles", http.MethodGet, protocol.PathRoles, nil, &l); err != nil {
				return err
			}
			return a.printRoles(cmd.OutOrStdout(), &out, l)
		}),
	}
	out.add(list, listFormats()...)
	return list
}

func (a *app) roleGetCmd() *cobra.Command {
	var out outputFlags
	get := &cobra.Command{
		Use: "get NAME", Short: "Show a role", Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			var r protocol.Role
			if err := a.call(cmd, "get role", http.MethodGet, protocol.PathRoles+"/"+url.PathEscape(args[0]), nil, &r); err != nil {
				return err
			}
			if !out.structured() {
				out.format = formatYAML
			}
			return out.print(cmd.OutOrStdout(), r)
		}),
	}
	out.add(get, formatJSON, formatYAML)
	return get
}

func (a *app) roleDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use: "delete NAME", Short: "Delete a custom role (not while bound)", Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if err := a.call(cmd, "delete role", http.MethodDelete, protocol.PathRoles+"/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "Deleted role %s\n", args[0])
			return err
		}),
	}
}

// roleUpdateCmd changes a custom role in place. --add-permission and
// --remove-permission edit the role's current list, read first; the API
// takes the whole list.
func (a *app) roleUpdateCmd() *cobra.Command {
	var perms, add, remove []string
	var desc string
	update := &cobra.Command{
		Use: "update NAME", Short: "Change a custom role's permissions or description", Args: cobra.ExactArgs(1),
		Long: `Change a custom role in place: the users, service accounts and groups bound to
it get its new permissions on their next request. --permission gives the whole
new list; --add-permission and --remove-permission change the current one.
Built-in roles cannot be changed: create a custom role instead.`,
		Example: `  legate role update deleter --permission delegate:delete --permission delegate:view
  legate role update deleter --add-permission task:view --remove-permission delegate:view
  legate role update deleter --description "cleans up delegates"`,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			var req protocol.UpdateRoleRequest
			if cmd.Flags().Changed("description") {
				req.Description = &desc
			}
			switch {
			case len(perms) > 0 && len(add)+len(remove) > 0:
				return usagef("give either --permission (the whole new list) or --add-permission/--remove-permission, not both")
			case len(perms) > 0:
				req.Permissions = &perms
			case len(add)+len(remove) > 0:
				// The manager edits the current list in its own write, so
				// two people editing a role at once do not undo each other.
				req.AddPermissions, req.RemovePermissions = add, remove
			case req.Description == nil:
				return usagef("nothing to change: give --permission, --add-permission, --remove-permission or --description")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.UpdateRole(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Updated role %s: %s\n", r.Name, strings.Join(r.Permissions, ", "))
			return err
		}),
	}
	update.Flags().StringArrayVar(&perms, "permission", nil, "a permission RESOURCE:ACTION of the whole new list (repeat)")
	update.Flags().StringArrayVar(&add, "add-permission", nil, "a permission RESOURCE:ACTION to add (repeat)")
	update.Flags().StringArrayVar(&remove, "remove-permission", nil, "a permission RESOURCE:ACTION to remove (repeat)")
	update.Flags().StringVar(&desc, "description", "", "what the role is for")
	return update
}

// roleBindingCmd builds role bind (bind) and role unbind.
func (a *app) roleBindingCmd(use, short string, bind bool) *cobra.Command {
	var user, sa, group, org, project string
	c := &cobra.Command{
		Use: use + " ROLE (--user U | --service-account S | --group G) [--org O [--project P]]", Short: short, Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			b := protocol.Binding{Role: args[0], Org: org, Project: project}
			n := 0
			for _, s := range []struct{ kind, v string }{{protocol.PrincipalUser, user}, {protocol.PrincipalServiceAccount, sa}, {protocol.SubjectGroup, group}} {
				if s.v != "" {
					b.SubjectKind, b.Subject = s.kind, s.v
					n++
				}
			}
			if n != 1 {
				return usagef("give exactly one of --user, --service-account and --group")
			}
			if project != "" && org == "" {
				return usagef("--project needs --org")
			}
			var err error
			if bind {
				err = a.call(cmd, "bind role", http.MethodPost, protocol.PathBindings, b, nil)
			} else {
				q := url.Values{"role": {b.Role}, "subject_kind": {b.SubjectKind}, "subject": {b.Subject}, "org": {org}, "project": {project}}
				err = a.call(cmd, "unbind role", http.MethodDelete, protocol.PathBindings+"?"+q.Encode(), nil, nil)
			}
			if err != nil {
				return err
			}
			verb := "Bound"
			if !bind {
				verb = "Unbound"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s %s for %s %s at %s\n", verb, b.Role, strings.ReplaceAll(b.SubjectKind, "_", " "), b.Subject, scopeText(org, project))
			return err
		}),
	}
	c.Flags().StringVar(&user, "user", "", "a user")
	c.Flags().StringVar(&sa, "service-account", "", "a service account")
	c.Flags().StringVar(&group, "group", "", "a group")
	c.Flags().StringVar(&org, "org", "", "bind at this org (default: the account)")
	c.Flags().StringVar(&project, "project", "", "bind at this project of --org")
	return c
}

func (a *app) roleBindingsCmd() *cobra.Command {
	var bout outputFlags
	bindings := &cobra.Command{
		Use: "bindings", Short: "List the bindings you may see", Args: cobra.NoArgs,
		Long: `List the bindings you may see: role, subject and scope. -o wide adds when each
was made; -o name prints each as the arguments of legate role unbind.`,
		Example: `  legate role bindings
  legate role bindings -o name | grep -- '--user alice' | xargs -L1 legate role unbind`,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			var l protocol.BindingList
			if err := a.call(cmd, "list bindings", http.MethodGet, protocol.PathBindings, nil, &l); err != nil {
				return err
			}
			return a.printBindings(cmd.OutOrStdout(), &bout, l)
		}),
	}
	bout.add(bindings, listFormats()...)
	return bindings
}

func (a *app) whoamiCmd() *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use: "whoami", Short: "Show who the CLI acts as: the user or service account, the key, the bindings", Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			who, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			if out.structured() {
				return out.print(cmd.OutOrStdout(), who)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s %s of account %s, with API key %s\n", strings.ReplaceAll(who.PrincipalKind, "_", " "), escape(who.Principal), who.AccountID, escape(who.APIKey))
			for _, b := range who.Bindings {
				fmt.Fprintf(w, "  %s at %s (bound to %s %s)\n", escape(b.Role), escape(scopeText(b.Org, b.Project)), b.SubjectKind, escape(b.Subject))
			}
			return nil
		}),
	}
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

// prompt asks for one line on the terminal (echoed unless secret).
func prompt(cmd *cobra.Command, in *bufio.Reader, question string, secret bool) (string, error) {
	fmt.Fprint(cmd.ErrOrStderr(), question)
	if f, ok := cmd.InOrStdin().(*os.File); ok && secret && term.IsTerminal(int(f.Fd())) {
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(cmd.ErrOrStderr())
		return string(b), err
	}
	line, err := in.ReadString('\n')
	if err != nil && !(errors.Is(err, io.EOF) && line != "") {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func (a *app) loginCmd() *cobra.Command {
	var withToken bool
	var user string
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Sign in and store an API key in your config directory",
		Long: `Ask for the manager's URL (unless --url or LEGATE_URL gives it), your user name and
your password (not echoed), sign in, create an API key for you through that
session, sign the session out, and store the URL and key in
$XDG_CONFIG_HOME/legate/config (~/.config/legate/config), mode 0600. The CLI
reads them when LEGATE_URL and LEGATE_API_KEY (and --url, --api-key) are unset.
With --with-token, the key is read from stdin instead.`,
		Example: `  legate login --url https://legate.example.com
  echo "$KEY" | legate login --url https://legate.example.com --with-token`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			in := bufio.NewReader(cmd.InOrStdin())
			u := a.url
			if u == "" {
				u = a.getenv(EnvURL)
			}
			var err error
			if u == "" {
				if u, err = prompt(cmd, in, "Manager URL: ", false); err != nil {
					return err
				}
			}
			base, err := client.ParseManagerURL(u)
			if err != nil {
				return usagef("%v", err)
			}
			saved := a.url
			a.url = base
			defer func() { a.url = saved }()
			var key string
			if withToken {
				if key, err = readSecretLine(in); err != nil || key == "" {
					return usagef("--with-token: put the API key on stdin")
				}
			} else {
				if user == "" {
					if user, err = prompt(cmd, in, "User: ", false); err != nil {
						return err
					}
				}
				pw, err := prompt(cmd, in, "Password: ", true)
				if err != nil {
					return err
				}
				if key, err = a.signInForKey(cmd.Context(), cmd, user, pw); err != nil {
					return err
				}
			}
			saved2 := a.apiKey
			a.apiKey = key
			c, err := a.client()
			a.apiKey = saved2
			if err != nil {
				return err
			}
			who, err := c.WhoAmI(cmd.Context())
			if err != nil {
				return fmt.Errorf("check the key: %w", err)
			}
			p, err := a.writeLogin(loginConfig{URL: base, APIKey: key})
			if err != nil {
				return fmt.Errorf("store the key: %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %s %s; key stored in %s\n", base, strings.ReplaceAll(who.PrincipalKind, "_", " "), who.Principal, p)
			return err
		}),
	}
	cmd.Flags().BoolVar(&withToken, "with-token", false, "read an API key from stdin instead of signing in")
	cmd.Flags().StringVar(&user, "user", "", "user name (asked when not given)")
	return cmd
}

// signInForKey signs in with a password, creates an API key through the
// session and signs the session out.
func (a *app) signInForKey(ctx context.Context, cmd *cobra.Command, user, pw string) (string, error) {
	saved := a.apiKey
	defer func() { a.apiKey = saved }()
	a.apiKey = "none"
	c, err := a.client()
	if err != nil {
		return "", err
	}
	c.SetSecret("") // signing in needs no credentials
	var s protocol.Session
	if err := c.Admin(ctx, "sign in", http.MethodPost, protocol.PathSessions, protocol.CreateSessionRequest{User: user, Password: pw}, &s); err != nil {
		return "", err
	}
	c.SetSecret(s.Token)
	host, _ := os.Hostname()
	name := fmt.Sprintf("login-%s-%s", sanitizeName(host), a.now().UTC().Format("20060102-150405"))
	var k protocol.APIKey
	err = c.Admin(ctx, "create API key", http.MethodPost, protocol.PathAPIKeys, protocol.CreateAPIKeyRequest{Name: name}, &k)
	_ = c.Admin(ctx, "sign out", http.MethodDelete, protocol.PathSessions, nil, nil)
	if err != nil {
		return "", err
	}
	return k.Value, nil
}

func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "host"
	}
	out := b.String()
	if len(out) > 30 {
		out = out[:30]
	}
	return out
}

func (a *app) logoutCmd() *cobra.Command {
	return &cobra.Command{
		Use: "logout", Short: "Remove the key legate login stored (the key stays valid: revoke it with legate apikey revoke)", Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			p, err := a.configPath()
			if err != nil {
				return err
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Removed %s\n", p)
			return err
		}),
	}
}

// fillHelp gives the access commands that have none a long description
// (their short one) and an example (their usage line).
func fillHelp(c *cobra.Command) {
	if c.Long == "" {
		c.Long = c.Short + "."
	}
	if c.Example == "" {
		c.Example = "  " + c.Parent().CommandPath() + " " + c.Use
	}
	for _, sub := range c.Commands() {
		fillHelp(sub)
	}
}
