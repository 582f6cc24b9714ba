//go:build !delegate

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/seal"
	"github.com/legate-dev/legate/internal/store"
)

// masterKeyFileName is the key file in a data directory.
const masterKeyFileName = "master.key"

// masterKeys is the ring a manager seals with, and where it came from.
type masterKeys struct {
	ring *seal.Ring
	// file is the key file the ring was read from, or is to be written to
	// when fresh; "" when it came from LEGATE_MASTER_KEY.
	file string
	// fresh is true when the key file did not exist: the ring is new, and
	// is written once the database proves to hold nothing sealed.
	fresh bool
}

func (k masterKeys) source() string {
	if k.file == "" {
		return seal.EnvMasterKey
	}
	return k.file
}

// keyFilePath is --master-key-file, or the key file of the data directory.
func keyFilePath(dataDir, flag string) string {
	if flag != "" {
		return flag
	}
	return filepath.Join(dataDir, masterKeyFileName)
}

// loadMasterKeys reads LEGATE_MASTER_KEY when it is set (it wins), else
// the key file. A missing key file gives a fresh ring when create is set,
// and an error otherwise.
func loadMasterKeys(lookup func(string) (string, bool), file string, create bool) (masterKeys, error) {
	if v, ok := lookup(seal.EnvMasterKey); ok {
		ring, err := seal.ParseEnv(v)
		if err != nil {
			return masterKeys{}, err
		}
		return masterKeys{ring: ring}, nil
	}
	ring, err := seal.ReadKeyFile(file)
	switch {
	case err == nil:
		return masterKeys{ring: ring, file: file}, nil
	case errors.Is(err, fs.ErrNotExist) && create:
		ring, err := seal.NewRing(seal.NewKey())
		if err != nil {
			return masterKeys{}, err
		}
		return masterKeys{ring: ring, file: file, fresh: true}, nil
	case errors.Is(err, fs.ErrNotExist):
		return masterKeys{}, fmt.Errorf("no master key: %s does not exist and %s is not set (a manager creates the file on its first start)", file, seal.EnvMasterKey)
	}
	return masterKeys{}, err
}

// openManagerStore opens the manager's store with its master keys. A fresh
// key file is written only once the database proves to hold nothing sealed
// with another key: a lost key file is then reported, not replaced by a
// new key that would leave the sealed secrets unreadable.
func openManagerStore(ctx context.Context, dsn string, keys masterKeys, log *slog.Logger) (*store.Store, error) {
	st, err := store.OpenWith(ctx, dsn, store.Options{Keys: keys.ring})
	if err != nil {
		return nil, err
	}
	if keys.fresh {
		if err := st.CheckKeys(ctx); err != nil {
			st.Close()
			var uk *seal.UnknownKeyError
			if errors.As(err, &uk) {
				return nil, fmt.Errorf("the master key file %s does not exist, but this database was sealed with key %s: "+
					"restore the file from your backup (mode 0600) or give the key in %s; "+
					"a new key would leave the sealed secrets unreadable", keys.file, uk.ID, seal.EnvMasterKey)
			}
			return nil, err
		}
		if err := seal.CreateKeyFile(keys.file, keys.ring); err != nil {
			st.Close()
			if errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("%s was created by another process meanwhile; start again to use it", keys.file)
			}
			return nil, err
		}
		log.Info("created the master key file; back it up apart from the database", "path", keys.file, "key", keys.ring.Primary())
	}
	log.Info("master key", "key", keys.ring.Primary(), "keys", len(keys.ring.IDs()), "source", keys.source())
	return st, nil
}

func newManagerKeyCmds() []*cobra.Command {
	return []*cobra.Command{newRotateKeyCmd(), newNewKeyCmd(), newResetAdminCmd()}
}

