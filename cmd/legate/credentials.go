package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/envguard"
)

// startup is what main learns before any command runs: the credentials
// that `legate delegate` or `legate dev` handed to itself when it
// re-executed itself without them in its environment (envguard.Receive).
type startup struct {
	creds      envguard.Values // nil unless reexecuted
	reexecuted bool
}

// receiveCredentials is the first thing main does.
func receiveCredentials() (*startup, error) {
	creds, reexecuted, err := envguard.Receive()
	if err != nil {
		return nil, err
	}
	return &startup{creds: creds, reexecuted: reexecuted}, nil
}

// lookupEnv is os.LookupEnv that also finds the credentials taken out of
// the environment: every setting that may be a credential (the token, the
// proxy variables, LEGATE_API_KEY, LEGATE_MASTER_KEY) must be read with it.
func (s *startup) lookupEnv(name string) (string, bool) { return s.creds.LookupEnv(name) }

// environ is the environment the process was started with, credentials
// included: the delegate derives its tasks' environment from it.
func (s *startup) environ() []string { return s.creds.Environ() }

// guard keeps the credentials of `legate delegate` and `legate dev` from
// the tasks they run, which run as the same user: the first time, it
// re-executes the process without them in its environment and without
// the secretFlags on its command line (the new image starts over from main
// and finds them in s.creds; this call does not return); then it marks the
// process not dumpable and the descriptors it inherited close-on-exec, so
// that tasks do not inherit them. When that is impossible it returns the
// reason, to be logged once as a warning: the delegate runs on, as exposed
// as before. exe is the program to execute instead of this one (the
// delegate-only binary), "" for this one.
func (s *startup) guard(exe string, secretFlags ...string) error {
	var errs []error
	if !s.reexecuted {
		if err := envguard.Reexec(envguard.Request{Secret: config.Sensitive, SecretFlags: secretFlags, Executable: exe}); err != nil {
			errs = append(errs, err)
		}
	}
	if err := envguard.Harden(); err != nil {
		errs = append(errs, err)
	}
	if err := envguard.SealDescriptors(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// warnExposed logs why guard failed, once.
func warnExposed(log *slog.Logger, err error) {
	if err == nil {
		return
	}
	log.Warn(fmt.Sprintf("could not hide the delegate's credentials from its tasks: processes of user %d, such as tasks, may read them from /proc/%d/environ, cmdline or mem", os.Getuid(), os.Getpid()),
		"err", err)
}
