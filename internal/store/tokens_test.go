package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()

		tok1 := Token{ID: "t1", AccountID: "acc1", Name: "prod", Hash: "h1", CreatedAt: t0}
		tok2 := Token{ID: "t2", AccountID: "acc1", Name: "dev", Hash: "h2", CreatedAt: at(time.Minute)}
		tok3 := Token{ID: "t3", AccountID: "acc2", Name: "prod", Hash: "h3", CreatedAt: at(-time.Minute)}
		for _, tok := range []Token{tok2, tok1, tok3} {
			if err := s.CreateToken(ctx, tok); err != nil {
				t.Fatalf("CreateToken(%s): %v", tok.ID, err)
			}
		}
		wantErr(t, "same name", s.CreateToken(ctx, Token{ID: "t4", AccountID: "acc1", Name: "prod", Hash: "h4", CreatedAt: t0}), ErrConflict)
		wantErr(t, "same ID", s.CreateToken(ctx, Token{ID: "t1", AccountID: "acc1", Name: "other", Hash: "h5", CreatedAt: t0}), ErrConflict)

		list, err := s.ListTokens(ctx, "acc1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Token{tok1, tok2}, list); diff != "" {
			t.Errorf("ListTokens (-want +got):\n%s", diff)
		}

		lookups := []struct {
			name    string
			account string
			hash    string
			want    Token
			wantErr error
		}{
			{"own token", "acc1", "h1", tok1, nil},
			{"other account's token", "acc1", "h3", Token{}, ErrNotFound},
			{"unknown hash", "acc1", "zz", Token{}, ErrNotFound},
		}
		for _, tt := range lookups {
			got, err := s.TokenByHash(ctx, tt.account, tt.hash)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("%s: TokenByHash error %v, want %v", tt.name, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: TokenByHash (-want +got):\n%s", tt.name, diff)
			}
		}
		got, err := s.TokenByID(ctx, "t3")
		if err != nil || !cmp.Equal(got, tok3) {
			t.Errorf("TokenByID(t3) = %+v, %v", got, err)
		}
		_, err = s.TokenByID(ctx, "nope")
		wantErr(t, "TokenByID unknown", err, ErrNotFound)

		// Revoke: idempotent, keeps the first time, keeps the name taken.
		revoked, err := s.RevokeToken(ctx, "acc1", "prod", at(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := tok1
		want.RevokedAt = ptr(at(time.Hour))
		if diff := cmp.Diff(want, revoked); diff != "" {
			t.Errorf("RevokeToken (-want +got):\n%s", diff)
		}
		revoked, err = s.RevokeToken(ctx, "acc1", "prod", at(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, revoked); diff != "" {
			t.Errorf("second RevokeToken (-want +got):\n%s", diff)
		}
		got, err = s.TokenByHash(ctx, "acc1", "h1")
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("TokenByHash of revoked token = %+v, %v", got, err)
		}
		_, err = s.RevokeToken(ctx, "acc1", "nope", t0)
		wantErr(t, "revoke unknown", err, ErrNotFound)
		_, err = s.RevokeToken(ctx, "acc2", "dev", t0)
		wantErr(t, "revoke other account's name", err, ErrNotFound)
		wantErr(t, "reuse revoked name", s.CreateToken(ctx, Token{ID: "t9", AccountID: "acc1", Name: "prod", Hash: "h9", CreatedAt: t0}), ErrConflict)
		other, err := s.TokenByID(ctx, "t3")
		if err != nil || other.RevokedAt != nil {
			t.Errorf("revoking acc1/prod touched acc2/prod: %+v, %v", other, err)
		}
	})
}

// TestTokenInitSecrets: the secrets a token gives INIT_SCRIPT are kept
// with it, in order, on every read; a token that gives none reads nil.
func TestTokenInitSecrets(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		if err := s.CreateToken(ctx, Token{ID: "t1", AccountID: "acc1", Name: "init", Hash: "h1", CreatedAt: t0, InitSecrets: []string{"REG_PW", "NPM_TOKEN"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateToken(ctx, Token{ID: "t2", AccountID: "acc1", Name: "plain", Hash: "h2", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		got, err := s.TokenByHash(ctx, "acc1", "h1")
		if err != nil || !slices.Equal(got.InitSecrets, []string{"REG_PW", "NPM_TOKEN"}) {
			t.Fatalf("TokenByHash: %+v, %v", got, err)
		}
		plain, err := s.TokenByID(ctx, "t2")
		if err != nil || plain.InitSecrets != nil {
			t.Fatalf("a token that gives none: %+v, %v", plain, err)
		}
	})
}
