package executor

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// OutputFile is the file in WorkDir a shell task writes its outputs to;
// its path is in the task's $LEGATE_OUTPUT (protocol.OutputEnv).
const OutputFile = "legate-output"

// ParseOutputs reads a task's output file: KEY=VALUE lines (KEY of
// letters, digits and '_', not starting with a digit; VALUE the rest of
// the line, a trailing \r removed), blank lines ignored, the last line of
// a key wins. Lines it cannot take are listed in problems, with their
// number, and left out; so is everything past protocol.MaxOutputBytes or
// protocol.MaxOutputs.
func ParseOutputs(data []byte) (outputs map[string]string, problems []string) {
	if len(data) > protocol.MaxOutputBytes {
		problems = append(problems, fmt.Sprintf("%s has %d bytes: only the first %d are read", protocol.OutputEnv, len(data), protocol.MaxOutputBytes))
		data = data[:protocol.MaxOutputBytes]
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), protocol.MaxOutputBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("line %d of %s has no '=': write KEY=VALUE", n, protocol.OutputEnv))
			continue
		case !validOutputKey(k):
			problems = append(problems, fmt.Sprintf("line %d of %s: %.40q is no valid key (letters, digits and '_', not starting with a digit)", n, protocol.OutputEnv, k))
			continue
		}
		if outputs == nil {
			outputs = map[string]string{}
		}
		if _, seen := outputs[k]; !seen && len(outputs) == protocol.MaxOutputs {
			problems = append(problems, fmt.Sprintf("line %d of %s: more than %d outputs; the rest are left out", n, protocol.OutputEnv, protocol.MaxOutputs))
			break
		}
		outputs[k] = v
	}
	return outputs, problems
}

func validOutputKey(k string) bool {
	if k == "" || len(k) > 256 || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// prepareOutputFile creates the empty output file of a task in dir and
// returns its path.
func prepareOutputFile(dir string) (string, error) {
	path := filepath.Join(dir, OutputFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("create the output file: %w", err)
	}
	return path, f.Close()
}

// readOutputFile reads what the task wrote to its output file.
func readOutputFile(path string) (map[string]string, []string) {
	f, err := os.Open(path)
	if err != nil {
		return nil, []string{fmt.Sprintf("read %s: %v", protocol.OutputEnv, err)}
	}
	defer f.Close()
	data := make([]byte, protocol.MaxOutputBytes+1)
	n, _ := io.ReadFull(f, data)
	return ParseOutputs(data[:n])
}
