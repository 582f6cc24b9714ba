package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
)

// TestTaskRunLargeOutputIsFollowedAndCapped: a task writes 40 MB as fast
// as seq can through `legate task run`. The delegate sends its head in
// uploads of 1 MiB and gathers the rest into large uploads, of which the
// manager stores only what its cap keeps. The CLI, following live, prints
// every byte in order; the stored output is exactly the first and the
// last 4 MiB (give or take a chunk) around the marker that counts the
// bytes in between.
func TestTaskRunLargeOutputIsFollowedAndCapped(t *testing.T) {
	t.Parallel()
	const total = 40_000_000
	c := startCluster(t)
	c.delegate("gather", "gather-host", c.seed004Env(c.token("gather"), "gather", "")...)
	cmd := exec.Command(binary, "task", "run", "--timeout", "10m", "--script", seqScript(total))
	cmd.Env = append(baseEnv(), "LEGATE_URL="+c.url, "LEGATE_API_KEY="+c.apiKey)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("task run: %v\n%s", err, stderr.String())
	}
	if want := seqBytes(0, total); !bytes.Equal(out.Bytes(), want) {
		n := 0
		for n < min(out.Len(), len(want)) && out.Bytes()[n] == want[n] {
			n++
		}
		t.Fatalf("task run printed %d bytes, the first %d of them as written; want all %d, in order", out.Len(), n, total)
	}
	list, err := c.api().ListTasks(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 1 {
		t.Fatalf("%d tasks, want the one task run submitted", len(list.Tasks))
	}
	checkHeadAndTail(t, c.mustCLI("task", "logs", list.Tasks[0].ID), total)
}
