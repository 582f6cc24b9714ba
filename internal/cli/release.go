package cli

import (
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/release"
)

// releaseCmd is legate release keygen|sign: signing binaries for the
// watchers' upgrades (docs/upgrades.md).
func (a *app) releaseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Sign legate binaries for upgrades: keygen, sign",
		Long: `Watchers (legate watcher) upgrade a delegate only to a binary signed with
a key they trust. legate release keygen makes an ed25519 key pair;
legate release sign signs a binary with the private key, writing
BINARY.sig next to it. The signature covers the binary's SHA-256 together
with its version, OS and architecture, so it cannot be moved to another
binary, version or platform. A manager serves only signed binaries of its
release directory (--release-dir, DIR/VERSION/legate-OS-ARCH).`,
		Example: `  legate release keygen --out release
  legate release sign --key release.key legate-data/releases/v1.4.2/legate-linux-amd64`,
	}
	cmd.AddCommand(a.releaseKeygenCmd(), a.releaseSignCmd())
	return cmd
}

func (a *app) releaseKeygenCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make an ed25519 key pair to sign releases with",
		Long: `Write a new key pair: OUT.key, the private key (mode 0600; keep it
offline, it signs what every watcher will run) and OUT.pub, the public
key (the base64 of 32 bytes) that watchers trust through
LEGATE_UPGRADE_PUBLIC_KEY (the file, or its content) or build into the
binary (-ldflags "-X main.upgradePublicKey=$(cat OUT.pub)"). Existing
files are not overwritten.`,
		Example: `  legate release keygen --out release`,
		Args:    cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out is required: the key files are OUT.key and OUT.pub")
			}
			priv, pub, err := release.GenerateKey()
			if err != nil {
				return err
			}
			if err := writeNew(out+".key", priv, 0o600); err != nil {
				return err
			}
			if err := writeNew(out+".pub", pub, 0o644); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Wrote %s.key (private, keep it safe) and %s.pub (public): %s", out, out, pub)
			return err
		}),
	}
	cmd.Flags().StringVar(&out, "out", "", "path of the key files without extension (OUT.key, OUT.pub)")
	return cmd
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func (a *app) releaseSignCmd() *cobra.Command {
	var key, version, goos, goarch, binary string
	cmd := &cobra.Command{
		Use:   "sign BINARY",
		Short: "Sign a legate binary: writes BINARY.sig",
		Long: `Sign BINARY with the private key of legate release keygen and write
BINARY.sig. The version, OS and architecture are read from the binary's
build information (-ldflags "-X main.version=…", GOOS, GOARCH); --version,
--os and --arch set them when it has none. A binary without a version
cannot be signed: watchers upgrade to versions. A legate-delegate (built
with -tags delegate, found so in its build information, or --binary
legate-delegate) gets a signature naming it, which no legate binary
passes for, and the other way round. Sign both binaries of a release: a
watcher runs the new version's delegate as legate-delegate when the
manager serves it signed.`,
		Example: `  legate release sign --key release.key legate-data/releases/v1.4.2/legate-linux-amd64
  legate release sign --key release.key legate-data/releases/v1.4.2/legate-delegate-linux-amd64`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return errors.New("--key is required: the private key file (legate release keygen)")
			}
			kb, err := os.ReadFile(key)
			if err != nil {
				return fmt.Errorf("read the key: %w", err)
			}
			priv, err := release.ParsePrivateKey(kb)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			bin := args[0]
			bv, bos, barch, bdelegate := binaryBuild(bin)
			which := release.BinaryLegate
			if bdelegate {
				which = release.BinaryDelegate
			}
			switch binary {
			case "":
			case release.BinaryLegate, release.BinaryDelegate:
				which = binary
			default:
				return fmt.Errorf("--binary %q: %s or %s", binary, release.BinaryLegate, release.BinaryDelegate)
			}
			m := release.Manifest{Binary: which, Version: pick(version, bv), OS: pick(goos, bos), Arch: pick(goarch, barch)}
			if m.Version == "" || m.OS == "" || m.Arch == "" {
				return fmt.Errorf("%s: its version, OS or architecture is unknown (version %q, %s/%s): give --version, --os and --arch", bin, m.Version, m.OS, m.Arch)
			}
			if m.SHA256, err = release.FileDigest(bin); err != nil {
				return err
			}
			sig, err := release.Sign(priv, m)
			if err != nil {
				return err
			}
			if err := os.WriteFile(bin+".sig", sig.Encode(), 0o644); err != nil {
				return fmt.Errorf("write the signature: %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "Signed %s (%s %s %s/%s): %s.sig\n", bin, m.Which(), m.Version, m.OS, m.Arch, bin)
			return err
		}),
	}
	cmd.Flags().StringVar(&key, "key", "", "private key file (legate release keygen)")
	cmd.Flags().StringVar(&version, "version", "", "the binary's version (default: from its build information)")
	cmd.Flags().StringVar(&goos, "os", "", "the binary's OS (default: from its build information)")
	cmd.Flags().StringVar(&goarch, "arch", "", "the binary's architecture (default: from its build information)")
	cmd.Flags().StringVar(&binary, "binary", "", "which binary it is, legate or legate-delegate (default: legate-delegate when it was built with -tags delegate)")
	return cmd
}

func pick(flag, found string) string {
	if flag != "" {
		return flag
	}
	return found
}

// binaryBuild reads a Go binary's version (-X main.version=…), GOOS and
// GOARCH from its build information, and whether it was built with the
// delegate tag (legate-delegate); what it cannot read is "".
func binaryBuild(path string) (version, goos, goarch string, delegate bool) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", "", "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "-tags":
			delegate = slices.Contains(strings.Split(s.Value, ","), "delegate")
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		case "-ldflags":
			for _, f := range strings.Fields(strings.ReplaceAll(s.Value, "'", " ")) {
				if v, ok := strings.CutPrefix(f, "main.version="); ok {
					version = strings.Trim(v, `"`)
				}
			}
		}
	}
	return version, goos, goarch, delegate
}
