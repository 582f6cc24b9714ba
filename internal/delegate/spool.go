package delegate

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/legate-dev/legate/internal/atomicfile"
	"github.com/legate-dev/legate/internal/protocol"
)

// spool keeps results the manager has not acknowledged yet on disk, so a
// delegate that stops (or crashes) while the manager is unreachable
// delivers them after it starts again. Delivery is idempotent: the manager
// accepts a repeated result for the same lease and refuses a stale one.
type spool struct {
	dir string
}

type spooledResult struct {
	TaskID string                 `json:"task_id"`
	Result protocol.ResultRequest `json:"result"`
}

func (s spool) path(taskID string) string {
	return filepath.Join(s.dir, taskID+".result.json")
}

// save keeps a result until the manager has it.
func (s spool) save(taskID string, res protocol.ResultRequest) error {
	b, err := json.Marshal(spooledResult{TaskID: taskID, Result: res})
	if err != nil {
		return err
	}
	return s.write(s.path(taskID), b)
}

// write replaces path atomically.
func (s spool) write(path string, b []byte) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o600)
}

func (s spool) remove(taskID string) { _ = os.Remove(s.path(taskID)) }

// load returns every spooled result; unreadable files are skipped and
// reported through bad.
func (s spool) load(bad func(name string, err error)) []spooledResult {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	var out []spooledResult
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".result.json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			bad(e.Name(), err)
			continue
		}
		var r spooledResult
		if err := json.Unmarshal(b, &r); err != nil || r.TaskID == "" || r.TaskID+".result.json" != e.Name() {
			bad(e.Name(), err)
			continue
		}
		out = append(out, r)
	}
	return out
}

// spooledLogs is the output of a task that could not be sent before the
// delegate stopped: the last chunks, in order, with their numbers.
type spooledLogs struct {
	TaskID string              `json:"task_id"`
	Epoch  int64               `json:"epoch"`
	Chunks []protocol.LogChunk `json:"chunks"`
}

func (s spool) logsPath(taskID string) string {
	return filepath.Join(s.dir, taskID+".logs.json")
}

// saveLogs keeps unsent output (the caller bounds it to the tail).
func (s spool) saveLogs(l spooledLogs) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return s.write(s.logsPath(l.TaskID), b)
}

func (s spool) loadLogs(taskID string) (spooledLogs, bool) {
	b, err := os.ReadFile(s.logsPath(taskID))
	if err != nil {
		return spooledLogs{}, false
	}
	var l spooledLogs
	if err := json.Unmarshal(b, &l); err != nil || l.TaskID != taskID {
		return spooledLogs{}, false
	}
	return l, true
}

func (s spool) removeLogs(taskID string) { _ = os.Remove(s.logsPath(taskID)) }
