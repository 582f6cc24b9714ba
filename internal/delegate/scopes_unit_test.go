package delegate

import (
	"context"
	"sync"
	"testing"
)

// The gate never lets tasks of two scopes in at once, lets tasks of the
// running scope in together, and serves a waiting scope before later
// tasks of the running one.
func TestScopeGate(t *testing.T) {
	var g scopeGate
	ctx := context.Background()
	a1 := g.enter(ctx, "org/a", nil)
	a2 := g.enter(ctx, "org/a", nil)
	waitingB := make(chan struct{})
	enteredB := make(chan func())
	go func() { enteredB <- g.enter(ctx, "org/b", func() { close(waitingB) }) }()
	<-waitingB
	// A later task of the running scope queues behind the waiting one.
	waitingA3 := make(chan struct{})
	enteredA3 := make(chan func())
	go func() { enteredA3 <- g.enter(ctx, "org/a", func() { close(waitingA3) }) }()
	<-waitingA3
	a1()
	select {
	case <-enteredB:
		t.Fatal("a task of scope b entered while one of scope a runs")
	default:
	}
	a2()
	b := <-enteredB
	select {
	case <-enteredA3:
		t.Fatal("a task of scope a entered while one of scope b runs")
	default:
	}
	b()
	(<-enteredA3)()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n != 0 || len(g.queue) != 0 {
		t.Fatalf("gate not empty: %d inside, %d waiting", g.n, len(g.queue))
	}
}

// A waiter whose context ends leaves the queue, and lets the next in.
func TestScopeGateCancelledWaiter(t *testing.T) {
	var g scopeGate
	a := g.enter(context.Background(), "a", nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	waiting := make(chan struct{})
	wg.Go(func() { g.enter(ctx, "b", func() { close(waiting) })() })
	<-waiting
	cancel()
	wg.Wait()
	c := g.enter(context.Background(), "a", nil) // the running scope again, nobody waits
	c()
	a()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n != 0 || len(g.queue) != 0 {
		t.Fatalf("gate not empty: %d inside, %d waiting", g.n, len(g.queue))
	}
}
