package secrets

import (
	"errors"
	"fmt"
	"strings"

	"github.com/legate-dev/legate/internal/seal"
)

// KeyError explains an error of the store's sealed values to an operator:
// which key the database needs and how to give it to the manager. Other
// errors come back unchanged.
func KeyError(err error) error {
	var uk *seal.UnknownKeyError
	switch {
	case errors.As(err, &uk):
		return fmt.Errorf("this database was sealed with key %s; give this manager the same key (%s or --master-key-file); it has %s",
			uk.ID, seal.EnvMasterKey, keyList(uk.Have))
	case errors.Is(err, seal.ErrAuth), errors.Is(err, seal.ErrMalformed):
		return fmt.Errorf("a sealed value in the database does not open (restore the database from a backup: someone wrote to it): %w", err)
	}
	return err
}

func keyList(ids []string) string {
	if len(ids) == 1 {
		return "key " + ids[0]
	}
	return "keys " + strings.Join(ids, ", ")
}

// IsSealError reports whether err comes from a sealed value that does not open.
func IsSealError(err error) bool {
	var uk *seal.UnknownKeyError
	return errors.As(err, &uk) || errors.Is(err, seal.ErrAuth) || errors.Is(err, seal.ErrMalformed)
}
