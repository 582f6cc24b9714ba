package delegate

import (
	"context"
	"errors"
	"testing"
)

func TestKillSwitch(t *testing.T) {
	t.Parallel()
	errFirst, errSecond := errors.New("first"), errors.New("second")
	var k killSwitch
	before, releaseBefore := k.context(context.Background())
	defer releaseBefore()
	done, releaseDone := k.context(context.Background())
	releaseDone() // released work is forgotten, and its context ended
	if !errors.Is(context.Cause(done), context.Canceled) {
		t.Fatalf("released context: cause %v, want context.Canceled", context.Cause(done))
	}
	if len(k.cancel) != 1 {
		t.Fatalf("%d contexts remembered after one release, want 1", len(k.cancel))
	}

	k.kill(errFirst)
	k.kill(errSecond) // only the first counts
	after, releaseAfter := k.context(context.Background())
	defer releaseAfter()
	for name, ctx := range map[string]context.Context{"handed out before the kill": before, "asked for after it": after} {
		if err := context.Cause(ctx); !errors.Is(err, errFirst) {
			t.Errorf("context %s: cause %v, want %v", name, err, errFirst)
		}
	}
	if !errors.Is(context.Cause(done), context.Canceled) {
		t.Errorf("a context released before the kill got cause %v, want context.Canceled", context.Cause(done))
	}
}

func TestKillSwitchKeepsTheParentsCancellation(t *testing.T) {
	t.Parallel()
	var k killSwitch
	parent, cancel := context.WithCancel(context.Background())
	ctx, release := k.context(parent)
	defer release()
	cancel()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Fatalf("child of a cancelled parent: %v", ctx.Err())
	}
}