func newRotateKeyCmd() *cobra.Command {
	var data, db, keyFile string
	var dropOld bool
	cmd := &cobra.Command{
		Use:   "rotate-key",
		Short: "Seal the database's secrets with a new master key",
		Long: `Rotate the master key that seals the secrets at rest (task secret values and
the delegates' session-signing key; docs/secrets-at-rest.md).

With a key file (DATA/master.key, or --master-key-file), rotate-key adds a new
key to the file as its primary (the old keys stay, to open what is sealed
with them), then re-seals every sealed value in the database with it, in
batches of 500 rows. Restart the manager(s) using the file right after, or
run it while they are stopped: until they restart they seal with the old key
and cannot open what was re-sealed with the new one (claims of those tasks
fail and are retried; nothing is lost). Then run rotate-key --drop-old: it
re-seals what managers sealed with the old key meanwhile, checks that nothing
is sealed with it any more, and removes it from the file.

With LEGATE_MASTER_KEY (several managers on one PostgreSQL database), the
keys live in the environment, so you make the new key and hand it out:
  1. legate manager new-key                       prints a new key NEW
  2. restart every manager with LEGATE_MASTER_KEY=OLD,NEW   (NEW opens)
  3. restart every manager with LEGATE_MASTER_KEY=NEW,OLD   (NEW seals)
  4. LEGATE_MASTER_KEY=NEW,OLD legate manager rotate-key --drop-old --db URL
     re-seals everything with NEW and checks nothing is sealed with OLD
  5. restart every manager with LEGATE_MASTER_KEY=NEW
Delegates keep their sessions throughout: the session key itself does not
change, only the key that seals it.`,
		Example: `  legate manager rotate-key --data /var/lib/legate
  systemctl restart legate-manager
  legate manager rotate-key --data /var/lib/legate --drop-old`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dsn := db
			if dsn == "" {
				dsn = strings.TrimSpace(os.Getenv(envDB))
			}
			if dsn == "" {
				dsn = filepath.Join(data, "legate.db")
			}
			return rotateKey(cmd.Context(), cmd.OutOrStdout(), dsn, keyFilePath(data, keyFile), dropOld)
		},
	}
	cmd.Flags().StringVar(&data, "data", "legate-data", "data directory of the manager (SQLite database, master.key)")
	cmd.Flags().StringVar(&db, "db", "", "database URL (default: $LEGATE_DB, else SQLite at DATA/legate.db)")
	cmd.Flags().StringVar(&keyFile, "master-key-file", "", "master key file (default: DATA/master.key); LEGATE_MASTER_KEY wins when set")
	cmd.Flags().BoolVar(&dropOld, "drop-old", false, "finish a rotation: re-seal what is left, check nothing is sealed with an old key, remove the old keys from the key file")
	return cmd
}

