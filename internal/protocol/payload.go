package protocol

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// TaskTypes returns every task type, in the order they were added. A new
// type is added here, with its payload (a section of TaskSpec) and its
// case in CheckPayload; the delegate runs it with a Type of package
// executor.
func TaskTypes() []string {
	return []string{TaskShell, TaskHTTP, TaskContainer, TaskKubernetes, TaskHelm, TaskVerify}
}

// Limits of task payloads.
const (
	// MaxShellScript bounds a shell task's script: 1 MiB.
	MaxShellScript = 1 << 20
	// MaxHTTPURL bounds an http task's URL.
	MaxHTTPURL = 8192
)

// CheckPayload checks the payload of a submitted task for its type, as
// the manager does before it queues the task, and normalizes it. A task
// without a type gets one from its sections: http when it has an http
// section, container when it has a container section and no shell one,
// kubernetes when it has a kubernetes section and no shell one, helm
// when it has a helm section and no shell one, verify when it has a verify
// section and no shell one, else shell. The payload is checked by its section's Validate, and the
// sections of other types are dropped.
func (s *TaskSpec) CheckPayload() error {
	if s.Type == "" {
		switch {
		case s.HTTP != nil:
			s.Type = TaskHTTP
		case s.Container != nil && s.Shell == nil:
			s.Type = TaskContainer
		case s.Kubernetes != nil && s.Shell == nil:
			s.Type = TaskKubernetes
		case s.Helm != nil && s.Shell == nil:
			s.Type = TaskHelm
		case s.Verify != nil && s.Shell == nil:
			s.Type = TaskVerify
		default:
			s.Type = TaskShell
		}
	}
	switch s.Type {
	case TaskShell:
		if err := s.Shell.Validate(); err != nil {
			return err
		}
		s.HTTP, s.Container, s.Kubernetes, s.Helm, s.Verify = nil, nil, nil, nil, nil
	case TaskHTTP:
		if err := s.HTTP.Validate(); err != nil {
			return err
		}
		s.Shell, s.Container, s.Kubernetes, s.Helm, s.Verify = nil, nil, nil, nil, nil
	case TaskContainer:
		if err := s.Container.Validate(); err != nil {
			return err
		}
		s.Shell, s.HTTP, s.Kubernetes, s.Helm, s.Verify = nil, nil, nil, nil, nil
	case TaskKubernetes:
		if err := s.Kubernetes.Validate(); err != nil {
			return err
		}
		s.Shell, s.HTTP, s.Container, s.Helm, s.Verify = nil, nil, nil, nil, nil
	case TaskHelm:
		if err := s.Helm.Validate(); err != nil {
			return err
		}
		s.Shell, s.HTTP, s.Container, s.Kubernetes, s.Verify = nil, nil, nil, nil, nil
	case TaskVerify:
		if err := s.Verify.Validate(); err != nil {
			return err
		}
		s.Shell, s.HTTP, s.Container, s.Kubernetes, s.Helm = nil, nil, nil, nil, nil
	default:
		return errors.New("unknown task type " + strconv.Quote(s.Type) + " (use " + orList(TaskTypes()) + ")")
	}
	return nil
}

// Validate checks a shell task's payload (nil: none): a script that is
// not blank, at most MaxShellScript long.
func (s *ShellSpec) Validate() error {
	if s == nil || strings.TrimSpace(s.Script) == "" {
		return errors.New("a shell task needs a non-empty script")
	}
	if len(s.Script) > MaxShellScript {
		return errors.New("script is larger than 1 MiB")
	}
	return nil
}

// Validate checks an http task's payload (nil: none) and normalizes its
// method: GET when empty, upper case. The URL must be an absolute http://
// or https:// URL of printable text, at most MaxHTTPURL long; the method
// an HTTP token; an expected status, when given, 100 to 599.
func (h *HTTPSpec) Validate() error {
	if h == nil {
		return errors.New("an http task needs an http section with a url")
	}
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("http url must be an absolute http:// or https:// URL")
	}
	if h.Method == "" {
		h.Method = "GET"
	}
	h.Method = strings.ToUpper(h.Method)
	if !isHTTPMethod(h.Method) {
		return errors.New("http method " + strconv.Quote(h.Method) + " is invalid: use a method such as GET or POST")
	}
	if err := checkText("http url", h.URL, MaxHTTPURL); err != nil {
		return err
	}
	if h.ExpectStatus != 0 && (h.ExpectStatus < 100 || h.ExpectStatus > 599) {
		return errors.New("expect_status must be between 100 and 599")
	}
	return nil
}

// isHTTPMethod reports whether s is a valid HTTP method: 1-32 token
// characters (RFC 9110: letters, digits and !#$%&'*+-.^_`|~).
func isHTTPMethod(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z') && !('a' <= c && c <= 'z') && !('0' <= c && c <= '9') && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// checkText refuses text longer than max bytes, text that is not valid
// UTF-8 and text with control characters (IsControl), naming what.
func checkText(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s is too long (%d bytes; at most %d)", what, len(s), max)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return fmt.Errorf("%s is not valid UTF-8 (byte %d); use printable text only", what, i)
			}
		}
		if IsControl(r) {
			return fmt.Errorf("%s contains the control or formatting character U+%04X at byte %d; use printable text only", what, r, i)
		}
	}
	return nil
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
