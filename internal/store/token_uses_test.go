package store

import (
	"context"
	"errors"
	"testing"
)

// TestTokenUses: a token created with two uses registers two delegate
// processes; the same live process registering again (a new session, a
// reconnect) takes no use; a third process is refused with ErrTokenUsedUp,
// and so is the first one's identity once it deregistered (a deregistered
// instance registering again is a new registration). A token without a
// limit is never refused.
func TestTokenUses(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		for _, tok := range []Token{
			{ID: "k1", AccountID: "acc1", Name: "two", Hash: "h1", CreatedAt: t0, Uses: 2},
			{ID: "k2", AccountID: "acc1", Name: "free", Hash: "h2", CreatedAt: t0},
		} {
			if err := s.CreateToken(ctx, tok); err != nil {
				t.Fatal(err)
			}
		}
		reg := func(key, proc, token string) error {
			_, err := s.UpsertInstance(ctx, Instance{ID: "d_" + key + proc, AccountID: "acc1", IdentityKey: key, Name: "n", Hostname: key,
				TokenID: token, RegisteredAt: t0, ProcessID: proc})
			return err
		}
		left := func() int {
			tok, err := s.TokenByID(ctx, "k1")
			if err != nil {
				t.Fatal(err)
			}
			if r := tok.Remaining(); r != nil {
				return *r
			}
			t.Fatal("a token with uses has no remaining count")
			return 0
		}
		if err := reg("a", "p1", "k1"); err != nil {
			t.Fatalf("first registration: %v", err)
		}
		for range 3 {
			if err := reg("a", "p1", "k1"); err != nil {
				t.Fatalf("the same process registering again: %v", err)
			}
		}
		if got := left(); got != 1 {
			t.Fatalf("uses left after one process registered (and re-registered): %d, want 1", got)
		}
		if err := reg("b", "p2", "k1"); err != nil {
			t.Fatalf("second process: %v", err)
		}
		if err := reg("c", "p3", "k1"); !errors.Is(err, ErrTokenUsedUp) {
			t.Fatalf("third process: %v, want ErrTokenUsedUp", err)
		}
		if err := reg("a", "p1", "k1"); err != nil {
			t.Fatalf("the first process registering again after the uses ran out: %v", err)
		}
		if err := reg("a", "p4", "k1"); !errors.Is(err, ErrTokenUsedUp) {
			t.Fatalf("a new process with the first one's identity: %v, want ErrTokenUsedUp", err)
		}
		in, err := s.UpsertInstance(ctx, Instance{ID: "d_b", AccountID: "acc1", IdentityKey: "b", Name: "n", Hostname: "b", TokenID: "k1", RegisteredAt: t0, ProcessID: "p2"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeregisterInstance(ctx, in.ID, t0); err != nil {
			t.Fatal(err)
		}
		if err := reg("b", "p2", "k1"); !errors.Is(err, ErrTokenUsedUp) {
			t.Fatalf("a deregistered instance registering again: %v, want ErrTokenUsedUp", err)
		}
		if got := left(); got != 0 {
			t.Fatalf("uses left: %d, want 0", got)
		}
		for i := range 5 {
			if err := reg("free", string(rune('a'+i)), "k2"); err != nil {
				t.Fatalf("token without a limit, registration %d: %v", i, err)
			}
		}
		if tok, _ := s.TokenByID(ctx, "k2"); tok.Remaining() != nil {
			t.Errorf("a token without a limit shows %d uses left", *tok.Remaining())
		}
	})
}