// rotateKey is the rotate-key command (see its help).
func rotateKey(ctx context.Context, out io.Writer, dsn, file string, dropOld bool) error {
	keys, err := loadMasterKeys(os.LookupEnv, file, false)
	if err != nil {
		return err
	}
	st, err := store.OpenWith(ctx, dsn, store.Options{Keys: keys.ring})
	if err != nil {
		return err
	}
	// The keys must open the database before anything changes.
	if err := st.CheckKeys(ctx); err != nil {
		st.Close()
		return explainKeys(err, keys)
	}
	if keys.file != "" && !dropOld {
		st.Close()
		next, err := keys.ring.Rotated(seal.NewKey())
		if err != nil {
			return err
		}
		// The new key is on disk before anything is sealed with it.
		if err := seal.WriteKeyFile(keys.file, next); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: new primary key %s; %s stays, to open what it sealed\n",
			keys.file, next.Primary(), keyNames(next.IDs()[1:]))
		keys.ring = next
		if st, err = store.OpenWith(ctx, dsn, store.Options{Keys: next}); err != nil {
			return err
		}
	}
	defer st.Close()
	rep, err := st.Reseal(ctx)
	if err != nil {
		err = explainKeys(err, keys)
		if keys.file != "" && !dropOld {
			return fmt.Errorf("re-sealing stopped: %w\nThe new key is in %s already and the old ones stay, so everything still opens; "+
				"fix the cause, then run legate manager rotate-key --drop-old to finish (it re-seals the rest first)", err, keys.file)
		}
		return fmt.Errorf("re-sealing stopped: %w", err)
	}
	fmt.Fprintf(out, "re-sealed with key %s: %s\n", keys.ring.Primary(), describeReseal(rep))
	left, err := st.SealedKeys(ctx)
	if err != nil {
		return err
	}
	var others []string
	for id, n := range left {
		if id != keys.ring.Primary() {
			name := "key " + id
			if id == "" {
				name = "no key (in clear)"
			}
			others = append(others, fmt.Sprintf("%d with %s", n, name))
		}
	}
	sort.Strings(others)
	old := keys.ring.IDs()[1:]
	if !dropOld {
		if len(others) > 0 {
			fmt.Fprintf(out, "still sealed otherwise (a manager that runs with the old key sealed them meanwhile): %s\n", strings.Join(others, ", "))
		}
		if keys.file != "" {
			fmt.Fprintf(out, "Next: restart every manager that uses %s, then run legate manager rotate-key --drop-old\n", keys.file)
		} else if len(old) > 0 {
			fmt.Fprintf(out, "Next: once every manager runs with %s (key %s first), run this again with --drop-old\n", seal.EnvMasterKey, keys.ring.Primary())
		}
		return nil
	}
	if len(others) > 0 {
		return fmt.Errorf("cannot drop the old keys: values are still sealed otherwise (%s); a manager still seals with an old key: "+
			"restart every manager with key %s first, then run this again", strings.Join(others, ", "), keys.ring.Primary())
	}
	switch {
	case len(old) == 0:
		fmt.Fprintf(out, "%s holds key %s alone: no old key to drop\n", keys.source(), keys.ring.Primary())
	case keys.file != "":
		if err := seal.WriteKeyFile(keys.file, keys.ring.PrimaryOnly()); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: removed %s; it holds key %s alone\n", keys.file, keyNames(old), keys.ring.Primary())
	default:
		fmt.Fprintf(out, "nothing is sealed with %s any more: set %s to key %s alone and restart the managers\n",
			keyNames(old), seal.EnvMasterKey, keys.ring.Primary())
	}
	return nil
}

func keyNames(ids []string) string {
	if len(ids) == 1 {
		return "key " + ids[0]
	}
	return "keys " + strings.Join(ids, ", ")
}

func describeReseal(r store.SealReport) string {
	var parts []string
	if r.SessionKey {
		parts = append(parts, "the session key")
	}
	parts = append(parts, fmt.Sprintf("the secret values of %d tasks", r.Sealed), fmt.Sprintf("%d stored secrets", r.Secrets))
	if r.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("(and dropped those of %d ended tasks)", r.Dropped))
	}
	return strings.Join(parts, ", ")
}

// explainKeys says which key the database needs when keys do not open it.
func explainKeys(err error, keys masterKeys) error {
	var uk *seal.UnknownKeyError
	if errors.As(err, &uk) {
		return fmt.Errorf("this database was sealed with key %s, which %s does not hold (it has %s); give the same key (%s or --master-key-file)",
			uk.ID, keys.source(), strings.Join(uk.Have, ", "), seal.EnvMasterKey)
	}
	return err
}

func newNewKeyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "new-key",
		Short: "Print a new random master key (for LEGATE_MASTER_KEY)",
		Long: `Print a new random master key, base64, on stdout (its key ID on stderr).
Managers that share a PostgreSQL database share their master key through
LEGATE_MASTER_KEY: one key, or several separated by commas, the first one
sealing and the others only opening. See legate manager rotate-key --help.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key := seal.NewKey()
			fmt.Fprintf(cmd.ErrOrStderr(), "key ID %s\n", seal.KeyID(key))
			fmt.Fprintln(cmd.OutOrStdout(), seal.EncodeKey(key))
			return nil
		},
	}
}
