package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/buildinfo"
)

// BuildInfo says which build of legate runs (see buildinfo.Info).
type BuildInfo = buildinfo.Info

// ReadBuildInfo returns the build information of the running binary;
// ldVersion is the version set with -ldflags (empty when not set).
func ReadBuildInfo(ldVersion string) BuildInfo { return buildinfo.Read(ldVersion) }

// versionTemplate is a cobra version template that prints s as it is.
func versionTemplate(s string) string { return "{{printf \"%s\" " + strconv.Quote(s) + "}}" }

func (a *app) versionCmd() *cobra.Command {
	var (
		out        outputFlags
		clientOnly bool
	)
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of legate (and of the manager)",
		Long: `Print the version of this legate binary, the commit it was built from and the
Go version that built it. When a manager is configured (` + EnvURL + ` and
` + EnvAPIKey + `, or --url and --api-key), also ask it for its version;
--client skips that. "legate --version" prints the same as --client.`,
		Example: `  legate version
  legate version --client
  legate version -o json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			v := versionView{Client: a.build}
			var mgrErr error
			if !clientOnly && a.configured() {
				v.Manager, mgrErr = a.managerVersion(cmd.Context())
			}
			w := cmd.OutOrStdout()
			if out.structured() {
				return out.print(w, v)
			}
			if _, err := io.WriteString(w, a.build.String()); err != nil {
				return fmt.Errorf("write output: %w", err)
			}
			switch {
			case v.Manager != nil:
				return printManagerVersion(w, v.Manager)
			case mgrErr != nil:
				fmt.Fprintln(cmd.ErrOrStderr(), "legate: the manager's version is unknown: "+escapeLines(mgrErr.Error()))
			}
			return nil
		}),
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only this binary's version; do not ask the manager")
	out.add(cmd, "json", "yaml")
	return cmd
}

// versionView is what `legate version -o json` prints.
type versionView struct {
	Client  BuildInfo       `json:"client"`
	Manager *managerVersion `json:"manager,omitempty"`
}

type managerVersion struct {
	URL     string `json:"url"`
	Version string `json:"version"`
	// PublicURL and DelegateImage are what the manager's install specs
	// use (legate manifest); empty when the manager does not say.
	PublicURL     string `json:"public_url,omitempty"`
	DelegateImage string `json:"delegate_image,omitempty"`
}

// printManagerVersion prints the manager's lines of legate version: its
// version, and the URL and image its install specs use (or the fix when
// it has no image).
func printManagerVersion(w io.Writer, m *managerVersion) error {
	s := fmt.Sprintf("manager: %s at %s\n", escape(m.Version), escape(m.URL))
	if m.PublicURL != "" {
		s += "  public URL: " + escape(m.PublicURL) + "\n"
		img := "none (legate manifest needs --image: publish the image and start the manager with --delegate-image, docs/install.md)"
		if m.DelegateImage != "" {
			img = escape(m.DelegateImage)
		}
		s += "  delegate image: " + img + "\n"
	}
	if _, err := io.WriteString(w, s); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// configured reports whether a manager URL and an API key are set.
func (a *app) configured() bool {
	return (a.url != "" || a.getenv(EnvURL) != "") && (a.apiKey != "" || a.getenv(EnvAPIKey) != "")
}

// managerVersion asks the configured manager for its version, briefly.
func (a *app) managerVersion(ctx context.Context) (*managerVersion, error) {
	c, err := a.client()
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && ee.Msg != "" {
			err = errors.New(strings.TrimPrefix(ee.Msg, "legate: "))
		}
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	who, err := c.WhoAmI(ctx)
	if err != nil {
		return nil, errors.New(managerProblem(c.BaseURL(), err))
	}
	return &managerVersion{URL: c.BaseURL(), Version: who.Version, PublicURL: who.PublicURL, DelegateImage: who.DelegateImage}, nil
}
