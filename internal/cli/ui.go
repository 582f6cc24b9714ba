package cli

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// signInURL is what legate ui prints with -o json|yaml.
type signInURL struct {
	URL       string    `json:"url" yaml:"url"`
	User      string    `json:"user" yaml:"user"`
	ExpiresAt time.Time `json:"expires_at" yaml:"expires_at"`
}

func (a *app) uiCmd() *cobra.Command {
	var open bool
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Print a one-time sign-in link of the manager's web UI (--open opens it)",
		Long: `Print a link that signs the CLI's current user in to the web UI the manager serves
at its URL, without a password, the way Jupyter prints its token link. The link is
valid for 5 minutes and for one sign-in; the session it opens lasts an hour, or until
you sign out. The CLI must act as a user (legate login, or the admin.env of a manager):
a service account's key gets no link.

--open opens the link in the browser as well ($BROWSER when set, else xdg-open on
Linux, open on macOS, the default browser on Windows).`,
		Example: `  legate ui
  legate ui --open
  legate ui -o json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			l, err := c.CreateSignInLink(cmd.Context())
			if err != nil {
				return err
			}
			u := c.SignInURL(l)
			if out.structured() {
				if err := out.print(cmd.OutOrStdout(), signInURL{URL: u, User: l.User, ExpiresAt: l.ExpiresAt}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "Sign in to the web UI as %s with this link (valid until %s, for one sign-in):\n",
					escape(l.User), l.ExpiresAt.In(a.loc).Format("15:04:05"))
				fmt.Fprintln(cmd.OutOrStdout(), u)
			}
			if open {
				if err := a.openBrowser(u); err != nil {
					return fmt.Errorf("open the browser: %w (open the link above yourself)", err)
				}
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&open, "open", false, "open the link in the browser too")
	out.add(cmd, formatJSON, formatYAML)
	return cmd
}

// openBrowser starts the browser on u without waiting for it.
func (a *app) openBrowser(u string) error {
	var name string
	var args []string
	switch b := strings.TrimSpace(a.getenv("BROWSER")); {
	case b != "":
		name, args = b, []string{u}
	case runtime.GOOS == "darwin":
		name, args = "open", []string{u}
	case runtime.GOOS == "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", u}
	default:
		name, args = "xdg-open", []string{u}
	}
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
