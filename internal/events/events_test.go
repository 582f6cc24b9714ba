package events

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestStreamDeliversByKindInOrder: each subscriber gets the events of the
// kinds it named, in publishing order, and subscribers of one kind are
// called in the order they subscribed.
func TestStreamDeliversByKindInOrder(t *testing.T) {
	var s Stream
	var got []string
	s.Subscribe(func(_ context.Context, e Event) { got = append(got, "a:"+e.Kind.String()+":"+e.TaskID) }, TaskQueued, TaskEnded)
	s.Subscribe(func(_ context.Context, e Event) { got = append(got, "b:"+e.Kind.String()+":"+e.TaskID) }, TaskEnded)
	ctx := context.Background()
	s.Publish(ctx, Event{Kind: TaskQueued, TaskID: "t1"})
	s.Publish(ctx, Event{Kind: TaskStarted, TaskID: "t1"}) // nobody listens
	s.Publish(ctx, Event{Kind: TaskEnded, TaskID: "t1"})
	s.Publish(ctx, Event{Kind: 0, TaskID: "t2"})     // not a kind: dropped
	s.Publish(ctx, Event{Kind: kinds, TaskID: "t3"}) // nor past the last
	want := []string{"a:task_queued:t1", "a:task_ended:t1", "b:task_ended:t1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

func TestKindNames(t *testing.T) {
	for k := TaskQueued; k < kinds; k++ {
		if k.String() == "" || k.String() == "unknown" {
			t.Errorf("kind %d has no name", k)
		}
	}
	if Kind(200).String() != "unknown" {
		t.Errorf("Kind(200) = %q", Kind(200).String())
	}
}
