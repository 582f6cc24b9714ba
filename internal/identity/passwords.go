package identity

import (
	"net/http"
	"strconv"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
)

// Password hashing is bounded. An argon2id hash takes 19 MiB for as long
// as it runs (package access), so at most Config.PasswordHashes run at
// once, by default hashesPerCPU per CPU (GOMAXPROCS): more at once would
// not end sooner on the same CPUs, only take more memory. A sign-in, or a
// password set through the API, that finds no slot within hashSlotWait is
// answered 429 with Retry-After: 1 instead of waiting in an unbounded
// queue; a sign-in refused so is not counted against its user or address.

// hashesPerCPU is how many password hashes run at once per CPU.
const hashesPerCPU = 2

// hashSlotWait is how long a request waits for a hashing slot.
const hashSlotWait = time.Second

// takeHashSlot takes a hashing slot, waiting at most hashSlotWait; when
// there is none it answers 429 (unless the request has ended) and returns
// false. A slot taken is given back with releaseHashSlot.
func (s *Service) takeHashSlot(w http.ResponseWriter, r *http.Request) bool {
	select {
	case s.hashSlots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(hashSlotWait)
	defer t.Stop()
	select {
	case s.hashSlots <- struct{}{}:
		return true
	case <-t.C:
	case <-r.Context().Done():
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(hashSlotWait/time.Second)))
	api.WriteError(w, http.StatusTooManyRequests, protocol.CodeRateLimited,
		"the manager is checking %d passwords already; retry in a second", cap(s.hashSlots))
	return false
}

func (s *Service) releaseHashSlot() { <-s.hashSlots }

// hashPassword hashes a new password within a hashing slot; without one it
// answers 429 and returns false.
func (s *Service) hashPassword(w http.ResponseWriter, r *http.Request, pw string) (string, bool) {
	if !s.takeHashSlot(w, r) {
		return "", false
	}
	defer s.releaseHashSlot()
	return access.HashPassword(pw), true
}
