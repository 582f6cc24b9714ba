package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/store"
)

// IssueToken creates a delegate token directly in the store (for dev mode,
// before the API is serving) and returns its value.
func IssueToken(ctx context.Context, st *store.Store, accountID, name string, now time.Time) (string, error) {
	value := api.NewSecret("", 24)
	t := store.Token{ID: api.NewID("k_"), AccountID: accountID, Name: name, Hash: api.HashSecret(value), CreatedAt: now}
	if err := st.CreateToken(ctx, t); err != nil {
		return "", fmt.Errorf("create token %q: %w", name, err)
	}
	return value, nil
}
